#include "framework/error.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace shardlab {

std::string format_number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

namespace {
AbortHandler g_handler = nullptr;
}

void require_positive(const std::string& flag, int64_t value) {
  if (value <= 0) throw UserError(flag + " must be positive, got " + std::to_string(value));
}

double parse_size(const std::string& text, const std::string& flag) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  const std::string suffix = end;
  const std::string units = "kMGT";
  const size_t power = suffix.size() == 1 ? units.find(suffix[0] == 'K' ? 'k' : suffix[0]) : std::string::npos;
  if (power != std::string::npos) {
    value *= std::pow(1024.0, static_cast<double>(power + 1));
  } else if (!suffix.empty() || end == text.c_str()) {
    throw UserError("--" + flag + " '" + text + "' is not a size; use a number like 4096, 4e6, 16k or 4M");
  }
  if (!(value > 0) || !std::isfinite(value)) throw UserError("--" + flag + " must be positive, got '" + text + "'");
  return value;
}

int64_t parse_count(const std::string& text, const std::string& flag) {
  const double value = parse_size(text, flag);
  if (value >= 9.2e18) throw UserError("--" + flag + " '" + text + "' is too large; give a count below 9.2e18");
  if (value != std::floor(value)) throw UserError("--" + flag + " '" + text + "' is not a whole number; give a count");
  return static_cast<int64_t>(value);
}

UserError bad_command_line(const std::string& parser_message, int argc, const char* const* argv) {
  // The value sits between the parser's quotes: 'abc' or ‘abc’.
  std::string value;
  for (const auto& [open, close] : {std::pair<std::string, std::string>{"\u2018", "\u2019"}, {"'", "'"}}) {
    const size_t a = parser_message.find(open);
    const size_t b = a == std::string::npos ? a : parser_message.find(close, a + open.size());
    if (b != std::string::npos) {
      value = parser_message.substr(a + open.size(), b - a - open.size());
      break;
    }
  }
  const bool bad_value = parser_message.find("failed to parse") != std::string::npos;
  for (int i = 1; bad_value && i < argc; ++i) {
    const std::string arg = argv[i];
    std::string flag;
    if (arg == value && i > 1 && argv[i - 1][0] == '-') flag = argv[i - 1];
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos && arg.substr(eq + 1) == value) flag = arg.substr(0, eq);
    if (!flag.empty()) {
      return UserError(flag + " '" + value + "' is not a value this flag takes (a number where --help shows a " +
                       "number, within its type's range); run with --help for the flags and their defaults");
    }
  }
  return UserError("bad command line: " + parser_message + "; run with --help for the list of flags");
}

void set_abort_handler(AbortHandler handler) { g_handler = handler; }

void assert_fail(const char* condition, const char* file, int line, const std::string& detail) {
  std::string message = std::string("internal error at ") + file + ":" + std::to_string(line) +
                        ": assertion `" + condition + "` failed" + (detail.empty() ? "" : ": " + detail);
  if (g_handler) g_handler(message.c_str());
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace shardlab
