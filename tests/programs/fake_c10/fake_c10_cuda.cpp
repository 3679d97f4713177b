// A stand-in for libc10_cuda.so's caching allocator: blocks from a fixed address range
// of device 0 (never touched), each reported to c10::reportMemoryUsageToProfiler in
// libc10 with the allocated and reserved totals, as the caching allocator reports them.
// Reserved memory grows in 2 MiB segments and is never given back, as a cache holds it.
#include <cstdint>
#include <map>
#include <mutex>

namespace c10 {
struct Device {
  int8_t type;
  int8_t index;
};
void reportMemoryUsageToProfiler(void* ptr, int64_t alloc_size, size_t total_allocated, size_t total_reserved,
                                 Device device);
}  // namespace c10

namespace {
std::mutex g_mutex;
std::map<uintptr_t, size_t> g_blocks;
uintptr_t g_next = 0x7f0000000000;
size_t g_allocated = 0;
size_t g_reserved = 0;
constexpr size_t kSegment = 2 << 20;
}  // namespace

extern "C" __attribute__((visibility("default"))) void* fake_cuda_malloc(size_t bytes) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const size_t rounded = (bytes + 511) / 512 * 512;
  const uintptr_t p = g_next;
  g_next += rounded;
  g_blocks[p] = rounded;
  g_allocated += rounded;
  while (g_reserved < g_allocated) g_reserved += kSegment;
  c10::reportMemoryUsageToProfiler(reinterpret_cast<void*>(p), static_cast<int64_t>(rounded), g_allocated, g_reserved,
                                   c10::Device{1, 0});
  return reinterpret_cast<void*>(p);
}

extern "C" __attribute__((visibility("default"))) void fake_cuda_free(void* ptr) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_blocks.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == g_blocks.end()) return;
  const size_t bytes = it->second;
  g_blocks.erase(it);
  g_allocated -= bytes;
  c10::reportMemoryUsageToProfiler(ptr, -static_cast<int64_t>(bytes), g_allocated, g_reserved, c10::Device{1, 0});
}
