// Calibration of the `local` profile: measure this machine and write the profile file that
// hardware("local") reads (hardware/hardware.h; format in docs/cost_model.md).
//
//  - GEMM FLOP/s: the framework's own fp32 matmul (oneDNN) on n x n matrices, timed after
//    a warm-up; this is one rank's peak with the current OpenMP thread count, so run it
//    with the OMP_NUM_THREADS each training rank will get.
//  - Memory bandwidth: a STREAM triad a = b + s c over arrays far larger than the caches,
//    counting 3 x 4 bytes per element (two reads, one write).
//  - Links: the mesh's ranks talk through shared memory here, so the default link is one
//    memcpy between two large buffers (bandwidth) and the given default latency. Figures
//    from bench_collectives replace it per axis (CalibrationOptions::axis_links).
//
// The profile carries the fingerprint of this machine, build and thread count
// (local_fingerprint), so train_gpt and generate take it as theirs when those match. A new
// measurement keeps what the file already holds that it does not replace (keep_from_file):
// the per-axis links, figures of the network that a user or `bench_collectives
// --write-links` put there, and, from the same machine and build, the figures measured with
// other thread counts (HardwareProfile::other_threads), so one file serves runs of any
// thread count and none measures twice.
//
//   HardwareProfile local = calibrate_local({});
//   keep_from_file(local_profile_path(), local);
//   save_profile(local, local_profile_path());
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "parallel/cost/hardware/hardware.h"

namespace shardlab::cost {

struct CalibrationOptions {
  int64_t gemm_size = 1024;           // n of the n x n x n GEMM
  double seconds_per_measure = 0.3;   // each figure is the best of repeats within this time
  double link_latency = 1e-6;         // default hop latency (shared-memory MPI is ~1 us)
  std::map<std::string, LinkSpec> axis_links;  // measured elsewhere, stored as given
};

double measure_gemm_flops(int64_t n, double seconds);
// The same GEMM on bf16 operands through oneDNN's bf16 kernels (fp32 accumulation).
double measure_bf16_gemm_flops(int64_t n, double seconds);

double measure_memory_bandwidth(double seconds);
double measure_copy_bandwidth(double seconds);  // one memcpy of 64 MiB: bytes/s

// A full `local` profile: measured figures with the current OpenMP thread count and its
// fingerprint; bf16 the faster of the bf16 and fp32 kernels, int8 equal to fp32 (emulated here).
HardwareProfile calibrate_local(const CalibrationOptions& options);

// Copies into `fresh` the per-axis links (link.<axis>.*) of the profile file at `path` for
// the axes `fresh` has none of and, when the file was measured on this machine and build
// (fingerprint_machine), its figures for the thread counts `fresh` was not measured with.
// Returns what it kept ("link.data, link.tensor, the figures for 1 thread"); empty when
// nothing, or the file is missing or unreadable.
std::string keep_from_file(const std::string& path, HardwareProfile& fresh);

}  // namespace shardlab::cost
