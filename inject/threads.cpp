#include "inject/threads.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <csignal>
#include <ctime>

#include "inject/clock.h"

namespace torchprof::inject {

bool start_background_thread(void* (*fn)(void*), void* arg) {
  // The new thread inherits the mask: every signal blocked there, none here once restored.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  const bool ok = pthread_create(&thread, &attr, fn, arg) == 0;
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return ok;
}

bool wait_for_count(std::atomic<uint32_t>* word, uint32_t target, uint64_t deadline_ns) {
  for (;;) {
    const uint32_t seen = word->load(std::memory_order_acquire);
    if (static_cast<int32_t>(seen - target) >= 0) return true;
    const uint64_t now = now_ns();
    if (now >= deadline_ns) return false;
    const uint64_t left = deadline_ns - now;
    timespec rel{static_cast<time_t>(left / 1000000000ull), static_cast<long>(left % 1000000000ull)};
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, seen, &rel, nullptr, 0);
  }
}

void wake_count_waiters(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace torchprof::inject
