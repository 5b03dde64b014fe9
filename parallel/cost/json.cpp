#include "parallel/cost/json.h"

#include <cmath>
#include <cstdio>

#include "framework/error.h"

namespace shardlab::cost {
namespace {

void write_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

}  // namespace

Json Json::object() {
  Json j;
  j.value_ = Members{};
  return j;
}

Json Json::array() {
  Json j;
  j.value_ = Elements{};
  return j;
}

Json& Json::set(const std::string& key, Json value) {
  SL_ASSERT(std::holds_alternative<Members>(value_), "Json::set on a non-object");
  std::get<Members>(value_).emplace_back(key, std::move(value));
  return *this;
}

Json& Json::push(Json value) {
  SL_ASSERT(std::holds_alternative<Elements>(value_), "Json::push on a non-array");
  std::get<Elements>(value_).push_back(std::move(value));
  return *this;
}

std::string Json::dump(int indent) const {
  std::string out;
  write(out, indent, 0);
  return out;
}

void Json::write(std::string& out, int indent, int depth) const {
  std::string pad, close;
  if (indent > 0) {
    close = pad = "\n";
    pad.append(static_cast<size_t>(indent * (depth + 1)), ' ');
    close.append(static_cast<size_t>(indent * depth), ' ');
  }
  if (std::holds_alternative<std::monostate>(value_)) {
    out += "null";
  } else if (const double* number = std::get_if<double>(&value_)) {
    if (!std::isfinite(*number)) {
      out += "null";
    } else {
      char text[32];
      std::snprintf(text, sizeof text, "%.17g", *number);
      out += text;
    }
  } else if (const bool* flag = std::get_if<bool>(&value_)) {
    out += *flag ? "true" : "false";
  } else if (const std::string* text = std::get_if<std::string>(&value_)) {
    write_string(out, *text);
  } else if (const Members* members = std::get_if<Members>(&value_)) {
    out += '{';
    for (size_t i = 0; i < members->size(); ++i) {
      out += (i ? "," : "") + pad;
      write_string(out, (*members)[i].first);
      out += indent > 0 ? ": " : ":";
      (*members)[i].second.write(out, indent, depth + 1);
    }
    out += (members->empty() ? "" : close) + "}";
  } else {
    const Elements& elements = std::get<Elements>(value_);
    out += '[';
    for (size_t i = 0; i < elements.size(); ++i) {
      out += (i ? "," : "") + pad;
      elements[i].write(out, indent, depth + 1);
    }
    out += (elements.empty() ? "" : close) + "]";
  }
}

}  // namespace shardlab::cost
