// Table-driven checks of the book's worked figures (tests/test_cost_book_figures.cpp,
// tests/test_cost_serving.cpp): each row is a calculator's value, the book's value, the
// relative tolerance and where the book says it (file.md of jax-ml/scaling-book, section).
// kBook (+-10%): the book rounds to ~2 significant figures; kExact: the arithmetic is exact.
// Where the book's own arithmetic is wrong the row asserts the correct value and its
// comment says what the book printed.
//
//   check({{"inference.md, Pop Quiz", "step at batch 4", d.step_seconds, 2.5e-3, kBook}});
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace shardlab::test {

constexpr double kBook = 0.10;
constexpr double kExact = 1e-3;

struct Figure {
  const char* source;  // chapter file and section
  const char* what;
  double computed;
  double book;
  double tolerance;  // relative
};

inline void check(const std::vector<Figure>& figures) {
  for (const Figure& f : figures) {
    const std::string where = std::string(f.source) + ": " + f.what;
    INFO(where);
    CHECK(f.computed == doctest::Approx(f.book).epsilon(f.tolerance).scale(0));
  }
}

}  // namespace shardlab::test
