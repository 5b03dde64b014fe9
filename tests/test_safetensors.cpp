// safetensors files (framework/safetensors.h): fp32 round trips, BF16/F16 reads, and every
// kind of corrupt or mismatched file refused with a UserError naming the file and the
// tensor or field.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "framework/safetensors.h"
#include "tests/temp_dir.h"
#include "tests/user_error.h"

using namespace shardlab;
using shardlab::testing::user_error_of;

namespace {

// A file of `header` (as given, unpadded) followed by `data`.
void write_raw(const std::string& path, const std::string& header, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << data;
}

}  // namespace

TEST_CASE("fp32 tensors and metadata round trip through a safetensors file") {
  TempDir dir;
  const std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, 7.0f};
  const std::vector<float> b = {42.0f};
  write_safetensors(dir.file("m.safetensors"), {{"z.weight", {2, 3}, a}, {"a.bias", {}, b}}, {{"format", "pt"}});
  const SafetensorsFile f(dir.file("m.safetensors"));
  CHECK(f.names() == std::vector<std::string>{"a.bias", "z.weight"});
  CHECK(f.shape("z.weight") == Shape{2, 3});
  CHECK(f.dtype("z.weight") == "F32");
  CHECK(f.metadata().at("format") == "pt");
  CHECK(f.read("z.weight", {2, 3}) == a);
  CHECK(f.read("a.bias", {}) == b);
  // The data starts 8-byte aligned, as the safetensors library writes it.
  std::ifstream in(dir.file("m.safetensors"), std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  CHECK(n % 8 == 0);
}

TEST_CASE("BF16 and F16 tensors are read as fp32") {
  TempDir dir;
  // bf16: 1.0 = 0x3f80, -2.5 = 0xc020; f16: 1.0 = 0x3c00, -0.5 = 0xb800, 65504 = 0x7bff, 2^-24 = 0x0001
  const uint16_t bf16[2] = {0x3f80, 0xc020}, f16[4] = {0x3c00, 0xb800, 0x7bff, 0x0001};
  std::string data(reinterpret_cast<const char*>(bf16), 4);
  data.append(reinterpret_cast<const char*>(f16), 8);
  write_raw(dir.file("h.safetensors"),
            R"({"b": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]},
                "h": {"dtype": "F16", "shape": [2, 2], "data_offsets": [4, 12]}})",
            data);
  const SafetensorsFile f(dir.file("h.safetensors"));
  CHECK(f.read("b", {2}) == std::vector<float>{1.0f, -2.5f});
  CHECK(f.read("h", {2, 2}) == std::vector<float>{1.0f, -0.5f, 65504.0f, 5.9604645e-08f});
}

TEST_CASE("corrupt and mismatched safetensors files are UserErrors naming the file and the tensor or field") {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  const std::string eight(8, '\0');
  const auto error_for = [&](const std::string& header, const std::string& data) {
    write_raw(path, header, data);
    const std::string message = user_error_of([&] { SafetensorsFile f(path); });
    CHECK(message.find(path) != std::string::npos);
    return message;
  };
  SUBCASE("the header length runs past the end of the file") {
    std::ofstream(path, std::ios::binary) << std::string("\xff\xff\x00\x00\x00\x00\x00\x00{}", 10);
    CHECK(user_error_of([&] { SafetensorsFile f(path); }).find("runs past the end of the file") != std::string::npos);
  }
  SUBCASE("a file shorter than the header length") {
    std::ofstream(path, std::ios::binary) << "abc";
    CHECK(user_error_of([&] { SafetensorsFile f(path); }).find("fewer than the 8") != std::string::npos);
  }
  SUBCASE("a missing file") {
    CHECK(user_error_of([&] { SafetensorsFile f(dir.file("none")); }).find("cannot open") != std::string::npos);
  }
  SUBCASE("a header that is not JSON") { CHECK(error_for("{\"a\": [", eight).find("not valid JSON") != std::string::npos); }
  SUBCASE("offsets past the data") {
    const std::string m = error_for(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", eight);
    CHECK(m.find("tensor 'w'") != std::string::npos);
    CHECK(m.find("outside the 8 data bytes") != std::string::npos);
  }
  SUBCASE("offsets that disagree with the shape") {
    const std::string m = error_for(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", eight);
    CHECK(m.find("tensor 'w': data_offsets span 8 bytes, but shape [3] of F32 needs 12") != std::string::npos);
  }
  SUBCASE("overlapping tensors") {
    const std::string m = error_for(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                       "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                                    eight);
    CHECK(m.find("tensors 'a' and 'b' overlap") != std::string::npos);
  }
  SUBCASE("an unknown dtype") {
    const std::string m = error_for(R"({"w": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})", eight);
    CHECK(m.find("tensor 'w' has dtype 'I64'") != std::string::npos);
  }
  SUBCASE("a missing field") {
    CHECK(error_for(R"({"w": {"dtype": "F32", "shape": [2]}})", eight).find("tensor 'w' has no field 'data_offsets'") !=
          std::string::npos);
  }
  SUBCASE("a negative dimension") {
    CHECK(error_for(R"({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", eight)
              .find("tensor 'w': field 'shape' holds -2") != std::string::npos);
  }
  SUBCASE("a missing or misshapen tensor when read") {
    write_raw(path, R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", eight);
    const SafetensorsFile f(path);
    CHECK(user_error_of([&] { f.read("v", {2}); }).find("no tensor 'v'") != std::string::npos);
    CHECK(user_error_of([&] { f.read("w", {1, 2}); }).find("tensor 'w' has shape [2] but the model expects [1, 2]") !=
          std::string::npos);
  }
}
