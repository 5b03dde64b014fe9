#include "framework/text/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "framework/error.h"

namespace shardlab::text {

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

namespace {

std::string pcre2_message(int error) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(error, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

// A match data block freed on scope exit.
struct MatchData {
  pcre2_match_data* data;
  explicit MatchData(const pcre2_code* code) : data(pcre2_match_data_create_from_pattern(code, nullptr)) {
    SL_ASSERT(data != nullptr, "pcre2_match_data_create_from_pattern: out of memory");
  }
  ~MatchData() { pcre2_match_data_free(data); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
};

}  // namespace

int utf8_sequence_length(std::string_view text) {
  if (text.empty()) return 0;
  const auto b = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  int length = 0;
  unsigned char low = 0x80, high = 0xbf;  // the allowed range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    length = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    length = 3;
    if (c == 0xe0) low = 0xa0;   // overlong
    if (c == 0xed) high = 0x9f;  // surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    length = 4;
    if (c == 0xf0) low = 0x90;   // overlong
    if (c == 0xf4) high = 0x8f;  // past U+10FFFF
  } else {
    return 0;
  }
  if (text.size() < static_cast<size_t>(length) || b(1) < low || b(1) > high) return 0;
  for (int i = 2; i < length; ++i) {
    if (b(i) < 0x80 || b(i) > 0xbf) return 0;
  }
  return length;
}

PreTokenizer::PreTokenizer(const std::string& pattern) : pattern_(pattern), compiled_(std::make_unique<Compiled>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                                  &error, &offset, nullptr);
  if (compiled_->code == nullptr) {
    throw UserError("pre-tokenizer pattern " + pattern + " does not compile: " + pcre2_message(error) +
                    " at offset " + std::to_string(offset) + "; give a PCRE2 regular expression");
  }
  // JIT makes matching several times faster; where PCRE2 was built without it the
  // interpreter matches the same.
  pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE);
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

void PreTokenizer::split_valid(std::string_view text, const std::function<void(std::string_view)>& piece) const {
  const MatchData match(compiled_->code);
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;  // the first byte no piece has taken yet
  size_t at = 0;     // where the next search begins
  while (at < text.size()) {
    // The run was validated: no UTF check. A JIT match that runs out of its stack (a long
    // run the pattern backtracks over) is matched again by the interpreter, which uses the heap.
    int found = pcre2_match(compiled_->code, subject, text.size(), at, PCRE2_NO_UTF_CHECK, match.data, nullptr);
    if (found == PCRE2_ERROR_JIT_STACKLIMIT) {
      found = pcre2_match(compiled_->code, subject, text.size(), at, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, match.data,
                          nullptr);
    }
    if (found == PCRE2_ERROR_NOMATCH) break;
    if (found < 0) {
      throw UserError("pre-tokenizer pattern " + pattern_ + " failed on " + std::to_string(text.size()) +
                      "-byte text: " + pcre2_message(found) + "; use a pattern that does not backtrack so far");
    }
    const PCRE2_SIZE* bounds = pcre2_get_ovector_pointer(match.data);
    const size_t begin = bounds[0], end = bounds[1];
    if (end == begin) {  // an empty match takes nothing: search again one character on
      at = begin + utf8_sequence_length(text.substr(begin));
      continue;
    }
    if (begin > start) piece(text.substr(start, begin - start));  // bytes no match covered
    piece(text.substr(begin, end - begin));
    start = at = end;
  }
  if (start < text.size()) piece(text.substr(start));
}

void PreTokenizer::for_each_piece(std::string_view text, const std::function<void(std::string_view)>& piece) const {
  size_t at = 0;
  while (at < text.size()) {
    size_t end = at;
    int length;
    while (end < text.size() && (length = utf8_sequence_length(text.substr(end))) > 0) end += length;
    if (end > at) {
      split_valid(text.substr(at, end - at), piece);
    } else {
      while (end < text.size() && utf8_sequence_length(text.substr(end)) == 0) ++end;
      piece(text.substr(at, end - at));  // bytes that are not UTF-8, one piece
    }
    at = end;
  }
}

}  // namespace shardlab::text
