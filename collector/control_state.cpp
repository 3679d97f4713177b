#include "collector/control_state.h"

#include <cstdlib>

namespace torchprof {
namespace {

wire::Control make(wire::ControlCommand command, uint32_t window, uint32_t steps = 0, uint32_t flags = 0) {
  return wire::Control{static_cast<uint32_t>(command), window, steps, flags};
}

}  // namespace

ControlState::ControlState(bool paused) : controlled_(paused) {
  current_ = make(paused ? wire::ControlCommand::kStop : wire::ControlCommand::kStart, 0);
  if (!paused) windows_[0].status = WindowStatus::kOpen;  // the run records from its start
}

bool ControlState::recording() const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = windows_.find(open_window_);
  return it != windows_.end() && it->second.status == WindowStatus::kOpen;
}

std::optional<wire::Control> ControlState::start(uint32_t* window, std::string* error) {
  std::lock_guard<std::mutex> lock(mu_);
  Window& open = windows_[open_window_];
  if (open.status == WindowStatus::kOpen) {
    *window = open_window_;
    *error = "already recording (window " + std::to_string(open_window_) + ")";
    return std::nullopt;
  }
  if (open.status == WindowStatus::kArmed) open.status = WindowStatus::kClosed;  // the trigger is replaced
  controlled_ = true;
  open_window_ = *window = next_window_++;
  windows_[open_window_].status = WindowStatus::kOpen;
  current_ = make(wire::ControlCommand::kStart, open_window_);
  return current_;
}

std::optional<wire::Control> ControlState::stop(uint32_t* window, std::string* error) {
  std::lock_guard<std::mutex> lock(mu_);
  Window& open = windows_[open_window_];
  *window = open_window_;
  if (open.status != WindowStatus::kOpen && open.status != WindowStatus::kArmed) {
    *error = "not recording";
    return std::nullopt;
  }
  open.status = WindowStatus::kClosed;
  controlled_ = true;
  current_ = make(wire::ControlCommand::kStop, open_window_);
  return current_;
}

std::optional<wire::Control> ControlState::trigger(uint32_t steps, uint32_t* window, std::string* error) {
  std::lock_guard<std::mutex> lock(mu_);
  Window& open = windows_[open_window_];
  if (open.trigger && (open.status == WindowStatus::kArmed || open.status == WindowStatus::kOpen)) {
    *window = open_window_;
    *error = "a trigger is still pending (window " + std::to_string(open_window_) + ")";
    return std::nullopt;
  }
  if (steps == 0) {
    *error = "--steps must be at least 1";
    return std::nullopt;
  }
  if (open.status == WindowStatus::kOpen) open.status = WindowStatus::kClosed;  // recording stops until the boundary
  controlled_ = true;
  open_window_ = *window = next_window_++;
  Window& w = windows_[open_window_];
  w.status = WindowStatus::kArmed;
  w.trigger = true;
  w.steps = steps;
  current_ = make(wire::ControlCommand::kTrigger, open_window_, steps);
  return current_;
}

std::optional<wire::Control> ControlState::toggle(uint32_t* window, std::string* error) {
  if (recording()) return stop(window, error);
  return start(window, error);  // also replaces a trigger still armed
}

std::optional<wire::Control> ControlState::on_window_event(const wire::WindowEvent& e) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = windows_.find(e.window);
  if (it == windows_.end() || !it->second.trigger) return std::nullopt;
  Window& w = it->second;
  if (e.open != 0 && w.status == WindowStatus::kArmed) {
    w.status = WindowStatus::kOpen;
    current_ = make(wire::ControlCommand::kStart, e.window, 0, wire::kControlFollow);
    return current_;
  }
  if (e.open == 0 && w.status == WindowStatus::kOpen) {
    w.status = WindowStatus::kClosed;
    current_ = make(wire::ControlCommand::kStop, e.window, 0, wire::kControlFollow);
    return current_;
  }
  return std::nullopt;
}

std::optional<wire::Control> ControlState::state_for_new_process() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!controlled_) return std::nullopt;
  return current_;
}

ControlState::WindowStatus ControlState::status(uint32_t window) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = windows_.find(window);
  return it == windows_.end() ? WindowStatus::kUnknown : it->second.status;
}

std::string handle_control_request(ControlState& state, const std::string& request,
                                   std::optional<wire::Control>* to_send) {
  uint32_t window = 0;
  std::string error;
  if (request == "start") {
    *to_send = state.start(&window, &error);
  } else if (request == "stop") {
    *to_send = state.stop(&window, &error);
  } else if (request.starts_with("trigger ")) {
    char* end = nullptr;
    const unsigned long steps = std::strtoul(request.c_str() + 8, &end, 10);
    if (end == request.c_str() + 8 || *end != '\0' || steps > 1000000000ul) return "error bad step count";
    *to_send = state.trigger(static_cast<uint32_t>(steps), &window, &error);
  } else if (request.starts_with("status ")) {
    const unsigned long id = std::strtoul(request.c_str() + 7, nullptr, 10);
    switch (state.status(static_cast<uint32_t>(id))) {
      case ControlState::WindowStatus::kArmed: return "armed";
      case ControlState::WindowStatus::kOpen: return "open";
      case ControlState::WindowStatus::kClosed: return "closed";
      case ControlState::WindowStatus::kUnknown: return "unknown";
    }
    return "unknown";
  } else {
    return "error unknown request";
  }
  if (!to_send->has_value()) return "error " + error;
  return "ok window=" + std::to_string(window);
}

}  // namespace torchprof
