#include "inject/cupti_tracer.h"

#include <linux/futex.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "inject/clock.h"
#include "inject/config.h"
#include "inject/cupti_activity.h"
#include "inject/cupti_api.h"
#include "inject/cupti_support.h"
#include "inject/process_state.h"
#include "inject/recorder.h"

namespace torchprof::inject {
namespace {

using wire::Kind;

std::atomic<bool> g_started{false};
std::atomic<bool> g_child{false};         // forked child: CUPTI state is the parent's, never touch it
std::atomic<bool> g_record_api{false};    // TORCHPROF_TRACE lists cuda
std::atomic<bool> g_activity{false};      // activity kinds enabled, buffers registered
std::atomic<bool> g_exit_flushed{false};  // the atexit handler flushed CUPTI

// ---- forced flushes on a helper thread, so every wait for CUPTI is bounded ----

sem_t g_flush_request;
std::atomic<uint32_t> g_flush_requested{0};
std::atomic<uint32_t> g_flush_done{0};
std::atomic<bool> g_flush_worker{false};

void* flush_worker_main(void*) {
  t_slot.exited = true;  // nothing on this thread is recorded
  for (;;) {
    while (sem_wait(&g_flush_request) != 0 && errno == EINTR) {
    }
    uint32_t want = g_flush_requested.load(std::memory_order_acquire);
    TP_CUPTI_CALL(flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    g_flush_done.store(want, std::memory_order_release);
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&g_flush_done), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
  }
  return nullptr;
}

void start_flush_worker() {
  if (sem_init(&g_flush_request, /*pshared=*/0, /*value=*/0) != 0) return;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  g_flush_worker.store(pthread_create(&thread, &attr, flush_worker_main, nullptr) == 0, std::memory_order_release);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

// True when CUPTI finished the flush within `timeout_ms`; on a timeout the
// flush goes on in the background and whatever it delivers later is still converted.
bool flush_bounded(uint32_t timeout_ms) {
  if (!g_flush_worker.load(std::memory_order_acquire) || g_child.load(std::memory_order_relaxed)) return false;
  uint32_t mine = g_flush_requested.fetch_add(1, std::memory_order_acq_rel) + 1;
  sem_post(&g_flush_request);
  uint64_t deadline = now_ns() + uint64_t{timeout_ms} * 1000000ull;
  for (;;) {
    uint32_t done = g_flush_done.load(std::memory_order_acquire);
    if (static_cast<int32_t>(done - mine) >= 0) return true;
    uint64_t now = now_ns();
    if (now >= deadline) return false;
    uint64_t left = deadline - now;
    timespec rel{static_cast<time_t>(left / 1000000000ull), static_cast<long>(left % 1000000000ull)};
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&g_flush_done), FUTEX_WAIT_PRIVATE, done, &rel, nullptr, 0);
  }
}

// Registered at InitializeInjection, so it runs before the CUDA runtime's own
// exit handlers (registered earlier) tear CUDA down.
void flush_at_exit() {
  if (!g_activity.load(std::memory_order_acquire) || g_child.load(std::memory_order_relaxed)) return;
  if (flush_bounded(config().exit_timeout_ms / 2)) g_exit_flushed.store(true, std::memory_order_release);
}

void on_fork_child() {
  g_child.store(true, std::memory_order_relaxed);
  g_flush_worker.store(false, std::memory_order_relaxed);  // the thread is not in the child
  gpu_activity_forget_after_fork();
}

// ---- API callbacks (the program's threads) ----

uint64_t CUPTIAPI our_timestamp() { return now_ns(); }

void record_call(Kind kind, CUpti_CallbackId cbid, const CUpti_CallbackData* cb, uint64_t enter, uint64_t exit) {
  CallbackGuard guard;
  if (!guard.entered()) return;
  ThreadBuffer* tb = current_buffer();
  if (tb == nullptr) return;
  NameRef name = ascii_name(cb->functionName);
  if (kind == Kind::kCudaRuntime) name.len = api_name_length(name.text, name.len);
  record_api(tb, kind, static_cast<uint16_t>(cbid), name, enter, exit, cb->correlationId);
}

void record_profiler(bool start) {
  CallbackGuard guard;
  if (!guard.entered()) return;
  if (ThreadBuffer* tb = current_buffer()) {
    record_plain(tb, wire::Record{static_cast<uint8_t>(Kind::kCudaProfiler), 0, 0, 0, 0, start ? 1u : 0u, 0});
  }
}

// Records from the stopped range or the reset context must not wait for the
// next periodic flush (or be lost with the context).
void flush_now() {
  if (g_activity.load(std::memory_order_acquire)) TP_CUPTI_CALL(flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
}

void after_api(bool is_start, bool is_stop, bool is_reset) {
  if (is_start || is_stop) record_profiler(is_start);
  if (is_stop || is_reset) flush_now();
}

void on_runtime(CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  ThreadSlot& slot = t_slot;
  if (cb->callbackSite == CUPTI_API_ENTER) {
    ++slot.cuda_runtime_depth;
    if (cb->correlationData != nullptr) *cb->correlationData = now_ns();
    return;
  }
  uint64_t exit = now_ns();
  if (slot.cuda_runtime_depth > 0) --slot.cuda_runtime_depth;
  uint64_t enter = cb->correlationData != nullptr ? *cb->correlationData : exit;
  if (g_record_api.load(std::memory_order_relaxed)) record_call(Kind::kCudaRuntime, cbid, cb, enter, exit);
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
    if (cb->correlationData != nullptr) *cb->correlationData = now_ns();
    return;
  }
  uint64_t exit = now_ns();
  uint64_t enter = cb->correlationData != nullptr ? *cb->correlationData : exit;
  if (g_record_api.load(std::memory_order_relaxed)) record_call(Kind::kCudaDriver, cbid, cb, enter, exit);
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
      if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) flush_now();
      break;
    default: break;
  }
}

// ---- setup (InitializeInjection) ----

// One line on stderr and the same text as a kGpuNotice record, so the report shows it too.
void gpu_notice(const char* text) {
  notice(LogLevel::kWarn, "%s", text);
  CallbackGuard guard;
  if (!guard.entered()) return;
  if (ThreadBuffer* tb = current_buffer()) {
    wire::Record r{static_cast<uint8_t>(Kind::kGpuNotice), 0, 0, 0, now_ns(), 0, 0};
    record_with_extra(tb, ascii_name(text), r, nullptr, 0);
  }
}

void gpu_off(const char* reason) {
  char line[480];
  snprintf(line, sizeof(line), "GPU tracing off: %s", reason);
  gpu_notice(line);
}

bool read_cupti_clock(uint64_t* out) { return cupti()->get_timestamp(out) == CUPTI_SUCCESS; }

// CUPTI reads our clock when it can; otherwise the offset is measured once.
void align_clock() {
  const CuptiApi* api = cupti();
  if (api->register_timestamp_callback != nullptr &&
      TP_CUPTI_CALL(register_timestamp_callback(&our_timestamp)) == CUPTI_SUCCESS) {
    set_gpu_clock_offset(0);
    notice(LogLevel::kDebug, "GPU clock: CUPTI timestamp callback");
    return;
  }
  int64_t offset = 0;
  if (measure_clock_offset(&read_cupti_clock, &now_ns, /*tries=*/16, &offset)) {
    set_gpu_clock_offset(offset);
    notice(LogLevel::kDebug, "GPU clock: measured offset %lld ns", static_cast<long long>(offset));
  } else {
    notice(LogLevel::kWarn, "GPU clock: cannot read CUPTI's clock; GPU times may be offset");
  }
}

void enable_callbacks(CUpti_SubscriberHandle subscriber, bool api_calls) {
  if (api_calls) {
    TP_CUPTI_CALL(enable_domain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API));
    TP_CUPTI_CALL(enable_domain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API));
  } else {  // only what the flushes and the capture range need
    TP_CUPTI_CALL(enable_callback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                                  CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000));
    TP_CUPTI_CALL(enable_callback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                                  CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000));
    TP_CUPTI_CALL(enable_callback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                                  CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020));
    TP_CUPTI_CALL(enable_callback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStart));
    TP_CUPTI_CALL(enable_callback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop));
  }
  TP_CUPTI_CALL(enable_callback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING));
}

bool enable_activity(bool gpu, bool memory) {
  if (!gpu && !memory) return false;
  if (TP_CUPTI_CALL(register_callbacks(&cupti_buffer_requested, &cupti_buffer_completed)) != CUPTI_SUCCESS) {
    return false;
  }
  static constexpr CUpti_ActivityKind kGpuKinds[] = {
      CUPTI_ACTIVITY_KIND_DEVICE, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
      CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION};
  int enabled = 0;
  if (gpu) {
    for (CUpti_ActivityKind kind : kGpuKinds) enabled += TP_CUPTI_CALL(activity_enable(kind)) == CUPTI_SUCCESS;
  }
  if (memory) enabled += TP_CUPTI_CALL(activity_enable(CUPTI_ACTIVITY_KIND_MEMORY2)) == CUPTI_SUCCESS;
  return enabled > 0;
}

}  // namespace

void cupti_initialize() {
  const Config& c = config();
  if (!c.active || !(c.trace_cuda || c.trace_gpu || c.trace_memory)) return;
  if (g_started.exchange(true) || g_child.load()) return;
  char why[400];
  if (load_cupti(why, sizeof(why)) == nullptr) return gpu_off(why);
  CUpti_SubscriberHandle subscriber = nullptr;
  CUptiResult rc = cupti()->subscribe(&subscriber, &on_callback, nullptr);
  if (rc != CUPTI_SUCCESS) {
    const bool taken = rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    snprintf(why, sizeof(why), "cuptiSubscribe: %s%s", cupti_result_text(rc),
             taken ? " (another profiler, e.g. torch.profiler, holds CUPTI)" : "");
    return gpu_off(why);
  }
  pthread_atfork(nullptr, nullptr, on_fork_child);
  g_record_api.store(c.trace_cuda, std::memory_order_relaxed);
  align_clock();  // before any activity kind is enabled, as CUPTI asks
  enable_callbacks(subscriber, c.trace_cuda);
  if (enable_activity(c.trace_gpu, c.trace_memory)) {
    start_flush_worker();
    gpu_activity_enable();
    g_activity.store(true, std::memory_order_release);
    atexit(flush_at_exit);
  }
  // The process's stream exists from here on, so GPU records have a flusher
  // even when the program emits nothing else.
  CallbackGuard guard;
  if (guard.entered()) current_buffer();
}

void cupti_flush_for_exit(uint32_t timeout_ms) {
  if (!g_activity.load(std::memory_order_acquire) || g_child.load(std::memory_order_relaxed)) return;
  if (g_exit_flushed.load(std::memory_order_acquire)) return;
  flush_bounded(timeout_ms);
}

}  // namespace torchprof::inject
