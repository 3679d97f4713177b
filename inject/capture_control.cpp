#include "inject/capture_control.h"

#include <semaphore.h>

#include <cstring>

#include "inject/clock.h"
#include "inject/config.h"
#include "inject/process_state.h"
#include "inject/recorder.h"
#include "inject/thread_buffer.h"

namespace torchprof::inject::capture {

constinit std::atomic<uint64_t> g_word{0};

namespace {

constexpr char kStepPrefix[] = "ProfilerStep#";
constexpr uint32_t kStepPrefixLen = sizeof(kStepPrefix) - 1;

std::atomic<bool> g_has_steps{false};

// Window events of this process's own step boundaries, for the flusher to send. One
// window opens and closes at a time, so the latest of each is enough.
std::atomic<uint32_t> g_opened{0};
std::atomic<uint64_t> g_opened_ts{0};
std::atomic<uint32_t> g_closed{0};
std::atomic<uint64_t> g_closed_ts{0};
uint32_t g_sent_opened = 0;  // flusher only
uint32_t g_sent_closed = 0;

Switch to(uint64_t& w, uint64_t next, wire::CaptureSource source) {
  Switch s;
  s.changed = records(w) != records(next);
  s.on = records(next);
  s.window = s.on ? window_of(next) : window_of(w);  // an off closes the window that was open
  s.source = source;
  w = next;
  return s;
}

// Whether a follower's start/stop for `window` concerns this process: not when it
// counts that window's steps itself.
bool counts_itself(uint64_t w, uint32_t window, bool has_steps) {
  return has_steps && window_of(w) == window && (mode_of(w) == kArmed || mode_of(w) == kCounting);
}

void write_window(ThreadBuffer* tb, const Switch& s, uint64_t ts) {
  if (tb == nullptr || !s.changed) return;
  wire::Record r{static_cast<uint8_t>(wire::Kind::kCaptureWindow), 0, static_cast<uint16_t>(s.source), 0, ts,
                 s.window, s.on ? 1u : 0u};
  record_with_extra(tb, NameRef{}, r, nullptr, 0);
}

}  // namespace

Switch apply_control(uint64_t& w, const wire::Control& c, bool has_steps) {
  const bool follow = (c.flags & wire::kControlFollow) != 0;
  if (follow && counts_itself(w, c.window, has_steps)) return Switch{};
  switch (static_cast<wire::ControlCommand>(c.command)) {
    case wire::ControlCommand::kStop:
      return to(w, make_word(kPaused, 0, c.window),
                follow ? wire::CaptureSource::kFollow : wire::CaptureSource::kCommand);
    case wire::ControlCommand::kStart:
      return to(w, make_word(kRecording, 0, c.window),
                follow ? wire::CaptureSource::kFollow : wire::CaptureSource::kCommand);
    case wire::ControlCommand::kTrigger:
      // A trigger is armed once: sent again (a broadcast crossing the state sent at
      // connect) or after its window closed, it changes nothing.
      if (c.steps == 0 || c.window == window_of(w)) return Switch{};
      return to(w, make_word(kArmed, c.steps, c.window), wire::CaptureSource::kTrigger);
  }
  return Switch{};
}

Switch apply_boundary(uint64_t& w) {
  switch (mode_of(w)) {
    case kArmed:
      return to(w, make_word(kCounting, steps_of(w), window_of(w)), wire::CaptureSource::kTrigger);
    case kCounting: {
      const uint32_t left = steps_of(w) - 1;
      return to(w, make_word(left == 0 ? kPaused : kCounting, left, window_of(w)), wire::CaptureSource::kTrigger);
    }
    default:
      return Switch{};
  }
}

bool is_step_name(const char* name, uint32_t len) {
  if (name == nullptr) return false;
  if (len == ~0u) return strncmp(name, kStepPrefix, kStepPrefixLen) == 0;
  return len >= kStepPrefixLen && memcmp(name, kStepPrefix, kStepPrefixLen) == 0;
}

void init(bool paused) { g_word.store(paused ? make_word(kPaused, 0, 0) : 0, std::memory_order_relaxed); }

void fork_child() {
  g_has_steps.store(false, std::memory_order_relaxed);
  g_opened.store(0, std::memory_order_relaxed);
  g_closed.store(0, std::memory_order_relaxed);
  g_sent_opened = g_sent_closed = 0;
  // A child of a process counting a trigger's steps follows that window until the
  // collector says otherwise; the state it is sent at connect replaces this.
  const uint64_t w = word();
  if (mode_of(w) == kCounting) g_word.store(make_word(kRecording, 0, window_of(w)), std::memory_order_relaxed);
}

void note_has_steps() {
  if (!g_has_steps.load(std::memory_order_relaxed)) g_has_steps.store(true, std::memory_order_relaxed);
}

bool step_boundary(ThreadBuffer* tb, uint64_t at) {
  note_has_steps();
  uint64_t old = word();
  for (;;) {
    uint64_t next = old;
    const Switch s = apply_boundary(next);
    if (next == old) return records(old);
    if (g_word.compare_exchange_weak(old, next, std::memory_order_relaxed)) {
      if (s.changed) {
        const uint64_t ts = at != 0 ? at : now_ns();
        write_window(tb, s, ts);
        if (s.on) {
          g_opened_ts.store(ts, std::memory_order_relaxed);
          g_opened.store(s.window, std::memory_order_release);
        } else {
          g_closed_ts.store(ts, std::memory_order_relaxed);
          g_closed.store(s.window, std::memory_order_release);
        }
        // Once per window edge: the flusher switches CUPTI's kinds and tells the
        // collector now rather than at its next round.
        if (tb != nullptr && tb->wake != nullptr) sem_post(tb->wake);
      }
      return records(next);
    }
  }
}

ThreadBuffer* create_control_stream(ProcessState* ps) {
  // A tid no OS thread has (pid | 0x20000000; the GPU stream uses 0x40000000).
  const uint32_t tid = static_cast<uint32_t>(ps->pid) | 0x20000000u;
  ThreadBuffer* tb = create_thread_buffer(16, tid, /*is_main=*/false, &ps->wake, /*huge_pages=*/false);
  if (tb == nullptr) return nullptr;
  pthread_mutex_lock(&ps->threads_mu);
  ps->threads.push_back(tb);
  pthread_mutex_unlock(&ps->threads_mu);
  return tb;
}

void control(ThreadBuffer* tb, const wire::Control& c) {
  const bool has_steps = g_has_steps.load(std::memory_order_relaxed) || program_marks_steps();
  uint64_t old = word();
  for (;;) {
    uint64_t next = old;
    Switch s = apply_control(next, c, has_steps);
    if (next == old) return;
    // A start is stamped before it takes effect, a stop after, so that every record
    // made while recording lies inside the window.
    const uint64_t before = now_ns();
    if (g_word.compare_exchange_weak(old, next, std::memory_order_relaxed)) {
      write_window(tb, s, s.on ? before : now_ns());
      return;
    }
  }
}

bool admit(ThreadBuffer* tb, const char* text) {
  const uint64_t w = word();
  const Mode m = mode_of(w);
  if ((m == kArmed || m == kCounting) && is_step_name(text, ~0u)) return step_boundary(tb);
  return records(w);
}


bool collects_gpu_after(const wire::Control& c) {
  uint64_t w = word();
  apply_control(w, c, g_has_steps.load(std::memory_order_relaxed) || program_marks_steps());
  return collects_gpu(w);
}

int take_window_events(wire::WindowEvent* out, int max) {
  int n = 0;
  const uint32_t opened = g_opened.load(std::memory_order_acquire);
  if (opened != g_sent_opened && n < max) {
    out[n++] = wire::WindowEvent{opened, 1, g_opened_ts.load(std::memory_order_relaxed)};
    g_sent_opened = opened;
  }
  const uint32_t closed = g_closed.load(std::memory_order_acquire);
  if (closed != g_sent_closed && n < max) {
    out[n++] = wire::WindowEvent{closed, 0, g_closed_ts.load(std::memory_order_relaxed)};
    g_sent_closed = closed;
  }
  return n;
}

}  // namespace torchprof::inject::capture
