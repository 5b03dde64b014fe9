#include "framework/error.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace shardlab {
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
  return static_cast<int64_t>(value);
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
