// Host memory for tensor storage: 64-byte aligned, and from 2 MiB up in transparent huge
// pages where the kernel offers them.
//
// On this project's VMs a fresh 4 KiB page costs a fault into the hypervisor and a zeroing:
// first-touching 178 MB took 295-303 ms in 4 KiB pages and 7-12 ms in 2 MiB pages (THP
// advised with madvise, the kernel's default `madvise` mode). The weights of a model, its
// decode copies (generate), the KV cache, and every buffer a first step or a prefill
// allocates are that large. Huge pages also cut the TLB misses of streaming a model's
// weights once per decoded token.
//
//   char* raw = allocate_host_buffer(bytes);   // never null: throws on exhaustion
//   ...
//   free_host_buffer(raw, bytes);              // the same byte count
//
// A buffer of kHugePageBytes or more is mapped on its own, 2 MiB-aligned, and its whole
// 2 MiB pages are advised MADV_HUGEPAGE; the tail stays in 4 KiB pages, so no memory is
// wasted. Smaller buffers come from aligned_alloc. SHARDLAB_HUGE_PAGES=0 maps large
// buffers without the advice (for comparisons; docs/performance.md).
#pragma once

#include <cstddef>

namespace shardlab {

constexpr size_t kHostBufferAlign = 64;
constexpr size_t kHugePageBytes = size_t{2} << 20;

char* allocate_host_buffer(size_t bytes);
void free_host_buffer(char* raw, size_t bytes);

// Whether large buffers are advised into huge pages in this process (SHARDLAB_HUGE_PAGES).
bool host_huge_pages();

}  // namespace shardlab
