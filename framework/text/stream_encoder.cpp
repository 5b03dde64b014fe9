#include "framework/text/stream_encoder.h"

namespace shardlab::text {
namespace {

bool visible_ascii(char c) { return c > ' ' && c < 0x7f; }

}  // namespace

size_t last_safe_cut(std::string_view text) {
  for (size_t at = text.size(); at >= 3; --at) {  // cut before text[at - 1]
    if (text[at - 2] == '\n' && visible_ascii(text[at - 1]) && visible_ascii(text[at - 3])) return at - 1;
  }
  return 0;
}

std::vector<int> StreamEncoder::feed(std::string_view text) {
  // Only the new text (and the two bytes before it) can hold a new safe cut.
  const size_t searched = buffer_.size() >= 2 ? buffer_.size() - 2 : 0;
  buffer_.append(text);
  const size_t cut = last_safe_cut(std::string_view(buffer_).substr(searched));
  if (cut == 0) return {};
  std::vector<int> ids = tokenizer_.encode(std::string_view(buffer_).substr(0, searched + cut));
  buffer_.erase(0, searched + cut);
  return ids;
}

std::vector<int> StreamEncoder::finish() {
  std::vector<int> ids = tokenizer_.encode(buffer_);
  buffer_.clear();
  return ids;
}

}  // namespace shardlab::text
