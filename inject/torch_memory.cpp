// Tensor memory of torch's CPU allocator, for --profile-memory. libc10 allocates and
// frees every CPU tensor's storage through c10::alloc_cpu / c10::free_cpu, exported and
// called through its PLT; the preloaded library comes first in the global scope, so the
// definitions below receive those calls. Each is forwarded to libc10's own function,
// looked up in libc10 itself (torch loads it without RTLD_GLOBAL, so RTLD_NEXT would not
// find it), and with --profile-memory becomes one record on the calling thread's buffer:
// kTensorAlloc (address, bytes) or kTensorFree (address). Without it the definitions only
// forward. Nothing else calls these names, so what is recorded is torch's own tensors.
//
// CUDA tensors: the caching allocator (libc10_cuda) reports every block it hands out or
// takes back to c10::reportMemoryUsageToProfiler in libc10, with the device's allocated and
// reserved totals, whether or not a profiler listens. The definition here records the
// report (CUDA devices only: the CPU allocator reports the same blocks it got through
// alloc_cpu, and only to a profiler of the program's own) and calls libc10's, so that
// torch's own profiler still gets it.
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "inject/capture_control.h"
#include "inject/config.h"
#include "inject/export.h"
#include "inject/process_state.h"
#include "inject/recorder.h"

// torch's c10::Device as its ABI has it: DeviceType (int8) and DeviceIndex (int8), trivially
// copied, so passed in a register. Declared here, without torch's headers, so that the
// definition below has torch's mangled name.
namespace c10 {
struct Device {
  int8_t type;
  int8_t index;
};
}  // namespace c10

namespace torchprof::inject {
namespace {

using AllocFn = void* (*)(size_t);
using FreeFn = void (*)(void*);
using ReportFn = void (*)(void*, int64_t, size_t, size_t, c10::Device);
constexpr int8_t kCuda = 1;  // c10::DeviceType::CUDA

constexpr char kAllocSymbol[] = "_ZN3c109alloc_cpuEm";
constexpr char kFreeSymbol[] = "_ZN3c108free_cpuEPv";
constexpr char kReportSymbol[] = "_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE";

std::atomic<AllocFn> g_alloc{nullptr};
std::atomic<FreeFn> g_free{nullptr};
std::atomic<ReportFn> g_report{nullptr};
std::atomic<bool> g_report_missing{false};

// libc10 among the loaded objects (by its file name: libc10.so, or a wheel's renamed
// libc10-<hash>.so), never this library.
int find_c10(struct dl_phdr_info* info, size_t, void*) {
  const char* path = info->dlpi_name;
  if (path == nullptr || path[0] == '\0') return 0;
  const char* base = strrchr(path, '/');
  base = base != nullptr ? base + 1 : path;
  if (strncmp(base, "libc10.so", 9) != 0 && strncmp(base, "libc10-", 7) != 0) return 0;
  void* handle = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return 0;
  auto alloc = reinterpret_cast<AllocFn>(dlsym(handle, kAllocSymbol));
  auto release = reinterpret_cast<FreeFn>(dlsym(handle, kFreeSymbol));
  auto report = reinterpret_cast<ReportFn>(dlsym(handle, kReportSymbol));
  dlclose(handle);  // RTLD_NOLOAD took one more reference: libc10 stays loaded
  if (report != nullptr) g_report.store(report, std::memory_order_release);
  if (alloc == nullptr || release == nullptr) return 0;
  g_free.store(release, std::memory_order_release);
  g_alloc.store(alloc, std::memory_order_release);
  return 1;
}

// Stand-ins for a process where libc10 cannot be found (never seen: the callers are
// libc10's own): c10's alignment, and the C library's free.
void* plain_alloc(size_t bytes) {
  void* p = nullptr;
  return bytes == 0 || posix_memalign(&p, 64, bytes) != 0 ? nullptr : p;
}
void plain_free(void* p) { free(p); }

void resolve() {
  if (g_alloc.load(std::memory_order_acquire) != nullptr) return;
  dl_iterate_phdr(&find_c10, nullptr);
  if (g_alloc.load(std::memory_order_acquire) != nullptr) return;
  g_free.store(&plain_free, std::memory_order_release);
  g_alloc.store(&plain_alloc, std::memory_order_release);
}

// libc10's function in `slot`, looked up at the first call.
template <typename Fn>
inline Fn real(std::atomic<Fn>& slot) {
  Fn f = slot.load(std::memory_order_acquire);
  if (__builtin_expect(f == nullptr, 0)) {
    resolve();
    f = slot.load(std::memory_order_acquire);
  }
  return f;
}

inline ReportFn real_report() {
  ReportFn f = g_report.load(std::memory_order_acquire);
  if (__builtin_expect(f == nullptr, 0) && !g_report_missing.load(std::memory_order_relaxed)) {
    dl_iterate_phdr(&find_c10, nullptr);
    f = g_report.load(std::memory_order_acquire);
    if (f == nullptr) g_report_missing.store(true, std::memory_order_relaxed);
  }
  return f;
}

// One record on the calling thread's buffer; `totals` with CUDA tensors' reports.
inline void note(wire::Kind kind, uint16_t domain, void* p, uint64_t bytes, const wire::TensorTotals* totals) {
  CallbackGuard guard;
  if (!guard.entered()) return;
  ThreadBuffer* tb = current_buffer();
  if (tb == nullptr) return;
  record_tensor_memory(tb, kind, domain, reinterpret_cast<uintptr_t>(p), bytes, totals);
}

}  // namespace
}  // namespace torchprof::inject

namespace c10 {

TORCHPROF_EXPORT void* alloc_cpu(size_t nbytes);
TORCHPROF_EXPORT void free_cpu(void* data);
TORCHPROF_EXPORT void reportMemoryUsageToProfiler(void* ptr, int64_t alloc_size, size_t total_allocated,
                                                  size_t total_reserved, Device device);

void* alloc_cpu(size_t nbytes) {
  namespace tpi = torchprof::inject;
  void* p = tpi::real(tpi::g_alloc)(nbytes);
  // While recording is paused allocations are not recorded; their frees still are (the
  // analysis counts a free it cannot pair apart).
  if (p != nullptr && tpi::config().tensor_memory && tpi::capture::fast()) {
    tpi::note(torchprof::wire::Kind::kTensorAlloc, /*domain=*/0, p, nbytes, nullptr);
  }
  return p;
}

void free_cpu(void* data) {
  namespace tpi = torchprof::inject;
  if (data != nullptr && tpi::config().tensor_memory) {
    tpi::note(torchprof::wire::Kind::kTensorFree, /*domain=*/0, data, 0, nullptr);
  }
  tpi::real(tpi::g_free)(data);
}

void reportMemoryUsageToProfiler(void* ptr, int64_t alloc_size, size_t total_allocated, size_t total_reserved,
                                 Device device) {
  namespace tpi = torchprof::inject;
  // An allocation is not recorded while recording is paused; a free always is.
  const bool alloc = alloc_size > 0;
  if (ptr != nullptr && alloc_size != 0 && device.type == tpi::kCuda && tpi::config().tensor_memory &&
      (!alloc || tpi::capture::fast())) {
    const auto domain = static_cast<uint16_t>(static_cast<uint8_t>(device.type) |
                                              static_cast<uint8_t>(device.index < 0 ? 0 : device.index) << 8);
    const torchprof::wire::TensorTotals totals{total_allocated, total_reserved, 0, 0};
    tpi::note(alloc ? torchprof::wire::Kind::kTensorAlloc : torchprof::wire::Kind::kTensorFree, domain, ptr,
              alloc ? static_cast<uint64_t>(alloc_size) : 0, &totals);
  }
  if (tpi::ReportFn real = tpi::real_report()) real(ptr, alloc_size, total_allocated, total_reserved, device);
}

}  // namespace c10
