#include "framework/file_seal.h"

#include <cstring>
#include <fstream>
#include <vector>

#include <zlib.h>

#include "framework/error.h"

namespace shardlab {
namespace {

constexpr char kMagic[16] = "shardlab-seal";  // NUL-padded to 16 bytes
constexpr int64_t kHeaderBytes = 32;          // magic, size, checksum

// CRC-32 (zlib's, as Python's zlib.crc32) of the rest of a stream.
uint64_t checksum(std::istream& in) {
  uLong crc = crc32(0L, Z_NULL, 0);
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(buffer.data()), static_cast<uInt>(in.gcount()));
  }
  return crc;
}

uint64_t file_size(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  return in ? static_cast<uint64_t>(in.tellg()) : 0;
}

uint64_t checksum_after_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(kHeaderBytes);
  return checksum(in);
}

}  // namespace

void seal_file(const std::string& path) {
  const uint64_t size = file_size(path);
  if (size < static_cast<uint64_t>(kSealBytes)) {
    throw UserError("cannot seal '" + path + "': it has " + std::to_string(size) + " bytes, fewer than its " +
                    std::to_string(kSealBytes) + "-byte header; check that the disk is not full");
  }
  char header[kHeaderBytes] = {};
  std::memcpy(header, kMagic, sizeof kMagic);
  const uint64_t sum = checksum_after_header(path);
  std::memcpy(header + 16, &size, 8);  // little-endian on every machine shardlab builds for
  std::memcpy(header + 24, &sum, 8);
  std::fstream out(path, std::ios::binary | std::ios::in | std::ios::out);
  out.write(header, kHeaderBytes);
  out.flush();
  if (!out) throw UserError("cannot write the seal of '" + path + "'; check that the disk is not full");
}

SealCheck check_seal(const std::string& path) {
  char header[kHeaderBytes] = {};
  std::ifstream in(path, std::ios::binary);
  in.read(header, kHeaderBytes);
  if (in.gcount() != kHeaderBytes || std::memcmp(header, kMagic, sizeof kMagic) != 0) return {SealCheck::kUnsealed, ""};
  uint64_t size = 0, sum = 0;
  std::memcpy(&size, header + 16, 8);
  std::memcpy(&sum, header + 24, 8);
  const uint64_t actual = file_size(path);
  if (actual != size) {
    return {SealCheck::kBroken, "has " + std::to_string(actual) + " bytes but was sealed with " +
                                    std::to_string(size) + " (truncated or extended)"};
  }
  if (checksum_after_header(path) != sum) return {SealCheck::kBroken, "does not match its checksum (damaged bytes)"};
  return {SealCheck::kSealed, ""};
}

}  // namespace shardlab
