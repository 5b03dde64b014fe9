// Host DRAM offload (book "tpus", Question 6): an array evenly sharded over the host DRAM
// of a slice's hosts is brought to one chip and multiplied there by activations X[B, cols].
// Two routes, each a pipeline of stages (the book: overlapped, bounded by the slowest; the
// sum if nothing overlaps):
//   via DCN  the other hosts send their shares to the destination's host over DCN,
//            (hosts - 1) x bytes/host / W_dcn(host), then the whole array crosses that
//            chip's one PCIe link, bytes / W_pcie;
//   via ICI  every chip loads its own shard over its own PCIe link at once, (bytes / chips)
//            / W_pcie (the book's 8 GB per host over 8 links), then the destination gathers
//            the rest, (chips - 1)/chips x bytes over its ICI links (2 at the corner of a
//            4x4 without wraparound; 2 per axis that wraps), / (links x W_ici);
// then, either way, HBM -> MXU of the array and X, (bytes + X bytes) / W_hbm, and the
// matmul's FLOPs 2 B rows cols / C.
//
//   HostOffload o = host_offload({.bytes = 16e9, .mesh = {4, 4}, .to = {0, 0},
//                                 .flops = 2.0 * 8 * 131072 * 131072, .activation_bytes = 2.0 * 8 * 131072},
//                                hardware("tpu-v5e"));
//   // o.via_ici: PCIe 66.7 ms, ICI 167 ms, HBM 19.8 ms, math 1.4 ms -> 167 ms pipelined
#pragma once

#include <vector>

#include "parallel/cost/hardware/hardware.h"
#include "parallel/cost/roofline/roofline.h"

namespace shardlab::cost {

struct OffloadSpec {
  double bytes = 0;              // the whole array
  std::vector<int> mesh;         // the slice's torus axes, e.g. {4, 4}
  std::vector<int> to;           // the destination chip's coordinate, one per axis
  double flops = 0;              // of the matmul on the destination (0: none)
  double activation_bytes = 0;   // X, read from HBM beside the array
  DType compute = DType::kBf16;  // the matmul's dtype (its peak FLOP/s)
};

struct OffloadRoute {
  double dcn_seconds = 0;   // via DCN only
  double pcie_seconds = 0;
  double ici_seconds = 0;   // via ICI only
  double hbm_seconds = 0;
  double math_seconds = 0;
  double pipelined_seconds = 0;  // the slowest stage
  double serial_seconds = 0;     // all stages one after another
};

struct HostOffload {
  int chips = 0;
  int hosts = 0;             // ceil(chips / chips per host)
  double bytes_per_host = 0;
  double bytes_per_chip = 0;
  int ici_links_in = 0;      // links into the destination
  OffloadRoute via_dcn, via_ici;
};

// PCIe and DCN bandwidths are hw.facts' (per chip; per host). UserError naming the flag
// where the profile has none (--pcie-bw, --dcn-host-bw), a coordinate outside its axis, or
// an empty array.
HostOffload host_offload(const OffloadSpec& spec, const HardwareProfile& hw);

}  // namespace shardlab::cost
