#include "framework/data/dataset.h"

#include <algorithm>

#include "framework/error.h"

namespace shardlab::data {

TokenDataset::TokenDataset(std::vector<uint16_t> tokens, std::string source)
    : tokens_(std::move(tokens)), source_(std::move(source)) {
  if (tokens_.size() < 2) {
    throw UserError("token data " + source_ + " holds " + std::to_string(tokens_.size()) +
                    " tokens; training needs at least 2 (one input, one target): use a longer file");
  }
  vocab_size_ = *std::max_element(tokens_.begin(), tokens_.end()) + 1;
}

void TokenDataset::read_row(int64_t index, std::span<int32_t> tokens) const {
  const int64_t length = static_cast<int64_t>(tokens.size());
  SL_ASSERT(length >= 2 && length <= max_row_length(), "row length " + std::to_string(length));
  const int64_t stride = length - 1;  // rows overlap by one token: the last target is the next input
  const int64_t windows = (static_cast<int64_t>(tokens_.size()) - 1) / stride;
  const uint16_t* start = tokens_.data() + (index % windows) * stride;
  std::copy(start, start + length, tokens.begin());
}

std::string TokenDataset::describe() const {
  return source_ + " (" + std::to_string(tokens_.size()) + " tokens, vocab " + std::to_string(vocab_size_) + ")";
}

Batch Batch::microbatch(int index, int count) const {
  if (count <= 0 || rows % count != 0) {
    throw UserError("cannot split " + std::to_string(rows) + " rows per rank into " + std::to_string(count) +
                    " microbatches; choose a gradient accumulation count that divides the per-rank batch");
  }
  SL_ASSERT(index >= 0 && index < count, "microbatch " + std::to_string(index) + " of " + std::to_string(count));
  const int64_t micro_rows = rows / count;
  const auto begin = static_cast<std::ptrdiff_t>(index * micro_rows * seq_len);
  const auto end = begin + static_cast<std::ptrdiff_t>(micro_rows * seq_len);
  return Batch{micro_rows, seq_len, {inputs.begin() + begin, inputs.begin() + end},
               {targets.begin() + begin, targets.begin() + end}};
}

BatchLoader::BatchLoader(std::shared_ptr<const Dataset> data, int64_t global_batch, int64_t seq_len,
                         int rank, int ranks)
    : data_(std::move(data)), global_batch_(global_batch), seq_len_(seq_len), rank_(rank), ranks_(ranks) {
  SL_ASSERT(data_ != nullptr, "BatchLoader without a data set");
  SL_ASSERT(ranks >= 1 && rank >= 0 && rank < ranks, "rank " + std::to_string(rank) + " of " + std::to_string(ranks));
  if (global_batch <= 0 || seq_len <= 0) {
    throw UserError("batch size " + std::to_string(global_batch) + " and sequence length " + std::to_string(seq_len) +
                    " must both be positive");
  }
  if (global_batch % ranks != 0) {
    throw UserError("global batch " + std::to_string(global_batch) + " is not divisible by " + std::to_string(ranks) +
                    " data-parallel ranks; choose a batch size that is a multiple of the data axis");
  }
  if (seq_len + 1 > data_->max_row_length()) {
    throw UserError("data " + data_->describe() + " is too short for one sequence of " + std::to_string(seq_len) +
                    " tokens plus its target; use a longer file or a sequence length below " +
                    std::to_string(data_->max_row_length()));
  }
}

Batch BatchLoader::next() {
  const int64_t rows = local_rows();
  Batch batch{rows, seq_len_, std::vector<int32_t>(rows * seq_len_), std::vector<int32_t>(rows * seq_len_)};
  std::vector<int32_t> row(seq_len_ + 1);
  const int64_t first_row = position_ * global_batch_ + rank_ * rows;
  for (int64_t i = 0; i < rows; ++i) {
    data_->read_row(first_row + i, row);
    std::copy(row.begin(), row.end() - 1, batch.inputs.begin() + i * seq_len_);
    std::copy(row.begin() + 1, row.end(), batch.targets.begin() + i * seq_len_);
  }
  ++position_;
  return batch;
}

void BatchLoader::set_position(int64_t position) {
  if (position < 0) {
    throw UserError("data position " + std::to_string(position) + " is negative; the checkpoint is corrupt");
  }
  position_ = position;
}

}  // namespace shardlab::data
