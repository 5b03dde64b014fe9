// Token data sets and the global-batch loader.
//
// A Dataset is an endless, random-access sequence of rows: row i is a fixed-length run
// of token ids, a pure function of i (and of the data set's own seed). Rows are what a
// batch is made of, so the tokens a step trains on never depend on the parallel layout.
//
// BatchLoader cuts the row sequence into GLOBAL batches of B rows of T + 1 tokens
// (inputs are the first T, targets the last T). Global batch k holds rows
// [k*B, (k+1)*B); data-parallel rank r of R reads only rows [r*B/R, (r+1)*B/R) of it.
// Its whole state is one int64, position() = the number of global batches consumed,
// which a checkpoint saves and set_position() restores.
//
//   auto train = std::make_shared<data::TokenDataset>(data::read_shard("train.bin"), "train.bin");
//   data::BatchLoader loader(train, /*global_batch=*/8, /*seq_len=*/256, rank, ranks);
//   data::Batch batch = loader.next();    // batch.inputs / batch.targets: [8 / ranks, 256]
//   for (int j = 0; j < k; ++j) { data::Batch micro = batch.microbatch(j, k); ... }
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace shardlab::data {

class Dataset {
 public:
  virtual ~Dataset() = default;
  // Fills `tokens` with row `index` (row length = tokens.size(), at least 2).
  virtual void read_row(int64_t index, std::span<int32_t> tokens) const = 0;
  // The longest row it can serve (a token file holds only so many tokens).
  virtual int64_t max_row_length() const = 0;
  // A vocabulary that holds every token id of this data set: the smallest one for tokens in
  // memory; for shards too large to scan (ShardSet), the limit it checks ids against as rows are read.
  virtual int vocab_size() const = 0;
  // One line for logs, e.g. "llm.c shard train.bin (1200000 tokens)".
  virtual std::string describe() const = 0;
};

// An in-memory token array (text files; llm.c shards stream through shard_set.h instead)
// read in overlapping windows: row i is the T + 1 tokens starting at (i mod W) * T,
// W = (size - 1) / T windows; the array wraps (epochs) forever.
class TokenDataset : public Dataset {
 public:
  // `source` names the tokens' origin (a path) in messages; throws UserError when empty.
  TokenDataset(std::vector<uint16_t> tokens, std::string source);
  void read_row(int64_t index, std::span<int32_t> tokens) const override;
  int64_t max_row_length() const override { return static_cast<int64_t>(tokens_.size()); }
  int vocab_size() const override { return vocab_size_; }
  std::string describe() const override;
  const std::vector<uint16_t>& tokens() const { return tokens_; }

 private:
  std::vector<uint16_t> tokens_;
  std::string source_;
  int vocab_size_;
};

// This rank's rows of one global batch, row-major [rows, seq_len].
struct Batch {
  int64_t rows = 0;
  int64_t seq_len = 0;
  std::vector<int32_t> inputs;   // tokens t .. t+T-1 of each row
  std::vector<int32_t> targets;  // tokens t+1 .. t+T of each row

  // Rows [index*rows/count, (index+1)*rows/count): microbatch `index` of `count` for
  // gradient accumulation. Throws UserError when count does not divide rows.
  Batch microbatch(int index, int count) const;
};

class BatchLoader {
 public:
  // Throws UserError when sizes are not positive, ranks does not divide global_batch, or
  // a row of seq_len + 1 tokens does not fit the data set.
  BatchLoader(std::shared_ptr<const Dataset> data, int64_t global_batch, int64_t seq_len,
              int rank = 0, int ranks = 1);

  Batch next();  // this rank's slice of global batch position(), then advances
  int64_t position() const { return position_; }
  void set_position(int64_t position);
  int64_t global_batch() const { return global_batch_; }
  int64_t seq_len() const { return seq_len_; }
  int64_t local_rows() const { return global_batch_ / ranks_; }

 private:
  std::shared_ptr<const Dataset> data_;
  int64_t global_batch_;
  int64_t seq_len_;
  int rank_;
  int ranks_;
  int64_t position_ = 0;
};

}  // namespace shardlab::data
