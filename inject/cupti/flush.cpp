#include "inject/cupti/flush.h"

#include <semaphore.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <ctime>

#include "inject/clock.h"
#include "inject/config.h"
#include "inject/cupti/api.h"
#include "inject/process_state.h"
#include "inject/threads.h"

namespace torchprof::inject {
namespace {

sem_t g_request;
std::atomic<uint32_t> g_requested{0};
std::atomic<uint32_t> g_done{0};  // a futex word: waiters sleep on it
std::atomic<bool> g_forced{false};  // a pending request wants a forced flush
std::atomic<bool> g_running{false};
std::atomic<bool> g_child{false};
std::atomic<bool> g_periodic{true};  // off once the exit flush began: CUDA goes away after it

// Waits for a request, or for the period to pass (false); period 0 waits for ever.
bool wait_request(uint32_t period_ms) {
  for (;;) {
    int rc = 0;
    if (period_ms == 0) {
      rc = sem_wait(&g_request);
    } else {
      timespec until{};
      clock_gettime(CLOCK_MONOTONIC, &until);
      const uint64_t ns = static_cast<uint64_t>(until.tv_nsec) + uint64_t{period_ms} * 1000000ull;
      until.tv_sec += static_cast<time_t>(ns / 1000000000ull);
      until.tv_nsec = static_cast<long>(ns % 1000000000ull);
      rc = sem_clockwait(&g_request, CLOCK_MONOTONIC, &until);
    }
    if (rc == 0) return true;
    if (errno == ETIMEDOUT) return false;
  }
}

void* flush_main(void*) {
  t_slot.exited = true;  // nothing on this thread is recorded
  const uint32_t period = config().gpu_flush_ms;
  for (;;) {
    const bool asked = wait_request(period);
    const uint32_t want = g_requested.load(std::memory_order_acquire);
    if (!asked && want == g_done.load(std::memory_order_relaxed)) {
      // Periodic: completed buffers, full or not (a failure is not news).
      if (g_periodic.load(std::memory_order_acquire)) cupti()->flush_all(0);
      continue;
    }
    const bool forced = g_forced.exchange(false, std::memory_order_acq_rel);
    TP_CUPTI_CALL(flush_all(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0));
    g_done.store(want, std::memory_order_release);
    wake_count_waiters(&g_done);
  }
  return nullptr;
}

}  // namespace

bool cupti_flush_start() {
  if (g_running.load(std::memory_order_acquire)) return true;
  if (sem_init(&g_request, /*pshared=*/0, /*value=*/0) != 0) return false;
  g_running.store(start_background_thread(flush_main, nullptr), std::memory_order_release);
  return g_running.load(std::memory_order_relaxed);
}

bool cupti_flush_bounded(uint32_t timeout_ms, bool forced) {
  if (!g_running.load(std::memory_order_acquire) || g_child.load(std::memory_order_relaxed)) return false;
  if (forced) g_forced.store(true, std::memory_order_release);
  const uint32_t mine = g_requested.fetch_add(1, std::memory_order_acq_rel) + 1;
  sem_post(&g_request);
  return wait_for_count(&g_done, mine, now_ns() + uint64_t{timeout_ms} * 1000000ull);
}

void cupti_flush_stop_periodic() { g_periodic.store(false, std::memory_order_release); }

void cupti_flush_forget_after_fork() {
  g_child.store(true, std::memory_order_relaxed);
  g_running.store(false, std::memory_order_relaxed);
}

}  // namespace torchprof::inject
