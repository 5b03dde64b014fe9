// What every fuzz harness shares: the input as a file or as argv, and the one kind of
// failure a harness accepts. Built only with -DSHARDLAB_FUZZ=ON (clang's libFuzzer; see
// launch/fuzz.sh). A harness returns normally on success or on a UserError; anything else
// -- a crash, a sanitizer report, an assertion (abort), another exception escaping -- is
// a finding.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "framework/error.h"

namespace shardlab::fuzz {

// Writes the input to a file of this process's own and returns its path (suffix kept,
// for readers that choose a format by extension).
inline std::string as_file(const uint8_t* data, size_t size, const std::string& suffix) {
  const std::string path = "/tmp/shardlab-fuzz-" + std::to_string(getpid()) + suffix;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) __builtin_trap();  // the harness's own environment, not the code under test
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
  return path;
}

// The input split at NUL bytes into arguments after a program name.
inline std::vector<std::string> as_arguments(const uint8_t* data, size_t size) {
  std::vector<std::string> args{"program"};
  std::string current;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(current);
      current.clear();
    } else {
      current.push_back(static_cast<char>(data[i]));
    }
  }
  if (!current.empty()) args.push_back(current);
  return args;
}

// Runs fn, accepting a UserError (the input was refused with a message).
template <typename Fn>
int refuse_or_run(Fn fn) {
  try {
    fn();
  } catch (const UserError&) {
  }
  return 0;
}

}  // namespace shardlab::fuzz
