#include "framework/safetensors_dir.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "framework/error.h"
#include "framework/output_path.h"

namespace shardlab {
namespace {

namespace fs = std::filesystem;

// model-00001-of-00003.safetensors, as huggingface_hub's FILENAME_PATTERN formats a suffix.
std::string shard_name(size_t index, size_t count) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return name;
}

bool is_shard_name(const std::string& name) {
  static const std::regex pattern("model-[0-9]{5,}-of-[0-9]{5,}\\.safetensors");
  return std::regex_match(name, pattern);
}

uint64_t bytes_of(const SafetensorsEntry& t) { return t.data.size() * sizeof(float); }

}  // namespace

SafetensorsDir::SafetensorsDir(const std::string& dir) : dir_(dir) {
  const std::string single = dir + "/" + kSafetensorsFile, index = dir + "/" + kSafetensorsIndex;
  if (fs::exists(single) || !fs::exists(index)) {
    if (!fs::exists(single)) {
      throw UserError("'" + dir + "' holds neither " + kSafetensorsFile + " nor " + kSafetensorsIndex +
                      "; a Hugging Face model directory holds config.json and its weights");
    }
    files_.push_back(std::make_unique<SafetensorsFile>(single));
    for (const std::string& name : files_[0]->names()) where_[name] = files_[0].get();
    return;
  }
  const auto fail = [&](const std::string& what) { return UserError("safetensors index '" + index + "': " + what); };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(std::ifstream(index));
  } catch (const nlohmann::json::exception& e) {
    throw fail(std::string("not valid JSON (") + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("weight_map") || !j.at("weight_map").is_object()) {
    throw fail("no \"weight_map\" object mapping each tensor to its shard file");
  }
  sharded_ = true;
  std::map<std::string, std::vector<std::string>> by_file;  // shard -> the tensors the index puts there
  for (const auto& [tensor, file] : j.at("weight_map").items()) {
    if (!file.is_string()) throw fail("tensor '" + tensor + "' maps to " + file.dump() + ", not a file name");
    const std::string name = file.get<std::string>();
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
      throw fail("tensor '" + tensor + "' maps to '" + name + "', not the name of a file in the directory");
    }
    by_file[name].push_back(tensor);
  }
  for (const auto& [name, tensors] : by_file) {
    const std::string path = dir + "/" + name;
    if (!fs::exists(path)) {
      throw fail("shard '" + name + "', which holds tensor '" + tensors[0] + "' and " +
                 std::to_string(tensors.size() - 1) +
                 " others, does not exist; copy every file the index names into the directory");
    }
    files_.push_back(std::make_unique<SafetensorsFile>(path));
    for (const std::string& tensor : tensors) {
      if (!files_.back()->has(tensor)) {
        throw fail("tensor '" + tensor + "' is mapped to '" + name + "', which has no such tensor");
      }
      where_[tensor] = files_.back().get();
    }
  }
}

SafetensorsDir::~SafetensorsDir() = default;

bool SafetensorsDir::sharded() const { return sharded_; }
int64_t SafetensorsDir::file_count() const { return static_cast<int64_t>(files_.size()); }

std::vector<std::string> SafetensorsDir::names() const {
  std::vector<std::string> out;
  for (const auto& [name, file] : where_) out.push_back(name);
  return out;
}

bool SafetensorsDir::has(const std::string& name) const { return where_.count(name) > 0; }

const SafetensorsFile& SafetensorsDir::file(const std::string& name) const {
  const auto it = where_.find(name);
  if (it != where_.end()) return *it->second;
  if (!sharded_) return *files_[0];  // its own "no tensor" error names the file
  throw UserError("safetensors index '" + dir_ + "/" + kSafetensorsIndex + "': no tensor '" + name +
                  "' in its weight_map (" + std::to_string(where_.size()) +
                  " tensors); the export is incomplete or of another model");
}

Shape SafetensorsDir::shape(const std::string& name) const { return file(name).shape(name); }
const std::string& SafetensorsDir::file_of(const std::string& name) const { return file(name).path(); }
std::vector<float> SafetensorsDir::read(const std::string& name, const Shape& expected) const {
  return file(name).read(name, expected);
}

std::vector<std::pair<std::string, std::vector<size_t>>> plan_shards(const std::vector<SafetensorsEntry>& tensors,
                                                                     int64_t max_shard_bytes) {
  SL_ASSERT(max_shard_bytes > 0);
  const uint64_t limit = static_cast<uint64_t>(max_shard_bytes);
  std::vector<std::vector<size_t>> shards;
  std::vector<size_t> current;
  uint64_t current_bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t bytes = bytes_of(tensors[i]);
    if (bytes > limit) {  // alone, in a shard placed before the one being filled
      shards.push_back({i});
      continue;
    }
    if (current_bytes + bytes > limit) {
      shards.push_back(std::move(current));
      current.clear();
      current_bytes = 0;
    }
    current.push_back(i);
    current_bytes += bytes;
  }
  if (!current.empty()) shards.push_back(std::move(current));
  std::vector<std::pair<std::string, std::vector<size_t>>> out;
  for (size_t s = 0; s < shards.size(); ++s) {
    out.emplace_back(shards.size() == 1 ? std::string(kSafetensorsFile) : shard_name(s, shards.size()), shards[s]);
  }
  return out;
}

void write_safetensors_dir(const std::string& dir, const std::vector<SafetensorsEntry>& tensors,
                           int64_t max_shard_bytes, const std::map<std::string, std::string>& metadata) {
  if (max_shard_bytes <= 0) throw UserError("the largest shard must be positive, got " + std::to_string(max_shard_bytes));
  const auto plan = plan_shards(tensors, max_shard_bytes);
  std::set<std::string> written;
  nlohmann::json weight_map = nlohmann::json::object();
  uint64_t total_size = 0;
  for (const auto& [name, members] : plan) {
    std::vector<SafetensorsEntry> shard;
    for (const size_t i : members) {
      shard.push_back(tensors[i]);
      weight_map[tensors[i].name] = name;
      total_size += bytes_of(tensors[i]);
    }
    write_safetensors(dir + "/" + name, shard, metadata);
    written.insert(name);
  }
  if (plan.size() > 1) {
    const nlohmann::json index = {{"metadata", {{"total_size", total_size}}}, {"weight_map", weight_map}};
    const std::string path = dir + "/" + kSafetensorsIndex;
    write_file(path + ".tmp", index.dump(2) + "\n", "safetensors index");
    fs::rename(path + ".tmp", path);
    written.insert(kSafetensorsIndex);
  }
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    const bool ours = name == kSafetensorsFile || name == kSafetensorsIndex || is_shard_name(name);
    if (ours && !written.count(name)) fs::remove(e.path());
  }
}

}  // namespace shardlab
