// A streaming data set over many llm.c token shards, shuffled per epoch.
//
// The files of a pattern ("fineweb/train_*.bin") are memory-mapped read-only and their
// headers checked when the set opens; nothing else is read until a row is, and a row
// touches only its own pages, so each data-parallel rank reads only the rows of its
// slice of the global batch. Both shard forms are read: GPT-2's uint16 and LLaMA 3's
// uint32 tokens (token_files.h).
//
// Rows are windows of T + 1 tokens (T = row length - 1) inside one shard, at token
// offsets 0, T, 2T, ... (consecutive windows share one token, as llm.c's loader reads
// them); a shard of N tokens has (N - 1) / T windows, a window never spans two shards.
// With W windows in all, row i is window j = i mod W of epoch e = i / W, where the epoch
// lists the shards in an order and, within each shard, its windows in an order:
//   shuffle off: shards in name order, windows in file order (llm.c without shuffling);
//   shuffle on:  both orders are permutations drawn from (seed, e) alone -- a new shard
//                order per epoch and a new window order per shard and epoch, as llm.c's
//                shuffling loader does.
// Row i is therefore a pure function of (i, seed): a BatchLoader's position is the whole
// shuffle state, and a resumed run in any layout reads the rows an uninterrupted run
// reads. Each epoch serves every window exactly once. The permutations are Fisher-Yates
// over the counter-based Rng (O(windows of a shard) once per shard and epoch, cached),
// so a row costs a lookup and a copy.
//
// Token ids are checked against `vocab_limit` as rows are read (scanning every shard at
// open would touch every page): a larger id is a UserError naming the shard, the offset
// and the fix.
//
//   auto train = std::make_shared<data::ShardSet>("shards/train_*.bin", data::ShardSetOptions{
//       .seed = 1234, .shuffle = true, .vocab_limit = 50257});
//   data::BatchLoader loader(train, B, T, rank, ranks);
//   auto [head, tail] = train->split(train->tokens() - train->tokens() / 10, {.shuffle = false});
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "framework/data/dataset.h"

namespace shardlab::data {

struct ShardSetOptions {
  uint64_t seed = 0;
  bool shuffle = true;
  int64_t vocab_limit = 0;  // ids must lie below it; 0: what the shards' token width holds
};

class ShardSet : public Dataset {
 public:
  // Every file expand_data_paths(pattern, what) names, in name order; UserError naming the
  // file and the fix for one that is missing, not a shard, truncated or corrupt.
  ShardSet(const std::string& pattern, ShardSetOptions options, const std::string& what = "--data");

  // The first `tokens` tokens of the set (files one after another) and the rest, as two
  // sets over the same mapped files; `options` of the second ("held out": usually in order).
  using Ptr = std::shared_ptr<const ShardSet>;
  std::pair<Ptr, Ptr> split(int64_t tokens, ShardSetOptions rest_options) const;

  void read_row(int64_t index, std::span<int32_t> tokens) const override;
  int64_t max_row_length() const override;  // the longest shard (or piece of one)
  int vocab_size() const override;          // vocab_limit, or the token width's bound
  std::string describe() const override;

  int64_t tokens() const;                 // in all shards
  int64_t windows(int64_t length) const;  // rows of `length` tokens in one epoch
  int64_t shards() const { return static_cast<int64_t>(pieces_.size()); }  // files (pieces after split)

 private:
  struct File;
  struct Piece {  // tokens [begin, end) of one file
    std::shared_ptr<const File> file;
    int64_t begin = 0, end = 0;
  };
  // The order of one epoch at one row length: pieces in order, the first window of each.
  struct EpochOrder {
    int64_t length = 0, epoch = -1;
    std::vector<int32_t> pieces;
    std::vector<int64_t> first_window;  // prefix sums of the pieces' windows, in that order
  };
  struct WindowOrder {  // piece `piece`'s windows in epoch `epoch`
    int64_t length = 0, epoch = -1, piece = -1;
    std::vector<uint32_t> windows;
  };

  ShardSet(std::vector<Piece> pieces, ShardSetOptions options, std::string source);
  int64_t limit() const;  // ids must lie below it
  const EpochOrder& epoch_order(int64_t length, int64_t epoch) const;  // callers hold mutex_
  uint32_t window_of(int64_t length, int64_t epoch, int64_t piece, int64_t k) const;  // callers hold mutex_

  std::vector<Piece> pieces_;
  ShardSetOptions options_;
  std::string source_;  // the pattern, for messages
  int token_bytes_ = 2;  // the widest of its files

  mutable std::mutex mutex_;  // read_row is const and may be called from several threads
  mutable EpochOrder order_;
  mutable std::vector<WindowOrder> window_orders_;  // the few most recent, newest last
};

}  // namespace shardlab::data
