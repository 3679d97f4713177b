// A stand-in for libc10.so with torch 1.13's and 2.x's exported memory entry points, so
// that --profile-memory's interposition is tested without torch, and on a CUDA path no
// GPU is needed for: c10::alloc_cpu / c10::free_cpu (posix_memalign/free, as c10's) and
// c10::reportMemoryUsageToProfiler, which counts what reaches it (the real one hands it
// to a profiler of the program's own). Called from another library (fake_c10_cuda.cpp)
// and the program, through their PLTs, as libc10_cuda and libtorch call libc10.
#include <atomic>
#include <cstdint>
#include <cstdlib>

namespace c10 {

struct Device {
  int8_t type;
  int8_t index;
};

__attribute__((visibility("default"))) void* alloc_cpu(size_t nbytes) {
  void* p = nullptr;
  if (nbytes == 0 || posix_memalign(&p, 64, nbytes) != 0) return nullptr;
  return p;
}

__attribute__((visibility("default"))) void free_cpu(void* data) { free(data); }

std::atomic<long> g_reports{0};
std::atomic<long> g_report_bytes{0};

__attribute__((visibility("default"))) void reportMemoryUsageToProfiler(void* ptr, int64_t alloc_size,
                                                                        size_t total_allocated, size_t total_reserved,
                                                                        Device device) {
  (void)ptr;
  (void)total_allocated;
  (void)total_reserved;
  (void)device;
  g_reports.fetch_add(1);
  g_report_bytes.fetch_add(alloc_size);
}

}  // namespace c10

extern "C" __attribute__((visibility("default"))) long fake_c10_reports(long* bytes) {
  *bytes = c10::g_report_bytes.load();
  return c10::g_reports.load();
}
