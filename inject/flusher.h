// The one background thread per process: drains every thread's stream every
// TORCHPROF_FLUSH_MS (or when a producer passes half a segment or moves to another; the
// largest backlog first), makes spare segments ready for the threads that fill theirs
// quickly and gives back what no thread needs (segment_pool.h), delta-encodes and
// compresses each thread's records into a Frame and sends it; answers final-flush requests
// (exit, signal, exec) with a last drain and a Bye.
#pragma once

#include "inject/process_state.h"

namespace torchprof::inject {

// Starts the flusher of `ps` with every signal blocked (fatal signals must hit
// the program's threads, where our handler runs). False when it cannot start.
bool start_flusher(ProcessState* ps);

}  // namespace torchprof::inject
