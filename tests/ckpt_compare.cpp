// ckpt_compare A.h5 B.h5 PREFIX TOLERANCE: compares every tensor whose name starts with
// PREFIX in two shardlab checkpoint files (the same names in both, the same shapes), each
// by its largest element difference relative to its largest magnitude in A. Prints one
// line per tensor over the tolerance and a summary; exits 1 on any difference over it, a
// name in one file only, no tensor under PREFIX, or an all-zero tensor set in A (a dump
// of nothing must not pass).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "framework/checkpoint.h"
#include "framework/error.h"

using namespace shardlab;

namespace {

std::vector<std::string> names_under(const CheckpointReader& r, const std::string& prefix) {
  std::vector<std::string> out;
  for (const std::string& n : r.tensor_names()) {
    if (n.rfind(prefix, 0) == 0) out.push_back(n);
  }
  return out;
}

std::vector<float> read_all(const CheckpointReader& r, const std::string& name) {
  const Shape shape = r.shape(name);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(n);
  r.read(name, shape, v);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: ckpt_compare A.h5 B.h5 PREFIX TOLERANCE\n");
    return 2;
  }
  try {
    const CheckpointReader a(argv[1]), b(argv[2]);
    const std::string prefix = argv[3];
    const double tolerance = std::atof(argv[4]);
    const auto names = names_under(a, prefix);
    if (names.empty()) return std::fprintf(stderr, "FAIL: no tensor under '%s' in %s\n", argv[3], argv[1]), 1;
    if (names != names_under(b, prefix)) return std::fprintf(stderr, "FAIL: the files hold different tensors under '%s'\n", argv[3]), 1;
    double worst = 0.0, largest = 0.0;
    int over = 0;
    for (const std::string& name : names) {
      if (a.shape(name) != b.shape(name)) return std::fprintf(stderr, "FAIL: %s has different shapes\n", name.c_str()), 1;
      const auto x = read_all(a, name), y = read_all(b, name);
      double scale = 0.0, diff = 0.0;
      for (size_t i = 0; i < x.size(); ++i) {
        scale = std::max(scale, std::abs(static_cast<double>(x[i])));
        diff = std::max(diff, std::abs(static_cast<double>(x[i]) - y[i]));
      }
      largest = std::max(largest, scale);
      const double relative = scale > 0 ? diff / scale : diff;
      worst = std::max(worst, relative);
      if (!(relative <= tolerance)) {
        std::fprintf(stderr, "FAIL: %s differs by %.3g of its largest element %.3g\n", name.c_str(), relative, scale);
        ++over;
      }
    }
    if (largest == 0.0) return std::fprintf(stderr, "FAIL: every tensor under '%s' is zero\n", argv[3]), 1;
    std::printf("%zu tensors under '%s': largest relative difference %.3g (tolerance %g)\n", names.size(), argv[3],
                worst, tolerance);
    return over > 0 ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL: %s\n", e.what());
    return 1;
  }
}
