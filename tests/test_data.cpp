// Data: the synthetic arithmetic task, token files, and the global-batch loader.
#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <string>

#include "framework/data/arithmetic.h"
#include "framework/data/dataset.h"
#include "framework/data/token_files.h"
#include "framework/error.h"
#include "tests/temp_dir.h"
#include "tests/user_error.h"

using namespace shardlab;
using namespace shardlab::data;

using shardlab::testing::user_error_of;

namespace {

std::string row_text(const Dataset& data, int64_t index, size_t length) {
  std::vector<int32_t> row(length);
  data.read_row(index, row);
  return std::string(row.begin(), row.end());
}

struct Parsed {
  int64_t a, b;
  std::string answer;
};

// The complete "a+b=c\n" problems of a row (the last, cut-off one is dropped).
std::vector<Parsed> problems_of(const std::string& text, int digits) {
  std::vector<Parsed> out;
  const size_t length = 2 * digits + 2 + digits + 2;
  for (size_t at = 0; at + length <= text.size(); at += length) {
    const std::string p = text.substr(at, length);
    REQUIRE(p[digits] == '+');
    REQUIRE(p[2 * digits + 1] == '=');
    REQUIRE(p.back() == '\n');
    out.push_back({std::stoll(p.substr(0, digits)), std::stoll(p.substr(digits + 1, digits)),
                   p.substr(2 * digits + 2)});
  }
  return out;
}

std::string reversed_sum(int64_t a, int64_t b, int digits) {
  std::string s = std::to_string(a + b);
  s = std::string(digits + 1 - s.size(), '0') + s;
  return std::string(s.rbegin(), s.rend()) + "\n";
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string shard_header(int32_t magic, int32_t version, int32_t count) {
  std::vector<int32_t> header(kShardHeaderInts, 0);
  header[0] = magic, header[1] = version, header[2] = count;
  return std::string(reinterpret_cast<const char*>(header.data()), header.size() * sizeof(int32_t));
}


}  // namespace

TEST_CASE("arithmetic rows are deterministic, well formed and correct") {
  ArithmeticTask task({.digits = 3, .seed = 7});
  CHECK(task.prompt_text(7, 45) == "007+045=");
  CHECK(task.answer_text(7, 45) == "2500\n");  // 052 -> 0052 reversed
  CHECK(task.answer_text(999, 999) == "8991\n");

  const std::string row = row_text(*task.train(), 5, 257);
  CHECK(row == row_text(*ArithmeticTask({.digits = 3, .seed = 7}).train(), 5, 257));
  CHECK(row != row_text(*task.train(), 6, 257));
  CHECK(row != row_text(*ArithmeticTask({.digits = 3, .seed = 8}).train(), 5, 257));
  const auto problems = problems_of(row, 3);
  CHECK(problems.size() == 257 / 13);  // "007+045=2500\n" is 13 bytes
  for (const Parsed& p : problems) CHECK(p.answer == reversed_sum(p.a, p.b, 3));
  CHECK(task.train()->vocab_size() == 256);
}

TEST_CASE("train and held-out splits never share a problem") {
  ArithmeticTask task({.digits = 2, .seed = 3});
  std::set<std::pair<int64_t, int64_t>> train, heldout;  // unordered pairs {min, max}
  for (int64_t i = 0; i < 200; ++i) {
    for (const Parsed& p : problems_of(row_text(*task.train(), i, 201), 2)) {
      CHECK_FALSE(task.is_heldout(p.a, p.b));
      train.insert({std::min(p.a, p.b), std::max(p.a, p.b)});
    }
    for (const Parsed& p : problems_of(row_text(*task.heldout(), i, 201), 2)) {
      CHECK(task.is_heldout(p.a, p.b));
      CHECK(task.is_heldout(p.b, p.a));
      heldout.insert({std::min(p.a, p.b), std::max(p.a, p.b)});
    }
  }
  for (const auto& pair : heldout) CHECK(train.count(pair) == 0);
  CHECK(heldout.size() > 100);
  int64_t held = 0;
  for (int64_t a = 0; a < 100; ++a) {
    for (int64_t b = 0; b < 100; ++b) held += task.is_heldout(a, b);
  }
  CHECK(held > 500);  // about 1 in 10 of 10000
  CHECK(held < 1500);
}

TEST_CASE("task metric: exact match of the greedy completion") {
  ArithmeticTask task({.digits = 2, .seed = 11});
  std::vector<std::string> prompts;
  auto oracle = [&](const std::vector<int>& prompt, int max_new) {
    const std::string text(prompt.begin(), prompt.end());
    prompts.push_back(text);
    CHECK(max_new == 4);
    const std::string query = text.substr(text.size() - 6);  // "aa+bb="
    const std::string answer = reversed_sum(std::stoll(query.substr(0, 2)), std::stoll(query.substr(3, 2)), 2);
    CHECK(task.is_heldout(std::stoll(query.substr(0, 2)), std::stoll(query.substr(3, 2))));
    return std::vector<int>(answer.begin(), answer.end());
  };
  TaskScore perfect = task.evaluate(oracle, 50);
  CHECK(perfect.total == 50);
  CHECK(perfect.correct == 50);
  CHECK(perfect.accuracy() == 1.0);
  CHECK(prompts[0].size() == 3 * 10 + 6);  // three solved problems, then the query
  CHECK(problems_of(prompts[0], 2).size() == 3);

  const std::vector<std::string> first_run = prompts;
  prompts.clear();
  task.evaluate(oracle, 50);
  CHECK(prompts == first_run);  // the same problems every eval

  auto off_by_one = [&](const std::vector<int>& prompt, int max_new) {
    std::vector<int> answer = oracle(prompt, max_new);
    answer[0] = answer[0] == '9' ? '0' : answer[0] + 1;
    return answer;
  };
  CHECK(task.evaluate(off_by_one, 20).correct == 0);
  CHECK(task.evaluate([](const std::vector<int>&, int) { return std::vector<int>{}; }, 5).accuracy() == 0.0);
}

TEST_CASE("llm.c shard round trip and text bytes") {
  TempDir dir;
  const std::vector<uint16_t> tokens = {0, 1, 255, 256, 50256, 65535, 7};
  write_shard(dir.file("a.bin"), tokens);
  CHECK(read_shard(dir.file("a.bin")) == tokens);
  CHECK(read_token_file(dir.file("a.bin")) == tokens);
  CHECK(std::filesystem::file_size(dir.file("a.bin")) == 1024 + 2 * tokens.size());

  write_bytes(dir.file("a.txt"), std::string("hi\n\xff", 4));
  CHECK(read_token_file(dir.file("a.txt")) == std::vector<uint16_t>{'h', 'i', '\n', 255});
  TokenDataset data(read_shard(dir.file("a.bin")), dir.file("a.bin"));
  CHECK(data.vocab_size() == 65536);
}

TEST_CASE("bad token files raise a UserError naming the path, the finding and a fix") {
  TempDir dir;
  const std::string missing = dir.file("missing.bin");
  std::string msg = user_error_of([&] { read_shard(missing); });
  CHECK(msg.find(missing) != std::string::npos);
  CHECK(msg.find("check the path") != std::string::npos);
  CHECK(user_error_of([&] { read_text_bytes(dir.file("missing.txt")); }).find("missing.txt") != std::string::npos);

  write_bytes(dir.file("short.bin"), "tiny");
  msg = user_error_of([&] { read_shard(dir.file("short.bin")); });
  CHECK(msg.find("has 4 bytes") != std::string::npos);

  write_bytes(dir.file("magic.bin"), shard_header(1234, 1, 0));
  msg = user_error_of([&] { read_shard(dir.file("magic.bin")); });
  CHECK(msg.find("magic 1234, expected 20240520") != std::string::npos);
  CHECK(msg.find(dir.file("magic.bin")) != std::string::npos);

  write_bytes(dir.file("version.bin"), shard_header(kShardMagic, 2, 0));
  CHECK(user_error_of([&] { read_shard(dir.file("version.bin")); }).find("version 2") != std::string::npos);

  write_bytes(dir.file("truncated.bin"), shard_header(kShardMagic, 1, 10) + std::string(6, '\0'));
  msg = user_error_of([&] { read_shard(dir.file("truncated.bin")); });
  CHECK(msg.find("says 10 tokens") != std::string::npos);
  CHECK(msg.find("truncated") != std::string::npos);

  write_shard(dir.file("one.bin"), std::vector<uint16_t>{1});
  CHECK(user_error_of([&] { TokenDataset(read_shard(dir.file("one.bin")), "one.bin"); }).find("one.bin") !=
        std::string::npos);
}

TEST_CASE("token data rows are consecutive windows that wrap") {
  std::vector<uint16_t> tokens(23);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(i);
  TokenDataset data(tokens, "counting");
  std::vector<int32_t> row(6);  // T = 5: windows start at 0, 5, 10, 15 (4 windows of 23 tokens)
  data.read_row(1, row);
  CHECK(row == std::vector<int32_t>{5, 6, 7, 8, 9, 10});
  data.read_row(5, row);
  CHECK(row == std::vector<int32_t>{5, 6, 7, 8, 9, 10});
  data.read_row(3, row);
  CHECK(row == std::vector<int32_t>{15, 16, 17, 18, 19, 20});
}

TEST_CASE("rank slices concatenate to the global batch, independent of the layout") {
  auto data = ArithmeticTask({.digits = 2, .seed = 5}).train();
  const int64_t B = 8, T = 16;
  BatchLoader whole(data, B, T);
  std::vector<Batch> reference;
  for (int step = 0; step < 3; ++step) reference.push_back(whole.next());
  for (const Batch& b : reference) {
    CHECK(b.rows == B);
    for (int64_t r = 0; r < B; ++r) {  // targets are inputs shifted by one
      for (int64_t t = 0; t + 1 < T; ++t) CHECK(b.targets[r * T + t] == b.inputs[r * T + t + 1]);
    }
  }
  CHECK(reference[0].inputs != reference[1].inputs);

  for (int ranks : {2, 4, 8}) {
    std::vector<BatchLoader> loaders;
    for (int r = 0; r < ranks; ++r) loaders.emplace_back(data, B, T, r, ranks);
    for (const Batch& global : reference) {
      std::vector<int32_t> inputs, targets;
      for (BatchLoader& loader : loaders) {
        Batch local = loader.next();
        CHECK(local.rows == B / ranks);
        inputs.insert(inputs.end(), local.inputs.begin(), local.inputs.end());
        targets.insert(targets.end(), local.targets.begin(), local.targets.end());
      }
      CHECK(inputs == global.inputs);
      CHECK(targets == global.targets);
    }
  }
}

TEST_CASE("loader position restores the stream; microbatches split the rows") {
  auto data = ArithmeticTask({.digits = 2, .seed = 9}).train();
  BatchLoader a(data, 4, 12, 1, 2);
  for (int i = 0; i < 3; ++i) a.next();
  CHECK(a.position() == 3);
  BatchLoader b(data, 4, 12, 1, 2);
  b.set_position(a.position());
  Batch from_a = a.next(), from_b = b.next();
  CHECK(from_a.inputs == from_b.inputs);
  CHECK(from_a.targets == from_b.targets);

  BatchLoader whole(data, 6, 4);
  Batch batch = whole.next();
  std::vector<int32_t> joined;
  for (int j = 0; j < 3; ++j) {
    Batch micro = batch.microbatch(j, 3);
    CHECK(micro.rows == 2);
    joined.insert(joined.end(), micro.inputs.begin(), micro.inputs.end());
  }
  CHECK(joined == batch.inputs);
  CHECK_THROWS_AS(batch.microbatch(0, 4), UserError);
}

TEST_CASE("loader rejects impossible sizes with a UserError") {
  auto data = ArithmeticTask({}).train();
  CHECK(user_error_of([&] { BatchLoader(data, 6, 8, 0, 4); }).find("global batch 6 is not divisible by 4") !=
        std::string::npos);
  CHECK_THROWS_AS(BatchLoader(data, 0, 8), UserError);
  auto small = std::make_shared<TokenDataset>(std::vector<uint16_t>(10, 1), "small.txt");
  CHECK(user_error_of([&] { BatchLoader(small, 2, 16); }).find("small.txt") != std::string::npos);
  CHECK_THROWS_AS(ArithmeticTask({.digits = 10}), UserError);
}

TEST_CASE("a --data pattern reads every matching file in name order; no match is a clear error") {
  TempDir dir;
  write_shard(dir.file("train_002.bin"), std::vector<uint16_t>{5, 6});
  write_shard(dir.file("train_001.bin"), std::vector<uint16_t>{1, 2, 3});
  write_shard(dir.file("val_001.bin"), std::vector<uint16_t>{9});
  CHECK(expand_data_paths(dir.file("train_001.bin")) == std::vector<std::string>{dir.file("train_001.bin")});
  CHECK(expand_data_paths(dir.file("train_*.bin")) ==
        std::vector<std::string>{dir.file("train_001.bin"), dir.file("train_002.bin")});
  CHECK(read_token_files(dir.file("train_*.bin")) == std::vector<uint16_t>{1, 2, 3, 5, 6});
  CHECK(read_token_files(dir.file("val_00?.bin")) == std::vector<uint16_t>{9});
  CHECK(user_error_of([&] { expand_data_paths(dir.file("test_*.bin")); }).find("matches no file") != std::string::npos);
}
