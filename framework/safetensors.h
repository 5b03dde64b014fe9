// safetensors files (Hugging Face's weight format): an 8-byte little-endian header length
// N, an N-byte JSON header, then the raw little-endian tensor bytes.
//
//   {"wte.weight": {"dtype": "F32", "shape": [256, 128], "data_offsets": [0, 131072]},
//    ..., "__metadata__": {"format": "pt"}}
//
// data_offsets are [begin, end) in bytes from the start of the data (just after the
// header). SafetensorsFile maps the file read-only (mmap) and checks the whole header when
// it opens it: the header length against the file's size, the JSON, each entry's dtype
// (F32, BF16 or F16), shape and offsets (inside the data, its byte count = numel x the
// dtype's size, no two tensors overlapping). Anything wrong -- and later a missing tensor
// or one whose shape is not the expected one -- is a UserError naming the file and the
// tensor or field; a corrupt file never crashes the reader. Reads convert to fp32.
//
// write_safetensors writes fp32 ("F32") tensors, in the order given, atomically
// ("<path>.tmp", then rename); the header is padded with spaces to a multiple of 8 bytes,
// as the safetensors library writes it, so the data is aligned.
//
//   write_safetensors("m/model.safetensors", {{"wte.weight", {256, 128}, wte.span()}}, {{"format", "pt"}});
//   SafetensorsFile f("m/model.safetensors");
//   std::vector<float> wte = f.read("wte.weight", {256, 128});
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "framework/tensor.h"

namespace shardlab {

class SafetensorsFile {
 public:
  // Maps and validates the file; UserError when it is missing or malformed.
  explicit SafetensorsFile(std::string path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const;
  std::vector<std::string> names() const;  // sorted; "__metadata__" is not a tensor
  bool has(const std::string& name) const;
  Shape shape(const std::string& name) const;        // UserError when missing
  std::string dtype(const std::string& name) const;  // "F32", "BF16" or "F16"
  const std::map<std::string, std::string>& metadata() const;

  // The tensor as fp32, after checking that its shape is `expected`.
  std::vector<float> read(const std::string& name, const Shape& expected) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct SafetensorsEntry {
  std::string name;
  Shape shape;
  std::span<const float> data;  // numel_of(shape) values, row-major
};

void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace shardlab
