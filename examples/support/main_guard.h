// The one place a program's errors are turned into exit codes.
//
// A UserError prints "error: <message>" and exits 1; any other exception prints
// "internal error: ..." and exits 2. Programs wrap their body:
//   int main(int argc, char** argv) { return cli::guarded_main([&] { return run(argc, argv); }); }
#pragma once

#include <cstdio>
#include <exception>

#include "framework/error.h"

namespace shardlab::cli {

template <typename Body>
int guarded_main(Body body) {
  try {
    return body();
  } catch (const UserError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "internal error: %s\n", e.what());
    return 2;
  }
}

}  // namespace shardlab::cli
