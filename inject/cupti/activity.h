// CUPTI activity buffers and their conversion into wire records.
//
// CUPTI asks for buffers and hands them back full on its own thread; that
// thread only queues them here (a short mutex, never held while calling CUPTI).
// The flusher thread later walks each queued buffer and writes one record per
// kernel, copy, set, allocation, synchronisation and device into the "GPU
// stream": a ThreadBuffer the flusher owns, framed and counted like any thread.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "inject/cupti/support.h"
#include "inject/thread_buffer.h"

namespace torchprof::inject {

// The GPU stream's pseudo tid: the pid with bit 30 set, which no OS tid has
// (pid_max is at most 2^22), so it never collides with a real thread.
constexpr uint32_t gpu_stream_tid(int pid) { return static_cast<uint32_t>(pid) | 0x40000000u; }

// Registered with cuptiActivityRegisterCallbacks.
void CUPTIAPI cupti_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records);
void CUPTIAPI cupti_buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t size,
                                     size_t valid_size);

// GPU timestamps are CUPTI's minus this offset. 0 when CUPTI calls our
// timestamp callback (then both sides read the same clock).
void set_gpu_clock_offset(int64_t offset_ns);
int64_t gpu_clock_offset();

// Turns conversion on (InitializeInjection, after the callbacks are registered), for
// the records of the CUPTI reporting `cupti_version` (cupti/support.h: each field read
// only where that release writes it). `api_calls`: the
// RUNTIME and DRIVER records are ours (TORCHPROF_CUDA_API=activity), not only a second
// client's; those of calls that began before `api_since` (our clock) are not.
void gpu_activity_enable(uint32_t cupti_version, bool api_calls, uint64_t api_since);
bool gpu_activity_enabled();

// The most recent widened correlation id (cupti/support.h): API callbacks move
// it, completed buffers take a copy, so both widen ids the same way.
extern std::atomic<uint64_t> g_correlation_reference;

// An API callback's correlation id, widened to 64 bits (hot path).
inline uint64_t widen_api_correlation(uint32_t raw) {
  const uint64_t reference = g_correlation_reference.load(std::memory_order_relaxed);
  const uint64_t id = widen_correlation(raw, reference);
  if (__builtin_expect(correlation_reference_due(id, reference), 0)) {
    g_correlation_reference.store(id, std::memory_order_relaxed);
  }
  return id;
}

// Buffers CUPTI has been handed by cupti_buffer_requested and not given back.
int gpu_buffers_outstanding();

// Exit: true once every buffer CUPTI completed so far has been converted, waiting
// (the flusher converts them) until `deadline_ns` on our clock at most.
bool gpu_activity_wait_converted(uint64_t deadline_ns);

enum class ConvertStatus {
  kDone,      // nothing queued any more
  kNeedRoom,  // `tb`'s ring is short of room: drain it, then call again
};

// Flusher side: converts queued buffers into records in `tb`.
ConvertStatus convert_gpu_activity(ThreadBuffer* tb);

// Flusher side: keeps a buffer ready (faulted in) for CUPTI's next request, within the cap.
void gpu_buffers_make_ready();

// Forked child: the parent's queued buffers and CUPTI state are abandoned untouched.
void gpu_activity_forget_after_fork();

}  // namespace torchprof::inject
