// The launcher's on-demand capture state (collector/control_state.h): commands, window
// ids, what a process that connects later is sent, and the control socket's requests.
#include <doctest/doctest.h>

#include <optional>
#include <string>

#include "collector/control_state.h"

namespace tw = torchprof::wire;
using torchprof::ControlState;
using torchprof::handle_control_request;

namespace {

uint32_t command(const std::optional<tw::Control>& c) { return c ? c->command : 99u; }

}  // namespace

TEST_CASE("control state: an uncontrolled run sends nothing to new processes") {
  ControlState s(/*paused=*/false);
  CHECK_FALSE(s.state_for_new_process().has_value());
  CHECK(s.recording());
  uint32_t w = 0;
  std::string error;
  // A stop of a run that records from its start closes window 0.
  const std::optional<tw::Control> stop = s.stop(&w, &error);
  REQUIRE(stop.has_value());
  CHECK(w == 0);
  CHECK(command(s.state_for_new_process()) == static_cast<uint32_t>(tw::ControlCommand::kStop));
  CHECK_FALSE(s.recording());
}

TEST_CASE("control state: start and stop number their windows; a double start is refused") {
  ControlState s(/*paused=*/true);
  CHECK(command(s.state_for_new_process()) == static_cast<uint32_t>(tw::ControlCommand::kStop));
  uint32_t w = 0;
  std::string error;
  REQUIRE(s.start(&w, &error).has_value());
  CHECK(w == 1);
  CHECK(s.status(1) == ControlState::WindowStatus::kOpen);
  CHECK_FALSE(s.start(&w, &error).has_value());
  CHECK(error.find("already recording") != std::string::npos);
  const std::optional<tw::Control> late = s.state_for_new_process();
  REQUIRE(late.has_value());
  CHECK(late->command == static_cast<uint32_t>(tw::ControlCommand::kStart));
  CHECK(late->window == 1);
  REQUIRE(s.stop(&w, &error).has_value());
  CHECK(s.status(1) == ControlState::WindowStatus::kClosed);
  CHECK_FALSE(s.stop(&w, &error).has_value());
  REQUIRE(s.start(&w, &error).has_value());
  CHECK(w == 2);
}

TEST_CASE("control state: a trigger is armed, opened and closed by window events, once each") {
  ControlState s(/*paused=*/true);
  uint32_t w = 0;
  std::string error;
  const std::optional<tw::Control> t = s.trigger(5, &w, &error);
  REQUIRE(t.has_value());
  CHECK(t->command == static_cast<uint32_t>(tw::ControlCommand::kTrigger));
  CHECK(t->steps == 5);
  CHECK(s.status(w) == ControlState::WindowStatus::kArmed);
  CHECK_FALSE(s.trigger(2, &w, &error).has_value());  // one pending trigger at a time
  const std::optional<tw::Control> open = s.on_window_event(tw::WindowEvent{1, 1, 100});
  REQUIRE(open.has_value());
  CHECK(open->command == static_cast<uint32_t>(tw::ControlCommand::kStart));
  CHECK((open->flags & tw::kControlFollow) != 0);
  CHECK_FALSE(s.on_window_event(tw::WindowEvent{1, 1, 101}).has_value());  // a second stepper
  CHECK(s.status(1) == ControlState::WindowStatus::kOpen);
  const std::optional<tw::Control> close = s.on_window_event(tw::WindowEvent{1, 0, 200});
  REQUIRE(close.has_value());
  CHECK(close->command == static_cast<uint32_t>(tw::ControlCommand::kStop));
  CHECK(s.status(1) == ControlState::WindowStatus::kClosed);
  CHECK_FALSE(s.on_window_event(tw::WindowEvent{1, 0, 201}).has_value());
  CHECK_FALSE(s.on_window_event(tw::WindowEvent{7, 1, 300}).has_value());  // no such window
  REQUIRE(s.trigger(2, &w, &error).has_value());
  CHECK(w == 2);
}

TEST_CASE("control state: the socket's requests and replies") {
  ControlState s(/*paused=*/true);
  std::optional<tw::Control> send;
  CHECK(handle_control_request(s, "start", &send) == "ok window=1");
  CHECK(send.has_value());
  CHECK(handle_control_request(s, "start", &send) == "error already recording (window 1)");
  CHECK(handle_control_request(s, "status 1", &send) == "open");
  CHECK(handle_control_request(s, "stop", &send) == "ok window=1");
  CHECK(handle_control_request(s, "status 1", &send) == "closed");
  CHECK(handle_control_request(s, "status 9", &send) == "unknown");
  CHECK(handle_control_request(s, "trigger 3", &send) == "ok window=2");
  CHECK(handle_control_request(s, "status 2", &send) == "armed");
  CHECK(handle_control_request(s, "trigger x", &send) == "error bad step count");
  CHECK(handle_control_request(s, "trigger 0", &send).starts_with("error"));
  CHECK(handle_control_request(s, "reboot", &send) == "error unknown request");
}

TEST_CASE("control state: SIGUSR2 toggles") {
  ControlState s(/*paused=*/true);
  uint32_t w = 0;
  std::string error;
  CHECK(command(s.toggle(&w, &error)) == static_cast<uint32_t>(tw::ControlCommand::kStart));
  CHECK(w == 1);
  CHECK(command(s.toggle(&w, &error)) == static_cast<uint32_t>(tw::ControlCommand::kStop));
  CHECK(w == 1);
  CHECK(command(s.toggle(&w, &error)) == static_cast<uint32_t>(tw::ControlCommand::kStart));
  CHECK(w == 2);
}
