// Size parsing ("4096", "4e6", "16k", "4M") on any text: a UserError naming the flag, or a
// positive finite number; the int64 form never wraps.
#include <cmath>

#include "tests/fuzz/fuzz_input.h"

using namespace shardlab;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  return fuzz::refuse_or_run([&] {
    const double value = parse_size(text, "bytes");
    if (!(value > 0) || !std::isfinite(value)) __builtin_trap();
    const int64_t count = parse_count(text, "count");
    if (count <= 0) __builtin_trap();
  });
}
