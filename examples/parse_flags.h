// parse_flags: a program's command line through its cxxopts options, a parser's complaint
// becoming the UserError that names the flag and the fix (framework/error.h,
// bad_command_line), so every program refuses a bad flag the same way.
//
//   const cxxopts::ParseResult args = cli::parse_flags(options, argc, argv);
#pragma once

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

}  // namespace shardlab::cli
