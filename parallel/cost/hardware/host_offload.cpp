#include "parallel/cost/hardware/host_offload.h"

#include <algorithm>
#include <string>

#include "framework/error.h"

namespace shardlab::cost {
namespace {

void finish(OffloadRoute& r) {
  r.pipelined_seconds = std::max({r.dcn_seconds, r.pcie_seconds, r.ici_seconds, r.hbm_seconds, r.math_seconds});
  r.serial_seconds = r.dcn_seconds + r.pcie_seconds + r.ici_seconds + r.hbm_seconds + r.math_seconds;
}

// ICI links into chip `to`: both neighbours on an axis that wraps, else one at either end
// of the line and two inside it.
int links_into(const std::vector<int>& mesh, const std::vector<int>& to, const HardwareProfile& hw) {
  int links = 0;
  for (size_t i = 0; i < mesh.size(); ++i) {
    if (mesh[i] < 2) continue;
    const bool end = to[i] == 0 || to[i] == mesh[i] - 1;
    links += hw.axis_wraps(mesh[i]) || !end ? 2 : 1;
  }
  return links;
}

}  // namespace

HostOffload host_offload(const OffloadSpec& s, const HardwareProfile& hw) {
  if (!(s.bytes > 0)) throw UserError("the offloaded array must have bytes > 0; give --shape and --dtype");
  if (s.to.size() != s.mesh.size())
    throw UserError("--to has " + std::to_string(s.to.size()) + " coordinates for a mesh of " +
                    std::to_string(s.mesh.size()) + " axes; give one per axis, e.g. 0,0");
  for (size_t i = 0; i < s.mesh.size(); ++i)
    if (s.mesh[i] < 1 || s.to[i] < 0 || s.to[i] >= s.mesh[i])
      throw UserError("--to coordinate " + std::to_string(s.to[i]) + " lies outside axis " + std::to_string(i) +
                      " of " + std::to_string(s.mesh[i]) + " chips");
  const ChipFacts& f = hw.facts;
  if (!(f.pcie_bandwidth > 0)) throw UserError(hw.name + " has no PCIe bandwidth; give --pcie-bw, e.g. 1.5e10");
  if (!(f.dcn_bandwidth_per_host > 0))
    throw UserError(hw.name + " has no DCN bandwidth per host; give --dcn-host-bw, e.g. 2.5e10");
  HostOffload o;
  o.chips = 1;
  for (int n : s.mesh) o.chips *= n;
  const int per_host = std::max(1, f.chips_per_host);
  o.hosts = (o.chips + per_host - 1) / per_host;
  o.bytes_per_host = s.bytes / o.hosts;
  o.bytes_per_chip = s.bytes / o.chips;
  o.ici_links_in = links_into(s.mesh, s.to, hw);
  const double hbm = (s.bytes + s.activation_bytes) / hw.hbm_bandwidth;
  const double math = s.flops > 0 ? s.flops / peak_flops(hw, s.compute) : 0;

  o.via_dcn.dcn_seconds = (o.hosts - 1) * o.bytes_per_host / f.dcn_bandwidth_per_host;
  o.via_dcn.pcie_seconds = s.bytes / f.pcie_bandwidth;
  o.via_ici.pcie_seconds = o.bytes_per_chip / f.pcie_bandwidth;
  o.via_ici.ici_seconds =
      o.ici_links_in > 0 ? (s.bytes - o.bytes_per_chip) / (o.ici_links_in * hw.ici.bandwidth) : 0;
  for (OffloadRoute* r : {&o.via_dcn, &o.via_ici}) {
    r->hbm_seconds = hbm;
    r->math_seconds = math;
    finish(*r);
  }
  return o;
}

}  // namespace shardlab::cost
