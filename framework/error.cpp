#include "framework/error.h"

#include <cstdio>
#include <cstdlib>

namespace shardlab {
namespace {
AbortHandler g_handler = nullptr;
}

void require_positive(const std::string& flag, int64_t value) {
  if (value <= 0) throw UserError(flag + " must be positive, got " + std::to_string(value));
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
