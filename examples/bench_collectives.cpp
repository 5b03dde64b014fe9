// bench_collectives: the nccl-tests of shardlab. For each op, algorithm and size it
// times the collective on one mesh axis and prints time, algorithm bandwidth, bus
// bandwidth and the cost model's prediction for a hardware profile, with the speed
// relative to native measured in the same run.
//
//   mpirun -n 2 bench_collectives                                   # 4 KiB .. 64 MiB
//   mpirun -n 2 --mca btl self,tcp bench_collectives --csv tcp.csv
//   mpirun -n 2 bench_collectives --calibrate auto.table            # measure `auto`
//   mpirun -n 2 bench_collectives --overhead                        # wrapper vs bare MPI
//
// Time is the slowest rank's mean over --iters repetitions (after one warm-up);
// busbw = algbw * bus_factor(op, n) (comm_trace.h), comparable across group sizes.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cxxopts.hpp>
#include <fstream>
#include <map>
#include <sstream>

#include "framework/error.h"
#include "parallel/collectives.h"
#include "parallel/comm.h"
#include "parallel/mesh.h"

using namespace shardlab;
using namespace shardlab::parallel;

namespace {

struct Row {
  CollectiveOp op;
  Algorithm algorithm;
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

int64_t parse_size(const std::string& s) {
  size_t used = 0;
  double v = std::stod(s, &used);
  const std::string unit = s.substr(used);
  const double scale = unit == "" ? 1 : unit == "K" ? 1024 : unit == "M" ? 1048576 : unit == "G" ? 1073741824 : -1;
  if (scale < 0) throw UserError("size '" + s + "': use a number with an optional K, M or G suffix");
  return static_cast<int64_t>(v * scale);
}

// Runs one collective of `bytes` (as comm_trace.h counts them) on `g`.
void run_once(const AxisGroup& g, CollectiveOp op, Algorithm a, std::vector<float>& in, std::vector<float>& out,
              int64_t bytes) {
  const size_t n = static_cast<size_t>(g.size()), count = static_cast<size_t>(bytes) / sizeof(float);
  switch (op) {
    case CollectiveOp::kAllGather:
      return all_gather(g, std::span(in).first(count / n), std::span(out).first(count), a);
    case CollectiveOp::kReduceScatter:
      return reduce_scatter(g, std::span(in).first(count), std::span(out).first(count / n), a);
    case CollectiveOp::kAllReduce:
      return all_reduce(g, std::span(in).first(count), ReduceOp::kSum, a);
    case CollectiveOp::kAllToAll:
      return all_to_all(g, std::span(in).first(count), std::span(out).first(count), a);
    case CollectiveOp::kPermute:
      return ppermute(g, std::span(in).first(count), std::span(out).first(count), 1, a);
    default:
      throw UserError("bench_collectives measures all_gather, reduce_scatter, all_reduce, all_to_all and ppermute");
  }
}

double time_collective(const AxisGroup& g, MPI_Comm comm, CollectiveOp op, Algorithm a, std::vector<float>& in,
                       std::vector<float>& out, int64_t bytes, int iters) {
  run_once(g, op, a, in, out, bytes);  // warm-up: connections, caches
  MPI_Barrier(comm);
  const double t0 = MPI_Wtime();
  for (int i = 0; i < iters; ++i) run_once(g, op, a, in, out, bytes);
  double mine = (MPI_Wtime() - t0) / iters, slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
  return slowest;
}

// Rules for `auto`: per op, the fastest measured algorithm by size, runs merged.
AlgorithmTable calibrated_table(const std::vector<Row>& rows) {
  std::map<std::pair<CollectiveOp, int64_t>, const Row*> best;
  for (const Row& r : rows) {
    if (r.algorithm == Algorithm::kAuto) continue;
    auto& b = best[{r.op, r.bytes}];
    if (!b || r.seconds < b->seconds) b = &r;
  }
  std::vector<AutoRule> rules;
  for (auto it = best.begin(); it != best.end(); ++it) {
    auto next = std::next(it);
    const bool last_of_op = next == best.end() || next->first.first != it->first.first;
    if (!last_of_op && next->second->algorithm == it->second->algorithm) continue;
    rules.push_back({it->first.first, last_of_op ? AlgorithmTable::kAnySize : it->first.second, it->second->algorithm});
  }
  return AlgorithmTable(rules);
}

// Bare MPI_Allreduce against the wrapper (native and auto) for small messages.
void measure_overhead(const AxisGroup& g, MPI_Comm comm, int iters, bool print) {
  if (print) std::printf("%10s %14s %14s %14s %12s\n", "bytes", "bare_mpi_us", "native_us", "auto_us", "overhead_us");
  for (int64_t bytes : {4, 64, 1024, 4096}) {
    std::vector<float> v(bytes / 4, 1.0f);
    auto timed = [&](const std::function<void()>& f) {
      f();
      MPI_Barrier(comm);
      const double t0 = MPI_Wtime();
      for (int i = 0; i < iters; ++i) f();
      double mine = (MPI_Wtime() - t0) / iters, slowest = 0;
      MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
      return slowest;
    };
    const double bare = timed([&] { MPI_Allreduce(MPI_IN_PLACE, v.data(), v.size(), MPI_FLOAT, MPI_SUM, g.comm()); });
    const double native = timed([&] { all_reduce(g, v, ReduceOp::kSum, Algorithm::kNative); });
    const double automatic = timed([&] { all_reduce(g, v, ReduceOp::kSum, Algorithm::kAuto); });
    if (print) {
      std::printf("%10lld %14.2f %14.2f %14.2f %12.2f\n", static_cast<long long>(bytes), bare * 1e6, native * 1e6,
                  automatic * 1e6, (native - bare) * 1e6);
    }
  }
}

int run(int argc, char** argv) {
  cxxopts::Options options("bench_collectives", "Time shardlab's collectives on one mesh axis");
  options.add_options()
      ("mesh", "mesh spec, outermost axis first (default: data=<ranks>)", cxxopts::value<std::string>()->default_value(""))
      ("axis", "axis (or axes joined by +) to benchmark", cxxopts::value<std::string>()->default_value("data"))
      ("topology", "torus or mesh", cxxopts::value<std::string>()->default_value("torus"))
      ("ops", "ops to time", cxxopts::value<std::string>()->default_value("all_gather,reduce_scatter,all_reduce,all_to_all"))
      ("algorithms", "algorithms to time", cxxopts::value<std::string>()->default_value("native,ring,bidir,auto"))
      ("min-bytes", "smallest size (K, M suffixes)", cxxopts::value<std::string>()->default_value("4K"))
      ("max-bytes", "largest size", cxxopts::value<std::string>()->default_value("64M"))
      ("iters", "repetitions per point (0: about 256 MiB of traffic, 3 to 50)", cxxopts::value<int>()->default_value("0"))
      ("profile", "hardware profile for predictions and emulation", cxxopts::value<std::string>()->default_value("local"))
      ("link-mode", "off, account or delay", cxxopts::value<std::string>()->default_value("off"))
      ("link-scale", "emulated link slowdown factor", cxxopts::value<double>()->default_value("1"))
      ("auto-table", "auto algorithm table to use", cxxopts::value<std::string>()->default_value(""))
      ("csv", "write the rows as CSV to this file", cxxopts::value<std::string>()->default_value(""))
      ("json", "write the rows as JSON to this file", cxxopts::value<std::string>()->default_value(""))
      ("calibrate", "write the measured auto table to this file", cxxopts::value<std::string>()->default_value(""))
      ("overhead", "measure the wrapper's overhead over bare MPI_Allreduce instead")
      ("h,help", "show this help");
  cxxopts::ParseResult args;
  try {
    args = options.parse(argc, argv);
  } catch (const std::exception& e) {
    throw UserError(std::string("bad command line: ") + e.what());
  }
  int world_rank = 0, world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  const bool root = world_rank == 0;
  if (args.count("help")) {
    if (root) std::printf("%s\n", options.help().c_str());
    return 0;
  }
  const std::string spec = args["mesh"].as<std::string>().empty() ? "data=" + std::to_string(world_size)
                                                                  : args["mesh"].as<std::string>();
  Mesh mesh(MPI_COMM_WORLD, spec, parse_topology(args["topology"].as<std::string>()));
  CommContext& context = mesh.context();
  context.links.configure(parse_link_mode(args["link-mode"].as<std::string>()),
                          cost::hardware(args["profile"].as<std::string>()), args["link-scale"].as<double>());
  if (!args["auto-table"].as<std::string>().empty()) context.auto_table = AlgorithmTable::load(args["auto-table"].as<std::string>());
  std::vector<std::string> group_names;
  {
    std::stringstream in(args["axis"].as<std::string>());
    for (std::string item; std::getline(in, item, '+');) group_names.push_back(item);
  }
  const AxisGroup& g = mesh.group(group_names);
  const int n = g.size();

  if (args.count("overhead")) {
    measure_overhead(g, mesh.comm(), args["iters"].as<int>() > 0 ? args["iters"].as<int>() : 2000, root);
    return 0;
  }

  std::vector<CollectiveOp> ops;
  for (const std::string& s : split(args["ops"].as<std::string>())) ops.push_back(parse_collective_op(s));
  std::vector<Algorithm> algorithms;
  for (const std::string& s : split(args["algorithms"].as<std::string>())) algorithms.push_back(parse_algorithm(s));
  const int64_t min_bytes = parse_size(args["min-bytes"].as<std::string>());
  const int64_t max_bytes = parse_size(args["max-bytes"].as<std::string>());
  // Every size a multiple of 4 n bytes so each op splits it evenly over the group.
  const int64_t quantum = 4 * static_cast<int64_t>(n) * n;
  std::vector<float> in(max_bytes / 4 + quantum), out(max_bytes / 4 * n + quantum);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 7);

  if (root) {
    std::printf("# %s, axis %s (%d ranks), profile %s, link mode %s x%g\n", mesh.describe().c_str(), g.name().c_str(), n,
                context.links.profile_name().c_str(), to_string(context.links.mode()).c_str(), context.links.link_scale());
    std::printf("%-15s %10s %-7s %12s %11s %11s %13s %10s\n", "op", "bytes", "algo", "time_us", "algbw_GB/s",
                "busbw_GB/s", "predicted_us", "x_native");
  }
  std::vector<Row> rows;
  for (CollectiveOp op : ops) {
    for (int64_t size = min_bytes; size <= max_bytes; size *= 2) {
      const int64_t bytes = std::max(quantum, size / quantum * quantum);
      const int iters = args["iters"].as<int>() > 0 ? args["iters"].as<int>()
                                                    : static_cast<int>(std::clamp<int64_t>((256 << 20) / bytes, 3, 50));
      double native = 0;
      for (Algorithm a : algorithms) {
        const double t = time_collective(g, mesh.comm(), op, a, in, out, bytes, iters);
        if (a == Algorithm::kNative) native = t;
        Row row{op, a, bytes, t, context.links.predict_seconds(op, resolve_algorithm(g, op, bytes, a), g, bytes), native};
        rows.push_back(row);
        if (root) {
          const double algbw = bytes / t / 1e9;
          std::printf("%-15s %10lld %-7s %12.1f %11.3f %11.3f %13.1f %10s\n", to_string(op).c_str(),
                      static_cast<long long>(bytes), to_string(a).c_str(), t * 1e6, algbw, algbw * bus_factor(op, n),
                      row.predicted * 1e6, native > 0 ? std::to_string(native / t).substr(0, 5).c_str() : "-");
        }
      }
    }
  }
  if (!root) return 0;
  if (const std::string path = args["csv"].as<std::string>(); !path.empty()) {
    std::ofstream csv(path);
    if (!csv) throw UserError("cannot write " + path);
    csv << "op,bytes,algorithm,ranks,time_s,algbw_Bps,busbw_Bps,predicted_s,speedup_vs_native\n";
    for (const Row& r : rows) {
      csv << to_string(r.op) << "," << r.bytes << "," << to_string(r.algorithm) << "," << n << "," << r.seconds << ","
          << r.bytes / r.seconds << "," << r.bytes / r.seconds * bus_factor(r.op, n) << "," << r.predicted << ","
          << (r.native_seconds > 0 ? r.native_seconds / r.seconds : 0) << "\n";
    }
  }
  if (const std::string path = args["json"].as<std::string>(); !path.empty()) {
    std::ofstream json(path);
    if (!json) throw UserError("cannot write " + path);
    json << "[\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      json << "  {\"op\":\"" << to_string(r.op) << "\",\"bytes\":" << r.bytes << ",\"algorithm\":\""
           << to_string(r.algorithm) << "\",\"ranks\":" << n << ",\"time_s\":" << r.seconds
           << ",\"busbw_Bps\":" << r.bytes / r.seconds * bus_factor(r.op, n) << ",\"predicted_s\":" << r.predicted
           << "}" << (i + 1 < rows.size() ? ",\n" : "\n");
    }
    json << "]\n";
  }
  if (const std::string path = args["calibrate"].as<std::string>(); !path.empty()) {
    calibrated_table(rows).save(path);
    std::printf("wrote auto table %s\n", path.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MpiRuntime mpi(argc, argv);
  return run_mpi_main(MPI_COMM_WORLD, [&] { return run(argc, argv); });
}
