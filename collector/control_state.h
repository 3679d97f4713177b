// The launcher's side of on-demand capture: whether the run records, the capture
// windows it opened, and the Control messages that tell every process so.
//
// Window ids count from 1 in the order `torchprof start` / `trigger` (or SIGUSR2 with
// --capture-range signal) made them. A start opens window W and the next stop closes
// it; a trigger arms window W in every process, and the first process that meets a
// step boundary opens it (WindowEvent) and closes it N steps later; the processes that
// have no steps of their own follow it (Control with kControlFollow).
//
// Thread-safe: the control socket's thread, the launcher's main thread (signals) and
// the collector's loop thread use it.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "common/wire/wire.h"

namespace torchprof {

class ControlState {
 public:
  enum class WindowStatus { kUnknown, kArmed, kOpen, kClosed };

  // `paused`: the processes start paused (torchprof-run --paused).
  explicit ControlState(bool paused);

  // Each returns the Control to send to every process, and sets *window to the window
  // it concerns; nullopt (and *error set) when there is nothing to do.
  std::optional<wire::Control> start(uint32_t* window, std::string* error);
  std::optional<wire::Control> stop(uint32_t* window, std::string* error);
  std::optional<wire::Control> trigger(uint32_t steps, uint32_t* window, std::string* error);
  // SIGUSR2 with --capture-range signal: stop when recording, else start.
  std::optional<wire::Control> toggle(uint32_t* window, std::string* error);

  // A process's own step boundary opened or closed `e.window`: the Control the other
  // processes are to follow, once per window and direction.
  std::optional<wire::Control> on_window_event(const wire::WindowEvent& e);

  // What a process that connects now is sent after its HelloAck; nullopt while the run
  // was never controlled (not paused, no command yet): such a process records as before.
  std::optional<wire::Control> state_for_new_process() const;

  WindowStatus status(uint32_t window) const;
  bool recording() const;

 private:
  struct Window {
    WindowStatus status = WindowStatus::kUnknown;
    bool trigger = false;
    uint32_t steps = 0;
  };

  mutable std::mutex mu_;
  bool controlled_;
  wire::Control current_{};  // the last command, as a new process should see it
  uint32_t next_window_ = 1;
  uint32_t open_window_ = 0;  // the window a start opened, or a trigger armed or opened
  std::map<uint32_t, Window> windows_;
};

// "start" | "stop" | "trigger N" | "status W": the control socket's requests (one line
// each). Returns the reply line (without the newline).
std::string handle_control_request(ControlState& state, const std::string& request,
                                   std::optional<wire::Control>* to_send);

}  // namespace torchprof
