// parse_flags: a program's command line through its cxxopts options, a parser's complaint
// becoming the UserError that names the flag and the fix (framework/error.h,
// bad_command_line), so every program refuses a bad flag the same way; and the end of a
// program's main, where a UserError becomes its message and exit status 1.
//
//   const cxxopts::ParseResult args = cli::parse_flags(options, argc, argv);
//   int main(int argc, char** argv) { return cli::exit_on_user_error([&] { return run(argc, argv); }); }
#pragma once

#include <cstdio>

#include <cxxopts.hpp>

#include "framework/error.h"

namespace shardlab::cli {

inline cxxopts::ParseResult parse_flags(cxxopts::Options& options, int argc, const char* const* argv) {
  try {
    return options.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    throw bad_command_line(e.what(), argc, argv);
  }
}

// Runs a program's body; a UserError prints "error: <message>" on stderr and returns 1 (a
// user's mistake never ends in a crash or an abort).
template <class Run>
int exit_on_user_error(Run&& run) {
  try {
    return run();
  } catch (const UserError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace shardlab::cli
