#include "inject/cupti/tracer.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "inject/capture_control.h"
#include "inject/clock.h"
#include "inject/config.h"
#include "inject/cupti/activity.h"
#include "inject/cupti/api.h"
#include "inject/cupti/cbids.h"
#include "inject/cupti/flush.h"
#include "inject/cupti/share.h"
#include "inject/cupti/subscribers.h"
#include "inject/cupti/support.h"
#include "inject/process_state.h"
#include "inject/recorder.h"

namespace torchprof::inject {
namespace {

using wire::Kind;

std::atomic<bool> g_started{false};
std::atomic<bool> g_child{false};         // forked child: CUPTI state is the parent's, never touch it
std::atomic<bool> g_record_api{false};    // TORCHPROF_TRACE lists cuda
std::atomic<bool> g_activity{false};      // activity kinds enabled, buffers registered
std::atomic<bool> g_exit_flushed{false};  // the atexit handler flushed CUPTI and saw it converted
// Our activity kinds, for on-demand capture to switch (cupti_follow_recording).
CUpti_ActivityKind g_kinds[16];
int g_kind_count = 0;
std::atomic<bool> g_kinds_on{false};
std::atomic<bool> g_kinds_busy{false};  // one switcher at a time, never waited on

// Set in an API call's ENTER callback, in the call's correlationData: an EXIT whose
// ENTER we never saw (the call was in flight when callbacks were enabled, as the
// cudaFree(0) or cudaGetDeviceCount that starts CUDA is) has no start of its own.
constexpr uint64_t kEnterSeen = uint64_t{1} << 63;

// Registered at InitializeInjection, so it runs before the CUDA runtime's own
// exit handlers (registered earlier) tear CUDA down: the last buffers are
// flushed and converted while the kernel names they point to still exist.
void flush_at_exit() {
  if (!g_activity.load(std::memory_order_acquire) || g_child.load(std::memory_order_relaxed)) return;
  cupti_flush_stop_periodic();
  const uint32_t budget_ms = config().exit_timeout_ms / 2;
  const uint64_t deadline = now_ns() + uint64_t{budget_ms} * 1000000ull;
  if (!cupti_flush_bounded(budget_ms, /*forced=*/true)) return;
  if (gpu_activity_wait_converted(deadline)) g_exit_flushed.store(true, std::memory_order_release);
  if (const int kept = gpu_buffers_outstanding(); kept > 0) {
    char line[300];
    snprintf(line, sizeof line,
             "CUPTI kept %d of torchprof's activity buffers after the final flush: another CUPTI client in the "
             "process (torch.profiler?) replaced its buffer callbacks; the GPU records in them are lost",
             kept);
    gpu_notice_line(LogLevel::kWarn, line);
  }
}

void on_fork_child() {
  g_child.store(true, std::memory_order_relaxed);
  hub_forget_after_fork();
  cupti_flush_forget_after_fork();
  share_forget_after_fork();
  gpu_activity_forget_after_fork();
}

// ---- API callbacks (the program's threads) ----

uint64_t CUPTIAPI our_timestamp() { return now_ns(); }

void record_call(Kind kind, CUpti_CallbackId cbid, const CUpti_CallbackData* cb, uint64_t enter, uint64_t exit) {
  if (!capture::records(capture::word())) return;  // paused: on-demand capture (capture_control.h)
  CallbackGuard guard;
  if (!guard.entered()) return;
  ThreadBuffer* tb = current_buffer();
  if (tb == nullptr) return;
  NameRef name = ascii_name(cb->functionName);
  if (kind == Kind::kCudaRuntime) name.len = api_name_length(name.text, name.len);
  record_api(tb, kind, static_cast<uint16_t>(cbid), name, enter, exit, widen_api_correlation(cb->correlationId));
}

void record_profiler(bool start) {
  CallbackGuard guard;
  if (!guard.entered()) return;
  if (ThreadBuffer* tb = current_buffer()) {
    record_plain(tb, wire::Record{static_cast<uint8_t>(Kind::kCudaProfiler), 0, 0, 0, 0, start ? 1u : 0u, 0});
  }
}

// Records from the stopped range must not wait for the next periodic flush, but a
// forced flush would cut short the work still queued (its records come back with
// no times): at a profiler stop, the completed buffers only. At a device reset or
// a context's end its records would be lost with it: forced. Bounded either way.
void after_api(bool is_start, bool is_stop, bool is_reset) {
  if (is_start || is_stop) record_profiler(is_start);
  if ((is_stop || is_reset) && g_activity.load(std::memory_order_acquire)) {
    cupti_flush_bounded(kCallbackFlushMs, /*forced=*/is_reset);
  }
}

// ENTER: the start, tagged. EXIT: the start if its ENTER was seen, else 0 (nothing to record).
uint64_t enter_or_exit(const CUpti_CallbackData* cb) {
  if (cb->callbackSite == CUPTI_API_ENTER) {
    if (cb->correlationData != nullptr) *cb->correlationData = now_ns() | kEnterSeen;
    return 0;
  }
  if (cb->correlationData == nullptr || (*cb->correlationData & kEnterSeen) == 0) return 0;
  return *cb->correlationData & ~kEnterSeen;
}

void on_runtime(CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  ThreadSlot& slot = t_slot;
  if (cb->callbackSite == CUPTI_API_ENTER) {
    ++slot.cuda_runtime_depth;
    enter_or_exit(cb);
    return;
  }
  const uint64_t exit = now_ns();
  const uint64_t enter = enter_or_exit(cb);
  if (enter != 0) {
    if (slot.cuda_runtime_depth > 0) --slot.cuda_runtime_depth;
    if (g_record_api.load(std::memory_order_relaxed)) record_call(Kind::kCudaRuntime, cbid, cb, enter, exit);
  }
  if (__builtin_expect(cbid == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000 ||
                           cbid == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000 ||
                           cbid == CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020,
                       0)) {
    after_api(cbid == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000,
              cbid == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000,
              cbid == CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020);
  }
}

// Driver calls made by a runtime call on the same thread are its internals
// (torch shows the runtime call); only direct driver use (Triton, …) is recorded.
void on_driver(CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  if (t_slot.cuda_runtime_depth != 0) return;
  if (cb->callbackSite == CUPTI_API_ENTER) {
    enter_or_exit(cb);
    return;
  }
  const uint64_t exit = now_ns();
  const uint64_t enter = enter_or_exit(cb);
  if (enter != 0 && g_record_api.load(std::memory_order_relaxed)) record_call(Kind::kCudaDriver, cbid, cb, enter, exit);
  if (__builtin_expect(cbid == CUPTI_DRIVER_TRACE_CBID_cuProfilerStart || cbid == CUPTI_DRIVER_TRACE_CBID_cuProfilerStop,
                       0)) {
    after_api(cbid == CUPTI_DRIVER_TRACE_CBID_cuProfilerStart, cbid == CUPTI_DRIVER_TRACE_CBID_cuProfilerStop, false);
  }
}

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (__builtin_expect(g_child.load(std::memory_order_relaxed), 0) || data == nullptr) return;
  switch (domain) {
    case CUPTI_CB_DOMAIN_RUNTIME_API: on_runtime(cbid, static_cast<const CUpti_CallbackData*>(data)); break;
    case CUPTI_CB_DOMAIN_DRIVER_API: on_driver(cbid, static_cast<const CUpti_CallbackData*>(data)); break;
    case CUPTI_CB_DOMAIN_RESOURCE:
      if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING && g_activity.load(std::memory_order_acquire)) {
        cupti_flush_bounded(kCallbackFlushMs, /*forced=*/true);
      }
      break;
    default: break;
  }
}

// ---- setup (InitializeInjection) ----

void gpu_state(wire::GpuTracing state) {
  CallbackGuard guard;
  if (!guard.entered()) return;
  if (ThreadBuffer* tb = current_buffer()) {
    record_plain(tb, wire::Record{static_cast<uint8_t>(Kind::kGpuState), 0, 0, 0, now_ns(),
                                  static_cast<uint64_t>(state), 0});
  }
}

void gpu_off(const char* reason) {
  char line[480];
  snprintf(line, sizeof(line), "GPU tracing off: %s", reason);
  gpu_notice_line(LogLevel::kWarn, line);
  gpu_state(wire::GpuTracing::kOff);
}

bool read_cupti_clock(uint64_t* out) { return cupti()->get_timestamp(out) == CUPTI_SUCCESS; }

// CUPTI reads our clock when it can; otherwise the offset is measured once.
CUpti_TimestampCallbackFunc align_clock() {
  const CuptiApi* api = cupti();
  // CUPTI's own clock, before ours replaces it: a client of the program's that registers
  // no clock of its own (Kineto before torch 2.5) reads its records on it.
  int64_t cupti_own = 0;
  if (measure_clock_offset(&read_cupti_clock, &now_ns, /*tries=*/16, &cupti_own)) share_set_cupti_clock(cupti_own);
  if (api->register_timestamp_callback != nullptr &&
      TP_CUPTI_CALL(register_timestamp_callback(&our_timestamp)) == CUPTI_SUCCESS) {
    set_gpu_clock_offset(0);
    notice(LogLevel::kDebug, "GPU clock: CUPTI timestamp callback");
    return &our_timestamp;
  }
  int64_t offset = 0;
  if (measure_clock_offset(&read_cupti_clock, &now_ns, /*tries=*/16, &offset)) {
    set_gpu_clock_offset(offset);
    notice(LogLevel::kDebug, "GPU clock: measured offset %lld ns", static_cast<long long>(offset));
  } else {
    notice(LogLevel::kWarn, "GPU clock: cannot read CUPTI's clock; GPU times may be offset");
  }
  return nullptr;
}

// Callbacks for the recorded API calls only (cupti/cbids.h, from this toolkit's
// headers); a CUPTI of the same major line numbers its calls the same way.
// Through the shared subscriber (cupti/subscribers.h): a failure is logged with where.
void enable_ours(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  const CUptiResult rc = hub_enable_ours(1, domain, cbid);
  if (rc != CUPTI_SUCCESS) cupti_call_failed("cuptiEnableCallback", rc, __FILE__, __LINE__);
}

template <unsigned N>
void enable_recorded(CUpti_CallbackDomain domain, const CbidClass (&table)[N]) {
  for (const CbidClass& entry : table) {
    if ((entry.bits & kApiRecorded) != 0) hub_enable_ours(1, domain, entry.cbid);
  }
}

void enable_callbacks(bool api_calls) {
  if (api_calls) {
    enable_recorded(CUPTI_CB_DOMAIN_RUNTIME_API, kRuntimeCbids);
    enable_recorded(CUPTI_CB_DOMAIN_DRIVER_API, kDriverCbids);
  }
  // What the flushes and the capture range need, whatever the names say.
  enable_ours(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000);
  enable_ours(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000);
  enable_ours(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020);
  enable_ours(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStart);
  enable_ours(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop);
  enable_ours(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
}

int enable_kind(CUpti_ActivityKind kind) {
  if (TP_CUPTI_CALL(activity_enable(kind)) != CUPTI_SUCCESS) return 0;
  share_note_our_kind(kind);
  if (g_kind_count < 16) g_kinds[g_kind_count++] = kind;
  return 1;
}

// TORCHPROF_CUDA_API=activity: the API calls come as CUPTI's RUNTIME and DRIVER records,
// their threads named by system thread id (CUPTI's default is pthread_self()'s low bits),
// as the threads' own records name them. False when this CUPTI cannot: callbacks then.
bool use_system_thread_ids() {
  const CuptiApi* api = cupti();
  if (api->set_thread_id_type != nullptr &&
      TP_CUPTI_CALL(set_thread_id_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)) == CUPTI_SUCCESS) {
    return true;
  }
  notice(LogLevel::kWarn, "TORCHPROF_CUDA_API=activity: this CUPTI cannot name threads by system id; "
                          "API calls are recorded by callbacks");
  return false;
}

bool enable_activity(bool gpu, bool memory, bool api_calls, CUpti_TimestampCallbackFunc timestamp) {
  if (!gpu && !memory && !api_calls) return false;
  if (TP_CUPTI_CALL(register_callbacks(&cupti_buffer_requested, &cupti_buffer_completed)) != CUPTI_SUCCESS) {
    return false;
  }
  share_start(&cupti_buffer_requested, &cupti_buffer_completed, timestamp);
  // MEMCPY2: peer-to-peer copies, which the MEMCPY kind never reports.
  static constexpr CUpti_ActivityKind kGpuKinds[] = {
      CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY2,
      CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
      // The stream each event was recorded on, for the stream waits naming it (Kineto's wait_on_stream).
      CUPTI_ACTIVITY_KIND_CUDA_EVENT};
  int enabled = 0;
  if (gpu) {
    enabled += enable_kind(CUPTI_ACTIVITY_KIND_DEVICE);
    for (CUpti_ActivityKind kind : kGpuKinds) enabled += enable_kind(kind);
  }
  if (memory) enabled += enable_kind(CUPTI_ACTIVITY_KIND_MEMORY2);
  if (api_calls) enabled += enable_kind(CUPTI_ACTIVITY_KIND_RUNTIME) + enable_kind(CUPTI_ACTIVITY_KIND_DRIVER);
  return enabled > 0;
}

}  // namespace

void gpu_notice_line(LogLevel level, const char* text) {
  notice(level, "%s", text);
  CallbackGuard guard;
  if (!guard.entered()) return;
  if (ThreadBuffer* tb = current_buffer()) {
    wire::Record r{static_cast<uint8_t>(Kind::kGpuNotice), 0, 0, 0, now_ns(), 0, 0};
    record_with_extra(tb, ascii_name(text), r, nullptr, 0);
  }
}

void gpu_client_record(HubPath path, uint32_t subscribes, const char* library) {
  CallbackGuard guard;
  if (!guard.entered()) return;
  if (ThreadBuffer* tb = current_buffer()) {
    wire::Record r{static_cast<uint8_t>(Kind::kCuptiClient), 0, static_cast<uint16_t>(path), 0, now_ns(), subscribes,
                   0};
    record_with_extra(tb, ascii_name(library), r, nullptr, 0);
  }
}

void cupti_initialize() {
  const Config& c = config();
  if (!c.active || !(c.trace_cuda || c.trace_gpu || c.trace_memory)) return;
  if (g_started.exchange(true) || g_child.load()) return;
  char why[480];
  if (load_cupti(why, sizeof(why)) == nullptr) return gpu_off(why);
  // One real subscriber, ours, shared with the program's own clients (cupti/subscribers.h).
  hub_set_ours(&on_callback);
  hub_set_retry(&cupti_initialize);
  CUptiResult rc = CUPTI_SUCCESS;
  bool deferred = false;
  CUpti_SubscriberHandle subscriber = hub_real_subscriber(&rc, &deferred);
  if (deferred) {
    // CUDA started inside a client's subscribe: this runs again once it is done.
    g_started.store(false);
    return;
  }
  if (subscriber == nullptr) {
    const bool taken = rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    snprintf(why, sizeof(why), "cuptiSubscribe: %s%s", cupti_result_text(rc),
             taken ? " (a subscriber torchprof cannot share holds CUPTI: a tool such as Nsight Systems or "
                     "Nsight Compute, or a client calling CUPTI through its own library handle)"
                   : "");
    return gpu_off(why);
  }
  pthread_atfork(nullptr, nullptr, on_fork_child);
  // API calls by activity records: callbacks stay only where something must happen at
  // the call (profiler start/stop, resets, a context's end).
  const bool api_activity = c.trace_cuda && c.cuda_api_activity && use_system_thread_ids();
  CUpti_TimestampCallbackFunc timestamp = align_clock();  // before any activity kind is enabled, as CUPTI asks
  g_record_api.store(c.trace_cuda && !api_activity, std::memory_order_relaxed);
  enable_callbacks(c.trace_cuda && !api_activity);
  const uint64_t api_since = now_ns();
  if (enable_activity(c.trace_gpu, c.trace_memory, api_activity, timestamp)) {
    cupti_flush_start();
    gpu_activity_enable(cupti()->version, api_activity, api_since);
    g_kinds_on.store(true, std::memory_order_relaxed);
    g_activity.store(true, std::memory_order_release);
    atexit(flush_at_exit);
    // Started paused: no activity is collected until recording starts.
    if (!capture::collects_gpu(capture::word())) cupti_follow_recording(false);
  }
  // The process's stream exists from here on, so GPU records have a flusher
  // even when the program emits nothing else.
  gpu_state(wire::GpuTracing::kOn);
}

void cupti_follow_recording(bool recording) {
  if (g_kinds_on.load(std::memory_order_relaxed) == recording) return;
  if (!g_activity.load(std::memory_order_acquire) || g_child.load(std::memory_order_relaxed)) return;
  // The flusher, or InitializeInjection once: the other one retries at the next round.
  if (g_kinds_busy.exchange(true, std::memory_order_acquire)) return;
  {
    for (int i = 0; i < g_kind_count; ++i) {
      if (recording) {
        TP_CUPTI_CALL(activity_enable(g_kinds[i]));
      } else if (!share_client_wants(g_kinds[i])) {
        TP_CUPTI_CALL(activity_disable(g_kinds[i]));
      }
    }
    g_kinds_on.store(recording, std::memory_order_relaxed);
  }
  g_kinds_busy.store(false, std::memory_order_release);
  if (!recording) cupti_flush_bounded(0, /*forced=*/false);  // what was collected comes out now
}

void cupti_flush_for_exit(uint32_t timeout_ms) {
  if (!g_activity.load(std::memory_order_acquire) || g_child.load(std::memory_order_relaxed)) return;
  if (g_exit_flushed.load(std::memory_order_acquire)) return;
  cupti_flush_bounded(timeout_ms, /*forced=*/true);
}

namespace {

// ---- a program that links CUDA, but GPU tracing never started ----

std::atomic<bool> g_forked{false};  // a forked child: its parent says how its own CUDA went
void note_forked() { g_forked.store(true, std::memory_order_relaxed); }

struct CudaLibraries {
  char first[128] = {};  // basename of the first CUDA library found
  bool driver = false;   // libcuda.so* is loaded
};

int find_cuda_libraries(dl_phdr_info* info, size_t, void* data) {
  auto* found = static_cast<CudaLibraries*>(data);
  if (info->dlpi_name == nullptr) return 0;
  const char* slash = strrchr(info->dlpi_name, '/');
  const char* base = slash != nullptr ? slash + 1 : info->dlpi_name;
  const bool driver = strncmp(base, "libcuda.so", 10) == 0;
  const bool cuda = driver || strncmp(base, "libcudart.so", 12) == 0 || strncmp(base, "libcupti.so", 11) == 0;
  if (!cuda) return 0;
  found->driver = found->driver || driver;
  if (found->first[0] == '\0') snprintf(found->first, sizeof found->first, "%s", base);
  return 0;
}

// True when the program's own file carries device code (an .nv_fatbin section): nvcc's
// default links the CUDA runtime statically into it, so no libcudart shows among the
// loaded libraries, and when its dlopen of libcuda fails nothing else would say so.
// A few bounded reads of the ELF headers, once, at exit.
bool executable_has_device_code() {
  const int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool found = false;
  Elf64_Ehdr eh{};
  if (pread(fd, &eh, sizeof eh, 0) == static_cast<ssize_t>(sizeof eh) && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_shentsize == sizeof(Elf64_Shdr) && eh.e_shstrndx < eh.e_shnum &&
      eh.e_shnum <= 4096) {
    Elf64_Shdr names{};
    const off_t at = static_cast<off_t>(eh.e_shoff + uint64_t{eh.e_shstrndx} * sizeof(Elf64_Shdr));
    static char table[65536];
    if (pread(fd, &names, sizeof names, at) == static_cast<ssize_t>(sizeof names)) {
      const size_t size = names.sh_size < sizeof table ? names.sh_size : sizeof table - 1;
      const ssize_t got = pread(fd, table, size, static_cast<off_t>(names.sh_offset));
      if (got > 0) {
        table[got] = '\0';
        for (ssize_t i = 0; i < got && !found; i += static_cast<ssize_t>(strlen(table + i)) + 1) {
          found = strcmp(table + i, ".nv_fatbin") == 0 || strcmp(table + i, ".nvFatBinSegment") == 0;
        }
      }
    }
  }
  close(fd);
  return found;
}

}  // namespace

// At exit of a process that loaded CUDA's libraries while InitializeInjection was
// never called: one line saying so (stderr and a kGpuNotice), instead of a profile
// that is silently without GPU rows.
void cupti_process_exiting() {
  const Config& c = config();
  if (!c.active || !(c.trace_cuda || c.trace_gpu || c.trace_memory)) return;
  // Another tool holds CUDA's injection (the launcher said so): it, not we, was started.
  if (!c.cuda_injection_ours) return;
  if (g_started.load(std::memory_order_relaxed) || g_forked.load(std::memory_order_relaxed)) return;
  CudaLibraries libs;
  dl_iterate_phdr(&find_cuda_libraries, &libs);
  if (libs.first[0] == '\0' && executable_has_device_code()) {
    // A static runtime loads libcuda itself: when it is not loaded now, that dlopen failed.
    char exe[96] = "the program";
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
      exe[n] = '\0';
      const char* slash = strrchr(exe, '/');
      if (slash != nullptr) memmove(exe, slash + 1, strlen(slash + 1) + 1);
    }
    snprintf(libs.first, sizeof libs.first, "%s's statically linked CUDA runtime", exe);
  }
  if (libs.first[0] == '\0') return;
  const char* reason = "the CUDA driver never called InitializeInjection (cuInit failed, or CUDA_INJECTION64_PATH "
                       "did not reach the program)";
  if (access("/proc/driver/nvidia/version", F_OK) != 0) {
    reason = "there is no NVIDIA driver on this machine";
  } else if (!libs.driver && strstr(libs.first, "statically linked") != nullptr) {
    reason = "libcuda was never loaded (the runtime's dlopen of libcuda.so.1 failed, or no CUDA call was made)";
  } else if (!libs.driver) {
    reason = "CUDA was never initialised (the program made no CUDA call)";
  }
  char line[400];
  snprintf(line, sizeof line, "GPU tracing never started: %s is loaded, but %s", libs.first, reason);
  gpu_notice_line(LogLevel::kWarn, line);
  gpu_state(wire::GpuTracing::kNotStarted);
}

namespace {

__attribute__((constructor)) void watch_forks() { pthread_atfork(nullptr, nullptr, note_forked); }

}  // namespace

}  // namespace torchprof::inject
