#include "examples/plan/offload.h"

#include <string>
#include <vector>

#include "examples/plan/args.h"
#include "framework/error.h"
#include "parallel/cost/hardware/host_offload.h"

namespace shardlab::plan {

using namespace shardlab::cost;

void add_offload_flags(cxxopts::Options& o) {
  o.add_options("offload")
      ("rows", "rows of the offloaded array A[rows, cols]", cxxopts::value<std::string>()->default_value("128K"))
      ("cols", "its columns (the dim X[B, cols] contracts)", cxxopts::value<std::string>()->default_value("128K"))
      ("dtype", "A's element type", cxxopts::value<std::string>()->default_value("int8"))
      ("batch", "B: rows of the activations X[B, cols] multiplied on the destination",
       cxxopts::value<std::string>()->default_value("8"))
      ("x-dtype", "X's element type (the matmul runs in the wider of the two)",
       cxxopts::value<std::string>()->default_value("bf16"))
      ("mesh", "the slice's axis sizes, e.g. 4x4", cxxopts::value<std::string>()->default_value("4x4"))
      ("to", "the destination chip's coordinates (default the origin)", cxxopts::value<std::string>())
      ("pcie-bw", "bytes/s between a chip and its host (default the profile's)", cxxopts::value<double>())
      ("dcn-host-bw", "DCN bytes/s per host (default the profile's)", cxxopts::value<double>());
}

namespace {

Json route_json(const OffloadRoute& r) {
  return Json{{"dcn_seconds", r.dcn_seconds}, {"pcie_seconds", r.pcie_seconds}, {"ici_seconds", r.ici_seconds},
              {"hbm_seconds", r.hbm_seconds}, {"math_seconds", r.math_seconds},
              {"pipelined_seconds", r.pipelined_seconds}, {"serial_seconds", r.serial_seconds}};
}

std::string route_text(const OffloadRoute& r, const std::string& first) {
  return first + " + HBM " + human(r.hbm_seconds, "s") + " + math " + human(r.math_seconds, "s") + ": " +
         human(r.pipelined_seconds, "s") + " pipelined, " + human(r.serial_seconds, "s") + " in sequence";
}

}  // namespace

int cmd_offload(const cxxopts::ParseResult& a) {
  HardwareProfile hw = hardware_from(a);
  if (a.count("pcie-bw")) hw.facts.pcie_bandwidth = a["pcie-bw"].as<double>();
  if (a.count("dcn-host-bw")) hw.facts.dcn_bandwidth_per_host = a["dcn-host-bw"].as<double>();
  const int64_t rows = parse_count(a["rows"].as<std::string>(), "rows");
  const int64_t cols = parse_count(a["cols"].as<std::string>(), "cols");
  const int64_t batch = parse_count(a["batch"].as<std::string>(), "batch");
  const DType dtype = parse_dtype(a["dtype"].as<std::string>()), x = parse_dtype(a["x-dtype"].as<std::string>());
  const std::vector<int> mesh = parse_list(a["mesh"].as<std::string>(), 'x', "mesh");
  const std::vector<int> to =
      a.count("to") ? parse_list(a["to"].as<std::string>(), ',', "to") : std::vector<int>(mesh.size(), 0);
  const double r = static_cast<double>(rows), c = static_cast<double>(cols), b = static_cast<double>(batch);
  const OffloadSpec spec{.bytes = r * c * bytes_of(dtype), .mesh = mesh, .to = to, .flops = 2 * b * r * c,
                         .activation_bytes = b * c * bytes_of(x), .compute = compute_dtype(dtype, x)};
  const HostOffload o = host_offload(spec, hw);
  const std::string mesh_text = a["mesh"].as<std::string>();
  const std::string dest = coordinates(to);
  const bool ici_faster = o.via_ici.pipelined_seconds <= o.via_dcn.pipelined_seconds;
  std::string text =
      to_string(dtype) + "[" + std::to_string(rows) + ", " + std::to_string(cols) + "] (" + human(spec.bytes, "B") +
      ") in the host DRAM of a " + hw.name + " " + mesh_text + " (" + std::to_string(o.hosts) + " host(s), " +
      human(o.bytes_per_host, "B") + " each), to chip " + dest + ", times " + to_string(x) + "[" +
      std::to_string(batch) + ", " + std::to_string(cols) + "] (" + human(spec.flops, "FLOP") + "):\n";
  text += "  via DCN: " +
          route_text(o.via_dcn, "DCN " + human(o.via_dcn.dcn_seconds, "s") + " (" +
                                    human((o.hosts - 1) * o.bytes_per_host, "B") + " into its host at " +
                                    human(hw.facts.dcn_bandwidth_per_host, "B/s") + ") + PCIe " +
                                    human(o.via_dcn.pcie_seconds, "s") + " (all of it over 1 link at " +
                                    human(hw.facts.pcie_bandwidth, "B/s") + ")") +
          (ici_faster ? "" : "  <- faster") + "\n";
  text += "  via ICI: " +
          route_text(o.via_ici, "PCIe " + human(o.via_ici.pcie_seconds, "s") + " (" + human(o.bytes_per_chip, "B") +
                                    " per chip, each over its own link) + ICI " + human(o.via_ici.ici_seconds, "s") +
                                    " (" + human(spec.bytes - o.bytes_per_chip, "B") + " into " + dest + " over " +
                                    std::to_string(o.ici_links_in) + " links at " + human(hw.ici.bandwidth, "B/s") +
                                    ")") +
          (ici_faster ? "  <- faster" : "") + "\n";
  emit(a, Json{{"hw", hw.name}, {"mesh", mesh}, {"to", to}, {"bytes", spec.bytes}, {"hosts", o.hosts},
               {"bytes_per_host", o.bytes_per_host}, {"bytes_per_chip", o.bytes_per_chip}, {"flops", spec.flops},
               {"pcie_bytes_per_second", hw.facts.pcie_bandwidth},
               {"dcn_bytes_per_second_per_host", hw.facts.dcn_bandwidth_per_host},
               {"ici_links_in", o.ici_links_in}, {"via_dcn", route_json(o.via_dcn)},
               {"via_ici", route_json(o.via_ici)}, {"faster", ici_faster ? "ici" : "dcn"}},
       text);
  return 0;
}

}  // namespace shardlab::plan
