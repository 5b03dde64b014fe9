// The byte-level BPE tokenizer (framework/text/) against an independent reference:
// tests/bpe_reference.py trains a small vocabulary, writes it as tokenizer.json files and a
// tiktoken file, and encodes tricky texts with GPT-2's and tiktoken's own algorithms (Python
// `regex` for the patterns). shardlab must give the same ids from every file form, decode
// them back to the bytes, and get the GPT-2 pattern's known cases right.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "framework/error.h"
#include "framework/text/tokenizer.h"
#include "framework/text/stream_encoder.h"
#include "framework/text/tokenizer_files.h"
#include "tests/temp_dir.h"

using namespace shardlab;
using namespace shardlab::text;

namespace {

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

// The reference's files and cases, made once for the whole test binary.
struct Reference {
  TempDir dir;
  nlohmann::json cases;
  Reference() {
    const std::string command = "/usr/bin/python3 " SHARDLAB_TESTS_DIR "/bpe_reference.py " + dir.file("");
    REQUIRE_MESSAGE(std::system(command.c_str()) == 0,
                    "tests/bpe_reference.py failed; it needs Debian's python3-regex (launch/test.sh installs it)");
    std::ifstream in(dir.file("cases.json"));
    cases = nlohmann::json::parse(in);
  }
};

const Reference& reference() {
  static const Reference r;
  return r;
}

std::vector<std::string> pieces(const PreTokenizer& split, std::string_view text) {
  std::vector<std::string> out;
  split.for_each_piece(text, [&](std::string_view p) { out.emplace_back(p); });
  return out;
}

void check_against_reference(const Tokenizer& tok, const char* key) {
  int checked = 0;
  for (const nlohmann::json& c : reference().cases) {
    const std::string text = from_hex(c["hex"].get<std::string>());
    const std::vector<int> expected = c[key].get<std::vector<int>>();
    INFO("text hex " << c["hex"].get<std::string>());
    CHECK(tok.encode(text) == expected);
    CHECK(tok.decode(expected) == text);
    ++checked;
  }
  CHECK(checked > 50);
}

}  // namespace

TEST_CASE("GPT-2's pattern cuts contractions, runs of spaces and digits as OpenAI's does") {
  const PreTokenizer gpt2(kGpt2Pattern);
  using V = std::vector<std::string>;
  CHECK(pieces(gpt2, "Hello world's 123") == V{"Hello", " world", "'s", " 123"});
  CHECK(pieces(gpt2, "they're we've I'm you'll he'd") == V{"they", "'re", " we", "'ve", " I", "'m", " you", "'ll", " he", "'d"});
  CHECK(pieces(gpt2, "IT'S") == V{"IT", "'", "S"});  // GPT-2's contractions are lower case only
  // A run of spaces leaves its last space to the word after it; at the end it stays whole.
  CHECK(pieces(gpt2, "a   b  ") == V{"a", "  ", " b", "  "});
  CHECK(pieces(gpt2, "x\n\n y") == V{"x", "\n\n", " y"});
  CHECK(pieces(gpt2, "1234567 3.14") == V{"1234567", " 3", ".", "14"});
  CHECK(pieces(gpt2, "abc123def") == V{"abc", "123", "def"});
  CHECK(pieces(gpt2, "naïve Привет!!") == V{"naïve", " Привет", "!!"});
  const PreTokenizer llama3(kLlama3Pattern);
  CHECK(pieces(llama3, "1234567") == V{"123", "456", "7"});
  CHECK(pieces(llama3, "IT'S") == V{"IT", "'S"});
  CHECK(pieces(llama3, "end.\n\nNext") == V{"end", ".\n\n", "Next"});
}

TEST_CASE("bytes that are not UTF-8 are pieces of their own, and the pieces join to the text") {
  const PreTokenizer gpt2(kGpt2Pattern);
  using V = std::vector<std::string>;
  CHECK(pieces(gpt2, "ab\xff\xfe cd") == V{"ab", "\xff\xfe", " cd"});
  CHECK(pieces(gpt2, "\xe2\x82x") == V{"\xe2\x82", "x"});  // a cut-off sequence
  CHECK(utf8_sequence_length("\xc0\xaf") == 0);               // overlong
  CHECK(utf8_sequence_length("\xed\xa0\x80") == 0);           // a surrogate
  CHECK(utf8_sequence_length("\xf4\x90\x80\x80") == 0);       // past U+10FFFF
  CHECK(utf8_sequence_length("\xf0\x9f\x91\x8b") == 4);       // an emoji
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::string text(rng() % 64, '\0');
    for (char& c : text) c = static_cast<char>(rng() % 4 == 0 ? ' ' : rng());
    std::string joined;
    for (const std::string& p : pieces(gpt2, text)) {
      CHECK(!p.empty());
      joined += p;
    }
    CHECK(joined == text);
  }
}

TEST_CASE("a GPT-2 tokenizer.json encodes as OpenAI's encoder.py, from either form of merges") {
  const Tokenizer strings(read_tokenizer_file(reference().dir.file("gpt2_strings.json")));
  const Tokenizer pairs(read_tokenizer_file(reference().dir.file("gpt2_pairs.json")));
  CHECK(strings.pattern() == kGpt2Pattern);
  CHECK(strings.vocab_size() == 557);
  check_against_reference(strings, "gpt2");
  check_against_reference(pairs, "gpt2");
}

TEST_CASE("LLaMA 3's tokenizer.json and tiktoken file encode as tiktoken does") {
  const Tokenizer json(read_tokenizer_file(reference().dir.file("llama3.json")));
  const Tokenizer tiktoken(read_tiktoken(reference().dir.file("llama3.tiktoken"), kLlama3Pattern, {"<|endoftext|>"}));
  CHECK(json.pattern() == kLlama3Pattern);
  check_against_reference(json, "llama3");
  check_against_reference(tiktoken, "llama3");
  // Without its own specials a tiktoken file gets LLaMA 3's 256, numbered after its ranks.
  const Tokenizer llama(read_tokenizer_file(reference().dir.file("llama3.tiktoken")));
  CHECK(llama.vocab_size() == 556 + 256);
  CHECK(llama.special_id("<|begin_of_text|>") == 556);
  CHECK(llama.special_id("<|eot_id|>") == 556 + 9);
  CHECK(llama.encode("<|begin_of_text|>hi").front() == 556);
}

TEST_CASE("special tokens are cut out first; encode_ordinary reads their text as text") {
  const Tokenizer tok(read_tokenizer_file(reference().dir.file("gpt2_strings.json")));
  const int eot = tok.special_id("<|endoftext|>").value();
  CHECK(eot == 556);
  CHECK(tok.encode("<|endoftext|>") == std::vector<int>{eot});
  const std::vector<int> ordinary = tok.encode_ordinary("<|endoftext|>");
  CHECK(ordinary.size() > 1);
  CHECK(std::find(ordinary.begin(), ordinary.end(), eot) == ordinary.end());
  CHECK(tok.decode(ordinary) == "<|endoftext|>");
  CHECK(tok.token_bytes(eot) == "<|endoftext|>");
}

TEST_CASE("any bytes round-trip through encode and decode") {
  const Tokenizer gpt2(read_tokenizer_file(reference().dir.file("gpt2_strings.json")));
  const Tokenizer llama(read_tokenizer_file(reference().dir.file("llama3.tiktoken")));
  std::mt19937 rng(11);
  const std::string alphabet[] = {"a", "e", "th", " ", "  ", "\n", "'s", "1", "é", "Ж", "日", "👋", "\xff", "\x80",
                                  "\xe2\x82", "<|endoftext|>", "<|begin_of_text|>", "\t", "!"};
  for (int trial = 0; trial < 300; ++trial) {
    std::string text;
    const int parts = static_cast<int>(rng() % 40);
    for (int i = 0; i < parts; ++i) {
      text += trial % 2 ? alphabet[rng() % std::size(alphabet)] : std::string(1, static_cast<char>(rng()));
    }
    CHECK(gpt2.decode(gpt2.encode(text)) == text);
    CHECK(llama.decode(llama.encode(text)) == text);
    CHECK(gpt2.decode(gpt2.encode_ordinary(text)) == text);
  }
  CHECK(gpt2.encode("").empty());
}

TEST_CASE("a file that is not a tokenizer, or an inconsistent one, is a clear error") {
  TempDir dir;
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir.file(name), std::ios::binary) << text;
    return dir.file(name);
  };
  CHECK_THROWS_WITH_AS(read_tokenizer_file(dir.file("missing.json")), doctest::Contains("cannot open tokenizer"),
                       UserError);
  CHECK_THROWS_WITH_AS(read_tokenizer_file(write("prose.txt", "just some prose\n")),
                       doctest::Contains("line 1 ('just some prose') has no rank"), UserError);
  CHECK_THROWS_WITH_AS(read_tokenizer_file(write("broken.json", "{\"model\": ")), doctest::Contains("is not valid JSON"),
                       UserError);
  CHECK_THROWS_WITH_AS(read_tokenizer_file(write("nomodel.json", "{}")), doctest::Contains("has no model"), UserError);
  CHECK_THROWS_WITH_AS(
      read_tokenizer_file(write("wordpiece.json", R"({"model": {"type": "WordPiece", "vocab": {}}})")),
      doctest::Contains("model type 'WordPiece'"), UserError);
  // The reference's file with one merge naming a token the vocabulary lacks.
  std::ifstream in(reference().dir.file("gpt2_strings.json"));
  nlohmann::json broken = nlohmann::json::parse(in);
  broken["model"]["merges"][3] = "q zzz";
  CHECK_THROWS_WITH_AS(read_tokenizer_file(write("badmerge.json", broken.dump())),
                       doctest::Contains("merge 3 ('q zzz') needs token 'zzz'"), UserError);
  broken = nlohmann::json::parse(std::ifstream(reference().dir.file("gpt2_strings.json")));
  broken["normalizer"] = {{"type", "NFC"}};
  CHECK_THROWS_WITH_AS(read_tokenizer_file(write("nfc.json", broken.dump())), doctest::Contains("normalizer 'NFC'"),
                       UserError);
  // A tiktoken file without every byte is not byte-level.
  CHECK_THROWS_WITH_AS(Tokenizer(read_tiktoken(write("short.tiktoken", "YQ== 0\nYg== 1\n"))),
                       doctest::Contains("no token for byte 0"), UserError);
  CHECK_THROWS_WITH_AS(read_tiktoken(write("dup.tiktoken", "YQ== 0\nYg== 0\n")), doctest::Contains("repeats rank 0"),
                       UserError);
  const Tokenizer tok(read_tokenizer_file(reference().dir.file("gpt2_strings.json")));
  CHECK_THROWS_WITH_AS(tok.decode(std::vector<int>{5000}), doctest::Contains("token id 5000 is no token"), UserError);
}

TEST_CASE("a text fed in blocks of any size encodes as the whole text") {
  const Tokenizer gpt2(read_tokenizer_file(reference().dir.file("gpt2_strings.json")));
  const Tokenizer llama(read_tokenizer_file(reference().dir.file("llama3.tiktoken")));
  std::mt19937 rng(3);
  const std::string words[] = {"the", " quick", "fox", ".", "\n", "\n\n", "  ", " ", "It's", "123456", "é", "\xff",
                               "<|endoftext|>", "!\n", "\r\n", "\t"};
  std::string text;
  for (int i = 0; i < 3000; ++i) text += words[rng() % std::size(words)];
  CHECK(last_safe_cut("ab\ncd") == 3);
  CHECK(last_safe_cut("ab \ncd") == 0);  // a space before the newline may join it
  CHECK(last_safe_cut("ab\n cd") == 0);  // a space after it may start the next piece
  for (const Tokenizer* tok : {&gpt2, &llama}) {
    for (size_t block : {1, 7, 64, 1000}) {
      StreamEncoder stream(*tok);
      std::vector<int> ids;
      for (size_t at = 0; at < text.size(); at += block) {
        const std::vector<int> part = stream.feed(std::string_view(text).substr(at, block));
        ids.insert(ids.end(), part.begin(), part.end());
      }
      CHECK(stream.buffered_bytes() < text.size());
      const std::vector<int> tail = stream.finish();
      ids.insert(ids.end(), tail.begin(), tail.end());
      CHECK(ids == tok->encode(text));
    }
  }
}
