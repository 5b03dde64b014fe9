// ShardSet: llm.c shards mapped and read as windows, shuffled per epoch from the seed.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <string>

#include "framework/data/dataset.h"
#include "framework/data/shard_set.h"
#include "framework/data/token_files.h"
#include "framework/error.h"
#include "tests/temp_dir.h"
#include "tests/user_error.h"

using namespace shardlab;
using namespace shardlab::data;
using shardlab::testing::user_error_of;

namespace {

constexpr int64_t kT = 8;  // rows of kT + 1 tokens

// Shards whose tokens are their global positions (+ base): a row's first token says which
// window it is. Sizes 101, 150, 77 -> 12, 18 and 9 windows of 8 + 1 tokens (39 in all).
const std::vector<int64_t> kSizes = {101, 150, 77};

void write_counting_shards(const TempDir& dir, uint32_t base = 0, bool wide = false) {
  uint32_t next = base;
  for (size_t s = 0; s < kSizes.size(); ++s) {
    std::vector<uint32_t> ids(kSizes[s]);
    std::iota(ids.begin(), ids.end(), next);
    next += static_cast<uint32_t>(kSizes[s]);
    const std::string path = dir.file("train_" + std::to_string(s) + ".bin");
    if (wide) {
      write_shard(path, std::span<const uint32_t>(ids));
    } else {
      write_shard(path, std::vector<uint16_t>(ids.begin(), ids.end()));
    }
  }
}

std::vector<int32_t> row_of(const Dataset& data, int64_t index) {
  std::vector<int32_t> row(kT + 1);
  data.read_row(index, row);
  return row;
}

// The first tokens of rows [first, first + count).
std::vector<int32_t> starts(const Dataset& data, int64_t first, int64_t count) {
  std::vector<int32_t> out;
  for (int64_t i = first; i < first + count; ++i) out.push_back(row_of(data, i)[0]);
  return out;
}

// Every window's first token: offsets 0, T, 2T, ... inside each shard.
std::vector<int32_t> all_window_starts() {
  std::vector<int32_t> out;
  int32_t begin = 0;
  for (int64_t size : kSizes) {
    for (int64_t k = 0; k < (size - 1) / kT; ++k) out.push_back(begin + static_cast<int32_t>(k * kT));
    begin += static_cast<int32_t>(size);
  }
  return out;
}

void patch_int32(const std::string& path, int64_t at, int32_t value) {
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(at);
  f.write(reinterpret_cast<const char*>(&value), sizeof value);
}

}  // namespace

TEST_CASE("each epoch reads every window once, in an order drawn from (seed, epoch)") {
  TempDir dir;
  write_counting_shards(dir);
  const ShardSet data(dir.file("train_*.bin"), {.seed = 7, .shuffle = true});
  REQUIRE(data.windows(kT + 1) == 39);
  CHECK(data.tokens() == 101 + 150 + 77);
  std::vector<int32_t> expected = all_window_starts();
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<int32_t> seen = starts(data, epoch * 39, 39);
    for (int64_t i = 0; i < 39; ++i) {  // a row is T + 1 consecutive tokens of one shard
      const std::vector<int32_t> row = row_of(data, epoch * 39 + i);
      for (int64_t t = 1; t <= kT; ++t) REQUIRE(row[t] == row[0] + t);
    }
    std::sort(seen.begin(), seen.end());
    CHECK(seen == expected);
  }
  const std::vector<int32_t> epoch0 = starts(data, 0, 39), epoch1 = starts(data, 39, 39);
  CHECK(epoch0 != epoch1);
  CHECK(epoch0 != expected);  // shuffled, not file order

  // Windows of one shard stay together within an epoch (llm.c: shard order, then windows).
  int shard_changes = 0;
  const auto shard_of = [](int32_t token) { return token < 101 ? 0 : token < 251 ? 1 : 2; };
  for (size_t i = 1; i < epoch0.size(); ++i) shard_changes += shard_of(epoch0[i]) != shard_of(epoch0[i - 1]);
  CHECK(shard_changes == 2);

  // The same seed gives the same rows from a fresh set (no state but the index); another seed does not.
  CHECK(starts(ShardSet(dir.file("train_*.bin"), {.seed = 7, .shuffle = true}), 45, 20) == starts(data, 45, 20));
  CHECK(starts(ShardSet(dir.file("train_*.bin"), {.seed = 8, .shuffle = true}), 0, 39) != epoch0);
}

TEST_CASE("without shuffling, one shard reads exactly as the in-memory TokenDataset") {
  TempDir dir;
  write_counting_shards(dir);
  const ShardSet in_order(dir.file("train_1.bin"), {.seed = 7, .shuffle = false});
  const TokenDataset whole(read_shard(dir.file("train_1.bin")), "train_1.bin");
  for (int64_t i = 0; i < 60; ++i) REQUIRE(row_of(in_order, i) == row_of(whole, i));
  const ShardSet all(dir.file("train_*.bin"), {.shuffle = false});
  CHECK(starts(all, 39, 39) == all_window_starts());  // every epoch in file order
}

TEST_CASE("rank slices partition the global batch, and a loader resumed in another layout reads the same rows") {
  TempDir dir;
  write_counting_shards(dir);
  auto data = std::make_shared<const ShardSet>(dir.file("train_*.bin"), ShardSetOptions{.seed = 3});
  constexpr int64_t kBatch = 4;
  BatchLoader whole(data, kBatch, kT);
  std::vector<Batch> reference;
  for (int step = 0; step < 25; ++step) reference.push_back(whole.next());  // 100 rows: past two epochs
  for (int ranks : {2, 4}) {
    for (int64_t resume_at : {0, 9, 17}) {  // a fresh data set and loaders from a saved position
      auto fresh = std::make_shared<const ShardSet>(dir.file("train_*.bin"), ShardSetOptions{.seed = 3});
      std::vector<BatchLoader> loaders;
      for (int r = 0; r < ranks; ++r) {
        loaders.emplace_back(fresh, kBatch, kT, r, ranks);
        loaders.back().set_position(resume_at);
      }
      for (int64_t step = resume_at; step < 25; ++step) {
        std::vector<int32_t> inputs, targets;
        for (BatchLoader& loader : loaders) {
          const Batch b = loader.next();
          inputs.insert(inputs.end(), b.inputs.begin(), b.inputs.end());
          targets.insert(targets.end(), b.targets.begin(), b.targets.end());
        }
        REQUIRE(inputs == reference[step].inputs);
        REQUIRE(targets == reference[step].targets);
      }
    }
  }
}

TEST_CASE("LLaMA 3's uint32 shards, the vocabulary limit and a held-out split") {
  TempDir dir;
  write_counting_shards(dir, 128000, /*wide=*/true);  // ids past uint16
  const ShardSet wide(dir.file("train_*.bin"), {.shuffle = false, .vocab_limit = 1 << 17});
  CHECK(row_of(wide, 0)[0] == 128000);
  CHECK(row_of(wide, 38)[kT] == 128000 + 101 + 150 + 8 * kT + kT);
  CHECK(wide.describe().find("uint32") != std::string::npos);

  const ShardSet small(dir.file("train_*.bin"), {.shuffle = false, .vocab_limit = 128100});
  const std::string msg = user_error_of([&] { row_of(small, 12); });  // the first window of train_1
  CHECK(msg.find("train_1.bin' holds id 128101 at token 0") != std::string::npos);
  CHECK(msg.find("--vocab 128102") != std::string::npos);

  const auto [head, tail] = wide.split(300, {.shuffle = false});
  CHECK(head->tokens() == 300);
  CHECK(tail->tokens() == 28);
  CHECK(tail->shards() == 1);
  CHECK(row_of(*tail, 0)[0] == 128000 + 300);       // the held-out tail starts where the head stops
  CHECK(row_of(*head, 0)[0] == 128000);
  CHECK(head->windows(kT + 1) == 12 + 18 + (49 - 1) / kT);  // train_2 cut at its 49th token
}

TEST_CASE("bad shards are refused when the set opens, naming the file and the fix") {
  TempDir dir;
  write_counting_shards(dir);
  const std::string good = dir.file("train_*.bin");
  CHECK(user_error_of([&] { ShardSet(dir.file("none_*.bin"), {}); }).find("matches no file") != std::string::npos);

  patch_int32(dir.file("train_1.bin"), 0, 1234);
  std::string msg = user_error_of([&] { ShardSet(good, {}); });
  CHECK(msg.find("train_1.bin' has magic 1234") != std::string::npos);
  CHECK(msg.find("20240801") != std::string::npos);

  patch_int32(dir.file("train_1.bin"), 0, kShardMagicU32);  // LLaMA 3's magic with GPT-2's version
  msg = user_error_of([&] { ShardSet(good, {}); });
  CHECK(msg.find("magic 20240801 and version 1") != std::string::npos);

  write_counting_shards(dir);
  std::filesystem::resize_file(dir.file("train_2.bin"), 1024 + 2 * 77 - 1);
  msg = user_error_of([&] { ShardSet(good, {}); });
  CHECK(msg.find("train_2.bin' header says 77 tokens") != std::string::npos);
  CHECK(msg.find("truncated") != std::string::npos);

  std::filesystem::resize_file(dir.file("train_2.bin"), 100);
  CHECK(user_error_of([&] { ShardSet(good, {}); }).find("less than its 1024-byte header") != std::string::npos);

  write_counting_shards(dir);
  std::filesystem::create_directory(dir.file("train_dir.bin"));  // not a regular file: not matched
  CHECK(ShardSet(good, {}).shards() == 3);
  CHECK(user_error_of([&] { ShardSet(dir.file("train_dir.bin"), {}); }).find("directory") != std::string::npos);
}
