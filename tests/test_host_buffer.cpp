// Host buffers (framework/host_buffer.h): alignment, the huge-page advice, and tensors on them.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "framework/host_buffer.h"
#include "framework/tensor.h"

using namespace shardlab;

namespace {

// The VmFlags of the mapping of /proc/self/smaps that holds `p` ("" if none does).
std::string vm_flags_at(const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> begin >> dash >> end && dash == '-' && line.find(':') > line.find(' ')) {
      inside = begin <= at && at < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

}  // namespace

TEST_CASE("host buffers are aligned and writable end to end; from 2 MiB up advised into huge pages") {
  const size_t sizes[] = {1, 100, 64 << 10, kHugePageBytes - 1, kHugePageBytes, kHugePageBytes + 1, (5 << 20) + 123};
  for (const size_t bytes : sizes) {
    CAPTURE(bytes);
    char* p = allocate_host_buffer(bytes);
    REQUIRE(p != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(p) % kHostBufferAlign == 0);
    std::memset(p, 0x5a, bytes);
    CHECK(p[0] == 0x5a);
    CHECK(p[bytes - 1] == 0x5a);
    if (bytes >= kHugePageBytes) {
      CHECK(reinterpret_cast<uintptr_t>(p) % kHugePageBytes == 0);
      const std::string flags = vm_flags_at(p);
      REQUIRE(!flags.empty());
      // "hg": madvise(MADV_HUGEPAGE) was given (the kernel decides whether pages follow).
      CHECK((flags.find(" hg") != std::string::npos) == host_huge_pages());
    }
    free_host_buffer(p, bytes);
  }
}

TEST_CASE("a large tensor lives in a huge-page buffer and is recycled through the cache") {
  const int64_t n = 3 << 20;  // 12 MiB of floats
  const float* first = nullptr;
  {
    Tensor t = Tensor::full({n}, 2.0f);
    first = t.data();
    CHECK(t.data()[n - 1] == 2.0f);
    CHECK((vm_flags_at(t.data()).find(" hg") != std::string::npos) == host_huge_pages());
  }
  Tensor again = Tensor::zeros({n});  // the same size: the cached buffer
  CHECK(again.data() == first);
  CHECK(again.data()[n - 1] == 0.0f);
}
