// File seal: a checksum over a whole file, kept in its first kSealBytes, so that a
// damaged or truncated file is recognised before any parser walks it.
//
// A checkpoint is an HDF5 file created with a userblock of kSealBytes (bytes HDF5 leaves
// to the application). Once the file is complete, seal_file() writes there
//   "shardlab-seal\0\0\0"   16-byte magic
//   uint64 little-endian     the file's size in bytes
//   uint64 little-endian     the CRC-32 (zlib's) of every byte after this header
// and check_seal() recomputes it. HDF5 1.10 can free uninitialised memory while walking a
// damaged file's metadata (seen under ASan with flipped bytes), so a reader checks the
// seal first and never lets HDF5 see a damaged file.
//
//   H5Pset_userblock(fcpl, kSealBytes);  ... write, close ...  seal_file(path);
// (launch/seal_checkpoint.py does the same for a file written elsewhere, e.g. with h5py.)
//   if (const SealCheck c = check_seal(path); c.state == SealCheck::kBroken) throw UserError(c.problem);
#pragma once

#include <cstdint>
#include <string>

namespace shardlab {

inline constexpr int64_t kSealBytes = 512;  // a userblock size HDF5 accepts (a power of 2, >= 512)

// Writes the seal into the first bytes of `path`, which the file leaves free. Throws
// UserError when the file cannot be read or written.
void seal_file(const std::string& path);

struct SealCheck {
  enum State {
    kSealed,    // the seal matches the file's bytes
    kUnsealed,  // no seal: a file written before seals, or not a sealed file at all
    kBroken,    // a seal that does not match: truncated or damaged
  } state;
  std::string problem;  // for kBroken: what does not match
};
SealCheck check_seal(const std::string& path);

}  // namespace shardlab
