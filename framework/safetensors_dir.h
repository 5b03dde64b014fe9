// The weights of a Hugging Face model directory: one safetensors file, or several (shards)
// with an index, as transformers' save_pretrained writes them past its max_shard_size.
//
//   dir/model.safetensors                       one file; or
//   dir/model.safetensors.index.json            {"metadata": {"total_size": 2936012800},
//   dir/model-00001-of-00003.safetensors ...     "weight_map": {"lm_head.weight": "model-00003-of-00003.safetensors", ...}}
//
// Reading follows transformers: model.safetensors when it is there, else the index. The
// index is checked when the directory is opened: valid JSON with a "weight_map" object of
// plain file names in the directory, every listed shard present, and every tensor it lists
// in the shard it names (each shard is checked as SafetensorsFile checks it). A tensor
// absent from the index, a missing shard or one that lacks a tensor the index gives it is
// a UserError naming the index, the tensor and the file.
//
// write_safetensors_dir splits exactly as huggingface_hub's split_state_dict_into_shards
// (which save_pretrained calls): tensors in the order given, a new shard when the next
// tensor would take the current one past max_shard_bytes, a tensor larger than the limit
// alone in a shard of its own; one shard is written as model.safetensors with no index,
// several as model-0000i-of-0000N.safetensors plus the index (total_size: the bytes of all
// tensors; keys sorted, two-space indent, as transformers writes it). Each file is written
// atomically, the index after its shards; the files of an earlier export in the directory
// that this one does not write (model.safetensors, the index, other shards) are removed,
// so a loader never mixes two exports.
//
//   write_safetensors_dir("out/hf", entries, 100'000'000);  // shards of at most 100 MB
//   SafetensorsDir weights("out/hf");
//   std::vector<float> wte = weights.read("transformer.wte.weight", {V, D});
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "framework/safetensors.h"

namespace shardlab {

// transformers' default max_shard_size, "5GB" (5 * 10^9 bytes).
constexpr int64_t kDefaultMaxShardBytes = 5'000'000'000;
constexpr const char* kSafetensorsFile = "model.safetensors";
constexpr const char* kSafetensorsIndex = "model.safetensors.index.json";

class SafetensorsDir {
 public:
  // Opens and validates the directory's weights; UserError when it has none or they are malformed.
  explicit SafetensorsDir(const std::string& dir);
  ~SafetensorsDir();
  SafetensorsDir(const SafetensorsDir&) = delete;
  SafetensorsDir& operator=(const SafetensorsDir&) = delete;

  bool sharded() const;                    // an index and its shards, not one file
  int64_t file_count() const;              // the safetensors files read
  std::vector<std::string> names() const;  // every tensor, sorted
  bool has(const std::string& name) const;
  Shape shape(const std::string& name) const;  // UserError when missing
  // The file holding `name` (UserError when missing), for messages.
  const std::string& file_of(const std::string& name) const;
  // The tensor as fp32, after checking that its shape is `expected`; UserError when missing.
  std::vector<float> read(const std::string& name, const Shape& expected) const;

 private:
  const SafetensorsFile& file(const std::string& name) const;
  std::string dir_;
  bool sharded_ = false;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> where_;  // tensor -> its file
};

// The shards' file names and contents, as huggingface_hub splits `tensors`: one name
// (model.safetensors) when everything fits in one shard. Exposed for tests.
std::vector<std::pair<std::string, std::vector<size_t>>> plan_shards(const std::vector<SafetensorsEntry>& tensors,
                                                                     int64_t max_shard_bytes);

// Writes dir's weights (the directory must exist); `metadata` goes into every file.
void write_safetensors_dir(const std::string& dir, const std::vector<SafetensorsEntry>& tensors,
                           int64_t max_shard_bytes = kDefaultMaxShardBytes,
                           const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

}  // namespace shardlab
