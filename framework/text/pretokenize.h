// Pre-tokenization: text cut into the pieces that byte-pair encoding then merges within,
// by a model's own regular expression (PCRE2, UTF + Unicode properties, JIT when built in).
//
// GPT-2's and LLaMA 3's patterns use \p{L} (letters) and \p{N} (numbers), so a piece never
// mixes letters and digits, and a word keeps the one space before it (" world").
// The regex runs on each maximal run of valid UTF-8; every run of bytes that is not valid
// UTF-8 (a stray 0xff, a cut-off sequence) is a piece of its own, so any byte string cuts
// into pieces that join back to it exactly. Bytes no match covers (a pattern that does not
// cover every character) are pieces too.
//
//   text::PreTokenizer split(text::kGpt2Pattern);
//   split.for_each_piece("Hello world's 123", [](std::string_view p) { ... });
//   // "Hello", " world", "'s", " 123"
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace shardlab::text {

// GPT-2's pattern (OpenAI's encoder.py; Hugging Face's ByteLevel pre-tokenizer).
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// LLaMA 3's pattern (Meta's tokenizer.py; tiktoken's cl100k_base): digits in threes,
// contractions in any case, newlines kept with the punctuation before them.
inline constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The length of the well-formed UTF-8 sequence (Unicode table 3-7: no overlong forms, no
// surrogates, nothing past U+10FFFF) that starts text[0], or 0 when there is none.
int utf8_sequence_length(std::string_view text);

class PreTokenizer {
 public:
  // Compiles `pattern`; UserError naming the pattern, PCRE2's message and the offset.
  explicit PreTokenizer(const std::string& pattern);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // Calls `piece` with each piece of `text`, in order; the pieces join to `text`.
  // Safe to call from several threads at once.
  void for_each_piece(std::string_view text, const std::function<void(std::string_view)>& piece) const;
  const std::string& pattern() const { return pattern_; }

 private:
  struct Compiled;
  std::string pattern_;
  std::unique_ptr<Compiled> compiled_;
  void split_valid(std::string_view text, const std::function<void(std::string_view)>& piece) const;
};

}  // namespace shardlab::text
