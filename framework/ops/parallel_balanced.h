// A loop over items of equal cost split over the OpenMP threads that stay busy to the end
// even when the threads do not run at the same speed.
//
// schedule(static) gives each thread one contiguous range: every item's memory is one
// stream that the prefetchers follow, and each thread touches only its own range. But a
// decode step's weight products are memory-bound, and on a VM the two vCPUs need not
// stream alike (measured: the 24 products of a step on one thread took 4.1-4.3 ms on one
// vCPU and 5.7-6.7 ms on the other), so the faster thread waits at the barrier for the
// slower one. schedule(dynamic) balances them but hands out items in an interleaved order
// that breaks each thread's stream.
//
//   parallel_balanced(groups, [&](int64_t g) { multiply_group(g); });
//
// keeps static's contiguous ranges and lets a thread that finishes its own range take the
// items left at the *back* of the others' ranges, one at a time, until none are left:
// each range is still walked front to back by its owner, and only the last few items of a
// range change hands. Which thread runs an item never changes what the item computes, so
// the results are the same as static's, bitwise.
#pragma once

#include <omp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "framework/error.h"

namespace shardlab::ops {

template <typename Body>
void parallel_balanced(int64_t n, bool parallel, Body&& body) {
  const int threads = parallel ? omp_get_max_threads() : 1;
  if (threads <= 1 || n <= 1) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
  // Each thread's range [front, back) packed in one word, so that the owner taking the
  // front and a thief taking the back cannot both take the last item.
  SL_ASSERT(n < (int64_t{1} << 32), "parallel_balanced packs item indices in 32 bits, got " + std::to_string(n));
  struct alignas(64) Range {
    std::atomic<uint64_t> bounds;
  };
  const auto pack = [](uint64_t front, uint64_t back) { return front << 32 | back; };
  const std::unique_ptr<Range[]> ranges(new Range[threads]);
  for (int t = 0; t < threads; ++t) {
    ranges[t].bounds.store(pack(n * t / threads, n * (t + 1) / threads), std::memory_order_relaxed);
  }
#pragma omp parallel num_threads(threads)
  {
    // The runtime may give fewer threads than asked (nesting, thread limits): then the
    // missing threads' ranges are taken from the back, as any range left over is.
    const int me = omp_get_thread_num();
    auto& own = ranges[me].bounds;
    for (uint64_t cur = own.load(std::memory_order_relaxed);;) {
      const uint64_t front = cur >> 32, back = cur & 0xffffffffu;
      if (front >= back) break;
      if (own.compare_exchange_weak(cur, pack(front + 1, back), std::memory_order_relaxed)) {
        body(static_cast<int64_t>(front));
        cur = own.load(std::memory_order_relaxed);
      }
    }
    for (int other = 1; other < threads; ++other) {
      auto& theirs = ranges[(me + other) % threads].bounds;
      for (uint64_t cur = theirs.load(std::memory_order_relaxed);;) {
        const uint64_t front = cur >> 32, back = cur & 0xffffffffu;
        if (front >= back) break;
        if (theirs.compare_exchange_weak(cur, pack(front, back - 1), std::memory_order_relaxed)) {
          body(static_cast<int64_t>(back - 1));
          cur = theirs.load(std::memory_order_relaxed);
        }
      }
    }
  }
}

}  // namespace shardlab::ops
