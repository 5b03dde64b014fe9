#include "examples/plan/hw.h"

#include <cstdio>
#include <string>

#include "examples/plan/args.h"
#include "framework/error.h"
#include "parallel/cost/roofline/ops.h"

namespace shardlab::plan {

using namespace shardlab::cost;

namespace {

// "?" for a fact the book does not give (0), else the value with its unit.
std::string known(double value, const char* unit) { return value > 0 ? human(value, unit) : "?"; }

// "1 host", "32 hosts".
std::string count(int64_t n, const std::string& noun) { return std::to_string(n) + " " + noun + (n == 1 ? "" : "s"); }

std::string usd(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "$%.3g", value);
  return text;
}

// The chip and pod/node facts, two lines.
std::string facts_text(const HardwareProfile& p) {
  const ChipFacts& f = p.facts;
  const PodTotals pod = pod_totals(p);
  const bool gpu = p.interconnect == Interconnect::kSwitched;
  const int64_t alus = vector_alus(p);
  std::string text = "  chip: " + count(f.cores, gpu ? "SM" : "TensorCore");
  if (gpu) {
    text += " at " + known(f.base_clock_hz, "Hz") + " (boost " + known(f.clock_hz, "Hz") + "), SMEM " +
            known(f.smem_bytes_per_core, "B") + " per SM (" + known(f.smem_bytes_per_core * f.cores, "B") +
            "), registers " + known(f.register_bytes_per_core, "B") + " per SM (" +
            known(f.register_bytes_per_core * f.cores, "B") + "; with SMEM " +
            known((f.smem_bytes_per_core + f.register_bytes_per_core) * f.cores, "B") + "), L2 " + known(f.l2_bytes, "B");
  } else {
    text += ", MXU " + std::to_string(f.mxu_size) + "x" + std::to_string(f.mxu_size) + ", VMEM " +
            known(f.vmem_bytes, "B") + ", clock " + known(f.clock_hz, "Hz") + ", PCIe " +
            known(f.pcie_bandwidth, "B/s") + ", DCN " + known(f.dcn_bandwidth_per_host, "B/s") + " per host of " +
            std::to_string(f.chips_per_host);
  }
  text += "; " + std::to_string(alus) + " vector ALUs";
  if (f.clock_hz > 0) {
    text += " = " + (f.base_clock_hz > 0 ? human(alus * f.base_clock_hz, "FLOP/s") + " (boost " : std::string()) +
            human(vector_flops(p), "FLOP/s") + (f.base_clock_hz > 0 ? ")" : "") + " fp32 without FMA";
  }
  text += "\n";
  text += std::string("  ") + (gpu ? "node" : "pod " + f.pod_topology) + " of " + std::to_string(pod.chips) +
          " chips: " + count(pod.hosts, "host") + ", " + count(pod.cores, gpu ? "SM" : "TensorCore") + ", " + human(pod.flops_bf16, "FLOP/s") + " bf16, " +
          human(pod.hbm_bytes, "B") + " HBM";
  if (f.price_per_hour > 0) {
    text += "; " + usd(f.price_per_hour) + " per chip-hour = " + usd(pod.price_per_hour) + " per hour, " +
            scientific(pod.flops_per_dollar_hour, "bf16 FLOP/s per $/hour") + " = " +
            scientific(pod.flops_per_dollar, "bf16 FLOPs per $") + " at peak";
  }
  return text + "\n";
}

Json facts_json(const HardwareProfile& p) {
  const ChipFacts& f = p.facts;
  const PodTotals pod = pod_totals(p);
  return Json{{"cores", f.cores}, {"clock_hz", f.clock_hz}, {"base_clock_hz", f.base_clock_hz},
              {"vmem_bytes", f.vmem_bytes}, {"smem_bytes_per_core", f.smem_bytes_per_core},
              {"register_bytes_per_core", f.register_bytes_per_core},
              {"l2_bytes", f.l2_bytes}, {"mxu_size", f.mxu_size}, {"vector_alus", vector_alus(p)},
              {"pod_topology", f.pod_topology}, {"chips_per_host", f.chips_per_host},
              {"pcie_bytes_per_second", f.pcie_bandwidth}, {"dcn_bytes_per_second_per_host", f.dcn_bandwidth_per_host},
              {"usd_per_chip_hour", f.price_per_hour},
              {"pod", Json{{"chips", pod.chips}, {"hosts", pod.hosts}, {"cores", pod.cores},
                           {"flops_bf16", pod.flops_bf16}, {"hbm_bytes", pod.hbm_bytes},
                           {"usd_per_hour", pod.price_per_hour},
                           {"flops_per_second_per_usd_hour", pod.flops_per_dollar_hour},
                           {"flops_per_usd", pod.flops_per_dollar}}}};
}

}  // namespace

void add_hw_flags(cxxopts::Options& o) {
  o.add_options()("vector-flops",
                  "F: the vector units' fp32 FLOP/s with FMAs (2 per ALU per cycle), e.g. 80e12: the clock it implies",
                  cxxopts::value<std::string>());
}

int cmd_hw(const cxxopts::ParseResult& a) {
  if (a.count("vector-flops") && !a.count("hw")) throw UserError("--vector-flops needs --hw, the chip whose ALUs reach it");
  if (a.count("hw")) {
    const HardwareProfile p = hardware_from(a);
    std::string text = p.name + ": " + p.description + "\n  bf16 " + human(p.flops_bf16, "FLOP/s") + ", fp32 " +
                       human(p.flops_fp32, "FLOP/s") + ", int8 " + human(p.flops_int8, "OP/s") + ", fp8 " +
                       human(p.flops_fp8, "FLOP/s") + "\n  HBM " + human(p.hbm_bytes, "B") + " at " +
                       human(p.hbm_bandwidth, "B/s") + "\n  " +
                       (p.interconnect == Interconnect::kTorus ? "ICI link " : "NVLink per GPU ") +
                       human(p.ici.bandwidth, "B/s") + " one way, " + human(p.ici.latency, "s") + " per hop; DCN " +
                       human(p.dcn.bandwidth, "B/s") + "\n  " + std::to_string(p.node_size) + " chips per " +
                       (p.interconnect == Interconnect::kTorus ? "pod" : "node") + "\n";
    for (const auto& [axis, link] : p.axis_links)
      text += "  axis " + axis + ": " + human(link.bandwidth, "B/s") + ", " + human(link.latency, "s") + "\n";
    Json json = profile_json(p);
    if (p.name == "local") {  // where it lives, and what it was measured for
      text += "  file " + local_profile_path() + (p.fingerprint.empty() ? "" : " (" + p.fingerprint + ")") + "\n";
      json["path"] = local_profile_path();
      json["fingerprint"] = p.fingerprint;
    }
    if (p.facts.cores > 0) {
      text += facts_text(p);
      json["facts"] = facts_json(p);
    }
    if (a.count("vector-flops")) {
      const double flops = parse_size(a["vector-flops"].as<std::string>(), "vector-flops");
      const double clock = clock_for_vector_flops(p, flops, 2);
      text += "  " + human(flops, "FLOP/s") + " of vector fp32 with FMAs (2 FLOPs per ALU per cycle) over " +
              std::to_string(vector_alus(p)) + " ALUs: a clock of " + human(clock, "Hz") + "\n";
      json["vector_flops_with_fma"] = flops;
      json["implied_clock_hz"] = clock;
    }
    emit(a, json, text);
    return 0;
  }
  Json list = Json::array();
  std::string text;
  for (const std::string& name : hardware_names()) {
    const HardwareProfile& p = hardware(name);
    list.push_back(profile_json(p));
    char line[256];
    std::snprintf(line, sizeof line, "%-8s bf16 %-12s HBM %-9s %-12s link %s\n", p.name.c_str(),
                  human(p.flops_bf16, "FLOP/s").c_str(), human(p.hbm_bytes, "B").c_str(),
                  human(p.hbm_bandwidth, "B/s").c_str(), human(p.ici.bandwidth, "B/s").c_str());
    text += line;
  }
  emit(a, Json{{"profiles", list}}, text);
  return 0;
}

}  // namespace shardlab::plan
