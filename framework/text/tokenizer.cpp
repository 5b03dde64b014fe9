#include "framework/text/tokenizer.h"

#include <algorithm>
#include <limits>

#include "framework/error.h"

namespace shardlab::text {
namespace {

uint64_t pair_key(int left, int right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// A long text reuses few distinct pieces; past this many the cache starts again rather
// than grow without bound on a corpus of rare words.
constexpr size_t kCacheLimit = size_t{1} << 18;

}  // namespace

Tokenizer::Tokenizer(Vocabulary vocabulary) : vocabulary_(std::move(vocabulary)), splitter_(vocabulary_.pattern) {
  const std::vector<std::string>& tokens = vocabulary_.tokens;
  const int n = vocab_size();
  const auto check_id = [&](int id, const std::string& what) {
    if (id < 0 || id >= n || tokens[id].empty()) {
      throw UserError(what + " names token id " + std::to_string(id) + ", which is no token of this " +
                      std::to_string(n) + "-id vocabulary; the tokenizer file is inconsistent: use the model's own file");
    }
  };
  std::vector<bool> special(n, false);
  for (const SpecialToken& s : vocabulary_.specials) {
    if (s.text.empty()) throw UserError("special token " + std::to_string(s.id) + " has empty text; give it its text");
    check_id(s.id, "special token " + s.text);
    special[s.id] = true;
  }
  for (int id = 0; id < n; ++id) {
    if (tokens[id].empty() || special[id]) continue;
    if (!token_ids_.emplace(tokens[id], id).second) {
      throw UserError("token ids " + std::to_string(token_ids_.at(tokens[id])) + " and " + std::to_string(id) +
                      " hold the same bytes; a tokenizer file gives each byte string one id");
    }
  }
  for (int b = 0; b < 256; ++b) {
    if (!token_ids_.contains(std::string(1, static_cast<char>(b)))) {
      throw UserError("the vocabulary has no token for byte " + std::to_string(b) +
                      "; a byte-level BPE vocabulary holds all 256 single bytes (is this a byte-level tokenizer?)");
    }
  }
  for (const Merge& m : vocabulary_.merges) {
    const std::string what = "merge " + std::to_string(m.rank);
    check_id(m.left, what);
    check_id(m.right, what);
    check_id(m.merged, what);
    if (tokens[m.merged] != tokens[m.left] + tokens[m.right]) {
      throw UserError(what + " joins tokens " + std::to_string(m.left) + " and " + std::to_string(m.right) +
                      " into token " + std::to_string(m.merged) + ", whose bytes are not theirs joined; the "
                      "tokenizer file is inconsistent");
    }
    const auto [it, added] = pair_.emplace(pair_key(m.left, m.right), std::pair{m.rank, m.merged});
    if (!added && m.rank < it->second.first) it->second = {m.rank, m.merged};
  }
  specials_by_first_byte_.resize(256);
  for (size_t i = 0; i < vocabulary_.specials.size(); ++i) {
    specials_by_first_byte_[static_cast<unsigned char>(vocabulary_.specials[i].text[0])].push_back(static_cast<int>(i));
  }
  for (std::vector<int>& candidates : specials_by_first_byte_) {
    std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) {
      return vocabulary_.specials[a].text.size() > vocabulary_.specials[b].text.size();
    });
  }
}

void Tokenizer::encode_piece(std::string_view piece, std::vector<int>& out) const {
  if (vocabulary_.whole_piece_tokens) {
    if (const auto it = token_ids_.find(piece); it != token_ids_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  {
    const std::lock_guard lock(cache_mutex_);
    if (const auto it = cache_.find(piece); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int> parts;
  parts.reserve(piece.size());
  for (char c : piece) parts.push_back(token_ids_.find(std::string_view(&c, 1))->second);
  // Merge the lowest-ranked adjacent pair, the leftmost of equals, until none merges
  // (tiktoken's _byte_pair_merge; quadratic in the piece, and pieces are short).
  constexpr int kNone = std::numeric_limits<int>::max();
  const auto rank_at = [&](size_t i) {
    const auto it = pair_.find(pair_key(parts[i], parts[i + 1]));
    return it == pair_.end() ? kNone : it->second.first;
  };
  std::vector<int> ranks(parts.size() > 1 ? parts.size() - 1 : 0);
  for (size_t i = 0; i < ranks.size(); ++i) ranks[i] = rank_at(i);
  while (!ranks.empty()) {
    const size_t best = std::min_element(ranks.begin(), ranks.end()) - ranks.begin();
    if (ranks[best] == kNone) break;
    parts[best] = pair_.at(pair_key(parts[best], parts[best + 1])).second;
    parts.erase(parts.begin() + best + 1);
    ranks.erase(ranks.begin() + best);
    if (best < ranks.size()) ranks[best] = rank_at(best);
    if (best > 0) ranks[best - 1] = rank_at(best - 1);
  }
  out.insert(out.end(), parts.begin(), parts.end());
  const std::lock_guard lock(cache_mutex_);
  if (cache_.size() >= kCacheLimit) cache_.clear();
  cache_.emplace(std::string(piece), std::move(parts));
}

void Tokenizer::encode_text(std::string_view text, std::vector<int>& out) const {
  splitter_.for_each_piece(text, [&](std::string_view piece) { encode_piece(piece, out); });
}

std::vector<int> Tokenizer::encode_ordinary(std::string_view text) const {
  std::vector<int> out;
  out.reserve(text.size() / 3);
  encode_text(text, out);
  return out;
}

std::vector<int> Tokenizer::encode(std::string_view text) const {
  std::vector<int> out;
  out.reserve(text.size() / 3);
  size_t start = 0;  // the first byte not yet encoded
  for (size_t at = 0; at < text.size();) {
    const SpecialToken* found = nullptr;
    for (int i : specials_by_first_byte_[static_cast<unsigned char>(text[at])]) {
      const SpecialToken& s = vocabulary_.specials[i];
      if (text.substr(at, s.text.size()) == s.text) {
        found = &s;
        break;
      }
    }
    if (found == nullptr) {
      ++at;
      continue;
    }
    encode_text(text.substr(start, at - start), out);
    out.push_back(found->id);
    start = at += found->text.size();
  }
  encode_text(text.substr(start), out);
  return out;
}

std::string Tokenizer::decode(std::span<const int> ids) const {
  std::string out;
  for (int id : ids) {
    if (id < 0 || id >= vocab_size() || vocabulary_.tokens[id].empty()) {
      throw UserError("token id " + std::to_string(id) + " is no token of this tokenizer (" +
                      std::to_string(vocab_size()) + " ids); was the model trained with another tokenizer?");
    }
    out += vocabulary_.tokens[id];
  }
  return out;
}

std::optional<int> Tokenizer::special_id(const std::string& text) const {
  for (const SpecialToken& s : vocabulary_.specials) {
    if (s.text == text) return s.id;
  }
  return std::nullopt;
}

std::string Tokenizer::describe() const {
  const std::string& p = pattern();
  const std::string pattern_name = p == kGpt2Pattern ? "GPT-2" : p == kLlama3Pattern ? "LLaMA 3" : "custom";
  return "byte-level BPE, " + std::to_string(vocab_size()) + " token ids (" +
         std::to_string(vocabulary_.merges.size()) + " merges, " + std::to_string(vocabulary_.specials.size()) +
         " special), " + pattern_name + " pre-tokenizer pattern" +
         (vocabulary_.whole_piece_tokens ? ", whole-piece tokens first" : "");
}

}  // namespace shardlab::text
