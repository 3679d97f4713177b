// The one clock of every CPU record: CLOCK_MONOTONIC nanoseconds, read from the TSC
// where the kernel itself counts time with it. The Hello message pairs it with
// CLOCK_REALTIME.
//
// clock_gettime(CLOCK_MONOTONIC) costs two thirds of a recorded push/pop pair (its vDSO
// path orders the TSC read with a fence and retries on a seqlock). Once the flusher
// thread has calibrated the TSC against CLOCK_MONOTONIC (tsc_clock.h), now_ns() reads
// the TSC and maps it to nanoseconds with a multiply: the flusher keeps the map on
// CLOCK_MONOTONIC by re-anchoring it every 25 ms and steering its rate, so a record's
// time stays within nanoseconds of CLOCK_MONOTONIC (microseconds for a second after
// NTP changes that clock's rate abruptly), and the map never goes back. Where now_ns()
// changes between the map and clock_gettime it may step back by the map's error (a
// few nanoseconds); the recorder keeps that out of a thread's records (recorder.cpp).
// Until then, while the map is being replaced, and where the TSC is not used (not
// x86-64, the kernel's clocksource is not the TSC, TORCHPROF_CLOCK=monotonic), now_ns()
// is clock_gettime(CLOCK_MONOTONIC).
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace torchprof::inject {

inline uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // vDSO: no syscall
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// ns = base_ns + (tsc - base_tsc) * mult / 2^32 (mult: nanoseconds per tick, 32.32).
struct TscMap {
  uint64_t base_tsc = 0;
  uint64_t base_ns = 0;
  uint64_t mult = 0;
};

inline uint64_t tsc_map_ns(uint64_t base_tsc, uint64_t base_ns, uint64_t mult, uint64_t tsc) {
  // Signed: a TSC read may land a few cycles before the base a map was made at.
  const auto ticks = static_cast<int64_t>(tsc - base_tsc);
  const auto ns = static_cast<__int128>(ticks) * static_cast<__int128>(mult);
  return base_ns + static_cast<uint64_t>(static_cast<int64_t>(ns >> 32));
}
inline uint64_t tsc_map_ns(const TscMap& m, uint64_t tsc) { return tsc_map_ns(m.base_tsc, m.base_ns, m.mult, tsc); }

// The published map, a seqlock: `seq` is odd while the flusher writes it, and before
// the first map. Readers never wait: an odd or changed `seq` sends them to clock_gettime.
struct PublishedTscMap {
  std::atomic<uint32_t> seq{1};
  std::atomic<uint64_t> base_tsc{0};
  std::atomic<uint64_t> base_ns{0};
  std::atomic<uint64_t> mult{0};
};
extern PublishedTscMap g_tsc_map;

inline uint64_t now_ns() {
#if defined(__x86_64__)
  const uint32_t seq = g_tsc_map.seq.load(std::memory_order_acquire);
  if ((seq & 1) == 0) {
    const uint64_t base_tsc = g_tsc_map.base_tsc.load(std::memory_order_relaxed);
    const uint64_t base_ns = g_tsc_map.base_ns.load(std::memory_order_relaxed);
    const uint64_t mult = g_tsc_map.mult.load(std::memory_order_relaxed);
    const uint64_t tsc = __rdtsc();
    std::atomic_thread_fence(std::memory_order_acquire);
    if (g_tsc_map.seq.load(std::memory_order_relaxed) == seq) return tsc_map_ns(base_tsc, base_ns, mult, tsc);
  }
#endif
  return monotonic_ns();
}

}  // namespace torchprof::inject
