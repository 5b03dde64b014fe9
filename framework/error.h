// Two kinds of error (docs/architecture.md, "Conventions").
//
// UserError: bad input a user can fix. Its message names the offending values and the
// fix; every main catches it, prints it once per rank and exits non-zero.
//   throw UserError("hidden " + std::to_string(d) + " is not divisible by tensor axis 8; ...");
//
// SL_ASSERT: an internal invariant. On failure it prints file:line and the condition,
// then calls the installed abort handler (std::abort by default; parallel/ installs one
// that names the rank and calls MPI_Abort so no other rank waits forever).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace shardlab {

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message) : std::runtime_error(message) {}
};

// A number as a user would type it, for error messages: 16, 0.5, 1e+09 (printf's %g).
std::string format_number(double value);

// Flag checks every program shares.
// Throws UserError("<flag> must be positive, got <value>") unless value > 0.
void require_positive(const std::string& flag, int64_t value);
// "4096", "4e6", "16k", "4M" (binary suffixes k/K, M, G, T) -> a positive number;
// UserError naming --flag and the accepted forms otherwise (also for 0 and negatives).
double parse_size(const std::string& text, const std::string& flag);
// parse_size for a count held in int64_t: also refuses fractions and what would overflow it.
int64_t parse_count(const std::string& text, const std::string& flag);
// A command-line parser's complaint (cxxopts: "Argument 'abc' failed to parse") as a
// UserError that names the flag given the bad value, found in argv, and the fix.
UserError bad_command_line(const std::string& parser_message, int argc, const char* const* argv);

using AbortHandler = void (*)(const char* message);
void set_abort_handler(AbortHandler handler);
[[noreturn]] void assert_fail(const char* condition, const char* file, int line, const std::string& detail);

}  // namespace shardlab

#define SL_ASSERT(cond, ...)                                                          \
  do {                                                                                \
    if (!(cond)) ::shardlab::assert_fail(#cond, __FILE__, __LINE__, std::string{__VA_ARGS__}); \
  } while (0)
