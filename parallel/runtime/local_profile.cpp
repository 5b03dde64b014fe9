#include "parallel/runtime/local_profile.h"

#include <omp.h>

#include <fstream>
#include <optional>
#include <string>

#include "framework/error.h"
#include "parallel/comm/collectives.h"
#include "parallel/cost/hardware/calibrate.h"
#include "parallel/cost/hardware/hardware.h"

namespace shardlab::runtime {
namespace {

// Why the cached profile cannot be used, or nullopt when it can (then it is installed, with
// its figures for this run's thread count: one file holds every thread count measured).
std::optional<std::string> cached_profile_problem(const std::string& path, const std::string& fingerprint) {
  if (!std::ifstream(path)) return "no profile at '" + path + "'";
  try {
    cost::HardwareProfile p = cost::load_profile(path);
    if (cost::fingerprint_machine(p.fingerprint) != cost::fingerprint_machine(fingerprint) ||
        cost::fingerprint_threads(p.fingerprint) == 0)
      return "'" + path + "' was measured on another machine or build";
    const int threads = cost::fingerprint_threads(fingerprint);
    if (!cost::use_threads(p, threads)) {
      std::string held = std::to_string(cost::fingerprint_threads(p.fingerprint));
      for (const auto& [count, rates] : p.other_threads) held += ", " + std::to_string(count);
      return "'" + path + "' holds figures for " + held + " threads per rank, this run has " + std::to_string(threads);
    }
    cost::set_local_profile(p);
    return std::nullopt;
  } catch (const UserError& e) {
    return "'" + path + "' is corrupt (" + std::string(e.what()) + ")";
  }
}

// A new measurement, with what the file at `path` holds beside it (per-axis links, other
// thread counts); `kept` names them.
cost::HardwareProfile measure(const std::string& path, std::string* kept) {
  cost::HardwareProfile p = cost::calibrate_local({});
  *kept = cost::keep_from_file(path, p);
  cost::set_local_profile(p);
  return p;
}

}  // namespace

void ensure_local_profile(const parallel::Mesh& mesh, std::FILE* out) {
  const std::string path = cost::local_profile_path();
  const std::string fingerprint = cost::local_fingerprint(omp_get_max_threads());
  std::string kept;
  if (mesh.rank() == 0) {
    if (const auto problem = cached_profile_problem(path, fingerprint)) {
      std::fprintf(out, "profile %s: measuring this machine for the cost model (about 2 s) ...", problem->c_str());
      std::fflush(out);
      const cost::HardwareProfile p = measure(path, &kept);
      std::string where = "cached in '" + path + "'";
      if (!kept.empty()) where = "kept " + kept + " from it; " + where;
      try {
        cost::save_profile(p, path);
      } catch (const UserError& e) {
        where = "not cached: " + std::string(e.what());
      }
      std::fprintf(out, " GEMM %.1f GFLOP/s per rank, memory %.1f GB/s; %s\n", p.flops_fp32 / 1e9,
                   p.hbm_bandwidth / 1e9, where.c_str());
      std::fflush(out);
    }
  }
  float done = 0.0f;  // the others wait for rank 0's file
  parallel::all_reduce(mesh.all(), {&done, 1});
  if (mesh.rank() != 0 && cached_profile_problem(path, fingerprint)) measure(path, &kept);
}

}  // namespace shardlab::runtime
