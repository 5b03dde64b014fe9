#include "framework/rng.h"

#include <cmath>

namespace shardlab {
namespace {

// SplitMix64 finaliser: a strong 64-bit mixer, enough for initialisation and sampling.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t hash_name(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return h;
}

uint64_t Rng::bits(uint64_t stream, uint64_t index) const {
  return mix(mix(seed_ ^ mix(stream + 0x9e3779b97f4a7c15ULL)) + index * 0x9e3779b97f4a7c15ULL);
}

float Rng::uniform(uint64_t stream, uint64_t index) const {
  return static_cast<float>(bits(stream, index) >> 40) * (1.0f / 16777216.0f);
}

float Rng::normal(uint64_t stream, uint64_t index) const {
  // Two independent uniforms from one 64-bit draw; u1 in (0, 1] keeps log finite.
  const uint64_t b = bits(stream, index);
  const double u1 = (static_cast<double>(b >> 32) + 1.0) / 4294967296.0;
  const double u2 = static_cast<double>(b & 0xffffffffULL) / 4294967296.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

}  // namespace shardlab
