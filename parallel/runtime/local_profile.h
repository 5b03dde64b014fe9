// The `local` hardware profile a run's predictions use, measured without being asked.
//
// At start-up every program that predicts (train_gpt, generate) calls ensure_local_profile.
// Mesh rank 0 checks the profile file (cost::local_profile_path(): the per-user cache, the
// same file `shardlab-plan calibrate` writes): missing, unreadable or corrupt, measured on
// another machine or build (its fingerprint, cost::local_fingerprint), or holding no
// figures for this run's OpenMP thread count -- then it measures this machine (GEMM FLOP/s,
// memory bandwidth, a shared-memory link; cost/hardware/calibrate.h; about 2 s) and writes
// the profile, keeping the per-axis links and the other thread counts' figures the old file
// held, so a run of each thread count measures once. The other ranks then read it; a rank
// that cannot see rank 0's file (no shared filesystem) measures its own. Every prediction
// is then on a measured profile: never "not calibrated".
//
//   parallel::Mesh mesh(job, layout.axes);
//   runtime::ensure_local_profile(mesh, stdout);
#pragma once

#include <cstdio>

#include "parallel/comm/mesh.h"

namespace shardlab::runtime {

// Collective over the mesh. Says on `out` (rank 0) why it measured, what, and where it
// cached the result; says nothing when the cached profile holds.
void ensure_local_profile(const parallel::Mesh& mesh, std::FILE* out);

}  // namespace shardlab::runtime
