// A whole file mapped read-only into memory (mmap, MAP_PRIVATE), unmapped on destruction.
//
// Nothing is read when it opens: the kernel pages in only the bytes that are touched,
// so a reader of a few rows of a large file costs those rows' pages (token shards,
// safetensors weights). Opening never throws; the caller says what a failure means.
//
//   MappedFile file("train_000001.bin");
//   if (!file.ok()) throw UserError("cannot open ...: " + file.error());
//   std::span<const unsigned char> bytes = file.bytes();
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace shardlab {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&&) = delete;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  bool ok() const { return error_.empty(); }
  // Why it could not be opened or mapped (strerror's words); "" when ok().
  const std::string& error() const { return error_; }
  // The file's bytes; empty for an empty file or a failed open.
  std::span<const unsigned char> bytes() const { return {data_, size_}; }
  size_t size() const { return size_; }

 private:
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
  std::string error_;
};

}  // namespace shardlab
