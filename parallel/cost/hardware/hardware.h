// Hardware profiles: the chips of the book "How to Scale Your Model" (tables in its TPU and
// GPU chapters) plus `local`, this cluster as measured by `shardlab-plan calibrate`.
//
// One definition serves the cost model and the mesh's link emulation. Units are SI: bytes,
// seconds, FLOP/s, bytes/s. Bandwidths are ONE direction of ONE link unless named otherwise.
//
//   const cost::HardwareProfile& v5e = cost::hardware("tpu-v5e");
//   double t_hop = v5e.ici.latency + shard_bytes / v5e.ici.bandwidth;
//   cost::LinkSpec tensor_link = cost::hardware("local").link("tensor");   // per-axis figure
//
// `local` is read on first use from local_profile_path() (see docs/cost_model.md for the
// file format); without a file it is an uncalibrated placeholder (calibrated == false).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shardlab::cost {

// A point-to-point link: what one hop costs.
struct LinkSpec {
  double bandwidth = 0;  // bytes/s, one direction of one link
  double latency = 0;    // seconds per hop (fixed cost of a transfer)
};

// How the chips of one fast domain (a TPU pod, a GPU node) are wired.
enum class Interconnect {
  kTorus,     // TPU ICI: nearest-neighbour links along each torus axis (shardlab's mesh too)
  kSwitched,  // GPU NVLink through NVSwitch: every GPU reaches every other at full egress
};

// What the book tabulates about a chip and its host beyond the cost model's figures
// (chapters "tpus", "gpus", "applied-inference"); `shardlab-plan hw` prints them. 0 or
// empty: the book does not say.
struct ChipFacts {
  int cores = 0;                   // TPU TensorCores / GPU SMs per chip
  double clock_hz = 0;             // TPU: the clock the book quotes; GPU: boost clock
  double base_clock_hz = 0;        // GPU: base clock
  double vmem_bytes = 0;           // TPU: VMEM per chip
  double smem_bytes_per_core = 0;  // GPU: SMEM (L1) per SM
  double register_bytes_per_core = 0;  // GPU: register file per SM (256 kB since Volta; gpus.md)
  int switches_per_node = 0;       // GPU: NVSwitches in one NVLink domain (gpus.md's node table)
  double l2_bytes = 0;             // GPU: L2 per chip
  int mxu_size = 0;                // TPU: systolic array edge (matmul dims pad to it)
  std::string pod_topology;        // TPU: a full pod, e.g. "16x20x28"
  int chips_per_host = 0;          // chips one CPU host drives (TPU "host size"; GPUs: a node)
  double pcie_bandwidth = 0;       // bytes/s between a chip and its host
  double dcn_bandwidth_per_host = 0;  // bytes/s
  double price_per_hour = 0;       // USD per chip-hour on Google Cloud (Feb 2025)
};

// `local`: what one rank measures with a given OpenMP thread count.
struct ThreadRates {
  double flops_fp32 = 0, flops_bf16 = 0, flops_int8 = 0;
  double hbm_bandwidth = 0;
};

struct HardwareProfile {
  std::string name;         // lookup key, e.g. "tpu-v5e"
  std::string description;  // one line for humans
  // Peak dense matmul throughput per chip (FLOP/s; OP/s for int8). 0 where unsupported.
  double flops_bf16 = 0;
  double flops_fp32 = 0;
  double flops_int8 = 0;
  double flops_fp8 = 0;
  double hbm_bytes = 0;      // accelerator memory per chip (RAM per rank for `local`)
  double hbm_bandwidth = 0;  // bytes/s per chip
  Interconnect interconnect = Interconnect::kTorus;
  LinkSpec ici;  // TPU: one ICI link; GPU: one GPU's whole NVLink egress; local: default axis link
  LinkSpec dcn;  // beyond the fast domain: TPU DCN per chip; GPU InfiniBand NIC per GPU
  // Torus only: how many physical axes a full pod has (3 for v4p/v5p, 2 for v3/v5e/v6e),
  // and which axes get wraparound links: an axis whose size is a multiple of
  // wraparound_granule (v4p/v5p: 4, the cube edge; v5e/v6e: 16, only a full pod edge).
  int torus_axes = 1;
  bool wraparound = false;
  int wraparound_granule = 1;
  int node_size = 1;  // chips in one fast domain: GPUs per NVLink node, TPU chips per pod
  // GPU only: the switches reduce in-network (NVLink SHARP in a node, InfiniBand SHARP
  // above it), so an all_reduce over whole switches sends each byte up once and gets the
  // sum back once -- bytes / W, not the ring's 2 (N-1)/N bytes / W. Off in every profile.
  bool sharp = false;
  bool calibrated = true;  // false only for a `local` profile that was never measured
  std::string fingerprint;  // `local`: the machine, build and threads it was measured with
  // `local`: the same machine and build measured with other OpenMP thread counts (not the
  // fingerprint's), so that a run with any of them finds its figures (use_threads).
  std::map<int, ThreadRates> other_threads;
  std::map<std::string, LinkSpec> axis_links;  // `local`: measured link per mesh axis name
  ChipFacts facts;  // book profiles only

  // The link of a mesh axis: the calibrated per-axis figure if there is one, else ici.
  LinkSpec link(const std::string& axis) const;
  // Whether a torus axis of `axis_size` chips has wraparound links on this hardware.
  bool axis_wraps(int axis_size) const;
};

// A whole fast domain (TPU pod, GPU node) of node_size chips, from the chip's figures:
// hosts = chips / chips_per_host, cores, peak bf16 FLOP/s, HBM, USD per hour and the
// book's "FLOPs / $" (bf16 FLOP/s per USD/hour: 1.64e14 on v5e). 0 where a fact is unknown.
struct PodTotals {
  int64_t chips = 0;
  int64_t hosts = 0;
  int64_t cores = 0;
  double flops_bf16 = 0;
  double hbm_bytes = 0;
  double price_per_hour = 0;
  double flops_per_dollar_hour = 0;  // chip bf16 FLOP/s / chip USD per hour
  double flops_per_dollar = 0;       // bf16 FLOPs one dollar buys at peak: that x 3600 s
                                     // (applied-inference.md: H100 3.3e17, v5p 3.9e17, v5e 5.8e17)
};
PodTotals pod_totals(const HardwareProfile& hw);
// Vector (non-matmul) fp32 ALUs of one chip: a GPU SM has 4 subpartitions of 32 CUDA cores
// (H100: 132 x 128 = 16,896); a TPU TensorCore's VPU is 4 x 8 x 128 (v5p: 2 x 4096 = 8192).
// Times facts.clock_hz: vector FLOP/s at one op per ALU per cycle (no FMA). 0 if unknown.
int64_t vector_alus(const HardwareProfile& hw);

// The profile called `name` (case-insensitive). Throws UserError naming the known profiles.
// `local` is loaded once from local_profile_path() and cached for the process.
const HardwareProfile& hardware(const std::string& name);
// Every known name, book chips first, then "local".
std::vector<std::string> hardware_names();

// Where `local` lives: $SHARDLAB_LOCAL_PROFILE if set, else local.profile in the per-user
// cache directory ($XDG_CACHE_HOME/shardlab if that is an absolute path, else
// ~/.cache/shardlab; ./shardlab_local.profile without a HOME). One file for every program
// and thread count: calibrate writes it, train_gpt and generate read it and measure it
// again when its fingerprint is not theirs (parallel/runtime/local_profile.h).
std::string local_profile_path();
// What a `local` measurement holds for: this host and its CPU model and cores, this build
// (its tree, compiler, build type and when it was configured) and the OpenMP threads per
// rank. A cached profile with another fingerprint is measured again.
std::string local_fingerprint(int threads);
// The OpenMP threads per rank a fingerprint records (its last field), 0 if none.
int fingerprint_threads(const std::string& fingerprint);
// The fingerprint without its thread count: the machine and the build.
std::string fingerprint_machine(const std::string& fingerprint);
// Makes a `local` profile's figures (flops_*, hbm_bandwidth, fingerprint) those of
// `threads` per rank, from other_threads when it was measured with another count (the old
// figures move there). False, the profile unchanged, when it holds none for `threads`.
bool use_threads(HardwareProfile& profile, int threads);
// Replaces the `local` profile hardware() returns for the rest of the process.
void set_local_profile(const HardwareProfile& profile);
// Read/write a profile file ("key = value" lines, threads.<N>.<key> for other_threads;
// docs/cost_model.md). Throws UserError on
// a missing file, an unknown key or a malformed value, naming the file and line. Writing
// creates the file's folder and replaces the file whole (a temporary file renamed over it).
HardwareProfile load_profile(const std::string& path);
void save_profile(const HardwareProfile& profile, const std::string& path);

}  // namespace shardlab::cost
