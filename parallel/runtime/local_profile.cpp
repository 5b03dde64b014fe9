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

// Why a profile of fingerprint `cached` is not this run's (`ours`): the thread count alone
// (the last field, "N threads") or more.
std::string stale_reason(const std::string& cached, const std::string& ours) {
  const auto head = [](const std::string& f) { return f.substr(0, f.rfind(" | ")); };
  const auto threads = [](const std::string& f) { return f.substr(f.rfind(" | ") + 3); };
  if (head(cached) != head(ours) || cached.find(" | ") == std::string::npos)
    return "was measured on another machine, build or thread count";
  return "was measured with " + threads(cached) + " per rank, this run has " + threads(ours);
}

// Why the cached profile cannot be used, or nullopt when it can (then it is installed).
std::optional<std::string> cached_profile_problem(const std::string& path, const std::string& fingerprint) {
  if (!std::ifstream(path)) return "no profile at '" + path + "'";
  try {
    const cost::HardwareProfile p = cost::load_profile(path);
    if (p.fingerprint != fingerprint) return "'" + path + "' " + stale_reason(p.fingerprint, fingerprint);
    cost::set_local_profile(p);
    return std::nullopt;
  } catch (const UserError& e) {
    return "'" + path + "' is corrupt (" + std::string(e.what()) + ")";
  }
}

// A new measurement, with the per-axis links the file at `path` holds; `kept` names them.
cost::HardwareProfile measure(const std::string& path, std::string* kept) {
  cost::HardwareProfile p = cost::calibrate_local({});
  *kept = cost::keep_axis_links(path, p);
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
