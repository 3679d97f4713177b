// The small C API for bindings (a future Python module) and the CUDA driver's
// injection entry point; pthread_setname_np is interposed so renamed threads
// keep their names in the output.
#include <dlfcn.h>
#include <pthread.h>

#include <cstdint>

#include "inject/capture_control.h"
#include "inject/clock.h"
#include "inject/cupti/tracer.h"
#include "inject/export.h"
#include "inject/process_state.h"
#include "inject/recorder.h"
#include "inject/registry.h"

namespace tpi = torchprof::inject;

namespace {

// A push into one of the library's own domains, whose id `cached` (in the thread's buffer)
// is looked up under the registry's lock once per thread buffer: once per thread, and
// again in a forked child, which starts with fresh buffers.
int own_domain_push(tpi::ThreadBuffer* tb, uint16_t& cached, const char* domain, size_t domain_len,
                    const char* name) {
  if (cached == 0) {
    cached = tpi::registry_domain(tb, domain, domain_len);
    if (cached == 0) return -1;  // no domain id left: not recorded
  }
  if (!tpi::capture::fast() && !tpi::capture::admit(tb, name)) return tpi::capture::paused_push(tb, cached);
  return tpi::record_push(tb, cached, tpi::ascii_name(name), 0, 0);
}

}  // namespace

extern "C" {

// Same records and return values as nvtxRangePushA / nvtxRangePop / nvtxMarkA
// in NVTX's default domain.
TORCHPROF_EXPORT int torchprof_range_push(const char* name) {
  tpi::CallbackGuard guard;
  if (!guard.entered()) return -1;
  tpi::ThreadBuffer* tb = tpi::current_buffer();
  if (tb == nullptr) return -1;
  if (!tpi::capture::fast() && !tpi::capture::admit(tb, name)) return tpi::capture::paused_push(tb, 0);
  return tpi::record_push(tb, 0, tpi::ascii_name(name), 0, 0);
}

TORCHPROF_EXPORT int torchprof_range_pop(void) {
  tpi::CallbackGuard guard;
  if (!guard.entered()) return -1;
  tpi::ThreadBuffer* tb = tpi::current_buffer();
  return tb != nullptr ? tpi::record_pop(tb, 0) : -1;
}

TORCHPROF_EXPORT void torchprof_mark(const char* name) {
  tpi::CallbackGuard guard;
  if (!guard.entered()) return;
  tpi::ThreadBuffer* tb = tpi::current_buffer();
  if (tb == nullptr || (!tpi::capture::fast() && !tpi::capture::admit(tb, name))) return;
  tpi::record_mark(tb, 0, tpi::ascii_name(name), 0, 0);
}

// A PyTorch op range from the Python bootstrap (python/torchprof/_pytorch_ops.py):
// the message in emit_nvtx's format, in the "torchprof.ops" domain that tells the
// collector every range in it is an op (analysis/op_message.h).
TORCHPROF_EXPORT int torchprof_op_push(const char* message) {
  tpi::CallbackGuard guard;
  if (!guard.entered()) return -1;
  tpi::ThreadBuffer* tb = tpi::current_buffer();
  if (tb == nullptr) return -1;
  static constexpr char kDomain[] = "torchprof.ops";
  return own_domain_push(tb, tb->ops_domain, kDomain, sizeof(kDomain) - 1, message);
}

TORCHPROF_EXPORT int torchprof_op_pop(void) {
  tpi::CallbackGuard guard;
  if (!guard.entered()) return -1;
  tpi::ThreadBuffer* tb = tpi::current_buffer();
  return tb != nullptr && tb->ops_domain != 0 ? tpi::record_pop(tb, tb->ops_domain) : -1;
}

// An nn.Module call from the Python bootstrap's global module hooks
// (python/torchprof/_modules.py, --with-modules), named "nn.Module: <Class>_<n>" as
// torch's Python tracer names it, in the "torchprof.modules" domain: the collector keeps
// module calls apart from the op tree (analysis/conn_pass.h), so they change no op's times.
TORCHPROF_EXPORT int torchprof_module_push(const char* name) {
  tpi::CallbackGuard guard;
  if (!guard.entered()) return -1;
  tpi::ThreadBuffer* tb = tpi::current_buffer();
  if (tb == nullptr) return -1;
  static constexpr char kDomain[] = "torchprof.modules";
  return own_domain_push(tb, tb->modules_domain, kDomain, sizeof(kDomain) - 1, name);
}

TORCHPROF_EXPORT int torchprof_module_pop(void) {
  tpi::CallbackGuard guard;
  if (!guard.entered()) return -1;
  tpi::ThreadBuffer* tb = tpi::current_buffer();
  return tb != nullptr && tb->modules_domain != 0 ? tpi::record_pop(tb, tb->modules_domain) : -1;
}

// A bracket this narrow is two clock reads with nothing between them but the third.
constexpr uint64_t kTightBracketNs = 1000;

// A step that already ended (the Python bootstrap's ProfilerStep#k, one per
// optimizer.step()), timed on CLOCK_MONOTONIC as time.monotonic_ns() is. It goes
// into the "torchprof" domain so it can be told from the program's own markers, and
// is not recorded once the program has named its own ProfilerStep# ranges. Its times
// move onto the records' clock by that clock's distance from CLOCK_MONOTONIC now
// (nanoseconds where now_ns() reads the TSC, clock.h).
TORCHPROF_EXPORT void torchprof_step_range(const char* name, uint64_t start_mono_ns, uint64_t end_mono_ns) {
  tpi::CallbackGuard guard;
  if (!guard.entered() || tpi::program_marks_steps()) return;
  tpi::ThreadBuffer* tb = tpi::current_buffer();
  if (tb == nullptr) return;
  static constexpr char kDomain[] = "torchprof";
  const uint16_t domain = tpi::registry_domain(tb, kDomain, sizeof(kDomain) - 1);
  // The clocks' distance is read between two reads of ours. A thread preempted in
  // between would misplace the step by up to half the pause, so a wide bracket is read
  // again, a few times at most, and the narrowest one kept.
  uint64_t offset = 0;
  uint64_t narrowest = UINT64_MAX;
  for (int attempt = 0; attempt < 4 && narrowest > kTightBracketNs; ++attempt) {
    const uint64_t ours_before = tpi::now_ns();
    const uint64_t mono = tpi::monotonic_ns();
    const uint64_t ours_after = tpi::now_ns();
    if (ours_after - ours_before < narrowest) {
      narrowest = ours_after - ours_before;
      offset = ours_before + narrowest / 2 - mono;  // modulo 2^64: either sign
    }
  }
  const uint64_t end = end_mono_ns + offset;
  // The step ends at a boundary: an armed trigger opens there (this step is before the
  // window); a counting one records this step and may close after it.
  const uint64_t w = tpi::capture::word();
  tpi::capture::note_has_steps();
  if (tpi::capture::mode_of(w) == tpi::capture::kArmed) {
    tpi::capture::step_boundary(tb, end);
    return;
  }
  if (!tpi::capture::records(w)) return;
  tpi::record_range(tb, domain, tpi::ascii_name(name), start_mono_ns + offset, end);
  if (tpi::capture::mode_of(w) == tpi::capture::kCounting) tpi::capture::step_boundary(tb, end);
}

// torch.cuda.memory_stats(device)'s cudaMalloc retries and out-of-memory errors, from the
// Python bootstrap at exit (--profile-memory, CUDA initialised): counters the caching
// allocator's reports do not carry.
TORCHPROF_EXPORT void torchprof_allocator_stats(int device, uint64_t alloc_retries, uint64_t ooms) {
  tpi::CallbackGuard guard;
  if (!guard.entered() || device < 0 || device > 0xFFFF) return;
  tpi::ThreadBuffer* tb = tpi::current_buffer();
  if (tb == nullptr) return;
  tpi::record_allocator_stats(tb, static_cast<uint16_t>(device), alloc_retries, ooms);
}

// Called by the CUDA driver at cuInit when CUDA_INJECTION64_PATH names us. GPU
// tracing failures only turn GPU tracing off: always accept, so the driver goes on.
TORCHPROF_EXPORT int InitializeInjection(void) {
  tpi::cupti_initialize();
  return 1;
}

// Only a thread naming itself is recorded (another thread's OS tid is not
// knowable from a pthread_t); a thread that has not emitted yet needs nothing,
// its first event reads the current name.
TORCHPROF_EXPORT int pthread_setname_np(pthread_t thread, const char* name) noexcept {
  using SetNameFn = int (*)(pthread_t, const char*);
  static auto real = reinterpret_cast<SetNameFn>(dlsym(RTLD_NEXT, "pthread_setname_np"));
  int rc = real != nullptr ? real(thread, name) : -1;
  if (rc == 0 && pthread_equal(thread, pthread_self()) && tpi::t_slot.buf != nullptr &&
      tpi::t_slot.gen == tpi::g_generation.load(std::memory_order_relaxed)) {
    tpi::CallbackGuard guard;
    if (guard.entered()) tpi::record_thread_name(tpi::t_slot.buf, 0, tpi::ascii_name(name), /*source=*/1);
  }
  return rc;
}

}  // extern "C"
