// StreamEncoder: a Tokenizer over text that arrives in blocks (a corpus read a megabyte at
// a time), giving the ids Tokenizer::encode gives the whole text.
//
// It encodes up to the last place in its buffer where no piece can straddle: just after
// a newline that has a visible ASCII character (not a space) before it and after it.
// There, GPT-2's and LLaMA 3's patterns end one piece and start the next whatever follows,
// and no special token spans a newline. The rest waits for more text, or for finish().
//
//   text::StreamEncoder stream(tokenizer);
//   while (read(block)) write(stream.feed(block));
//   write(stream.finish());   // the tail, encoded whole
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "framework/text/tokenizer.h"

namespace shardlab::text {

class StreamEncoder {
 public:
  explicit StreamEncoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  // The ids of the text up to the last safe cut seen so far (often none yet).
  std::vector<int> feed(std::string_view text);
  // The ids of everything still buffered; the encoder is then empty, as new.
  std::vector<int> finish();
  size_t buffered_bytes() const { return buffer_.size(); }

 private:
  const Tokenizer& tokenizer_;
  std::string buffer_;
};

// Where text may be cut without changing its pieces: one past the last '\n' with a visible
// ASCII character on each side; 0 when there is no such place.
size_t last_safe_cut(std::string_view text);

}  // namespace shardlab::text
