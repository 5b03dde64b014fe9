// bench_collectives: the nccl-tests of shardlab. For each op, algorithm and size it
// times the collective on one mesh axis and prints time, algorithm bandwidth, bus
// bandwidth and the cost model's prediction for a hardware profile, with the speed
// relative to native measured in the same run.
//
//   mpirun -n 2 bench_collectives                                   # 4 KiB .. 64 MiB
//   mpirun -n 2 --mca btl self,tcp bench_collectives --csv tcp.csv
//   mpirun -n 2 bench_collectives --calibrate auto.table            # measure `auto`
//   mpirun -n 2 bench_collectives --overhead                        # wrapper vs bare MPI
//   mpirun -n 2 bench_collectives --write-links local   # per-axis links into the local profile
//
// The algorithms of one op and size are timed interleaved, --rounds times over: each
// round times every algorithm for --iters repetitions (the slowest rank's mean), and a
// row reports the best round, so that the load of other processes on the shared cores
// falls on no algorithm in particular. busbw = algbw * bus_factor(op, n) (comm_trace.h),
// comparable across group sizes; predicted is the cost model's time on --profile's links
// and x_pred = measured / predicted.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cxxopts.hpp>
#include <fstream>
#include <functional>
#include <sstream>

#include "framework/error.h"
#include "framework/ops/wire_format.h"
#include "framework/memory.h"
#include "framework/output_path.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/comm.h"
#include "parallel/comm/comm_context.h"
#include "parallel/comm/mesh.h"
#include "examples/parse_flags.h"

using namespace shardlab;
using namespace shardlab::parallel;

namespace {

struct Row {
  CollectiveOp op;
  Algorithm algorithm;
  DType wire;
  int64_t bytes;
  double seconds;
  double predicted;
  double native_seconds;  // same op and size with native, for the ratio
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

// Whether `op` can carry `wire` (only the gradient and parameter collectives compress).
bool takes_wire(CollectiveOp op, DType wire) {
  return wire == DType::kF32 || op == CollectiveOp::kAllGather || op == CollectiveOp::kReduceScatter ||
         op == CollectiveOp::kAllReduce;
}

// Runs one collective of `bytes` of fp32 data (as comm_trace.h counts fp32) on `g`, its
// messages carried as `wire`; an int8 reduction keeps error feedback in `feedback`, as
// training does (collectives.h).
void run_once(const AxisGroup& g, CollectiveOp op, Algorithm a, DType wire, std::vector<float>& in,
              std::vector<float>& out, std::vector<float>& feedback, int64_t bytes) {
  const size_t n = static_cast<size_t>(g.size()), count = static_cast<size_t>(bytes) / sizeof(float);
  std::span<float> fb;
  if (wire == DType::kInt8 && (op == CollectiveOp::kReduceScatter || op == CollectiveOp::kAllReduce)) {
    fb = std::span(feedback).first(static_cast<size_t>(error_feedback_floats(g, op, static_cast<int64_t>(count))));
  }
  switch (op) {
    case CollectiveOp::kAllGather:
      return all_gather(g, std::span(in).first(count / n), std::span(out).first(count), a, wire);
    case CollectiveOp::kReduceScatter:
      return reduce_scatter(g, std::span(in).first(count), std::span(out).first(count / n), a, wire, fb);
    case CollectiveOp::kAllReduce:
      return all_reduce(g, std::span(in).first(count), ReduceOp::kSum, a, wire, fb);
    case CollectiveOp::kAllToAll:
      return all_to_all(g, std::span(in).first(count), std::span(out).first(count), a);
    case CollectiveOp::kPermute:
      return ppermute(g, std::span(in).first(count), std::span(out).first(count), 1, a);
    default:
      throw UserError("bench_collectives measures all_gather, reduce_scatter, all_reduce, all_to_all and ppermute");
  }
}

// The slowest rank's mean seconds of `iters` calls of f (after a barrier).
double time_slowest(MPI_Comm comm, int iters, const std::function<void()>& f) {
  MPI_Barrier(comm);
  const double t0 = MPI_Wtime();
  for (int i = 0; i < iters; ++i) f();
  double mine = (MPI_Wtime() - t0) / iters, slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
  return slowest;
}

// Best-of-`rounds` times of several contenders timed interleaved (see the header), each
// warmed up once first (connections, caches, scratch buffers).
std::vector<double> time_interleaved(MPI_Comm comm, int iters, int rounds,
                                     const std::vector<std::function<void()>>& contenders) {
  for (const auto& f : contenders) f();
  std::vector<double> best(contenders.size(), 1e30);
  for (int round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < contenders.size(); ++i) best[i] = std::min(best[i], time_slowest(comm, iters, contenders[i]));
  }
  return best;
}

// Bare MPI_Allreduce against the wrapper (native and auto) for small messages.
void measure_overhead(const AxisGroup& g, MPI_Comm comm, int iters, int rounds, bool print) {
  if (print) std::printf("%10s %14s %14s %14s %12s\n", "bytes", "bare_mpi_us", "native_us", "auto_us", "overhead_us");
  for (int64_t bytes : {4, 64, 1024, 4096}) {
    std::vector<float> v(bytes / 4, 1.0f);
    const std::vector<double> t = time_interleaved(
        comm, iters, rounds,
        {[&] { MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_FLOAT, MPI_SUM, g.comm()); },
         [&] { all_reduce(g, v, ReduceOp::kSum, Algorithm::kNative); },
         [&] { all_reduce(g, v, ReduceOp::kSum, Algorithm::kAuto); }});
    if (print) {
      std::printf("%10lld %14.2f %14.2f %14.2f %12.2f\n", static_cast<long long>(bytes), t[0] * 1e6, t[1] * 1e6,
                  t[2] * 1e6, (t[1] - t[0]) * 1e6);
    }
  }
}

// Measures every axis of the mesh as a link -- one ring step, ppermute by 1, each rank
// sending to one neighbour while receiving from the other -- and stores it in the
// profile file `path` as link.<axis>.{bandwidth,latency} (parallel/cost/hardware/hardware.h), keeping
// the rest of the file, its fingerprint included. Latency is the time of a 4-byte step;
// bandwidth the slope between 1 MiB and 16 MiB steps.
void write_links(const Mesh& mesh, const std::string& path, int rounds, bool root) {
  cost::HardwareProfile profile = cost::load_profile(path);  // from shardlab-plan calibrate
  constexpr int64_t kSmall = 4, kMid = 1 << 20, kLarge = 16 << 20;
  std::vector<float> in(kLarge / 4, 1.0f), out(kLarge / 4);
  for (const std::string& name : kAxisNames) {
    if (!mesh.has_axis(name) || mesh.axis_size(name) == 1) continue;
    const AxisGroup& axis = mesh.axis(name);
    auto step_seconds = [&](int64_t bytes, int iters) {
      const size_t count = static_cast<size_t>(bytes / 4);
      return time_interleaved(mesh.comm(), iters, rounds, {[&] {
                                ppermute(axis, std::span(in).first(count), std::span(out).first(count), 1, Algorithm::kRing);
                              }})[0];
    };
    const double small = step_seconds(kSmall, 200), mid = step_seconds(kMid, 20), large = step_seconds(kLarge, 5);
    const cost::LinkSpec link{static_cast<double>(kLarge - kMid) / std::max(large - mid, 1e-9), small};
    profile.axis_links[name] = link;
    if (root) std::printf("axis %-8s link: %.3g B/s, %.3g s per hop\n", name.c_str(), link.bandwidth, link.latency);
  }
  if (root) {
    cost::save_profile(profile, path);
    std::printf("wrote per-axis links to %s\n", path.c_str());
  }
}

// Writes the table for this group size into `path`, keeping the rules it already holds
// for other group sizes (so runs on 2, 4 and 8 ranks build one table), ordered by ranks.
void save_calibration(const std::vector<Row>& rows, int n, const std::string& path) {
  std::vector<AutoRule> rules;
  if (std::ifstream(path)) {
    const AlgorithmTable existing = AlgorithmTable::load(path);
    for (const AutoRule& r : existing.rules()) {
      if (r.max_ranks != n) rules.push_back(r);
    }
  }
  std::vector<Measurement> timings;
  for (const Row& r : rows) {
    if (r.wire == DType::kF32) timings.push_back({r.op, r.bytes, r.algorithm, r.seconds});  // auto picks for fp32
  }
  for (const AutoRule& r : AlgorithmTable::rules_from(timings, n)) rules.push_back(r);
  std::stable_sort(rules.begin(), rules.end(), [](const AutoRule& a, const AutoRule& b) { return a.max_ranks < b.max_ranks; });
  AlgorithmTable(rules).save(path);
  std::printf("wrote auto table %s (rules for %d ranks)\n", path.c_str(), n);
}

void write_csv(const std::vector<Row>& rows, int n, const std::string& path) {
  std::ofstream csv(path);
  if (!csv) throw UserError("cannot write " + path);
  csv << "op,bytes,algorithm,wire,ranks,time_s,algbw_Bps,busbw_Bps,predicted_s,speedup_vs_native\n";
  for (const Row& r : rows) {
    csv << to_string(r.op) << "," << r.bytes << "," << to_string(r.algorithm) << "," << dtype_name(r.wire) << "," << n << "," << r.seconds << ","
        << r.bytes / r.seconds << "," << r.bytes / r.seconds * bus_factor(r.op, n) << "," << r.predicted << ","
        << (r.native_seconds > 0 ? r.native_seconds / r.seconds : 0) << "\n";
  }
}

void write_json(const std::vector<Row>& rows, int n, const std::string& path) {
  std::ofstream json(path);
  if (!json) throw UserError("cannot write " + path);
  json << "[\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    json << "  {\"op\":\"" << to_string(r.op) << "\",\"bytes\":" << r.bytes << ",\"algorithm\":\""
         << to_string(r.algorithm) << "\",\"wire\":\"" << dtype_name(r.wire) << "\",\"ranks\":" << n << ",\"time_s\":" << r.seconds
         << ",\"busbw_Bps\":" << r.bytes / r.seconds * bus_factor(r.op, n) << ",\"predicted_s\":" << r.predicted
         << ",\"speedup_vs_native\":" << (r.native_seconds > 0 ? r.native_seconds / r.seconds : 0) << "}" << (i + 1 < rows.size() ? ",\n" : "\n");
  }
  json << "]\n";
}

int run(int argc, char** argv) {
  cxxopts::Options options("bench_collectives", "Time shardlab's collectives on one mesh axis");
  options.add_options()
      ("mesh", "mesh spec, outermost axis first (default: data=<ranks>)", cxxopts::value<std::string>()->default_value(""))
      ("axis", "axis (or axes joined by +) to benchmark", cxxopts::value<std::string>()->default_value("data"))
      ("topology", "torus or mesh", cxxopts::value<std::string>()->default_value("torus"))
      ("ops", "ops to time", cxxopts::value<std::string>()->default_value("all_gather,reduce_scatter,all_reduce,all_to_all"))
      ("algorithms", "algorithms to time", cxxopts::value<std::string>()->default_value("native,ring,bidir,auto"))
      ("dtype", "wire formats to time, of fp32 bf16 int8 (framework/ops/wire_format.h): all_gather, reduce_scatter "
       "and all_reduce carry them; sizes stay those of the fp32 data", cxxopts::value<std::string>()->default_value("fp32"))
      ("min-bytes", "smallest size (K, M suffixes)", cxxopts::value<std::string>()->default_value("4K"))
      ("max-bytes", "largest size", cxxopts::value<std::string>()->default_value("64M"))
      ("iters", "repetitions per round (0: about 64 MiB of traffic, 2 to 50)", cxxopts::value<int>()->default_value("0"))
      ("rounds", "interleaved rounds per point; the best is reported", cxxopts::value<int>()->default_value("5"))
      ("profile", "hardware profile for predictions and emulation", cxxopts::value<std::string>()->default_value("local"))
      ("link-mode", "off, account or delay", cxxopts::value<std::string>()->default_value("off"))
      ("link-scale", "emulated link slowdown factor", cxxopts::value<double>()->default_value("1"))
      ("auto-table", "auto algorithm table to use", cxxopts::value<std::string>()->default_value(""))
      ("csv", "write the rows as CSV to this file", cxxopts::value<std::string>()->default_value(""))
      ("json", "write the rows as JSON to this file", cxxopts::value<std::string>()->default_value(""))
      ("calibrate", "add the measured auto rules for this group size to this table file", cxxopts::value<std::string>()->default_value(""))
      ("write-links", "measure each axis's link and store it in this profile file ('local': the one train_gpt reads, "
       "shardlab-plan calibrate's)", cxxopts::value<std::string>()->default_value(""))
      ("overhead", "measure the wrapper's overhead over bare MPI_Allreduce instead")
      ("collective-timeout", "seconds a rank may wait in one collective before the job is aborted, naming the "
       "missing rank (0: 300)", cxxopts::value<double>()->default_value("0"))
      ("h,help", "show this help");
  const cxxopts::ParseResult args = cli::parse_flags(options, argc, argv);
  int world_rank = 0, world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  const bool root = world_rank == 0;
  // Where the results go, checked before the measurements (every rank refuses alike).
  for (const char* flag : {"csv", "json", "calibrate"}) check_writable_file(args[flag].as<std::string>(), std::string("--") + flag);
  const std::string links_path =
      args["write-links"].as<std::string>() == "local" ? cost::local_profile_path() : args["write-links"].as<std::string>();
  check_writable_file(links_path, "--write-links");
  if (args.count("help")) {
    if (root) std::printf("%s\n", options.help().c_str());
    return 0;
  }
  const int rounds = args["rounds"].as<int>();
  if (rounds < 1) throw UserError("--rounds " + std::to_string(rounds) + " must be at least 1");
  if (args["iters"].as<int>() < 0) {
    throw UserError("--iters " + std::to_string(args["iters"].as<int>()) +
                    " must be 0 (about 64 MiB of traffic per point) or a positive count");
  }
  const std::string spec = args["mesh"].as<std::string>().empty() ? "data=" + std::to_string(world_size)
                                                                  : args["mesh"].as<std::string>();
  const double timeout = collective_timeout_from_flag(args["collective-timeout"].as<double>());
  Mesh mesh(MPI_COMM_WORLD, spec, parse_topology(args["topology"].as<std::string>()));
  CommContext& context = mesh.context();
  context.watchdog.set_timeout(timeout);
  configure_link_emulation(mesh, args["profile"].as<std::string>(), args["link-mode"].as<std::string>(),
                           args["link-scale"].as<double>());
  if (!args["auto-table"].as<std::string>().empty()) context.auto_table = AlgorithmTable::load(args["auto-table"].as<std::string>());
  if (!links_path.empty()) {
    write_links(mesh, links_path, rounds, root);
    return 0;
  }
  const AxisGroup& g = mesh.group_named(args["axis"].as<std::string>());
  const int n = g.size();

  if (args.count("overhead")) {
    measure_overhead(g, mesh.comm(), args["iters"].as<int>() > 0 ? args["iters"].as<int>() : 2000, rounds, root);
    return 0;
  }

  std::vector<CollectiveOp> ops;
  for (const std::string& s : split(args["ops"].as<std::string>())) ops.push_back(parse_collective_op(s));
  std::vector<Algorithm> algorithms;
  for (const std::string& s : split(args["algorithms"].as<std::string>())) algorithms.push_back(parse_algorithm(s));
  std::vector<DType> wires;
  for (const std::string& s : split(args["dtype"].as<std::string>())) wires.push_back(parse_wire_dtype(s, "--dtype"));
  const bool has_native = std::count(algorithms.begin(), algorithms.end(), Algorithm::kNative) > 0;
  const int64_t min_bytes = parse_count(args["min-bytes"].as<std::string>(), "min-bytes");
  const int64_t max_bytes = parse_count(args["max-bytes"].as<std::string>(), "max-bytes");
  if (min_bytes > max_bytes) {
    throw UserError("--min-bytes " + args["min-bytes"].as<std::string>() + " is larger than --max-bytes " +
                    args["max-bytes"].as<std::string>() + "; give a range from small to large");
  }
  // Every size a multiple of 4 n bytes so each op splits it evenly over the group.
  const int64_t quantum = 4 * static_cast<int64_t>(n) * n;
  const double buffers = 4.0 * (static_cast<double>(max_bytes / 4 + quantum) * 2 + static_cast<double>(max_bytes / 4) * n);
  if (buffers > machine_memory_bytes() / 2) {
    throw UserError("--max-bytes " + args["max-bytes"].as<std::string>() + " needs " + format_bytes(static_cast<int64_t>(buffers)) +
                    " of buffers per rank (one input, outputs for " + std::to_string(n) + " ranks) but this machine has " +
                    format_bytes(static_cast<int64_t>(machine_memory_bytes())) + "; lower --max-bytes");
  }
  std::vector<float> in(max_bytes / 4 + quantum), out(max_bytes / 4 * n + quantum);
  const bool compressed = std::any_of(wires.begin(), wires.end(), [](DType w) { return w == DType::kInt8; });
  std::vector<float> feedback(compressed ? static_cast<size_t>(error_feedback_floats(g, CollectiveOp::kAllReduce,
                                                                                     static_cast<int64_t>(in.size())))
                                         : 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 7);

  if (root) {
    std::printf("# %s, axis %s (%d ranks), profile %s%s, link mode %s x%g, best of %d interleaved rounds\n",
                mesh.describe().c_str(), g.name().c_str(), n, context.links.profile_name().c_str(),
                cost::hardware(context.links.profile_name()).calibrated ? "" : " (NOT calibrated)",
                to_string(context.links.mode()).c_str(), context.links.link_scale(), rounds);
    std::printf("%-15s %10s %-7s %-7s %-5s %12s %11s %11s %13s %8s %9s %7s\n", "op", "bytes", "algo", "runs", "wire",
                "time_us", "algbw_GB/s", "busbw_GB/s", "predicted_us", "x_pred", "x_native", "x_fp32");
  }
  std::vector<Row> rows;
  for (CollectiveOp op : ops) {
    for (int64_t size = min_bytes; size <= max_bytes; size *= 2) {
      const int64_t bytes = std::max(quantum, size / quantum * quantum);
      const int iters = args["iters"].as<int>() > 0 ? args["iters"].as<int>()
                                                    : static_cast<int>(std::clamp<int64_t>((64 << 20) / bytes, 2, 50));
      // Every (wire, algorithm) pair the op takes, timed interleaved.
      std::vector<std::pair<DType, Algorithm>> pairs;
      std::vector<std::function<void()>> contenders;
      for (DType w : wires) {
        if (!takes_wire(op, w)) continue;
        for (Algorithm a : algorithms) {
          pairs.emplace_back(w, a);
          contenders.push_back([&, a, w] { run_once(g, op, a, w, in, out, feedback, bytes); });
        }
      }
      const std::vector<double> t = time_interleaved(mesh.comm(), iters, rounds, contenders);
      auto time_of = [&](DType w, Algorithm a) {
        const auto at = std::find(pairs.begin(), pairs.end(), std::make_pair(w, a));
        return at == pairs.end() ? 0.0 : t[at - pairs.begin()];
      };
      const double native = has_native ? time_of(DType::kF32, Algorithm::kNative) : 0;
      for (size_t i = 0; i < pairs.size(); ++i) {
        const auto [wire, algorithm] = pairs[i];
        const Algorithm runs = wire == DType::kF32 || algorithm == Algorithm::kBidir
                                   ? resolve_algorithm(g, op, bytes, algorithm) : Algorithm::kRing;
        const int64_t wire_size = wire_bytes(wire, bytes / 4);
        const Row& row = rows.emplace_back(
            Row{op, algorithm, wire, bytes, t[i], context.links.predict_seconds(op, runs, g, wire_size), native});
        if (!root) continue;
        const double algbw = bytes / row.seconds / 1e9, fp32 = time_of(DType::kF32, algorithm);
        std::printf("%-15s %10lld %-7s %-7s %-5s %12.1f %11.3f %11.3f %13.1f %8.2f %9s %7s\n", to_string(op).c_str(),
                    static_cast<long long>(bytes), to_string(algorithm).c_str(), to_string(runs).c_str(),
                    dtype_name(wire), row.seconds * 1e6, algbw, algbw * bus_factor(op, n), row.predicted * 1e6,
                    row.seconds / row.predicted, native > 0 ? std::to_string(native / row.seconds).substr(0, 5).c_str() : "-",
                    fp32 > 0 ? std::to_string(fp32 / row.seconds).substr(0, 5).c_str() : "-");
      }
    }
  }
  if (!root) return 0;
  if (const std::string path = args["csv"].as<std::string>(); !path.empty()) write_csv(rows, n, path);
  if (const std::string path = args["json"].as<std::string>(); !path.empty()) write_json(rows, n, path);
  if (const std::string path = args["calibrate"].as<std::string>(); !path.empty()) save_calibration(rows, n, path);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MpiRuntime mpi(argc, argv);
  return run_mpi_main(MPI_COMM_WORLD, [&] { return run(argc, argv); });
}
