// A byte-level BPE tokenizer: GPT-2's (a Hugging Face tokenizer.json) and LLaMA 3's (a
// tiktoken file), encode and decode (docs/data.md, "Tokenizers").
//
// Every token is a byte string; every single byte is a token, so any byte string encodes
// and decode(encode(x)) == x, invalid UTF-8 included. Encoding:
// 1. special tokens ("<|endoftext|>") are cut out of the text first and become their ids;
// 2. the text between them is cut into pieces by the model's regex (pretokenize.h);
// 3. each piece starts as its bytes and merges adjacent pairs, lowest merge rank first
//    (leftmost among equals), until no adjacent pair has a merge. A tiktoken vocabulary
//    (and a tokenizer.json with "ignore_merges") takes a piece that is itself a token whole.
// Pieces' encodings are cached; encode and decode are safe to call from several threads.
//
//   text::Tokenizer tok(text::read_tokenizer_file("gpt2/tokenizer.json"));  // tokenizer_files.h
//   std::vector<int> ids = tok.encode("Hello world<|endoftext|>");  // 15496, 995, 50256
//   std::string back = tok.decode(ids);
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "framework/text/pretokenize.h"

namespace shardlab::text {

struct SpecialToken {
  std::string text;
  int id = 0;
};

// One merge of a vocabulary: tokens `left` and `right` next to each other become `merged`
// (ids); lower `rank` merges first.
struct Merge {
  int left = 0, right = 0, merged = 0, rank = 0;
};

// What a tokenizer is made of; tokenizer_files.h reads one, a test may write one by hand.
struct Vocabulary {
  std::vector<std::string> tokens;  // id -> bytes ("" where an id is unused)
  std::vector<Merge> merges;
  std::vector<SpecialToken> specials;
  std::string pattern = kGpt2Pattern;
  bool whole_piece_tokens = false;  // a piece that is a token is that token, unmerged
};

class Tokenizer {
 public:
  // UserError when a byte is not a token, a merge or special names an id out of range, or
  // two tokens share their bytes. Neither copied nor moved (its maps point into itself).
  explicit Tokenizer(Vocabulary vocabulary);
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  std::vector<int> encode(std::string_view text) const;           // special tokens recognised
  std::vector<int> encode_ordinary(std::string_view text) const;  // special tokens' text is text
  // UserError for an id that is no token.
  std::string decode(std::span<const int> ids) const;
  std::string token_bytes(int id) const { return decode(std::span<const int>(&id, 1)); }

  // One more than the largest id (the embedding rows a model needs).
  int vocab_size() const { return static_cast<int>(vocabulary_.tokens.size()); }
  std::optional<int> special_id(const std::string& text) const;
  const std::vector<SpecialToken>& specials() const { return vocabulary_.specials; }
  const std::string& pattern() const { return splitter_.pattern(); }
  // One line for logs: "byte-level BPE, 50257 tokens (50000 merges, 1 special), GPT-2 pattern".
  std::string describe() const;

 private:
  Vocabulary vocabulary_;
  PreTokenizer splitter_;
  std::unordered_map<std::string_view, int> token_ids_;    // bytes -> id (whole-piece lookup)
  std::unordered_map<uint64_t, std::pair<int, int>> pair_;  // (left, right) -> (rank, merged)
  std::vector<std::vector<int>> specials_by_first_byte_;   // byte -> specials, longest first
  mutable std::mutex cache_mutex_;
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  mutable std::unordered_map<std::string, std::vector<int>, Hash, std::equal_to<>> cache_;

  void encode_piece(std::string_view piece, std::vector<int>& out) const;
  void encode_text(std::string_view text, std::vector<int>& out) const;
};

}  // namespace shardlab::text
