#include "inject/process_state.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>
#include <new>

#include "inject/arena.h"
#include "inject/buffer_budget.h"
#include "inject/capture_control.h"
#include "inject/clock.h"
#include "inject/config.h"
#include "inject/connection.h"
#include "inject/flusher.h"
#include "inject/recorder.h"
#include "inject/registry.h"
#include "inject/signals.h"

namespace torchprof::inject {

constinit thread_local ThreadSlot t_slot __attribute__((tls_model("initial-exec"))) = {nullptr, 0, false, false, 0};
std::atomic<uint32_t> g_generation{1};

namespace {

std::atomic<ProcessState*> g_state{nullptr};
pthread_mutex_t g_init_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_key_t g_exit_key;
bool g_exit_key_ok = false;
bool g_forked = false;  // this process is a fork child of a profiled process
// The pid the library was loaded (or last forked) into: a vfork child, which shares
// our memory and ran no fork handler, has another.
int g_own_pid = 0;
std::atomic<bool> g_goodbye_said{false};

// A process that recorded nothing still ran: one short connection at its end (Hello,
// then Bye) has the collector count it, with its command line, for a cost of one
// round trip per process. Not for an exec (the new image says its own goodbye) nor a
// vfork child.
void goodbye_without_events(wire::ExitKind kind, int status) {
  if (!config().active || kind == wire::ExitKind::kExec) return;
  if (static_cast<int>(syscall(SYS_getpid)) != g_own_pid) return;
  if (g_goodbye_said.exchange(true)) return;
  Connection conn;
  if (!conn.ensure(config(), now_ns())) return;
  wire::Bye bye{static_cast<int32_t>(kind), status, 0, 0, now_ns()};
  conn.send_bye(bye);
  conn.reset();
}

// pthread key destructors run at thread exit after C++ thread_local destructors,
// so NVTX calls made from those are still recorded.
void on_thread_exit(void* p) {
  auto* tb = static_cast<ThreadBuffer*>(p);
  if (t_slot.buf == tb) t_slot.buf = nullptr;
  t_slot.exited = true;
  tb->dead.store(true, std::memory_order_release);
  if (tb->wake != nullptr) sem_post(tb->wake);
}

void fork_prepare() {
  pthread_mutex_lock(&g_init_mu);
  registry_fork_prepare();
}

void fork_parent() {
  registry_fork_parent();
  pthread_mutex_unlock(&g_init_mu);
}

// The child is a new process for the output: new buffers, flusher and
// connection at its first event. The parent's buffers are leaked on purpose
// (another thread of the parent may have been writing them at fork time).
void fork_child() {
  registry_fork_child();
  buffer_budget().reset_after_fork();
  arena().forget_after_fork();  // not mapped here (MADV_DONTFORK): the child makes its own
  // The parent's buffer of this thread is not mapped here either: the exit key must not
  // reach it.
  if (g_exit_key_ok) pthread_setspecific(g_exit_key, nullptr);
  capture::fork_child();
  pthread_mutex_init(&g_init_mu, nullptr);
  g_forked = true;
  g_own_pid = static_cast<int>(syscall(SYS_getpid));
  g_goodbye_said.store(false);
  g_state.store(nullptr, std::memory_order_release);
  g_generation.fetch_add(1, std::memory_order_acq_rel);
}

ProcessState* create_state() {
  auto* ps = new (std::nothrow) ProcessState();
  if (ps == nullptr) return nullptr;
  ps->generation = g_generation.load(std::memory_order_acquire);
  ps->pid = getpid();
  sem_init(&ps->wake, /*pshared=*/0, /*value=*/0);
  ps->threads.reserve(64);
  ps->reemit_registry.store(g_forked, std::memory_order_relaxed);
  install_signal_handlers();
  arena().ensure();  // before the flusher's handshake, which hands it over
  start_flusher(ps);
  return ps;
}

ProcessState* ensure_state() {
  ProcessState* ps = g_state.load(std::memory_order_acquire);
  if (ps != nullptr) return ps;
  pthread_mutex_lock(&g_init_mu);
  ps = g_state.load(std::memory_order_acquire);
  if (ps == nullptr) {
    ps = create_state();
    g_state.store(ps, std::memory_order_release);
  }
  pthread_mutex_unlock(&g_init_mu);
  return ps;
}

int futex_wait(std::atomic<uint32_t>* addr, uint32_t expected, const timespec* rel) {
  return static_cast<int>(syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAIT_PRIVATE,
                                  expected, rel, nullptr, 0));
}

}  // namespace

ProcessState* process_state() { return g_state.load(std::memory_order_acquire); }

ThreadBuffer* acquire_buffer_slow() {
  ThreadSlot& s = t_slot;
  if (!config().active || s.exited) return nullptr;
  ProcessState* ps = ensure_state();
  if (ps == nullptr) return nullptr;
  uint32_t tid = static_cast<uint32_t>(gettid());
  ThreadBuffer* tb =
      create_thread_buffer(config().buffer_kb, tid, static_cast<int>(tid) == ps->pid, &ps->wake, config().huge_pages);
  if (tb == nullptr) return nullptr;
  s.buf = tb;
  s.gen = ps->generation;
  if (g_exit_key_ok) pthread_setspecific(g_exit_key, tb);
  record_thread_start(tb);
  if (ps->reemit_registry.exchange(false, std::memory_order_acq_rel)) registry_reemit(tb);
  pthread_mutex_lock(&ps->threads_mu);
  ps->threads.push_back(tb);
  pthread_mutex_unlock(&ps->threads_mu);
  return tb;
}

void request_final_flush(wire::ExitKind kind, int status) {
  ProcessState* ps = g_state.load(std::memory_order_acquire);
  if (ps == nullptr) return goodbye_without_events(kind, status);
  if (!ps->flusher_running.load(std::memory_order_acquire)) return;
  if (ps->finished.load(std::memory_order_acquire)) return;
  if (static_cast<int>(syscall(SYS_getpid)) != ps->pid) return;  // vfork child
  if (static_cast<int>(syscall(SYS_gettid)) == ps->flusher_tid.load(std::memory_order_relaxed)) return;
  ps->req_kind.store(static_cast<int32_t>(kind), std::memory_order_relaxed);
  ps->req_status.store(status, std::memory_order_relaxed);
  uint32_t mine = ps->req_seq.fetch_add(1, std::memory_order_acq_rel) + 1;
  sem_post(&ps->wake);
  uint64_t deadline = now_ns() + uint64_t{config().exit_timeout_ms} * 1000000ull;
  for (;;) {
    uint32_t done = ps->done_seq.load(std::memory_order_acquire);
    if (static_cast<int32_t>(done - mine) >= 0) return;
    uint64_t now = now_ns();
    if (now >= deadline) return;
    uint64_t left = deadline - now;
    timespec rel{static_cast<time_t>(left / 1000000000ull), static_cast<long>(left % 1000000000ull)};
    futex_wait(&ps->done_seq, done, &rel);
  }
}

void finish_request(ProcessState* ps, uint32_t seq) {
  ps->done_seq.store(seq, std::memory_order_release);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&ps->done_seq), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

void init_process_hooks() {
  g_own_pid = static_cast<int>(syscall(SYS_getpid));
  g_exit_key_ok = pthread_key_create(&g_exit_key, on_thread_exit) == 0;
  pthread_atfork(fork_prepare, fork_parent, fork_child);
}

}  // namespace torchprof::inject
