#include "framework/text/tokenizer_files.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "framework/error.h"

namespace shardlab::text {
namespace {

using json = nlohmann::json;

std::string read_file(const std::string& path) {
  if (std::filesystem::is_directory(path)) {
    throw UserError("tokenizer '" + path + "' is a directory; give its tokenizer.json or tiktoken file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot open tokenizer '" + path + "': " + std::strerror(errno) + "; check the path");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68
// bytes for U+0100 onward, so every token is printable text in tokenizer.json.
std::unordered_map<char32_t, unsigned char> unicode_to_byte() {
  std::unordered_map<char32_t, unsigned char> map;
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    map[printable ? static_cast<char32_t>(b) : next++] = static_cast<unsigned char>(b);
  }
  return map;
}

// A ByteLevel token's text -> its bytes; nullopt when a character is outside the alphabet.
std::optional<std::string> byte_level_bytes(const std::string& token,
                                            const std::unordered_map<char32_t, unsigned char>& map) {
  std::string out;
  for (size_t i = 0; i < token.size();) {
    const int length = utf8_sequence_length(std::string_view(token).substr(i));
    if (length == 0 || length == 4) return std::nullopt;
    const auto u = [&](size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(token[i + k])); };
    char32_t c = length == 1 ? u(0) : length == 2 ? ((u(0) & 0x1f) << 6) | (u(1) & 0x3f)
                                                    : ((u(0) & 0x0f) << 12) | ((u(1) & 0x3f) << 6) | (u(2) & 0x3f);
    const auto it = map.find(c);
    if (it == map.end()) return std::nullopt;
    out += static_cast<char>(it->second);
    i += length;
  }
  return out;
}

// The pre-tokenizer regex of a tokenizer.json's "pre_tokenizer".
std::string pre_tokenizer_pattern(const json& pre, const std::string& path) {
  const std::string fix = "; shardlab reads byte-level BPE tokenizers (GPT-2's ByteLevel, or LLaMA 3's Split regex "
                          "then ByteLevel)";
  if (!pre.is_object()) throw UserError("tokenizer " + path + " has no pre_tokenizer" + fix);
  const std::string type = pre.value("type", "");
  if (type == "ByteLevel") {
    if (pre.value("add_prefix_space", false)) {
      throw UserError("tokenizer " + path + ": pre_tokenizer ByteLevel with add_prefix_space true is not supported"
                      "; set it to false (GPT-2's own is false)");
    }
    return pre.value("use_regex", true) ? kGpt2Pattern : "";
  }
  if (type == "Split") {
    if (!pre.contains("pattern") || !pre["pattern"].contains("Regex") || pre.value("invert", false) ||
        pre.value("behavior", "Isolated") != "Isolated") {
      throw UserError("tokenizer " + path + ": pre_tokenizer Split must have a {\"Regex\": ...} pattern, behavior "
                      "Isolated and invert false" + fix);
    }
    return pre["pattern"]["Regex"].get<std::string>();
  }
  if (type == "Sequence") {
    std::string pattern;
    bool byte_level = false;
    for (const json& part : pre.value("pretokenizers", json::array())) {
      const std::string p = pre_tokenizer_pattern(part, path);
      byte_level = byte_level || part.value("type", "") == "ByteLevel";
      if (p.empty()) continue;
      if (!pattern.empty()) throw UserError("tokenizer " + path + ": pre_tokenizer Sequence has two regexes" + fix);
      pattern = p;
    }
    if (!byte_level || pattern.empty()) {
      throw UserError("tokenizer " + path + ": pre_tokenizer Sequence needs one regex and a ByteLevel step" + fix);
    }
    return pattern;
  }
  throw UserError("tokenizer " + path + ": pre_tokenizer type '" + type + "' is not supported" + fix);
}

}  // namespace

std::vector<std::string> llama3_special_tokens() {
  std::vector<std::string> specials = {
      "<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
      "<|finetune_right_pad_id|>", "<|step_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>",
      "<|eot_id|>", "<|python_tag|>"};
  for (int i = 2; specials.size() < 256; ++i) specials.push_back("<|reserved_special_token_" + std::to_string(i) + "|>");
  return specials;
}

Vocabulary read_tokenizer_file(const std::string& path) {
  const std::string text = read_file(path);
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') return read_hf_tokenizer_json(path);
  return read_tiktoken(path);
}

Vocabulary read_hf_tokenizer_json(const std::string& path) {
  json root;
  try {
    root = json::parse(read_file(path));
  } catch (const json::parse_error& e) {
    throw UserError("tokenizer " + path + " is not valid JSON: " + e.what() + "; give a Hugging Face tokenizer.json");
  }
  const auto field = [&](const json& object, const char* name, const std::string& where) -> const json& {
    if (!object.is_object() || !object.contains(name)) {
      throw UserError("tokenizer " + path + " has no " + where + name + "; it is not a Hugging Face tokenizer.json "
                      "of a BPE model");
    }
    return object[name];
  };
  try {
    const json& model = field(root, "model", "");
    if (model.value("type", "BPE") != "BPE" || model.value("byte_fallback", false)) {
      throw UserError("tokenizer " + path + " has model type '" + model.value("type", "") +
                      "' (byte_fallback " + (model.value("byte_fallback", false) ? "true" : "false") +
                      "); shardlab reads byte-level BPE (type BPE, no byte_fallback), as GPT-2 and LLaMA 3 use");
    }
    if (root.contains("normalizer") && !root["normalizer"].is_null()) {
      throw UserError("tokenizer " + path + " has normalizer '" + root["normalizer"].value("type", "?") +
                      "', which shardlab does not implement; byte-level tokenizers (GPT-2, LLaMA 3) have none");
    }
    Vocabulary v;
    v.pattern = pre_tokenizer_pattern(root.value("pre_tokenizer", json()), path);
    v.whole_piece_tokens = model.value("ignore_merges", false);
    const json& vocab = field(model, "vocab", "model.");
    const json added = root.value("added_tokens", json::array());
    int size = 0;
    for (const auto& [token, id] : vocab.items()) size = std::max(size, id.get<int>() + 1);
    for (const json& a : added) size = std::max(size, field(a, "id", "added_tokens[].").get<int>() + 1);
    v.tokens.resize(size);
    for (const json& a : added) {
      const int id = a["id"].get<int>();
      v.tokens[id] = field(a, "content", "added_tokens[].").get<std::string>();
      v.specials.push_back({v.tokens[id], id});
    }
    const auto map = unicode_to_byte();
    for (const auto& [token, id_json] : vocab.items()) {
      const int id = id_json.get<int>();
      if (id < 0) throw UserError("tokenizer " + path + ": model.vocab gives '" + token + "' the negative id " + std::to_string(id));
      if (!v.tokens[id].empty()) continue;  // an added token: its content is its text
      const std::optional<std::string> bytes = byte_level_bytes(token, map);
      if (!bytes || bytes->empty()) {
        throw UserError("tokenizer " + path + ": model.vocab token '" + token + "' (id " + std::to_string(id) +
                        ") is not in the ByteLevel alphabet; shardlab reads byte-level BPE vocabularies only");
      }
      v.tokens[id] = *bytes;
    }
    const json& merges = field(model, "merges", "model.");
    const auto id_of = [&](const std::string& token, size_t rank, const std::string& merge) {
      if (!vocab.contains(token)) {
        throw UserError("tokenizer " + path + ": merge " + std::to_string(rank) + " ('" + merge + "') needs token '" +
                        token + "', which model.vocab lacks; the file is inconsistent");
      }
      return vocab[token].get<int>();
    };
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const json& m = merges[rank];
      std::string left, right;
      if (m.is_string()) {
        const std::string s = m.get<std::string>();
        const size_t space = s.find(' ');
        if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
          throw UserError("tokenizer " + path + ": merge " + std::to_string(rank) + " '" + s +
                          "' is not two tokens separated by one space");
        }
        left = s.substr(0, space), right = s.substr(space + 1);
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        left = m[0].get<std::string>(), right = m[1].get<std::string>();
      } else {
        throw UserError("tokenizer " + path + ": merge " + std::to_string(rank) + " is " + m.dump() +
                        "; a merge is \"a b\" or [\"a\", \"b\"]");
      }
      const std::string text = left + " " + right;
      v.merges.push_back({id_of(left, rank, text), id_of(right, rank, text), id_of(left + right, rank, text),
                          static_cast<int>(rank)});
    }
    return v;
  } catch (const json::exception& e) {
    throw UserError("tokenizer " + path + " has a field of the wrong type: " + e.what() +
                    "; give a Hugging Face tokenizer.json of a BPE model");
  }
}

Vocabulary read_tiktoken(const std::string& path, const std::string& pattern, const std::vector<std::string>& specials) {
  std::array<int, 256> sextet;
  sextet.fill(-1);
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < alphabet.size(); ++i) sextet[static_cast<unsigned char>(alphabet[i])] = static_cast<int>(i);

  Vocabulary v;
  v.pattern = pattern;
  v.whole_piece_tokens = true;
  std::istringstream lines(read_file(path));
  int line_number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const auto bad = [&](const std::string& why) {
      return UserError("tokenizer " + path + " line " + std::to_string(line_number) + " ('" + line.substr(0, 60) +
                       "') " + why + "; a tiktoken file has lines of '<base64 token> <rank>', a Hugging Face "
                       "tokenizer.json starts with '{'");
    };
    const size_t space = line.find(' ');
    if (space == std::string::npos || space == 0) throw bad("is not '<base64> <rank>'");
    std::string bytes;
    uint32_t bits = 0;
    int count = 0;
    size_t padding = 0;
    for (size_t i = 0; i < space; ++i) {
      if (line[i] == '=') {
        ++padding;
        continue;
      }
      const int s = sextet[static_cast<unsigned char>(line[i])];
      if (s < 0 || padding > 0) throw bad("holds a character that is not base64");
      bits = (bits << 6) | static_cast<uint32_t>(s);
      if ((count += 6) >= 8) bytes += static_cast<char>((bits >> (count -= 8)) & 0xff);
    }
    if (space % 4 != 0 || padding > 2 || bytes.empty()) throw bad("holds no whole base64 token");
    size_t used = 0;
    int rank = -1;
    try {
      rank = std::stoi(line.substr(space + 1), &used);
    } catch (const std::exception&) {
    }
    if (rank < 0 || used != line.size() - space - 1) throw bad("has no rank (a non-negative integer) after the space");
    if (static_cast<size_t>(rank) >= v.tokens.size()) v.tokens.resize(rank + 1);
    if (!v.tokens[rank].empty()) throw bad("repeats rank " + std::to_string(rank));
    v.tokens[rank] = bytes;
  }
  if (v.tokens.empty()) throw UserError("tokenizer " + path + " holds no token; give a tiktoken file or a tokenizer.json");
  // The implied merges: every split of a token into two tokens, at the token's rank.
  std::unordered_map<std::string_view, int> ids;
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    if (!v.tokens[id].empty()) ids.emplace(v.tokens[id], static_cast<int>(id));
  }
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    const std::string_view token = v.tokens[id];
    for (size_t cut = 1; cut < token.size(); ++cut) {
      const auto left = ids.find(token.substr(0, cut)), right = ids.find(token.substr(cut));
      if (left != ids.end() && right != ids.end()) {
        v.merges.push_back({left->second, right->second, static_cast<int>(id), static_cast<int>(id)});
      }
    }
  }
  for (const std::string& s : specials) {
    v.specials.push_back({s, static_cast<int>(v.tokens.size())});
    v.tokens.push_back(s);
  }
  return v;
}

}  // namespace shardlab::text
