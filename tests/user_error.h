// user_error_of(f): the message of the UserError that f throws (the test fails if none).
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "framework/error.h"

namespace shardlab::testing {

template <typename F>
std::string user_error_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  FAIL("expected a UserError");
  return "";
}

}  // namespace shardlab::testing
