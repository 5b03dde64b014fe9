#include "framework/host_buffer.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace shardlab {
namespace {

constexpr size_t kPage = 4096;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

[[noreturn]] void out_of_memory(size_t bytes) {
  throw std::runtime_error("out of memory allocating " + std::to_string(bytes) + " bytes");
}

}  // namespace

bool host_huge_pages() {
  static const bool on = [] {
    const char* env = std::getenv("SHARDLAB_HUGE_PAGES");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  return on;
}

char* allocate_host_buffer(size_t bytes) {
  if (bytes < kHugePageBytes) {
    void* p = std::aligned_alloc(kHostBufferAlign, round_up(bytes, kHostBufferAlign));
    if (p == nullptr) out_of_memory(bytes);
    return static_cast<char*>(p);
  }
  // Map one huge page more than needed, keep the 2 MiB-aligned part, give back the rest.
  const size_t length = round_up(bytes, kPage), mapped = length + kHugePageBytes;
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) out_of_memory(bytes);
  const auto start = reinterpret_cast<uintptr_t>(base);
  const uintptr_t aligned = round_up(start, kHugePageBytes);
  if (aligned > start) munmap(base, aligned - start);
  if (const uintptr_t end = start + mapped, used = aligned + length; end > used) {
    munmap(reinterpret_cast<void*>(used), end - used);
  }
  if (host_huge_pages()) {
    // Advice only: a kernel without THP (or with it off) keeps 4 KiB pages.
    madvise(reinterpret_cast<void*>(aligned), bytes / kHugePageBytes * kHugePageBytes, MADV_HUGEPAGE);
  }
  return reinterpret_cast<char*>(aligned);
}

void free_host_buffer(char* raw, size_t bytes) {
  if (raw == nullptr) return;
  if (bytes < kHugePageBytes) {
    std::free(raw);
    return;
  }
  munmap(raw, round_up(bytes, kPage));
}

}  // namespace shardlab
