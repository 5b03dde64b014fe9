// MemoryTracker: live and peak bytes of tensor storage, by category.
//
// Every Storage is counted under the category that was current on its thread when it
// was allocated (`Activations` unless a MemoryScope says otherwise). Used to show what
// ZeRO sharding and rematerialisation save.
//
//   { MemoryScope scope(MemoryCategory::Optimizer); m = Tensor::zeros(p.shape()); }
//   MemoryTracker::live(MemoryCategory::Optimizer);  // bytes of optimizer state
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace shardlab {

enum class MemoryCategory { Parameters, Gradients, Optimizer, Activations, Communication, kCount };
constexpr int kMemoryCategories = static_cast<int>(MemoryCategory::kCount);
const char* memory_category_name(MemoryCategory c);

class MemoryTracker {
 public:
  static void on_alloc(MemoryCategory c, int64_t bytes);
  static void on_free(MemoryCategory c, int64_t bytes);
  static int64_t live(MemoryCategory c);
  static int64_t peak(MemoryCategory c);
  static int64_t live_total();
  static int64_t peak_total();
  // Live bytes of `c` at the moment the total reached peak_total(): the peak's make-up.
  static int64_t at_peak(MemoryCategory c);
  static void reset_peaks();  // peaks restart from the current live bytes
  static MemoryCategory current();
  static void set_current(MemoryCategory c);
};

// Sets the category for allocations on this thread within its scope.
class MemoryScope {
 public:
  explicit MemoryScope(MemoryCategory c) : previous_(MemoryTracker::current()) {
    MemoryTracker::set_current(c);
  }
  ~MemoryScope() { MemoryTracker::set_current(previous_); }
  MemoryScope(const MemoryScope&) = delete;
  MemoryScope& operator=(const MemoryScope&) = delete;

 private:
  MemoryCategory previous_;
};

std::string format_bytes(int64_t bytes);  // "12.3 MiB"
double machine_memory_bytes();             // this machine's physical memory

}  // namespace shardlab
