// Unit tests of on-demand capture in the injected library: the recording state machine
// (Controls and step boundaries) and push/pop levels across a pause.
#include <doctest/doctest.h>
#include <semaphore.h>

#include <vector>

#include "inject/capture_control.h"
#include "inject/recorder.h"
#include "inject/thread_buffer.h"
#include "inject_drain.h"

namespace ti = torchprof::inject;
namespace tc = torchprof::inject::capture;
namespace tw = torchprof::wire;

namespace {

tw::Control ctl(tw::ControlCommand c, uint32_t window, uint32_t steps = 0, uint32_t flags = 0) {
  return tw::Control{static_cast<uint32_t>(c), window, steps, flags};
}

std::vector<tw::Kind> kinds(ti::ThreadBuffer* tb) {
  std::vector<tw::Kind> out;
  for (const tw::Record& r : ti::test::drain_records(tb)) {
    if (r.kind != static_cast<uint8_t>(tw::Kind::kString)) out.push_back(static_cast<tw::Kind>(r.kind));
  }
  return out;
}

}  // namespace

TEST_CASE("capture: start and stop switch recording and name their window") {
  uint64_t w = tc::make_word(tc::kPaused, 0, 0);
  tc::Switch s = tc::apply_control(w, ctl(tw::ControlCommand::kStart, 1), false);
  CHECK(s.changed);
  CHECK(s.on);
  CHECK(s.window == 1);
  CHECK(tc::mode_of(w) == tc::kRecording);
  CHECK(tc::window_of(w) == 1);
  s = tc::apply_control(w, ctl(tw::ControlCommand::kStart, 1), false);
  CHECK_FALSE(s.changed);  // the same state twice changes nothing
  s = tc::apply_control(w, ctl(tw::ControlCommand::kStop, 1), false);
  CHECK(s.changed);
  CHECK_FALSE(s.on);
  CHECK(s.window == 1);
  CHECK(tc::mode_of(w) == tc::kPaused);
}

TEST_CASE("capture: a trigger of 3 steps opens at the next boundary and closes at the third after it") {
  uint64_t w = tc::make_word(tc::kPaused, 0, 0);
  tc::Switch s = tc::apply_control(w, ctl(tw::ControlCommand::kTrigger, 4, 3), false);
  CHECK_FALSE(s.changed);  // paused before, paused (armed) after
  CHECK(tc::mode_of(w) == tc::kArmed);
  s = tc::apply_boundary(w);
  CHECK(s.changed);
  CHECK(s.on);
  CHECK(s.window == 4);
  CHECK(s.source == tw::CaptureSource::kTrigger);
  CHECK(tc::records(w));
  for (int k = 0; k < 2; ++k) {
    s = tc::apply_boundary(w);
    CHECK_FALSE(s.changed);
    CHECK(tc::records(w));
  }
  s = tc::apply_boundary(w);
  CHECK(s.changed);
  CHECK_FALSE(s.on);
  CHECK(s.window == 4);
  CHECK(tc::mode_of(w) == tc::kPaused);
  CHECK_FALSE(tc::apply_boundary(w).changed);  // later boundaries do nothing
  // The same trigger again (a broadcast crossing the state sent at connect) re-arms nothing.
  tc::apply_control(w, ctl(tw::ControlCommand::kTrigger, 4, 3), false);
  CHECK(tc::mode_of(w) == tc::kPaused);
}

TEST_CASE("capture: a trigger while recording stops recording, with the old window's id") {
  uint64_t w = tc::make_word(tc::kRecording, 0, 2);
  tc::Switch s = tc::apply_control(w, ctl(tw::ControlCommand::kTrigger, 3, 1), false);
  CHECK(s.changed);
  CHECK_FALSE(s.on);
  CHECK(s.window == 2);
  CHECK(tc::mode_of(w) == tc::kArmed);
  CHECK(tc::steps_of(w) == 1);
}

TEST_CASE("capture: a process counting its own steps ignores the follow of its window, others obey") {
  uint64_t w = tc::make_word(tc::kArmed, 2, 7);
  CHECK_FALSE(tc::apply_control(w, ctl(tw::ControlCommand::kStart, 7, 0, tw::kControlFollow), true).changed);
  CHECK(tc::mode_of(w) == tc::kArmed);
  tc::Switch s = tc::apply_control(w, ctl(tw::ControlCommand::kStart, 7, 0, tw::kControlFollow), false);
  CHECK(s.changed);
  CHECK(s.source == tw::CaptureSource::kFollow);
  CHECK(tc::mode_of(w) == tc::kRecording);
  s = tc::apply_control(w, ctl(tw::ControlCommand::kStop, 7, 0, tw::kControlFollow), false);
  CHECK(s.changed);
  CHECK(tc::mode_of(w) == tc::kPaused);
  // A plain stop reaches a counting process too (it cancels the trigger).
  w = tc::make_word(tc::kCounting, 2, 7);
  CHECK(tc::apply_control(w, ctl(tw::ControlCommand::kStop, 7), true).changed);
  CHECK(tc::mode_of(w) == tc::kPaused);
}

TEST_CASE("capture: step names") {
  CHECK(tc::is_step_name("ProfilerStep#12", ~0u));
  CHECK(tc::is_step_name("ProfilerStep#", 13));
  CHECK_FALSE(tc::is_step_name("ProfilerStep", ~0u));
  CHECK_FALSE(tc::is_step_name("ProfilerStep#1", 5));
  CHECK_FALSE(tc::is_step_name(nullptr, ~0u));
}

TEST_CASE("capture: pops across a pause close exactly the ranges that were recorded") {
  sem_t wake;
  sem_init(&wake, 0, 0);
  ti::ThreadBuffer* tb = ti::create_thread_buffer(64, 1, true, &wake);
  REQUIRE(tb != nullptr);
  // recording: push A (level 0); paused: push B (1); recording again: push C (2),
  // pop C, pop B (not recorded: its push was not), pop A.
  CHECK(ti::record_push(tb, 0, ti::ascii_name("A"), 0, 0) == 0);
  CHECK(tc::paused_push(tb, 0) == 1);
  CHECK(ti::record_push(tb, 0, ti::ascii_name("C"), 0, 0) == 2);
  CHECK(ti::record_pop(tb, 0) == 2);
  CHECK(ti::record_pop(tb, 0) == 1);
  CHECK(ti::record_pop(tb, 0) == 0);
  CHECK(ti::record_pop(tb, 0) == -1);
  const std::vector<tw::Kind> want = {tw::Kind::kPush, tw::Kind::kPush, tw::Kind::kPop, tw::Kind::kPop};
  CHECK(kinds(tb) == want);
  // A push recorded, then popped while paused: that pop is recorded (nothing left open).
  ti::ThreadBuffer* tb2 = ti::create_thread_buffer(64, 2, false, &wake);
  REQUIRE(tb2 != nullptr);
  CHECK(ti::record_push(tb2, 3, ti::ascii_name("D"), 0, 0) == 0);
  CHECK(tc::paused_push(tb2, 3) == 1);
  CHECK(ti::record_pop(tb2, 3) == 1);  // the paused one: nothing written
  CHECK(ti::record_pop(tb2, 3) == 0);  // the recorded one: its pop written
  const std::vector<tw::Kind> want2 = {tw::Kind::kPush, tw::Kind::kPop};
  CHECK(kinds(tb2) == want2);
  ti::destroy_thread_buffer(tb);
  ti::destroy_thread_buffer(tb2);
  sem_destroy(&wake);
}
