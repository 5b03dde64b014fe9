// llm.c's GPT-2 model file (framework/llmc_model.h): export then import is bit-exact; the
// file has llm.c's header, tensor sizes and zero vocabulary padding; version 5 (bf16) reads
// as its values widened; a file with another magic or version, a short or long file, a
// non-zero padding row, or a model llm.c cannot hold is a UserError naming it.
// (tests/llmc_convert.sh checks the layout against an independent numpy reader and writer.)
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "framework/llmc_model.h"
#include "framework/ops/bf16.h"
#include "tests/temp_dir.h"
#include "tests/user_error.h"

using namespace shardlab;
using shardlab::testing::user_error_of;

namespace {

using Params = std::map<std::string, std::vector<float>>;

// gpt-tiny as llm.c's GPT-2 has it (an MLP of 4 D), with a vocabulary to pad: V 200 -> Vp 256.
nn::ModelConfig tiny() {
  nn::ModelConfig c = nn::ModelConfig::preset("gpt-tiny");
  c.vocab = 200;
  c.context = 8;
  c.d_ff = 4 * c.d_model;
  return c;
}

ParamSource distinct_values(Params& made) {
  return [&made](const std::string& name, const Shape& shape) {
    std::vector<float> v(static_cast<size_t>(numel_of(shape)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(made.size() * 10000 + i) * 0.001f + 0.1f;
    made[name] = v;
    return v;
  };
}

Params import_all(const std::string& path, const nn::ModelConfig& c) {
  Params got;
  llmc::import_model(path, c, [&](const std::string& name, const Shape& shape, std::span<const float> v) {
    CHECK(static_cast<int64_t>(v.size()) == numel_of(shape));
    got[name] = std::vector<float>(v.begin(), v.end());
  });
  return got;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}
int32_t int_at(const std::string& bytes, size_t index) {
  int32_t v = 0;
  std::memcpy(&v, bytes.data() + 4 * index, 4);
  return v;
}
void set_int(std::string& bytes, size_t index, int32_t v) { std::memcpy(bytes.data() + 4 * index, &v, 4); }
float float_at(const std::string& bytes, size_t index) {  // the index-th fp32 value after the header
  float v = 0;
  std::memcpy(&v, bytes.data() + 1024 + 4 * index, 4);
  return v;
}

}  // namespace

TEST_CASE("llm.c: export then import is bit-exact; the file has llm.c's header, sizes and zero padding") {
  TempDir dir;
  const nn::ModelConfig c = tiny();
  const int64_t V = c.vocab, Vp = 256, C = c.d_model, L = c.n_layers, T = c.context;
  Params made;
  llmc::export_model(c, distinct_values(made), dir.file("m.bin"));
  const std::string bytes = read_bytes(dir.file("m.bin"));
  const std::vector<int32_t> header = {20240326, 3, static_cast<int32_t>(T), static_cast<int32_t>(V),
                                       static_cast<int32_t>(L), static_cast<int32_t>(c.n_heads),
                                       static_cast<int32_t>(C), static_cast<int32_t>(Vp)};
  for (size_t i = 0; i < 256; ++i) CHECK(int_at(bytes, i) == (i < header.size() ? header[i] : 0));
  // fill_in_parameter_sizes: Vp C + T C + L (12 C^2 + 13 C) + 2 C values.
  CHECK(bytes.size() == static_cast<size_t>(1024 + 4 * (Vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C)));
  for (int64_t i = V * C; i < Vp * C; ++i) REQUIRE(float_at(bytes, i) == 0.0f);
  CHECK(float_at(bytes, V * C - 1) == made.at("wte.weight").back());
  CHECK(float_at(bytes, Vp * C) == made.at("wpe.weight")[0]);
  CHECK(float_at(bytes, Vp * C + T * C + C) == made.at("blocks.1.norm1.weight")[0]);  // ln1w stacked over layers

  CHECK(llmc::read_config(dir.file("m.bin")).describe() == c.describe());
  CHECK(import_all(dir.file("m.bin"), c) == made);

  // Version 5: the same tensors in bf16 read as their bf16 values.
  std::string bf16 = bytes.substr(0, 1024);
  set_int(bf16, 1, 5);
  for (size_t i = 0; i < (bytes.size() - 1024) / 4; ++i) {
    const Bf16 b = to_bf16(float_at(bytes, i));
    bf16.append(reinterpret_cast<const char*>(&b.bits), 2);
  }
  write_bytes(dir.file("bf16.bin"), bf16);
  const Params got = import_all(dir.file("bf16.bin"), c);
  for (const auto& [name, values] : made) {
    std::vector<float> rounded(values.size());
    round_bf16(values.data(), rounded.data(), static_cast<int64_t>(values.size()));
    CHECK_MESSAGE(got.at(name) == rounded, name);
  }
}

TEST_CASE("llm.c: a file of another kind, short, long or with non-zero padding is a UserError naming it") {
  TempDir dir;
  const nn::ModelConfig c = tiny();
  Params made;
  llmc::export_model(c, distinct_values(made), dir.file("m.bin"));
  const std::string good = read_bytes(dir.file("m.bin"));
  const std::string path = dir.file("bad.bin");
  const auto error_for = [&](const std::string& bytes) {
    write_bytes(path, bytes);
    const std::string message = user_error_of([&] { llmc::read_config(path); });
    CHECK(message.find(path) != std::string::npos);
    return message;
  };
  std::string b = good;
  set_int(b, 0, 20240520);
  CHECK(error_for(b).find("starts with 20240520, not llm.c's model magic 20240326 (that is llm.c's token shard") !=
        std::string::npos);
  b = good;
  set_int(b, 1, 2);
  CHECK(error_for(b).find("version 2; shardlab reads version 3 (fp32) and 5 (bf16)") != std::string::npos);
  CHECK(error_for(good.substr(0, good.size() - 4)).find("the file is truncated") != std::string::npos);
  CHECK(error_for(good + "xxxx").find("has trailing bytes") != std::string::npos);
  CHECK(error_for(good.substr(0, 100)).find("it has 100 bytes, fewer than the 1024 of llm.c's header") !=
        std::string::npos);
  b = good;
  set_int(b, 6, 0);
  CHECK(error_for(b).find("header field C is 0, not between 1 and") != std::string::npos);
  b = good;
  set_int(b, 5, 3);
  CHECK(error_for(b).find("channels C 16 are not divisible by the heads NH 3") != std::string::npos);
  b = good;
  set_int(b, 7, 100);
  CHECK(error_for(b).find("padded vocabulary Vp 100 is smaller than the vocabulary V 200") != std::string::npos);

  // A padding row that is not zero: the header's V does not fit the weights.
  b = good;
  const float one = 1.0f;
  std::memcpy(b.data() + 1024 + 4 * (230 * c.d_model + 3), &one, 4);
  write_bytes(path, b);
  CHECK(user_error_of([&] { import_all(path, c); })
            .find("row 230 of wte holds 1, but rows 200 to 255 pad the vocabulary (V 200, Vp 256)") != std::string::npos);
  // The model asked for is not the file's.
  nn::ModelConfig other = c;
  other.n_layers = 3;
  CHECK(user_error_of([&] { import_all(dir.file("m.bin"), other); }).find("but the model is") != std::string::npos);
}

TEST_CASE("llm.c: a model its GPT-2 cannot hold is refused on export") {
  TempDir dir;
  Params made;
  const auto refusal = [&](const nn::ModelConfig& c) {
    return user_error_of([&] { llmc::export_model(c, distinct_values(made), dir.file("x.bin")); });
  };
  nn::ModelConfig llama = nn::ModelConfig::preset("llama-tiny");
  CHECK(refusal(llama).find("llm.c's model file holds GPT-2 models, not llama; export a llama model with --format hf") !=
        std::string::npos);
  nn::ModelConfig narrow = tiny();
  narrow.d_ff = 2 * narrow.d_model;
  CHECK(refusal(narrow).find("whose MLP width is 4 x d_model (64), not d_ff 32") != std::string::npos);
  nn::ModelConfig eps = tiny();
  eps.norm_eps = 1e-6f;
  CHECK(refusal(eps).find("whose LayerNorm eps is 1e-5, not 1e-06") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.file("x.bin")));
}
