#include "framework/file_seal.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <vector>

#include <zlib.h>

#include "framework/error.h"

namespace shardlab {
namespace {

constexpr char kMagic[16] = "shardlab-seal";  // NUL-padded to 16 bytes
constexpr int64_t kHeaderBytes = 32;          // magic, size, checksum

// Threads checksum pieces of at least this many bytes: below it one pass is as fast.
constexpr uint64_t kPieceBytes = uint64_t{16} << 20;

// CRC-32 (zlib's, as Python's zlib.crc32) of bytes [begin, end) of `path`; a short file
// ends it early (the caller compares sizes first).
uLong checksum_range(const std::string& path, uint64_t begin, uint64_t end) {
  uLong crc = crc32(0L, Z_NULL, 0);
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(begin));
  std::vector<char> buffer(1 << 20);
  for (uint64_t left = end - begin; left > 0 && in;) {
    in.read(buffer.data(), static_cast<std::streamsize>(std::min<uint64_t>(left, buffer.size())));
    const auto got = static_cast<uint64_t>(in.gcount());
    crc = crc32(crc, reinterpret_cast<const Bytef*>(buffer.data()), static_cast<uInt>(got));
    left -= got;
  }
  return crc;
}

uint64_t file_size(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  return in ? static_cast<uint64_t>(in.tellg()) : 0;
}

// The CRC-32 of every byte after the header of `path`, a file of `size` bytes (its callers
// have checked the size already). The OpenMP threads take consecutive pieces
// and zlib's crc32_combine joins their CRCs: the value one pass gives. Every save and every
// load runs it; a 1.5 GB GPT-2 checkpoint (weights and AdamW moments) took 0.43-0.49 s on
// one thread and 0.23-0.25 s on two, read from the page cache.
uint64_t checksum_after_header(const std::string& path, uint64_t size) {
  const uint64_t header = kHeaderBytes, bytes = size > header ? size - header : 0;
  const int pieces = static_cast<int>(std::clamp<uint64_t>(bytes / kPieceBytes, 1, omp_get_max_threads()));
  std::vector<uLong> crcs(pieces);
  const auto begin = [&](int i) { return header + bytes * static_cast<uint64_t>(i) / pieces; };
#pragma omp parallel for num_threads(pieces) schedule(static, 1) if (pieces > 1)
  for (int i = 0; i < pieces; ++i) crcs[i] = checksum_range(path, begin(i), begin(i + 1));
  uLong crc = crcs[0];
  for (int i = 1; i < pieces; ++i) crc = crc32_combine(crc, crcs[i], static_cast<z_off_t>(begin(i + 1) - begin(i)));
  return crc;
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
  const uint64_t sum = checksum_after_header(path, size);
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
  if (checksum_after_header(path, size) != sum) return {SealCheck::kBroken, "does not match its checksum (damaged bytes)"};
  return {SealCheck::kSealed, ""};
}

}  // namespace shardlab
