// On-demand capture: whether this process records right now.
//
// One process-wide word, read relaxed at the top of every NVTX entry point and CUPTI API
// callback; its low two bits are the mode, and only kRecording (0) takes the usual path,
// so a recording process pays one load and one predictable branch more, and a paused one
// returns after that branch and the bookkeeping below.
//
//   kRecording  record everything (the default, and `torchprof start`)
//   kPaused     record nothing new (TORCHPROF_PAUSED=1, `torchprof stop`)
//   kArmed      paused, waiting for the next step boundary of a trigger
//   kCounting   recording a trigger's steps: the Nth boundary after the first pauses again
//
// While paused the library keeps what must survive a pause: string, domain and category
// definitions and thread names are recorded as always; every NVTX push is counted so
// push/pop levels stay right, and a pop or range end that closes a range opened while
// recording is still recorded, so no recorded range is left open and no pop of a range
// pushed while paused closes a recorded one (inject/recorder.cpp).
//
// A step boundary is the start of a "ProfilerStep#…" range or mark the program names,
// or the end of one of the Python bootstrap's automatic steps (torchprof_step_range):
// the step markers the analysis finds by default. A trigger arms every process; the
// first one that meets a boundary opens the window and tells the collector
// (WindowEvent), which has every process that has shown no steps of its own follow it
// (Control with kControlFollow); a process that has shown steps counts its own.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/wire/wire.h"
#include "inject/process_state.h"
#include "inject/thread_buffer.h"

namespace torchprof::inject {


namespace capture {

enum Mode : uint64_t { kRecording = 0, kPaused = 1, kArmed = 2, kCounting = 3 };

// mode (bits 0-1) | steps left (bits 2-31) | window id (bits 32-63).
extern constinit std::atomic<uint64_t> g_word;

inline uint64_t word() { return g_word.load(std::memory_order_relaxed); }
inline Mode mode_of(uint64_t w) { return static_cast<Mode>(w & 3); }
inline uint32_t window_of(uint64_t w) { return static_cast<uint32_t>(w >> 32); }
inline uint32_t steps_of(uint64_t w) { return static_cast<uint32_t>(w >> 2) & 0x3fffffffu; }
inline uint64_t make_word(Mode m, uint32_t steps, uint32_t window) {
  return static_cast<uint64_t>(m) | (uint64_t{steps & 0x3fffffffu} << 2) | (uint64_t{window} << 32);
}
inline bool records(uint64_t w) { return mode_of(w) == kRecording || mode_of(w) == kCounting; }
// Whether CUPTI's activity kinds are to be on: while recording, and while a trigger is
// armed, so that the GPU work of the window's first step is not missed while the
// flusher catches up (what runs before the window falls outside its steps).
inline bool collects_gpu(uint64_t w) { return mode_of(w) != kPaused; }
// Whether the process records as usual: one load and one predictable branch.
inline bool fast() { return mode_of(word()) == kRecording; }

// What a switch did: the window record to write and, for a trigger's own boundary,
// the WindowEvent to send.
struct Switch {
  bool changed = false;  // recording turned on or off
  bool on = false;
  uint32_t window = 0;
  wire::CaptureSource source = wire::CaptureSource::kCommand;
};

// The pure state machine behind both (table-tested in tests/unit).
// `has_steps`: this process has shown a step marker of its own.
Switch apply_control(uint64_t& w, const wire::Control& c, bool has_steps);
// At a step boundary; a no-op unless armed or counting.
Switch apply_boundary(uint64_t& w);

// Whether `name` (len bytes, or NUL-terminated when len is ~0u) starts "ProfilerStep#".
bool is_step_name(const char* name, uint32_t len);

// Library side ----------------------------------------------------------------

// From the library constructor: paused when TORCHPROF_PAUSED=1.
void init(bool paused);
// In a forked child: its steps are not its parent's.
void fork_child();

// At a step boundary met on the calling thread at `ts` (0 = now): switches (CAS on the
// word) and writes the window record into `tb`. Returns whether this process records
// after it.
bool step_boundary(ThreadBuffer* tb, uint64_t ts = 0);

// Off the fast path, for a push, start or mark named `text` (nullptr: not ASCII): a
// trigger's step boundary when it is a step marker; then whether to record it.
bool admit(ThreadBuffer* tb, const char* text);

// A push while paused: the level is counted and marked as not recorded (levels below
// 64), so that record_pop() leaves out its pop but records the pop of a level that was.
inline int paused_push(ThreadBuffer* tb, uint16_t domain) {
  const uint32_t slot = domain % ThreadBuffer::kDepthSlots;
  const int level = tb->depth[slot]++;
  if (level >= 0 && level < 64) tb->unrecorded[slot] |= uint64_t{1} << level;
  return level;
}

// In record_pop while recording: true (and the mark cleared) when the push of `level`
// was made while paused, so its pop is not recorded either.
inline bool skip_pop(uint64_t& unrecorded, int level) {
  if (level >= 64 || ((unrecorded >> level) & 1) == 0) return false;
  unrecorded &= ~(uint64_t{1} << level);
  return true;
}

// The paused fast path, before any guard: true (and *level set) when the call is
// done. Only in plain kPaused, on a thread that has its buffer and is not inside one
// of our callbacks; anything else (armed, first event, re-entry) takes the full path.
inline ThreadBuffer* paused_buffer(uint64_t w) {
  if (mode_of(w) != kPaused) return nullptr;
  const ThreadSlot& s = t_slot;
  if (s.busy || s.buf == nullptr || s.gen != g_generation.load(std::memory_order_relaxed)) return nullptr;
  return s.buf;
}
inline bool paused_push_fast(uint64_t w, uint16_t domain, int* level) {
  ThreadBuffer* tb = paused_buffer(w);
  if (tb == nullptr) return false;
  *level = paused_push(tb, domain);
  return true;
}
// A pop of a level pushed while paused (or of nothing) ends here; the pop of a level
// that was recorded takes the full path, which records it.
inline bool paused_pop_fast(uint64_t w, uint16_t domain, int* level) {
  ThreadBuffer* tb = paused_buffer(w);
  if (tb == nullptr) return false;
  const uint32_t slot = domain % ThreadBuffer::kDepthSlots;
  int32_t& depth = tb->depth[slot];
  if (depth <= 0) {
    *level = -1;
    return true;
  }
  if (!skip_pop(tb->unrecorded[slot], depth - 1)) return false;
  *level = --depth;
  return true;
}
// The Python bootstrap's and the program's step markers set this.
void note_has_steps();

// Flusher side: a stream of the flusher's own for the window records of applied
// Controls (registered with the process's threads); nullptr when memory is short.
ThreadBuffer* create_control_stream(ProcessState* ps);
// Applies a Control from the collector and writes its window record into
// `tb` (the flusher's own control stream).
void control(ThreadBuffer* tb, const wire::Control& c);
// Whether applying `c` now would leave activity collection on (the flusher enables the
// kinds before a start takes effect).
bool collects_gpu_after(const wire::Control& c);
// Window events that a step boundary produced since the last call, for the collector.
// Returns how many were written to `out` (at most `max`).
int take_window_events(wire::WindowEvent* out, int max);

}  // namespace capture
}  // namespace torchprof::inject
