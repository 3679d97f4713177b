// Calibration of the TSC map that now_ns() reads (clock.h). Only the flusher thread
// calls tsc_clock_tick(), once per wake; the map it publishes is what every other
// thread reads.
#pragma once

#include <cstdint>

#include "inject/clock.h"

namespace torchprof::inject {

// Keeps a TscMap on CLOCK_MONOTONIC, fed with (TSC, CLOCK_MONOTONIC) pairs read back
// to back. Pure: no clock is read here, so tests feed it any clock they like.
//
// The first map comes from two pairs at least kFirstAfterNs apart. Every kEveryNs after
// that the map is re-anchored where the old one stands at the new pair's TSC (so time
// never jumps), at the rate measured over the last kWindow pairs (about a second),
// bent to take the old map's error away over kSteerNs, at most kMaxSlewPpm off that
// rate. An error beyond kResetErrNs (the machine slept, or the process moved to
// another host) starts over from the new pair. Where NTP changes CLOCK_MONOTONIC's
// rate by R ppm at once, the map lags by up to about R * kSteerNs until the window has
// measured the new rate: 100 ppm, 20 us.
class TscSteering {
 public:
  static constexpr uint64_t kFirstAfterNs = 20'000'000;
  static constexpr uint64_t kEveryNs = 25'000'000;
  static constexpr int kWindow = 40;
  static constexpr int64_t kSteerNs = 200'000'000;
  static constexpr int64_t kMaxSlewPpm = 1000;
  static constexpr int64_t kResetErrNs = 1'000'000;

  // True when `map` changed and is to be published.
  bool update(uint64_t tsc, uint64_t ns) {
    if (count_ == 0 || tsc <= oldest().tsc || ns <= oldest().ns) {  // the start, or a clock that went back
      restart(tsc, ns);
      return false;
    }
    const uint64_t rate = rate_since_oldest(tsc, ns);
    if (map_.mult == 0) {
      if (ns - oldest().ns < kFirstAfterNs || rate == 0) return false;
      map_ = {tsc, ns, rate};
      remember(tsc, ns);
      return true;
    }
    if (ns - newest().ns < kEveryNs) return false;
    const uint64_t here = tsc_map_ns(map_, tsc);
    const auto error = static_cast<int64_t>(here - ns);
    if (error > kResetErrNs || error < -kResetErrNs || rate == 0) {
      map_ = {tsc, ns, map_.mult};
      restart(tsc, ns);
      resets_++;
      return true;
    }
    // The rate minus error / kSteerNs, clamped: ahead of the clock (error > 0) runs slower.
    const int64_t max_bend = static_cast<int64_t>(rate / 1'000'000 * kMaxSlewPpm);
    int64_t bend = static_cast<int64_t>(static_cast<__int128>(rate) * error / kSteerNs);
    bend = bend > max_bend ? max_bend : (bend < -max_bend ? -max_bend : bend);
    map_ = {tsc, here, static_cast<uint64_t>(static_cast<int64_t>(rate) - bend)};
    remember(tsc, ns);
    return true;
  }

  const TscMap& map() const { return map_; }
  uint64_t resets() const { return resets_; }

 private:
  struct Pair {
    uint64_t tsc = 0;
    uint64_t ns = 0;
  };

  const Pair& oldest() const { return window_[(next_ + kWindow - count_) % kWindow]; }
  const Pair& newest() const { return window_[(next_ + kWindow - 1) % kWindow]; }
  void remember(uint64_t tsc, uint64_t ns) {
    window_[next_] = {tsc, ns};
    next_ = (next_ + 1) % kWindow;
    if (count_ < kWindow) ++count_;
  }
  void restart(uint64_t tsc, uint64_t ns) {
    count_ = 0;
    remember(tsc, ns);
  }

  // Nanoseconds per tick over the window, 32.32; 0 when it does not fit.
  uint64_t rate_since_oldest(uint64_t tsc, uint64_t ns) const {
    const Pair& from = oldest();
    const auto rate = (static_cast<unsigned __int128>(ns - from.ns) << 32) / (tsc - from.tsc);
    return rate >> 63 != 0 ? 0 : static_cast<uint64_t>(rate);
  }

  Pair window_[kWindow];
  int next_ = 0;
  int count_ = 0;
  uint64_t resets_ = 0;
  TscMap map_;
};

// Why now_ns() cannot use the TSC in this process (not x86-64, the kernel's
// clocksource is another, the TSC is disabled by prctl), or nullptr.
const char* tsc_clock_unavailable();

// The flusher's call on each wake: reads a pair and publishes the map when it
// changes. Returns true the first time a map is published.
bool tsc_clock_tick();

// The map now published (mult 0 before the first).
TscMap tsc_clock_map();

}  // namespace torchprof::inject
