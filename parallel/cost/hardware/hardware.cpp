#include "parallel/cost/hardware/hardware.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <system_error>
#include <thread>

#include "framework/error.h"

namespace shardlab::cost {
namespace {

constexpr double kHopLatency = 1e-6;  // the book's ~1 us per ICI hop

// The book's tables (chapters "tpus" and "gpus"). fp32 matmuls: TPUs run them as three
// bf16 passes (bf16/3); GPUs use TF32 tensor cores (bf16/2). Latencies other than the
// ICI hop are order-of-magnitude assumptions; the book gives none.
HardwareProfile tpu(std::string name, std::string description, double hbm_bytes, double hbm_bw,
                    double bf16, double int8, double ici_bw, double dcn_bw, int torus_axes,
                    int granule, int pod_chips) {
  HardwareProfile p;
  p.name = std::move(name);
  p.description = std::move(description);
  p.flops_bf16 = bf16;
  p.flops_fp32 = bf16 / 3;
  p.flops_int8 = int8;
  p.hbm_bytes = hbm_bytes;
  p.hbm_bandwidth = hbm_bw;
  p.interconnect = Interconnect::kTorus;
  p.ici = {ici_bw, kHopLatency};
  p.dcn = {dcn_bw, 10e-6};
  p.torus_axes = torus_axes;
  p.wraparound = true;
  p.wraparound_granule = granule;
  p.node_size = pod_chips;
  return p;
}

HardwareProfile gpu(std::string name, std::string description, double hbm_bytes, double hbm_bw,
                    double bf16, double int8, double fp8, double nvlink_bw, double ib_bw) {
  HardwareProfile p;
  p.name = std::move(name);
  p.description = std::move(description);
  p.flops_bf16 = bf16;
  p.flops_fp32 = bf16 / 2;
  p.flops_int8 = int8;
  p.flops_fp8 = fp8;
  p.hbm_bytes = hbm_bytes;
  p.hbm_bandwidth = hbm_bw;
  p.interconnect = Interconnect::kSwitched;
  p.ici = {nvlink_bw, 2e-6};
  p.dcn = {ib_bw, 5e-6};
  p.node_size = 8;
  return p;
}

HardwareProfile with_facts(HardwareProfile p, ChipFacts facts) {
  p.facts = std::move(facts);
  return p;
}

// Chip and host facts of the book's tables: TensorCores per chip (training chips 2,
// inference chips 1), the 128x128 MXU (256 on v6e), host sizes, PCIe ~1.5e10 B/s per chip
// (v4 16 GB/s, v6e 32 GB/s), DCN ~2.5e10 B/s per host; VMEM and the clock only where the
// book quotes them (v5e 128 MiB at 1.5 GHz; v5p 128 MB). GPUs: the "Summary of GPU specs"
// table. Prices: applied-inference.md (v5e $1.2, v5p $4.2, H100 $10.8) and gpus.md (H200 ~$10).
ChipFacts tpu_facts(int cores, int mxu, const char* pod, int chips_per_host, double pcie) {
  ChipFacts f;
  f.cores = cores, f.mxu_size = mxu, f.pod_topology = pod, f.chips_per_host = chips_per_host;
  f.pcie_bandwidth = pcie, f.dcn_bandwidth_per_host = 2.5e10;
  return f;
}
ChipFacts gpu_facts(int sms, double base_hz, double boost_hz, double smem, double l2, int switches) {
  ChipFacts f;
  f.switches_per_node = switches;
  f.cores = sms, f.clock_hz = boost_hz, f.base_clock_hz = base_hz, f.smem_bytes_per_core = smem, f.l2_bytes = l2;
  f.register_bytes_per_core = 256e3;  // "All generations have 256kB of register memory per SM"
  f.chips_per_host = 8;
  return f;
}

std::vector<HardwareProfile> book_profiles() {
  ChipFacts v5e = tpu_facts(1, 128, "16x16", 8, 1.5e10), v5p = tpu_facts(2, 128, "16x20x28", 4, 1.5e10);
  v5e.vmem_bytes = 128.0 * (1 << 20), v5e.clock_hz = 1.5e9, v5e.price_per_hour = 1.2;
  v5p.vmem_bytes = 128e6, v5p.price_per_hour = 4.2;
  ChipFacts h100 = gpu_facts(132, 1.59e9, 1.98e9, 256e3, 50e6, 4), h200 = h100;
  h100.price_per_hour = 10.8, h200.price_per_hour = 10;
  // GB200 NVL72 (gpus.md): B200 GPUs, 72 to an NVLink5 domain, node egress 72 x 400 Gbps =
  // 3.6 TB/s. Hosts of 4 GPUs (18 compute trays) are NVIDIA's figure; the book gives none.
  const ChipFacts b200 = gpu_facts(148, 0, 0, 256e3, 126e6, 2);
  ChipFacts nvl72_facts = b200;
  nvl72_facts.chips_per_host = 4, nvl72_facts.switches_per_node = 18;
  HardwareProfile nvl72 = gpu("gb200-nvl72", "NVIDIA GB200 NVL72: B200 GPUs in a 72-GPU NVLink5 domain", 192e9, 8.0e12,
                              2.25e15, 4.5e15, 4.5e15, 900e9, 50e9);
  nvl72.node_size = 72;
  return {
      with_facts(tpu("tpu-v3", "TPU v3: 2D torus, 32x32 pod", 32e9, 9.0e11, 1.4e14, 1.4e14, 1e11, 6.25e9, 2,
                     32, 1024),
                 tpu_facts(2, 128, "32x32", 8, 1.5e10)),
      with_facts(tpu("tpu-v4p", "TPU v4p: 3D torus, wraparound on 4-chip cube edges, 4096-chip pod", 32e9,
                     1.2e12, 2.75e14, 2.75e14, 4.5e10, 6.25e9, 3, 4, 4096),
                 tpu_facts(2, 128, "16x16x16", 4, 1.6e10)),
      with_facts(tpu("tpu-v5e", "TPU v5e: 2D, wraparound only on a full 16x16 pod", 16e9, 8.1e11, 1.97e14,
                     3.94e14, 4.5e10, 3.125e9, 2, 16, 256),
                 v5e),
      with_facts(tpu("tpu-v5p", "TPU v5p: 3D torus, wraparound on 4-chip cube edges, 8960-chip pod", 96e9,
                     2.8e12, 4.59e14, 9.18e14, 9e10, 6.25e9, 3, 4, 8960),
                 v5p),
      with_facts(tpu("tpu-v6e", "TPU v6e (Trillium): 2D, wraparound only on a full 16x16 pod", 32e9, 1.6e12,
                     9.2e14, 1.84e15, 9e10, 1.25e10, 2, 16, 256),
                 tpu_facts(1, 256, "16x16", 8, 3.2e10)),
      with_facts(gpu("a100", "NVIDIA A100 SXM 80GB: NVLink3 node of 8, HDR InfiniBand", 80e9, 2.0e12, 3.1e14,
                     6.2e14, 0, 300e9, 25e9),
                 gpu_facts(108, 1.10e9, 1.41e9, 192e3, 40e6, 6)),
      with_facts(gpu("h100", "NVIDIA H100 SXM: NVLink4 node of 8 (18 links x 25 GB/s), NDR InfiniBand", 80e9,
                     3.35e12, 9.9e14, 1.98e15, 1.98e15, 450e9, 50e9),
                 h100),
      with_facts(gpu("h200", "NVIDIA H200: as H100 with 141 GB HBM3e", 141e9, 4.8e12, 9.9e14, 1.98e15,
                     1.98e15, 450e9, 50e9),
                 h200),
      with_facts(gpu("b200", "NVIDIA B200: NVLink5 node of 8", 192e9, 8.0e12, 2.25e15, 4.5e15, 4.5e15, 900e9,
                     50e9),
                 b200),
      with_facts(nvl72, nvl72_facts),
  };
}

// An uncalibrated CPU host: numbers of the right order so predictions print, flagged so
// users know to run `shardlab-plan calibrate`.
HardwareProfile local_placeholder() {
  HardwareProfile p;
  p.name = "local";
  p.description = "this cluster, NOT calibrated (run shardlab-plan calibrate)";
  p.flops_fp32 = 5e10;
  p.flops_bf16 = p.flops_fp32;  // bf16 is emulated on this CPU: no faster than fp32
  p.flops_int8 = p.flops_fp32;
  const double pages = static_cast<double>(sysconf(_SC_PHYS_PAGES));
  p.hbm_bytes = pages * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  p.hbm_bandwidth = 1e10;
  p.ici = {5e9, 2e-6};
  p.dcn = p.ici;
  p.wraparound = true;
  p.node_size = 1 << 20;  // one fabric: every rank is reachable over the same links
  p.calibrated = false;
  return p;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r") - begin + 1);
}

}  // namespace

LinkSpec HardwareProfile::link(const std::string& axis) const {
  const auto it = axis_links.find(axis);
  return it == axis_links.end() ? ici : it->second;
}

bool HardwareProfile::axis_wraps(int axis_size) const {
  return wraparound && axis_size > 2 && axis_size % wraparound_granule == 0;
}

PodTotals pod_totals(const HardwareProfile& hw) {
  PodTotals t;
  t.chips = hw.node_size;
  t.hosts = hw.facts.chips_per_host > 0 ? t.chips / hw.facts.chips_per_host : 0;
  t.cores = t.chips * hw.facts.cores;
  t.flops_bf16 = t.chips * hw.flops_bf16;
  t.hbm_bytes = t.chips * hw.hbm_bytes;
  t.price_per_hour = t.chips * hw.facts.price_per_hour;
  t.flops_per_dollar_hour = hw.facts.price_per_hour > 0 ? hw.flops_bf16 / hw.facts.price_per_hour : 0;
  t.flops_per_dollar = t.flops_per_dollar_hour * 3600;  // the hour the price buys
  return t;
}

int64_t vector_alus(const HardwareProfile& hw) {
  return static_cast<int64_t>(hw.facts.cores) * (hw.interconnect == Interconnect::kSwitched ? 4 * 32 : 4 * 8 * 128);
}

std::vector<std::string> hardware_names() {
  std::vector<std::string> names;
  for (const auto& p : book_profiles()) names.push_back(p.name);
  names.push_back("local");
  return names;
}

std::string local_profile_path() {
  const char* env = std::getenv("SHARDLAB_LOCAL_PROFILE");
  if (env && *env) return env;
  const char* xdg = std::getenv("XDG_CACHE_HOME");  // the XDG base directory rules: absolute or ignored
  if (xdg && *xdg == '/') return std::string(xdg) + "/shardlab/local.profile";
  const char* home = std::getenv("HOME");
  if (home && *home) return std::string(home) + "/.cache/shardlab/local.profile";
  return "shardlab_local.profile";
}

namespace {

// The process's `local` profile: read on first use, replaced by set_local_profile.
std::unique_ptr<HardwareProfile>& local_slot() {
  static std::unique_ptr<HardwareProfile> local;
  return local;
}

const HardwareProfile& local_profile() {
  std::unique_ptr<HardwareProfile>& local = local_slot();
  if (!local) {
    local = std::make_unique<HardwareProfile>(local_placeholder());
    if (std::ifstream(local_profile_path())) {
      try {
        *local = load_profile(local_profile_path());
      } catch (const UserError& e) {  // unusable: measured again by the next run that predicts
        local->description = "this cluster, NOT calibrated (" + std::string(e.what()) + ")";
      }
    }
  }
  return *local;
}

// The first line of /proc/cpuinfo's `model name`, or "unknown cpu".
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) return trim(line.substr(line.find(':') + 1));
  }
  return "unknown cpu";
}

}  // namespace

void set_local_profile(const HardwareProfile& profile) { local_slot() = std::make_unique<HardwareProfile>(profile); }

std::string local_fingerprint(int threads) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string fingerprint = std::string(host) + " | " + cpu_model() + " x" +
                            std::to_string(std::thread::hardware_concurrency()) + " | build " + SHARDLAB_BUILD_ID +
                            " | " + std::to_string(threads) + " threads";
  std::replace(fingerprint.begin(), fingerprint.end(), '#', '_');  // '#' starts a comment in the file
  return fingerprint;
}

int fingerprint_threads(const std::string& fingerprint) {
  const size_t bar = fingerprint.rfind(" | ");
  if (bar == std::string::npos) return 0;
  const std::string last = fingerprint.substr(bar + 3);
  if (!last.ends_with(" threads")) return 0;
  try {
    return std::max(0, std::stoi(last));
  } catch (const std::exception&) {
    return 0;
  }
}

std::string fingerprint_machine(const std::string& fingerprint) {
  return fingerprint_threads(fingerprint) > 0 ? fingerprint.substr(0, fingerprint.rfind(" | ")) : fingerprint;
}

bool use_threads(HardwareProfile& p, int threads) {
  const int measured = fingerprint_threads(p.fingerprint);
  if (measured == threads) return true;
  const auto found = p.other_threads.find(threads);
  if (measured == 0 || found == p.other_threads.end()) return false;
  const ThreadRates ours = found->second;
  p.other_threads.erase(found);
  p.other_threads[measured] = {p.flops_fp32, p.flops_bf16, p.flops_int8, p.hbm_bandwidth};
  p.flops_fp32 = ours.flops_fp32;
  p.flops_bf16 = ours.flops_bf16;
  p.flops_int8 = ours.flops_int8;
  p.hbm_bandwidth = ours.hbm_bandwidth;
  p.fingerprint = fingerprint_machine(p.fingerprint) + " | " + std::to_string(threads) + " threads";
  char what[160];
  std::snprintf(what, sizeof what, "measured with %d threads per rank: GEMM %.0f GFLOP/s fp32, %.0f bf16; memory %.1f GB/s",
                threads, p.flops_fp32 / 1e9, p.flops_bf16 / 1e9, p.hbm_bandwidth / 1e9);
  p.description = what;
  return true;
}

const HardwareProfile& hardware(const std::string& name) {
  static const std::vector<HardwareProfile> book = book_profiles();
  const std::string key = lower(name);
  for (const auto& p : book)
    if (p.name == key) return p;
  if (key == "local") return local_profile();
  std::string known;
  for (const auto& n : hardware_names()) known += (known.empty() ? "" : ", ") + n;
  throw UserError("unknown hardware profile '" + name + "'; known profiles: " + known);
}

// The file stores every field as "key = value"; per-axis links as "link.<axis>.bandwidth"
// and "link.<axis>.latency". Unset keys keep the placeholder's values.
void save_profile(const HardwareProfile& p, const std::string& path) {
  std::error_code ignored;  // a folder that cannot be made fails the open below, with the path
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ignored);
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  std::ofstream out(tmp);
  if (!out) throw UserError("cannot write hardware profile file '" + path + "'; choose a writable path");
  out.precision(17);
  out << "# shardlab hardware profile (docs/cost_model.md). SI units: FLOP/s, bytes, bytes/s, s.\n"
      << "name = " << p.name << "\n"
      << "description = " << p.description << "\n"
      << "flops_fp32 = " << p.flops_fp32 << "\nflops_bf16 = " << p.flops_bf16 << "\n"
      << "flops_int8 = " << p.flops_int8 << "\nflops_fp8 = " << p.flops_fp8 << "\n"
      << "hbm_bytes = " << p.hbm_bytes << "\nhbm_bandwidth = " << p.hbm_bandwidth << "\n"
      << "interconnect = " << (p.interconnect == Interconnect::kTorus ? "torus" : "switched") << "\n"
      << "ici.bandwidth = " << p.ici.bandwidth << "\nici.latency = " << p.ici.latency << "\n"
      << "dcn.bandwidth = " << p.dcn.bandwidth << "\ndcn.latency = " << p.dcn.latency << "\n"
      << "torus_axes = " << p.torus_axes << "\nwraparound = " << (p.wraparound ? 1 : 0) << "\n"
      << "wraparound_granule = " << p.wraparound_granule << "\nnode_size = " << p.node_size << "\n";
  if (!p.fingerprint.empty()) out << "fingerprint = " << p.fingerprint << "\n";
  for (const auto& [axis, link] : p.axis_links)
    out << "link." << axis << ".bandwidth = " << link.bandwidth << "\n"
        << "link." << axis << ".latency = " << link.latency << "\n";
  for (const auto& [threads, r] : p.other_threads) {
    const std::string key = "threads." + std::to_string(threads) + ".";
    out << key << "flops_fp32 = " << r.flops_fp32 << "\n" << key << "flops_bf16 = " << r.flops_bf16 << "\n"
        << key << "flops_int8 = " << r.flops_int8 << "\n" << key << "hbm_bandwidth = " << r.hbm_bandwidth << "\n";
  }
  out.close();
  if (!out || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw UserError("failed writing hardware profile file '" + path + "'; check that the disk is not full");
  }
}

HardwareProfile load_profile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UserError("cannot read hardware profile file '" + path + "'; run `shardlab-plan calibrate --out " + path + "`");
  HardwareProfile p = local_placeholder();
  p.calibrated = true;
  std::map<std::string, double*> numbers = {
      {"flops_fp32", &p.flops_fp32},       {"flops_bf16", &p.flops_bf16},
      {"flops_int8", &p.flops_int8},       {"flops_fp8", &p.flops_fp8},
      {"hbm_bytes", &p.hbm_bytes},         {"hbm_bandwidth", &p.hbm_bandwidth},
      {"ici.bandwidth", &p.ici.bandwidth}, {"ici.latency", &p.ici.latency},
      {"dcn.bandwidth", &p.dcn.bandwidth}, {"dcn.latency", &p.dcn.latency}};
  std::map<std::string, int*> integers = {{"torus_axes", &p.torus_axes},
                                          {"wraparound_granule", &p.wraparound_granule},
                                          {"node_size", &p.node_size}};
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    const auto eq = line.find('=');
    const std::string where = path + ":" + std::to_string(number);
    if (eq == std::string::npos) throw UserError(where + ": expected 'key = value', got '" + line + "'");
    const std::string key = trim(line.substr(0, eq));
    const std::string value = trim(line.substr(eq + 1));
    auto number_of = [&] {
      char* end = nullptr;
      const double v = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || v < 0)
        throw UserError(where + ": '" + key + "' needs a non-negative number, got '" + value + "'");
      return v;
    };
    if (key == "name") {
      p.name = value;
    } else if (key == "description") {
      p.description = value;
    } else if (key == "fingerprint") {
      p.fingerprint = value;
    } else if (key == "interconnect") {
      if (value != "torus" && value != "switched")
        throw UserError(where + ": interconnect must be 'torus' or 'switched', got '" + value + "'");
      p.interconnect = value == "torus" ? Interconnect::kTorus : Interconnect::kSwitched;
    } else if (key == "wraparound") {
      p.wraparound = number_of() != 0;
    } else if (numbers.count(key)) {
      *numbers[key] = number_of();
    } else if (integers.count(key)) {
      *integers[key] = static_cast<int>(number_of());
    } else if (key.rfind("link.", 0) == 0 && key.find('.', 5) != std::string::npos) {
      const auto dot = key.rfind('.');
      const std::string axis = key.substr(5, dot - 5), field = key.substr(dot + 1);
      if (field != "bandwidth" && field != "latency")
        throw UserError(where + ": per-axis key must end in .bandwidth or .latency, got '" + key + "'");
      LinkSpec& link = p.axis_links.try_emplace(axis, p.ici).first->second;
      (field == "bandwidth" ? link.bandwidth : link.latency) = number_of();
    } else if (key.rfind("threads.", 0) == 0 && key.find('.', 8) != std::string::npos) {
      const auto dot = key.find('.', 8);
      const std::string count = key.substr(8, dot - 8), field = key.substr(dot + 1);
      char* end = nullptr;
      const long threads = std::strtol(count.c_str(), &end, 10);
      if (count.empty() || *end != '\0' || threads < 1 || threads > 1 << 16)
        throw UserError(where + ": '" + key + "' needs a thread count, as in threads.2.flops_fp32");
      ThreadRates& r = p.other_threads[static_cast<int>(threads)];
      std::map<std::string, double*> rates = {{"flops_fp32", &r.flops_fp32}, {"flops_bf16", &r.flops_bf16},
                                              {"flops_int8", &r.flops_int8}, {"hbm_bandwidth", &r.hbm_bandwidth}};
      if (!rates.count(field))
        throw UserError(where + ": '" + key + "': a thread count holds flops_fp32, flops_bf16, flops_int8 and hbm_bandwidth");
      *rates[field] = number_of();
    } else {
      throw UserError(where + ": unknown key '" + key + "'");
    }
  }
  if (p.flops_fp32 <= 0 || p.hbm_bandwidth <= 0 || p.ici.bandwidth <= 0)
    throw UserError(path + ": flops_fp32, hbm_bandwidth and ici.bandwidth must be positive");
  for (const auto& [threads, r] : p.other_threads)
    if (r.flops_fp32 <= 0 || r.hbm_bandwidth <= 0)
      throw UserError(path + ": threads." + std::to_string(threads) + ".flops_fp32 and .hbm_bandwidth must be positive");
  return p;
}

}  // namespace shardlab::cost
