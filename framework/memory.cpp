#include "framework/memory.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>

namespace shardlab {
namespace {

struct Counters {
  std::array<std::atomic<int64_t>, kMemoryCategories> live{};
  std::array<std::atomic<int64_t>, kMemoryCategories> peak{};
  std::atomic<int64_t> live_total{0};
  std::atomic<int64_t> peak_total{0};
  std::array<std::atomic<int64_t>, kMemoryCategories> at_peak{};  // live by category when peak_total was reached
};

Counters& counters() {
  static Counters c;
  return c;
}

thread_local MemoryCategory t_current = MemoryCategory::Activations;

// Raises `peak` to `value`; true when it did.
bool raise_peak(std::atomic<int64_t>& peak, int64_t value) {
  int64_t seen = peak.load(std::memory_order_relaxed);
  while (value > seen) {
    if (peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) return true;
  }
  return false;
}

// The categories' live bytes, as the new total peak's make-up (another thread's allocation
// in between may blur it by that allocation's bytes).
void snapshot_at_peak(Counters& k) {
  for (int i = 0; i < kMemoryCategories; ++i) k.at_peak[i].store(k.live[i].load(std::memory_order_relaxed), std::memory_order_relaxed);
}

}  // namespace

const char* memory_category_name(MemoryCategory c) {
  switch (c) {
    case MemoryCategory::Parameters: return "parameters";
    case MemoryCategory::Gradients: return "gradients";
    case MemoryCategory::Optimizer: return "optimizer";
    case MemoryCategory::Activations: return "activations";
    case MemoryCategory::Communication: return "communication";
    default: return "?";
  }
}

void MemoryTracker::on_alloc(MemoryCategory c, int64_t bytes) {
  auto& k = counters();
  int i = static_cast<int>(c);
  raise_peak(k.peak[i], k.live[i].fetch_add(bytes, std::memory_order_relaxed) + bytes);
  if (raise_peak(k.peak_total, k.live_total.fetch_add(bytes, std::memory_order_relaxed) + bytes)) snapshot_at_peak(k);
}

void MemoryTracker::on_free(MemoryCategory c, int64_t bytes) {
  auto& k = counters();
  k.live[static_cast<int>(c)].fetch_sub(bytes, std::memory_order_relaxed);
  k.live_total.fetch_sub(bytes, std::memory_order_relaxed);
}

int64_t MemoryTracker::live(MemoryCategory c) { return counters().live[static_cast<int>(c)].load(); }
int64_t MemoryTracker::peak(MemoryCategory c) { return counters().peak[static_cast<int>(c)].load(); }
int64_t MemoryTracker::live_total() { return counters().live_total.load(); }
int64_t MemoryTracker::peak_total() { return counters().peak_total.load(); }
int64_t MemoryTracker::at_peak(MemoryCategory c) { return counters().at_peak[static_cast<int>(c)].load(); }

void MemoryTracker::reset_peaks() {
  auto& k = counters();
  for (int i = 0; i < kMemoryCategories; ++i) k.peak[i].store(k.live[i].load());
  k.peak_total.store(k.live_total.load());
  snapshot_at_peak(k);
}

MemoryCategory MemoryTracker::current() { return t_current; }
void MemoryTracker::set_current(MemoryCategory c) { t_current = c; }

std::string format_bytes(int64_t bytes) {
  char buf[32];
  double b = static_cast<double>(bytes);
  if (b >= 1 << 30) std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1 << 30));
  else if (b >= 1 << 20) std::snprintf(buf, sizeof buf, "%.2f MiB", b / (1 << 20));
  else if (b >= 1 << 10) std::snprintf(buf, sizeof buf, "%.1f KiB", b / (1 << 10));
  else std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  return buf;
}

double machine_memory_bytes() {
  return static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
}

}  // namespace shardlab
