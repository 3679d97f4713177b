#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstring>

#include "inject/clock.h"
#include "inject/tsc_clock.h"

namespace torchprof::inject {

PublishedTscMap g_tsc_map;

namespace {

// Only the flusher thread touches these (a forked child's flusher goes on with the
// parent's copy: the TSC is the same).
TscSteering g_steering;
uint32_t g_seq = 0;  // the last even value of g_tsc_map.seq this writer stored (0: none yet)

#if defined(__x86_64__)
// A (TSC, CLOCK_MONOTONIC) pair: the TSC halfway through the clock read. The first
// read after the flusher wakes is slow (cold caches: microseconds, where the TSC read
// inside it may sit anywhere), so the pair is read several times and the tightest
// kept; none under kMaxSpanTicks (the scheduler interrupted them all) gives no pair.
bool read_pair(uint64_t& tsc, uint64_t& ns) {
  constexpr uint64_t kMaxSpanTicks = 8192;  // a warm clock_gettime takes ~100 ticks
  uint64_t best_span = kMaxSpanTicks;
  for (int attempt = 0; attempt < 8; ++attempt) {
    const uint64_t before = __rdtsc();
    const uint64_t clock = monotonic_ns();
    const uint64_t after = __rdtsc();
    if (after > before && after - before < best_span) {
      best_span = after - before;
      tsc = before + best_span / 2;
      ns = clock;
    }
  }
  return best_span < kMaxSpanTicks;
}
#endif

void publish(const TscMap& m) {
  g_tsc_map.seq.store(g_seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  g_tsc_map.base_tsc.store(m.base_tsc, std::memory_order_relaxed);
  g_tsc_map.base_ns.store(m.base_ns, std::memory_order_relaxed);
  g_tsc_map.mult.store(m.mult, std::memory_order_relaxed);
  g_seq += 2;
  g_tsc_map.seq.store(g_seq, std::memory_order_release);
}

}  // namespace

const char* tsc_clock_unavailable() {
#if !defined(__x86_64__)
  return "the TSC is read on x86-64 only";
#else
  // The kernel keeps CLOCK_MONOTONIC on the TSC only when it found it constant and in
  // step on every CPU; on any other clocksource the TSC is not trusted here either.
  int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "the kernel's clocksource is unknown";
  char buf[32] = {};
  ssize_t got = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (got < 3 || strncmp(buf, "tsc", 3) != 0 || (buf[3] != '\n' && buf[3] != '\0')) {
    return "the kernel's clocksource is not the TSC";
  }
  int mode = 0;
  if (prctl(PR_GET_TSC, &mode, 0, 0, 0) != 0 || mode != PR_TSC_ENABLE) return "the process may not read the TSC";
  return nullptr;
#endif
}

bool tsc_clock_tick() {
#if defined(__x86_64__)
  uint64_t tsc = 0;
  uint64_t ns = 0;
  if (!read_pair(tsc, ns)) return false;
  const bool first = g_steering.map().mult == 0;
  if (!g_steering.update(tsc, ns)) return false;
  publish(g_steering.map());
  return first;
#else
  return false;
#endif
}

TscMap tsc_clock_map() { return g_steering.map(); }

}  // namespace torchprof::inject
