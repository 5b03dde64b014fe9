// bench_loader: how fast the shard-set loader serves batches, to set beside training's
// tokens/s (docs/data.md, "Loader speed").
//
//   build/bench/bench_loader                                   # 8 synthetic shards of 8M tokens
//   build/bench/bench_loader --data 'fineweb/train_*.bin' --batch 8 --seq-len 1024 --ranks 2
//
// Without --data it writes --shards random GPT-2-form shards (ids below --vocab) into a
// temporary directory, removed at exit. It opens them as train_gpt does (data::ShardSet,
// shuffled per epoch unless --shuffle=false), reads --batches global batches through a
// BatchLoader as data-parallel rank 0 of --ranks, and prints the time to open the set and
// the loader's tokens/s (tokens of this rank's inputs per second of next()), over the first
// 64 batches (window orders drawn, pages mapped in: from the page cache when the files were
// just written or read) and then steady.
#include <chrono>
#include <cstdio>
#include <cxxopts.hpp>
#include <filesystem>
#include <random>
#include <unistd.h>

#include "framework/data/dataset.h"
#include "framework/data/shard_set.h"
#include "framework/data/token_files.h"
#include "framework/error.h"

using namespace shardlab;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Reads `count` batches; returns the tokens of this rank's inputs per second.
double tokens_per_second(data::BatchLoader& loader, int64_t count) {
  const auto t0 = Clock::now();
  int64_t tokens = 0;
  for (int64_t i = 0; i < count; ++i) tokens += static_cast<int64_t>(loader.next().inputs.size());
  return static_cast<double>(tokens) / seconds_since(t0);
}

int run(int argc, char** argv) {
  cxxopts::Options o("bench_loader", "Tokens/s of the shard-set loader (framework/data/shard_set.h).");
  o.add_options()("data", "llm.c shards to read (default: synthetic ones written to a temporary directory)",
                  cxxopts::value<std::string>()->default_value(""))(
      "shards", "synthetic shards", cxxopts::value<int>()->default_value("8"))(
      "shard-tokens", "tokens per synthetic shard", cxxopts::value<std::string>()->default_value("8M"))(
      "vocab", "ids of the synthetic shards lie below it", cxxopts::value<int64_t>()->default_value("50257"))(
      "batch", "global batch B", cxxopts::value<int64_t>()->default_value("8"))(
      "seq-len", "tokens per row T", cxxopts::value<int64_t>()->default_value("1024"))(
      "ranks", "data-parallel ranks; this process reads rank 0's rows", cxxopts::value<int>()->default_value("1"))(
      "batches", "global batches timed in the steady phase", cxxopts::value<int64_t>()->default_value("20000"))(
      "shuffle", "shuffle per epoch", cxxopts::value<bool>()->default_value("true"))("help", "this text");
  const auto p = o.parse(argc, argv);
  if (p.count("help")) return std::printf("%s\n", o.help().c_str()), 0;
  std::string pattern = p["data"].as<std::string>();
  const int64_t vocab = p["vocab"].as<int64_t>();
  std::filesystem::path temp;
  if (pattern.empty()) {
    temp = std::filesystem::temp_directory_path() / ("bench_loader_" + std::to_string(getpid()));
    std::filesystem::create_directories(temp);
    const int64_t n = parse_count(p["shard-tokens"].as<std::string>(), "--shard-tokens");
    std::mt19937 rng(1);
    std::uniform_int_distribution<int> id(0, static_cast<int>(std::min<int64_t>(vocab, 65536) - 1));
    std::vector<uint16_t> tokens(n);
    const auto t0 = Clock::now();
    for (int s = 0; s < p["shards"].as<int>(); ++s) {
      for (uint16_t& t : tokens) t = static_cast<uint16_t>(id(rng));
      data::write_shard((temp / ("train_" + std::to_string(s) + ".bin")).string(), tokens);
    }
    std::printf("wrote %d synthetic shards of %lld tokens in %.2f s\n", p["shards"].as<int>(),
                static_cast<long long>(n), seconds_since(t0));
    pattern = (temp / "train_*.bin").string();
  }
  const int64_t batch = p["batch"].as<int64_t>(), seq_len = p["seq-len"].as<int64_t>();
  const int ranks = p["ranks"].as<int>();
  const auto t0 = Clock::now();
  auto set = std::make_shared<const data::ShardSet>(
      pattern, data::ShardSetOptions{.seed = 1234, .shuffle = p["shuffle"].as<bool>(), .vocab_limit = vocab});
  std::printf("opened %s in %.2f ms\n", set->describe().c_str(), 1e3 * seconds_since(t0));
  data::BatchLoader loader(set, batch, seq_len, 0, ranks);
  const int64_t windows = set->windows(seq_len + 1);
  const double cold = tokens_per_second(loader, std::min<int64_t>(64, windows / batch + 1));
  const double steady = tokens_per_second(loader, p["batches"].as<int64_t>());
  std::printf("batch %lld x %lld, rank 0 of %d (%lld rows a step), %lld windows an epoch\n",
              static_cast<long long>(batch), static_cast<long long>(seq_len), ranks,
              static_cast<long long>(loader.local_rows()), static_cast<long long>(windows));
  std::printf("loader: %.3g tokens/s over the first 64 batches, %.3g tokens/s steady (%lld batches, %.2f epochs)\n",
              cold, steady, static_cast<long long>(p["batches"].as<int64_t>()),
              static_cast<double>(loader.position() * batch) / static_cast<double>(windows));
  if (!temp.empty()) std::filesystem::remove_all(temp);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
