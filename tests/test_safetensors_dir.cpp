// Sharded safetensors directories (framework/safetensors_dir.h): the split follows
// huggingface_hub's, a round trip through shards is bit-exact, the index is what
// transformers writes, a later export replaces an earlier one's files, and a missing shard,
// a tensor the index lacks or a malformed index is a UserError naming it.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "framework/safetensors_dir.h"
#include "tests/temp_dir.h"
#include "tests/user_error.h"

using namespace shardlab;
using shardlab::testing::user_error_of;

namespace {

std::string tensor_name(size_t i) {  // "t" + to_string(i), which GCC 12 warns of wrongly (-Wrestrict)
  std::string name = "t";
  return name += std::to_string(i);
}

// Tensors of the given sizes in bytes (multiples of 4), named t0, t1, ..., each value distinct.
struct Tensors {
  std::vector<std::vector<float>> values;
  std::vector<SafetensorsEntry> entries;
  explicit Tensors(const std::vector<int64_t>& bytes) {
    for (size_t i = 0; i < bytes.size(); ++i) {
      std::vector<float> v(static_cast<size_t>(bytes[i] / 4));
      for (size_t j = 0; j < v.size(); ++j) v[j] = static_cast<float>(i * 1000 + j) + 0.25f;
      values.push_back(std::move(v));
    }
    for (size_t i = 0; i < bytes.size(); ++i) {
      entries.push_back({tensor_name(i), {static_cast<int64_t>(values[i].size())}, values[i]});
    }
  }
};

std::vector<std::vector<size_t>> members(const std::vector<std::pair<std::string, std::vector<size_t>>>& plan) {
  std::vector<std::vector<size_t>> out;
  for (const auto& [name, m] : plan) out.push_back(m);
  return out;
}

}  // namespace

TEST_CASE("shards are split as huggingface_hub splits them") {
  // Its docstring's example: sizes [6, 6, 2, 6, 2, 2] under 10 give [6], [6+2], [6+2+2].
  const Tensors doc({24, 24, 8, 24, 8, 8});
  const auto plan = plan_shards(doc.entries, 40);
  CHECK(members(plan) == std::vector<std::vector<size_t>>{{0}, {1, 2}, {3, 4, 5}});
  CHECK(plan[0].first == "model-00001-of-00003.safetensors");
  CHECK(plan[2].first == "model-00003-of-00003.safetensors");
  // Its test of a tensor above the limit: [6, 10, 30, 2, 2] under 10 -> the 30 alone, in a
  // shard placed before the one being filled.
  const Tensors big({24, 40, 120, 8, 8});
  CHECK(members(plan_shards(big.entries, 40)) == std::vector<std::vector<size_t>>{{0}, {2}, {1}, {3, 4}});
  // Everything in one shard: model.safetensors.
  const auto one = plan_shards(doc.entries, 5'000'000'000);
  REQUIRE(one.size() == 1);
  CHECK(one[0].first == "model.safetensors");
}

TEST_CASE("a round trip through shards is bit-exact, with transformers' index; a later export replaces the files") {
  TempDir dir;
  const Tensors t({24, 40, 120, 8, 8});
  write_safetensors_dir(dir.path(), t.entries, 40);
  const SafetensorsDir read(dir.path());
  CHECK(read.sharded());
  CHECK(read.file_count() == 4);
  CHECK(read.names() == std::vector<std::string>{"t0", "t1", "t2", "t3", "t4"});
  for (size_t i = 0; i < t.values.size(); ++i) {
    CHECK(read.read(tensor_name(i), {static_cast<int64_t>(t.values[i].size())}) == t.values[i]);
  }
  CHECK(read.file_of("t2") == dir.file("model-00002-of-00004.safetensors"));
  const nlohmann::json index = nlohmann::json::parse(std::ifstream(dir.file("model.safetensors.index.json")));
  CHECK(index == nlohmann::json::parse(R"({"metadata": {"total_size": 200},
      "weight_map": {"t0": "model-00001-of-00004.safetensors", "t1": "model-00003-of-00004.safetensors",
                     "t2": "model-00002-of-00004.safetensors", "t3": "model-00004-of-00004.safetensors",
                     "t4": "model-00004-of-00004.safetensors"}})"));
  std::ifstream in(dir.file("model.safetensors.index.json"));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == index.dump(2) + "\n");  // json.dumps(index, indent=2, sort_keys=True) + "\n"
  CHECK(SafetensorsFile(dir.file("model-00001-of-00004.safetensors")).metadata().at("format") == "pt");

  // One file now: the index and shards go; shards again: the single file goes.
  write_safetensors_dir(dir.path(), t.entries);
  CHECK(std::filesystem::exists(dir.file("model.safetensors")));
  CHECK_FALSE(std::filesystem::exists(dir.file("model.safetensors.index.json")));
  CHECK_FALSE(std::filesystem::exists(dir.file("model-00001-of-00004.safetensors")));
  CHECK_FALSE(SafetensorsDir(dir.path()).sharded());
  write_safetensors_dir(dir.path(), t.entries, 100);
  CHECK_FALSE(std::filesystem::exists(dir.file("model.safetensors")));
  CHECK(SafetensorsDir(dir.path()).file_count() == 2);  // [120], [24 + 40 + 8 + 8]
  CHECK(std::filesystem::exists(dir.file("model-00002-of-00002.safetensors")));
  CHECK_FALSE(std::filesystem::exists(dir.file("model-00004-of-00004.safetensors")));
}

TEST_CASE("a missing shard, a tensor absent from the index or a malformed index is a UserError naming it") {
  TempDir dir;
  const Tensors t({24, 40, 120, 8, 8});
  write_safetensors_dir(dir.path(), t.entries, 40);
  const std::string index_path = dir.file("model.safetensors.index.json");
  const nlohmann::json index = nlohmann::json::parse(std::ifstream(index_path));
  const auto open_with = [&](const nlohmann::json& j) {
    std::ofstream(index_path) << j.dump();
    return user_error_of([&] { SafetensorsDir d(dir.path()); });
  };
  SUBCASE("a missing shard") {
    std::filesystem::remove(dir.file("model-00003-of-00004.safetensors"));
    const std::string m = user_error_of([&] { SafetensorsDir d(dir.path()); });
    CHECK(m.find(index_path) != std::string::npos);
    CHECK(m.find("shard 'model-00003-of-00004.safetensors', which holds tensor 't1' and 0 others, does not exist") !=
          std::string::npos);
  }
  SUBCASE("a tensor absent from the index") {
    nlohmann::json j = index;
    j["weight_map"].erase("t3");
    std::ofstream(index_path) << j.dump();
    const SafetensorsDir d(dir.path());
    CHECK_FALSE(d.has("t3"));
    CHECK(user_error_of([&] { d.read("t3", {2}); }).find("no tensor 't3' in its weight_map (4 tensors)") !=
          std::string::npos);
  }
  SUBCASE("a tensor the index puts in a shard that lacks it") {
    nlohmann::json j = index;
    j["weight_map"]["t0"] = "model-00002-of-00004.safetensors";
    CHECK(open_with(j).find("tensor 't0' is mapped to 'model-00002-of-00004.safetensors', which has no such tensor") !=
          std::string::npos);
  }
  SUBCASE("a file outside the directory") {
    nlohmann::json j = index;
    j["weight_map"]["t0"] = "../model-00001-of-00004.safetensors";
    CHECK(open_with(j).find("not the name of a file in the directory") != std::string::npos);
  }
  SUBCASE("no weight_map") {
    CHECK(open_with({{"metadata", index["metadata"]}}).find("no \"weight_map\"") != std::string::npos);
  }
  SUBCASE("not JSON") {
    std::ofstream(index_path) << "{\"weight_map\": ";
    CHECK(user_error_of([&] { SafetensorsDir d(dir.path()); }).find("not valid JSON") != std::string::npos);
  }
  SUBCASE("a corrupt shard names the shard") {
    std::ofstream(dir.file("model-00002-of-00004.safetensors"), std::ios::trunc) << "abc";
    CHECK(user_error_of([&] { SafetensorsDir d(dir.path()); }).find("model-00002-of-00004.safetensors") !=
          std::string::npos);
  }
  SUBCASE("no weights at all") {
    TempDir empty;
    CHECK(user_error_of([&] { SafetensorsDir d(empty.path()); }).find("holds neither model.safetensors nor") !=
          std::string::npos);
  }
}
