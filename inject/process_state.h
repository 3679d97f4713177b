// Per-process state of the injected library: created at the process's first
// event (lazily: helper processes that never emit pay nothing), replaced by a
// fresh one in a forked child (the old one is leaked, never touched again).
#pragma once

#include <pthread.h>
#include <semaphore.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "common/wire/wire.h"
#include "inject/thread_buffer.h"

namespace torchprof::inject {

struct ProcessState {
  uint32_t generation = 0;
  int pid = 0;
  sem_t wake;                        // posted by producers and exit paths
  pthread_mutex_t threads_mu = PTHREAD_MUTEX_INITIALIZER;
  std::vector<ThreadBuffer*> threads;  // guarded by threads_mu
  std::atomic<bool> reemit_registry{false};  // forked child: first thread re-emits the registry
  std::atomic<int> flusher_tid{0};
  std::atomic<bool> flusher_running{false};

  // Final flush requests (exit, signal, exec): the requester bumps req_seq and
  // waits until the flusher has sent Bye and set done_seq to it.
  std::atomic<uint32_t> req_seq{0};
  std::atomic<uint32_t> done_seq{0};
  std::atomic<int32_t> req_kind{0};
  std::atomic<int32_t> req_status{0};
  std::atomic<bool> finished{false};  // Bye(kExit/kSignal) sent: nothing more goes out
};

// What each thread keeps in TLS: tiny, initial-exec, so the hot path reads it
// without a __tls_get_addr call.
struct ThreadSlot {
  ThreadBuffer* buf;
  uint32_t gen;     // generation `buf` belongs to
  bool busy;        // re-entrancy guard
  bool exited;      // the thread's exit destructor ran: record nothing more
  uint16_t cuda_runtime_depth;  // CUDA runtime calls open on this thread (driver calls inside are not recorded)
};

extern constinit thread_local ThreadSlot t_slot __attribute__((tls_model("initial-exec")));
extern std::atomic<uint32_t> g_generation;

ThreadBuffer* acquire_buffer_slow();

// This thread's buffer, created at its first event; nullptr when inert.
inline ThreadBuffer* current_buffer() {
  ThreadSlot& s = t_slot;
  if (__builtin_expect(s.buf != nullptr && s.gen == g_generation.load(std::memory_order_relaxed), 1)) {
    return s.buf;
  }
  return acquire_buffer_slow();
}

// Held for the length of every callback: a callback that re-enters (our own
// code calling into something that emits NVTX) records nothing.
class CallbackGuard {
 public:
  CallbackGuard() : entered_(!t_slot.busy) { t_slot.busy = true; }
  ~CallbackGuard() {
    if (entered_) t_slot.busy = false;
  }
  CallbackGuard(const CallbackGuard&) = delete;
  CallbackGuard& operator=(const CallbackGuard&) = delete;
  bool entered() const { return entered_; }

 private:
  bool entered_;
};

// The current generation's state, or nullptr before the first event.
ProcessState* process_state();

// Asks the flusher to drain everything and send Bye(kind, status), then waits at
// most TORCHPROF_EXIT_TIMEOUT_MS. Async-signal-safe; returns at once when there is
// no flusher, when called from the flusher, or from a vfork child.
void request_final_flush(wire::ExitKind kind, int status);

// Flusher side of request_final_flush: request `seq` is done, wake the waiters.
void finish_request(ProcessState* ps, uint32_t seq);

// Called from the library constructor when active: fork handler, thread-exit key.
void init_process_hooks();

}  // namespace torchprof::inject
