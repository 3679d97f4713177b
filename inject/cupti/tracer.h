// GPU tracing through CUPTI: set up from InitializeInjection (the CUDA driver
// calls it at cuInit when CUDA_INJECTION64_PATH names this library), API
// callbacks on the program's threads, and the forced flushes at the ends.
#pragma once

#include <cstdint>

#include "inject/config.h"

namespace torchprof::inject {

// One notice line: on stderr at `level` and as a kGpuNotice record, so the report
// and summary.json show it too.
void gpu_notice_line(LogLevel level, const char* text);

// A kCuptiClient record: the program's own CUPTI client subscribed, served that way
// (subscribers.h's HubPath), the program's `subscribes` so far, from `library`.
enum class HubPath : uint8_t;
void gpu_client_record(HubPath path, uint32_t subscribes, const char* library);

// Body of InitializeInjection: loads CUPTI, subscribes, enables callbacks and
// activity kinds. On any failure GPU tracing stays off with one notice line
// (stderr and a kGpuNotice record); the program goes on untouched. A process
// that loads CUDA's libraries but never gets here says so at exit.
void cupti_initialize();

// The library's destructor, before its final flush: a process that loaded CUDA's
// libraries but never got to cupti_initialize says so (one notice line).
void cupti_process_exiting();

// Flusher, every round: on-demand capture's activity kinds follow the recording switch
// (capture_control.h). Off: our kinds are disabled (those a second client wants stay)
// and a non-forced flush is asked for; on: enabled again. Never in a CUPTI callback.
void cupti_follow_recording(bool recording);

// Flusher, on a final flush request: makes CUPTI hand over every buffer
// (cuptiActivityFlushAll forced), waiting at most `timeout_ms`. Does nothing
// when GPU tracing is off, in a forked child, or when the exit handler already did it.
void cupti_flush_for_exit(uint32_t timeout_ms);

}  // namespace torchprof::inject
