#include "framework/data/shard_set.h"

#include <algorithm>
#include <climits>
#include <numeric>

#include "framework/data/token_files.h"
#include "framework/error.h"
#include "framework/mapped_file.h"
#include "framework/rng.h"

namespace shardlab::data {

struct ShardSet::File {
  std::string path;
  MappedFile map;
  ShardHeader header;

  explicit File(const std::string& p) : path(p), map(p) {
    if (!map.ok()) {
      throw UserError("cannot open token shard '" + path + "': " + map.error() +
                      "; check the path (relative paths start from the working directory)");
    }
    const auto bytes = map.bytes();
    header = parse_shard_header(path, bytes.first(std::min<size_t>(bytes.size(), kShardHeaderBytes)),
                                static_cast<int64_t>(bytes.size()));
  }
  const unsigned char* tokens() const { return map.bytes().data() + kShardHeaderBytes; }
};

namespace {

// Fisher-Yates over [0, n), every draw a pure function of (seed, stream, position).
template <typename Index>
std::vector<Index> permutation(int64_t n, const Rng& rng, uint64_t stream, bool shuffle) {
  std::vector<Index> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), Index{0});
  if (!shuffle) return order;
  for (int64_t k = n - 1; k > 0; --k) {
    std::swap(order[k], order[rng.bits(stream, static_cast<uint64_t>(k)) % static_cast<uint64_t>(k + 1)]);
  }
  return order;
}

int64_t windows_in(int64_t tokens, int64_t length) { return tokens >= length ? (tokens - 1) / (length - 1) : 0; }

constexpr size_t kCachedWindowOrders = 4;  // a global batch rarely spans more than two shards

}  // namespace

ShardSet::ShardSet(const std::string& pattern, ShardSetOptions options, const std::string& what)
    : options_(options), source_(pattern) {
  for (const std::string& path : expand_data_paths(pattern, what)) {
    auto file = std::make_shared<const File>(path);
    token_bytes_ = std::max(token_bytes_, file->header.token_bytes);
    pieces_.push_back({file, 0, file->header.tokens});
  }
}

ShardSet::ShardSet(std::vector<Piece> pieces, ShardSetOptions options, std::string source)
    : pieces_(std::move(pieces)), options_(options), source_(std::move(source)) {
  for (const Piece& p : pieces_) token_bytes_ = std::max(token_bytes_, p.file->header.token_bytes);
}

std::pair<ShardSet::Ptr, ShardSet::Ptr> ShardSet::split(int64_t tokens, ShardSetOptions rest_options) const {
  SL_ASSERT(tokens >= 0 && tokens <= this->tokens(), "split at " + std::to_string(tokens));
  std::vector<Piece> head, tail;
  int64_t seen = 0;
  for (const Piece& p : pieces_) {
    const int64_t cut = std::clamp(tokens - seen, int64_t{0}, p.end - p.begin);
    if (cut > 0) head.push_back({p.file, p.begin, p.begin + cut});
    if (p.begin + cut < p.end) tail.push_back({p.file, p.begin + cut, p.end});
    seen += p.end - p.begin;
  }
  return {Ptr(new ShardSet(std::move(head), options_, source_ + ", first " + std::to_string(tokens) + " tokens")),
          Ptr(new ShardSet(std::move(tail), rest_options, source_ + ", held-out tail"))};
}

int64_t ShardSet::tokens() const {
  int64_t n = 0;
  for (const Piece& p : pieces_) n += p.end - p.begin;
  return n;
}

int64_t ShardSet::windows(int64_t length) const {
  int64_t n = 0;
  for (const Piece& p : pieces_) n += windows_in(p.end - p.begin, length);
  return n;
}

int64_t ShardSet::max_row_length() const {
  int64_t longest = 0;
  for (const Piece& p : pieces_) longest = std::max(longest, p.end - p.begin);
  return longest;
}

int64_t ShardSet::limit() const {
  if (options_.vocab_limit > 0) return options_.vocab_limit;
  return token_bytes_ == 2 ? int64_t{1} << 16 : INT_MAX;
}

int ShardSet::vocab_size() const { return static_cast<int>(std::min<int64_t>(limit(), INT_MAX)); }

std::string ShardSet::describe() const {
  std::string order = options_.shuffle ? "shuffled per epoch, seed " + std::to_string(options_.seed) : "in order";
  return source_ + " (" + std::to_string(pieces_.size()) + " llm.c shard" + (pieces_.size() == 1 ? "" : "s") +
         " mapped, " + std::to_string(tokens()) + " uint" + std::to_string(8 * token_bytes_) + " tokens, " + order +
         ")";
}

const ShardSet::EpochOrder& ShardSet::epoch_order(int64_t length, int64_t epoch) const {
  if (!options_.shuffle) epoch = 0;  // every epoch reads in file order
  if (order_.length == length && order_.epoch == epoch) return order_;
  const Rng rng(options_.seed);
  order_.length = length;
  order_.epoch = epoch;
  order_.pieces = permutation<int32_t>(shards(), rng, rng.bits(hash_name("data.shard_order"), epoch), options_.shuffle);
  order_.first_window.assign(1, 0);
  for (int32_t piece : order_.pieces) {
    const Piece& p = pieces_[piece];
    order_.first_window.push_back(order_.first_window.back() + windows_in(p.end - p.begin, length));
  }
  return order_;
}

uint32_t ShardSet::window_of(int64_t length, int64_t epoch, int64_t piece, int64_t k) const {
  if (!options_.shuffle) return static_cast<uint32_t>(k);
  for (const WindowOrder& w : window_orders_) {
    if (w.length == length && w.epoch == epoch && w.piece == piece) return w.windows[k];
  }
  const Rng rng(options_.seed);
  const Piece& p = pieces_[piece];
  // One stream per (piece, epoch): a piece's order does not depend on the other pieces'.
  const uint64_t stream = rng.bits(hash_name("data.window_order") + static_cast<uint64_t>(piece), epoch);
  if (window_orders_.size() == kCachedWindowOrders) window_orders_.erase(window_orders_.begin());
  window_orders_.push_back(
      {length, epoch, piece, permutation<uint32_t>(windows_in(p.end - p.begin, length), rng, stream, true)});
  return window_orders_.back().windows[k];
}

void ShardSet::read_row(int64_t index, std::span<int32_t> tokens) const {
  const int64_t length = static_cast<int64_t>(tokens.size());
  SL_ASSERT(index >= 0 && length >= 2 && length <= max_row_length(),
            "row " + std::to_string(index) + " of length " + std::to_string(length));
  const Piece* piece = nullptr;
  int64_t offset = 0;  // of the window's first token in its file
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    const int64_t per_epoch = windows(length);
    const int64_t epoch = index / per_epoch;
    const int64_t j = index % per_epoch;
    const EpochOrder& order = epoch_order(length, epoch);
    const auto at = std::upper_bound(order.first_window.begin(), order.first_window.end(), j) - 1;
    const int32_t which = order.pieces[at - order.first_window.begin()];
    piece = &pieces_[which];
    offset = piece->begin + window_of(length, epoch, which, j - *at) * (length - 1);
  }
  const File& file = *piece->file;
  if (file.header.token_bytes == 2) {
    const auto* ids = reinterpret_cast<const uint16_t*>(file.tokens()) + offset;  // 2-byte aligned: header 1024 bytes
    std::copy(ids, ids + length, tokens.begin());
  } else {
    const auto* ids = reinterpret_cast<const uint32_t*>(file.tokens()) + offset;
    std::transform(ids, ids + length, tokens.begin(), [](uint32_t id) { return static_cast<int32_t>(std::min<uint32_t>(id, INT_MAX)); });
  }
  const int64_t limit = this->limit();
  const auto bad = std::find_if(tokens.begin(), tokens.end(), [limit](int32_t id) { return id >= limit; });
  if (bad != tokens.end()) {
    const int64_t at = offset + (bad - tokens.begin());
    throw UserError("token shard '" + file.path + "' holds id " + std::to_string(*bad) + " at token " +
                    std::to_string(at) + ", but the model vocabulary is " + std::to_string(limit) + "; pass --vocab " +
                    std::to_string(static_cast<int64_t>(*bad) + 1) +
                    " or larger (the vocabulary of the tokenizer that made the shards)");
  }
}

}  // namespace shardlab::data
