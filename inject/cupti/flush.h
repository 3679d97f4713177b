// cuptiActivityFlushAll, always on a helper thread of ours. A flush may wait on the
// device or on CUPTI's own worker, and one asked for inside a callback on the
// program's thread could wait on a lock that thread holds: callers wait for it a
// bounded time, and a flush that takes longer goes on alone. The same thread
// makes a default (non-forced) flush every TORCHPROF_GPU_FLUSH_MS, since CUPTI
// hands back only full buffers otherwise: records then arrive while the program
// runs, and a SIGKILL loses at most one interval of them.
#pragma once

#include <cstdint>

namespace torchprof::inject {

// Starts the thread (once activity buffers are registered). False if it could not.
bool cupti_flush_start();

// Asks for a flush (forced: every buffer, records of work still queued
// incomplete; otherwise the completed ones) and waits at most `timeout_ms` for
// it. True when it finished in time.
bool cupti_flush_bounded(uint32_t timeout_ms, bool forced);

// How long a callback on a program thread waits for its flush (profiler stop,
// device reset, context destruction).
constexpr uint32_t kCallbackFlushMs = 200;

// Exit: no more periodic flushes (CUDA's teardown follows the exit flush).
void cupti_flush_stop_periodic();

// Forked child: the thread is not there; nothing is ever flushed.
void cupti_flush_forget_after_fork();

}  // namespace torchprof::inject
