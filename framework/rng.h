// Counter-based random numbers: a value is a pure function of (seed, stream, index).
//
// Parameters are initialised with stream = hash of their name and index = the element's
// position in the *global* (unsharded) tensor, so any sharded layout that fills its
// slice of a parameter gets exactly the values the single-process run has.
//
//   float u = Rng(seed).uniform(hash_name("blocks.0.attn.wqkv"), 1234);
#pragma once

#include <cstdint>
#include <string_view>

namespace shardlab {

uint64_t hash_name(std::string_view name);  // FNV-1a, stable across platforms

class Rng {
 public:
  explicit Rng(uint64_t seed) : seed_(seed) {}
  uint64_t bits(uint64_t stream, uint64_t index) const;  // 64 random bits
  float uniform(uint64_t stream, uint64_t index) const;  // in [0, 1)
  float normal(uint64_t stream, uint64_t index) const;   // mean 0, std 1 (Box-Muller)
  uint64_t seed() const { return seed_; }

 private:
  uint64_t seed_;
};

}  // namespace shardlab
