// Pure helpers of GPU tracing, kept apart from CUPTI and process state so the
// unit tests exercise them directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace torchprof::inject {

// Length of a runtime API name without CUPTI's version tag: "_v" and at least
// four digits ("cudaLaunchKernel_v7000" → 16, "cudaMalloc_v3020" → 10). Driver
// names such as "cuMemcpyHtoD_v2" end in real symbol suffixes and are kept.
inline uint32_t api_name_length(const char* name, uint32_t len) {
  if (name == nullptr) return 0;
  uint32_t digits = 0;
  while (digits < len && name[len - 1 - digits] >= '0' && name[len - 1 - digits] <= '9') ++digits;
  if (digits >= 4 && len >= digits + 3 && name[len - digits - 1] == 'v' && name[len - digits - 2] == '_') {
    return len - digits - 2;
  }
  return len;
}

// Measures (CUPTI clock − our clock) from `tries` readings of CUPTI's clock,
// each bracketed by two of ours; the reading with the narrowest bracket wins
// (least disturbed by preemption). False when CUPTI's clock cannot be read.
inline bool measure_clock_offset(bool (*cupti_now)(uint64_t*), uint64_t (*our_now)(), int tries,
                                 int64_t* offset_ns) {
  uint64_t best_width = UINT64_MAX;
  for (int i = 0; i < tries; ++i) {
    uint64_t before = our_now();
    uint64_t theirs = 0;
    if (!cupti_now(&theirs)) return false;
    uint64_t after = our_now();
    if (after - before < best_width) {
      best_width = after - before;
      *offset_ns = static_cast<int64_t>(theirs - (before + (after - before) / 2));
    }
  }
  return best_width != UINT64_MAX;
}

// CUPTI's correlation ids are 32-bit and wrap on long runs (some 70 minutes at a
// million API calls a second). The id widened to 64 bits is the one nearest to
// `reference`, a recent widened id: calls and the records naming them are never
// 2^31 ids apart. 0 stays 0 (no id).
inline uint64_t widen_correlation(uint32_t raw, uint64_t reference) {
  if (raw == 0) return 0;
  constexpr uint64_t kSpan = uint64_t{1} << 32;
  uint64_t id = (reference & ~(kSpan - 1)) | raw;
  if (id + kSpan / 2 < reference) {
    id += kSpan;
  } else if (id > reference + kSpan / 2 && id >= kSpan) {
    id -= kSpan;
  }
  return id;
}

// The reference is moved only when a widened id enters a new 2^28 block: calls on
// every thread read it, and a store that rare never contends.
constexpr uint64_t kCorrelationBlock = uint64_t{1} << 28;
inline bool correlation_reference_due(uint64_t id, uint64_t reference) {
  return id > reference && id / kCorrelationBlock != reference / kCorrelationBlock;
}

// Record layouts. The structs read here are this header version's (CUDA 13.0:
// CUpti_ActivityKernel10, Device5, Memcpy6, Synchronization2, …). Each CUPTI release's
// struct of a kind is the one before it with fields appended at the end or given to
// padding, never moved: CUDA 12.x writes a prefix of these structs (Kernel9, Memcpy5,
// Synchronization, CudaEvent, Memory3), 13.1+ these with more after them (Kernel11's
// priority, Device6's numTpcs, Kernel12's executionModel), and
// cuptiActivityGetNextRecord steps by the size the loaded CUPTI wrote. So one build reads
// every release from CUDA 12.0 on, each field only where that release has it. The
// releases by the API version cuptiGetVersion reports (cupti_version.h: 19 is 12.0, 22
// 12.4, 24 12.6, 26 12.8, then 130000 13.0, 130100 13.1, 130200 13.2, 130300 13.3).
constexpr uint32_t kOldestReadableCupti = 19;  // CUDA 12.0: Kernel9, the prefix of Kernel10
constexpr uint32_t kNewestKnownCupti = 130300;  // CUDA 13.3: the newest layouts checked
constexpr bool cupti_version_readable(uint32_t version) { return version >= kOldestReadableCupti; }
// CUpti_ActivitySynchronization2's returnValue: from CUDA 12.8 (API version 26) on;
// the 40-byte Synchronization records before it end where it would start.
constexpr bool sync_record_has_return_value(uint32_t version) { return version >= 26; }

// The CUDA release of an API version, for messages: "12.4", "13.1" ("12.x" when unknown).
inline void cupti_release_name(uint32_t version, char* out, size_t size) {
  static constexpr struct {
    uint32_t version;
    const char* release;
  } kReleases[] = {{19, "12.0"}, {20, "12.2"}, {21, "12.3"}, {22, "12.4"}, {23, "12.5"}, {24, "12.6"},
                   {26, "12.8"}, {27, "12.9"}, {28, "12.9"}};
  if (version >= 130000) {
    snprintf(out, size, "%u.%u", version / 10000, version / 100 % 100);
    return;
  }
  for (const auto& r : kReleases) {
    if (r.version == version) {
      snprintf(out, size, "%s", r.release);
      return;
    }
  }
  snprintf(out, size, "%s", version < kOldestReadableCupti ? "before 12.0" : "12.x");
}

// Maps a time on our clock to another client's clock (a TSC, say) from two pairs
// read on both clocks: `first` long ago, `last` recently. The rate comes from the
// two, the position from the recent one; with pairs less than 1 ms apart the rate
// is `rate0`, measured when the client registered its clock.
struct ClockPair {
  uint64_t ours = 0;
  uint64_t theirs = 0;
};
inline double clock_rate(const ClockPair& first, const ClockPair& last) {
  return static_cast<double>(last.theirs - first.theirs) / static_cast<double>(last.ours - first.ours);
}
inline uint64_t map_to_their_clock(uint64_t t, const ClockPair& first, const ClockPair& last, double rate0 = 1.0) {
  if (t == 0) return 0;  // unknown stays unknown
  double rate = rate0;
  if (last.ours > first.ours + 1000000) rate = clock_rate(first, last);
  // Differences in integers, then scaled: clocks near 2^60 (Unix-epoch ns) are 256 ns
  // apart as doubles.
  const auto delta = static_cast<int64_t>(static_cast<double>(static_cast<int64_t>(t - last.ours)) * rate);
  if (delta < 0 && static_cast<uint64_t>(-delta) >= last.theirs) return 1;
  return last.theirs + static_cast<uint64_t>(delta);
}

// Buffers handed to a second CUPTI client hold copies of its records, each after
// its own length, behind a header only this process writes:
//   [magic 8][cookie 8] then { [u64 bytes][record, `bytes` long, 8-byte aligned] }...
// cuptiActivityGetNextRecord walks them with next_shared_record.
constexpr uint64_t kSharedBufferMagic = 0x31534d5054505443ull;  // "CTPTPMS1"
constexpr size_t kSharedHeaderBytes = 16;

inline bool is_shared_buffer(const uint8_t* buffer, size_t valid, uint64_t cookie) {
  if (buffer == nullptr || valid < kSharedHeaderBytes) return false;
  uint64_t head[2];
  memcpy(head, buffer, sizeof head);
  return head[0] == kSharedBufferMagic && head[1] == cookie;
}

// The record after `current` (nullptr: the first) in a shared buffer; false at its end.
inline bool next_shared_record(uint8_t* buffer, size_t valid, uint8_t** current) {
  size_t at = kSharedHeaderBytes;
  if (*current != nullptr) {
    uint64_t bytes = 0;
    memcpy(&bytes, *current - 8, sizeof bytes);
    at = static_cast<size_t>(*current - buffer) + bytes;
  }
  if (at + 8 > valid) return false;
  uint64_t bytes = 0;
  memcpy(&bytes, buffer + at, sizeof bytes);
  if (bytes == 0 || bytes > valid - at - 8) return false;
  *current = buffer + at + 8;
  return true;
}

}  // namespace torchprof::inject
