// prepare_data: text corpus files -> llm.c token shards, through a BPE tokenizer
// (docs/data.md, "Preparing a corpus").
//
//   prepare_data --tokenizer gpt2/tokenizer.json --out data/tiny tiny.txt
//       data/tiny_val_000000.bin    the first --val-fraction of the corpus (to a line end)
//       data/tiny_train_000001.bin  the rest, --shard-tokens tokens per shard
//   train_gpt --data "data/tiny_train_*.bin" --val-data data/tiny_val_000000.bin --vocab 50257 ...
//
// Each input file is one document and starts with the tokenizer's <|begin_of_text|> (LLaMA
// 3) or <|endoftext|> (GPT-2), as llm.c's scripts put one before each document; special
// tokens written in the text are encoded as specials. Files are read a megabyte at a time
// (text::StreamEncoder gives the ids of the whole text), so a corpus need not fit in memory.
// Shards hold uint16 ids (llm.c's GPT-2 form) when the tokenizer has at most 65536 ids, and
// uint32 ids (llm.c's LLaMA 3 form, magic 20240801) past that, e.g. for LLaMA 3's 128256.
//
// stderr: a progress bar with the measured read rate (MB/s) and tokens/s; stdout: each
// shard written and a summary.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <cxxopts.hpp>

#include "examples/parse_flags.h"
#include "framework/data/token_files.h"
#include "framework/error.h"
#include "framework/text/stream_encoder.h"
#include "framework/text/tokenizer_files.h"

using namespace shardlab;

namespace {

using Clock = std::chrono::steady_clock;

// Tokens into shards of `shard_tokens`, named <prefix>_<split>_<index>.bin with one index
// counting across splits (llm.c's naming: val is shard 0).
class ShardWriter {
 public:
  // `wide`: uint32 ids (LLaMA 3's form), else uint16.
  ShardWriter(std::string prefix, int64_t shard_tokens, bool wide)
      : prefix_(std::move(prefix)), shard_tokens_(shard_tokens), wide_(wide) {}

  void add(const std::vector<int>& ids, const std::string& split) {
    split_ = split;
    for (int id : ids) {
      if (wide_) {
        wide_buffer_.push_back(static_cast<uint32_t>(id));
      } else {
        buffer_.push_back(static_cast<uint16_t>(id));
      }
      if (buffered() == shard_tokens_) flush();
    }
    tokens_[split == "val"] += static_cast<int64_t>(ids.size());
  }
  // Writes what is buffered as a last, shorter shard of the current split.
  void flush() {
    const int64_t count = buffered();
    if (count == 0) return;
    char index[16];
    std::snprintf(index, sizeof index, "%06d", next_index_++);
    const std::string path = prefix_ + "_" + split_ + "_" + index + ".bin";
    if (wide_) {
      data::write_shard(path, std::span<const uint32_t>(wide_buffer_));
    } else {
      data::write_shard(path, std::span<const uint16_t>(buffer_));
    }
    written_.push_back(path + ": " + std::to_string(count) + " tokens");
    ++shards_[split_ == "val"];
    buffer_.clear();
    wide_buffer_.clear();
  }
  int64_t tokens(bool val) const { return tokens_[val]; }
  int shards(bool val) const { return shards_[val]; }
  int64_t total_tokens() const { return tokens_[0] + tokens_[1]; }
  const std::vector<std::string>& written() const { return written_; }  // "path: N tokens"

 private:
  std::string prefix_;
  int64_t shard_tokens_;
  bool wide_;
  std::string split_;
  std::vector<uint16_t> buffer_;
  std::vector<uint32_t> wide_buffer_;
  int64_t buffered() const { return static_cast<int64_t>(wide_ ? wide_buffer_.size() : buffer_.size()); }
  int next_index_ = 0;
  int64_t tokens_[2] = {0, 0};
  int shards_[2] = {0, 0};
  std::vector<std::string> written_;
};

// One line on stderr, redrawn: done / total bytes, the read rate and the tokens per second.
class Progress {
 public:
  explicit Progress(int64_t total_bytes) : total_(total_bytes), start_(Clock::now()) {}
  void show(int64_t bytes, int64_t tokens, bool last = false) {
    const auto now = Clock::now();
    if (!last && now - drawn_ < std::chrono::milliseconds(200)) return;
    drawn_ = now;
    const double seconds = std::max(1e-9, std::chrono::duration<double>(now - start_).count());
    const double fraction = total_ > 0 ? static_cast<double>(bytes) / total_ : 1.0;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(fraction * kWidth);
    std::fprintf(stderr, "\r[%s%s] %5.1f%% %.1f/%.1f MB | %.2f MB/s | %.0f tokens/s | %.1f s", std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, '.').c_str(), 100 * fraction, bytes / 1e6, total_ / 1e6,
                 bytes / 1e6 / seconds, tokens / seconds, seconds);
    if (last) std::fprintf(stderr, "\n");
  }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  int64_t total_;
  Clock::time_point start_;
  Clock::time_point drawn_{};
};

int run(int argc, char** argv) {
  cxxopts::Options o("prepare_data", "Tokenize text files into llm.c token shards (uint16 ids; uint32 past 65536).");
  o.add_options()("tokenizer", "Hugging Face tokenizer.json or tiktoken file (past 65536 ids: uint32 shards)",
                  cxxopts::value<std::string>())(
      "out", "output prefix: PREFIX_val_000000.bin, PREFIX_train_000001.bin, ...", cxxopts::value<std::string>())(
      "shard-tokens", "tokens per shard (100M: llm.c's size; 4096, 16k, 1M also read)",
      cxxopts::value<std::string>()->default_value("100M"))(
      "val-fraction", "share of the corpus bytes, from its start to a line end, that goes to the val shard (0: none)",
      cxxopts::value<double>()->default_value("0.1"))(
      "inputs", "text files (or patterns such as corpus/*.txt), one document each", cxxopts::value<std::vector<std::string>>())(
      "h,help", "print this help");
  o.parse_positional({"inputs"});
  o.positional_help("FILE...");
  const cxxopts::ParseResult p = cli::parse_flags(o, argc, argv);
  if (p.count("help")) return std::printf("%s\n", o.help().c_str()), 0;
  if (!p.count("tokenizer")) throw UserError("--tokenizer is required: a tokenizer.json or tiktoken file");
  if (!p.count("out")) throw UserError("--out is required: the shards' path prefix, e.g. --out data/corpus");
  if (!p.count("inputs")) throw UserError("give at least one text file to tokenize, e.g. prepare_data ... corpus.txt");
  const int64_t shard_tokens = parse_count(p["shard-tokens"].as<std::string>(), "--shard-tokens");
  const double val_fraction = p["val-fraction"].as<double>();
  if (!(val_fraction >= 0 && val_fraction < 1)) {
    throw UserError("--val-fraction must be at least 0 and below 1, got " + format_number(val_fraction));
  }
  std::vector<std::string> paths;
  for (const std::string& pattern : p["inputs"].as<std::vector<std::string>>()) {
    for (const std::string& path : data::expand_data_paths(pattern, "input")) paths.push_back(path);
  }
  const std::string tokenizer_path = p["tokenizer"].as<std::string>();
  const text::Tokenizer tokenizer(text::read_tokenizer_file(tokenizer_path));
  std::optional<int> document_start = tokenizer.special_id("<|begin_of_text|>");
  if (!document_start) document_start = tokenizer.special_id("<|endoftext|>");

  int64_t total_bytes = 0;
  for (const std::string& path : paths) {
    if (!std::filesystem::is_regular_file(path)) throw UserError("input " + path + " is not a readable file; check the path");
    total_bytes += static_cast<int64_t>(std::filesystem::file_size(path));
  }
  const int64_t val_bytes = static_cast<int64_t>(val_fraction * static_cast<double>(total_bytes));
  const std::filesystem::path parent = std::filesystem::path(p["out"].as<std::string>()).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  std::fprintf(stderr, "tokenizer: %s\n", tokenizer.describe().c_str());

  ShardWriter shards(p["out"].as<std::string>(), shard_tokens, tokenizer.vocab_size() > 65536);
  Progress progress(total_bytes);
  text::StreamEncoder stream(tokenizer);
  int64_t read = 0;
  bool in_val = val_bytes > 0;
  std::string block(size_t{1} << 20, '\0');
  for (const std::string& path : paths) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw UserError("cannot read input file " + path + "; check the path");
    if (document_start) shards.add({*document_start}, in_val ? "val" : "train");
    while (in.read(block.data(), static_cast<std::streamsize>(block.size())) || in.gcount() > 0) {
      std::string_view chunk(block.data(), static_cast<size_t>(in.gcount()));
      if (in_val && read + static_cast<int64_t>(chunk.size()) > val_bytes) {
        // The val part ends at the first line end at or after val_bytes.
        const size_t newline = chunk.find('\n', static_cast<size_t>(std::max<int64_t>(0, val_bytes - read)));
        if (newline != std::string_view::npos) {
          shards.add(stream.feed(chunk.substr(0, newline + 1)), "val");
          shards.add(stream.finish(), "val");
          shards.flush();
          in_val = false;
          read += static_cast<int64_t>(newline + 1);
          chunk.remove_prefix(newline + 1);
        }
      }
      shards.add(stream.feed(chunk), in_val ? "val" : "train");
      read += static_cast<int64_t>(chunk.size());
      progress.show(read, shards.total_tokens());
    }
    shards.add(stream.finish(), in_val ? "val" : "train");  // a file ends a document
  }
  shards.flush();
  progress.show(read, shards.total_tokens(), /*last=*/true);
  if (shards.tokens(false) == 0) {
    throw UserError("the corpus (" + std::to_string(total_bytes) + " bytes) left no tokens for training after the val "
                    "part; lower --val-fraction (" + format_number(val_fraction) + ") or give more text");
  }
  const double seconds = progress.seconds();
  for (const std::string& line : shards.written()) std::printf("wrote %s\n", line.c_str());
  std::printf("prepare_data: %.2f MB in %.2f s (%.2f MB/s, %.0f tokens/s): %lld tokens, %.2f bytes per token; "
              "val %lld tokens in %d shard(s), train %lld tokens in %d shard(s); each document starts with %s\n",
              read / 1e6, seconds, read / 1e6 / seconds, shards.total_tokens() / seconds,
              static_cast<long long>(shards.total_tokens()), static_cast<double>(read) / shards.total_tokens(),
              static_cast<long long>(shards.tokens(true)), shards.shards(true), static_cast<long long>(shards.tokens(false)),
              shards.shards(false), document_start ? tokenizer.token_bytes(*document_start).c_str() : "nothing");
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cli::exit_on_user_error([&] { return run(argc, argv); }); }
