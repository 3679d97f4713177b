// The library's own threads and the futex words its waiters sleep on.
#pragma once

#include <atomic>
#include <cstdint>

namespace torchprof::inject {

// Starts `fn(arg)` on a detached thread that receives no signals (they stay the
// program's). False when the thread could not be made.
bool start_background_thread(void* (*fn)(void*), void* arg);

// Sleeps until `word` has reached `target` (counted with wrap-around: word - target >= 0)
// or the clock (now_ns) passes `deadline_ns`. True when it was reached.
bool wait_for_count(std::atomic<uint32_t>* word, uint32_t target, uint64_t deadline_ns);

// Wakes every waiter of `word`, after the caller has moved it.
void wake_count_waiters(std::atomic<uint32_t>* word);

}  // namespace torchprof::inject
