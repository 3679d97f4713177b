// Nesting and steps through the engine (analysis/engine.h): self times of nested
// ranges per thread, start/end ranges that overlap without nesting, step markers
// (ranges, marks, a custom regex) and the schedule's actions and cycles.
#include <doctest/doctest.h>

#include <map>
#include <regex>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "common/errors.h"
#include "engine_test_util.h"
#include "process_capture.h"

namespace torchprof {

using test::kEpoch;
using test::Slots;
using wire::Kind;

namespace {

// The one event named `name` (starting at monotonic `start` when given).
const Event& find(const test::Collected& c, const std::string& name, int64_t start = -1) {
  for (const Event& e : c.events) {
    if (e.name == name && (start < 0 || e.start_ns == kEpoch + start)) return e;
  }
  FAIL("no event " << name);
  static Event none;
  return none;
}

const OpStats* op(const Run& run, const std::string& name) {
  for (const OpStats& o : run.ops) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

// A start/end range of range id `id` on the thread whose slots these are.
Slots& start_end(Slots& s, uint32_t name, uint64_t id, uint64_t start, uint64_t end) {
  return s.rec(Kind::kStart, name, start, id).rec(Kind::kEnd, 0, end, id);
}

}  // namespace

TEST_CASE("nesting: self time subtracts direct children only, per thread") {
  // Thread 1: outer [0,100] { child1 [10,50] { grandchild [20,30] }, child2 [60,90] },
  // then tail [100,110], pushed at the nanosecond outer ended. Thread 2: other_thread [5,95].
  Slots t1;
  t1.str(1, "outer").str(2, "child1").str(3, "grandchild").str(4, "child2").str(5, "tail").str(6, "other_thread");
  t1.push(1, 0).push(2, 10).push(3, 20).pop(30).pop(50).push(4, 60).pop(90).pop(100).push(5, 100).pop(110);
  Slots t2;
  t2.push(6, 5).pop(95);
  std::map<int, test::Collected> c;
  const Run run = test::analyse(test::Captures().process(1).frame(1, t1).frame(2, t2).save("nesting_self.tprof"), {}, &c);
  const test::Collected& p = c[1];
  CHECK(p.events.size() == 6);
  CHECK(find(p, "outer").self_ns == 100 - 40 - 30);  // its direct children, not the grandchild
  CHECK(find(p, "child1").self_ns == 40 - 10);
  CHECK(find(p, "grandchild").self_ns == 10);
  CHECK(find(p, "child2").self_ns == 30);
  // A range starting where another ends is a sibling, not a child.
  CHECK(find(p, "tail").self_ns == 10);
  // Other threads never nest into this one.
  CHECK(find(p, "other_thread").self_ns == 90);
  CHECK(find(p, "other_thread").tid == 2);
  CHECK(op(run, "outer")->self_cpu_ns == 30);
  CHECK(op(run, "outer")->cpu_total_ns == 100);
}

TEST_CASE("nesting: partial overlaps are not children; identical ranges nest once") {
  // Thread 1: start/end ranges a [0,50] and b [40,80], and a pushed c [45,48] inside b.
  // a ends while b, opened inside it, is open: b is left to what is around a (nothing).
  Slots t1;
  t1.str(1, "a").str(2, "b").str(3, "c").str(4, "same1").str(5, "same2");
  t1.rec(Kind::kStart, 1, 0, 1).rec(Kind::kStart, 2, 40, 2).push(3, 45).pop(48);
  t1.rec(Kind::kEnd, 0, 50, 1).rec(Kind::kEnd, 0, 80, 2);
  // Thread 2: two start/end ranges over the same [0,10].
  Slots t2;
  start_end(t2, 4, 3, 0, 10);
  start_end(t2, 5, 4, 0, 10);
  std::map<int, test::Collected> c;
  const Run run = test::analyse(test::Captures().process(1).frame(1, t1).frame(2, t2).save("nesting_overlap.tprof"), {}, &c);
  const test::Collected& p = c[1];
  CHECK(find(p, "a").self_ns == 50);      // b only overlaps a; c's innermost container is b
  CHECK(find(p, "b").self_ns == 40 - 3);  // c is b's child
  CHECK(find(p, "c").self_ns == 3);
  CHECK_FALSE(find(p, "a").push_pop);
  // Identical intervals: the one read first holds the other (it ends last on the tie).
  CHECK(find(p, "same2").self_ns == 10);
  CHECK(find(p, "same1").self_ns == 0);
  CHECK(op(run, "same1")->self_cpu_ns == 0);
  CHECK(op(run, "same2")->self_cpu_ns == 10);
}

TEST_CASE("nesting: self time never negative with overlapping children") {
  // parent [0,10] holds x [0,8]; y [2,10] opens inside x, which leaves it to parent when
  // it ends: parent's children are 8 + 8 = 16 ns of its 10, its self time 0, not -6.
  Slots s;
  s.str(1, "parent").str(2, "x").str(3, "y");
  s.rec(Kind::kStart, 1, 0, 1).rec(Kind::kStart, 2, 0, 2).rec(Kind::kStart, 3, 2, 3);
  s.rec(Kind::kEnd, 0, 8, 2).rec(Kind::kEnd, 0, 10, 3).rec(Kind::kEnd, 0, 10, 1);
  std::map<int, test::Collected> c;
  const Run run = test::analyse(test::Captures().process(1).frame(1, s).save("nesting_negative.tprof"), {}, &c);
  REQUIRE(c[1].events.size() == 3);
  for (const Event& e : c[1].events) CHECK(e.self_ns >= 0);
  CHECK(find(c[1], "parent").self_ns == 0);
  CHECK(find(c[1], "x").self_ns == 8);
  CHECK(find(c[1], "y").self_ns == 8);
  for (const OpStats& o : run.ops) CHECK(o.self_cpu_ns >= 0);
}

TEST_CASE("steps: range markers, events by start, ops from recorded steps only") {
  // Thread 1: ProfilerStep#0 [0,100] { work [10,20] }, ProfilerStep#1 [100,200]
  // { work [110,150] }, ProfilerStep#2 [200,300] { work [210,215], mark ping at 220 };
  // thread 2: before_nothing [250,260].
  Slots t1;
  t1.str(1, "ProfilerStep#0").str(2, "ProfilerStep#1").str(3, "ProfilerStep#2").str(4, "work").str(5, "ping");
  t1.str(6, "before_nothing");
  t1.push(1, 0).push(4, 10).pop(20).pop(100);
  t1.push(2, 100).push(4, 110).pop(150).pop(200);
  t1.push(3, 200).push(4, 210).pop(215).rec(Kind::kMark, 5, 220).pop(300);
  Slots t2;
  t2.push(6, 250).pop(260);
  AnalysisOptions options;
  options.schedule = Schedule{.wait = 1, .warmup = 0, .active = 2};
  std::map<int, test::Collected> c;
  const Run run = test::analyse(test::Captures().process(7).frame(1, t1).frame(2, t2).save("steps_ranges.tprof"),
                                options, &c);
  const Process& p = run.processes.at(0);
  REQUIRE(p.steps.size() == 3);
  CHECK(p.steps[0].name == "ProfilerStep#0");
  CHECK(p.steps[0].marker);
  CHECK(p.steps[1].start_ns == kEpoch + 100);
  CHECK(p.steps[1].dur_ns == 100);
  CHECK(p.steps[0].action == StepAction::kNone);
  CHECK(p.steps[1].action == StepAction::kRecord);
  CHECK(p.steps[2].action == StepAction::kRecordAndSave);
  CHECK(p.steps[0].cycle == -1);
  CHECK(p.steps[1].cycle == 0);
  CHECK(p.steps[2].cycle == 0);
  CHECK(find(c[7], "before_nothing").step == 2);  // other threads belong by time
  CHECK(find(c[7], "ping").step == 2);
  CHECK(find(c[7], "ping").kind == EventKind::kMark);
  CHECK(find(c[7], "work", 110).step == 1);
  // Only the recorded steps' events reach the traces.
  CHECK(c[7].named("work").size() == 2);
  CHECK(c[7].named("ProfilerStep#0").empty());
  for (const EventIds& ids : c[7].ids) CHECK(ids.cycle == 0);

  const OpStats* work = op(run, "work");
  REQUIRE(work);
  CHECK(work->calls == 2);  // step 0 is not recorded
  CHECK(work->cpu_total_ns == 45);
  CHECK(work->kind == "nvtx");
  const OpStats* step = op(run, "ProfilerStep*");
  REQUIRE(step);
  CHECK(step->calls == 2);
  CHECK(step->cpu_total_ns == 200);
  CHECK(step->self_cpu_ns == 200 - 40 - 5);
  CHECK(op(run, "ping") == nullptr);  // marks are not ops
}

TEST_CASE("steps: mark-only markers span to the next marker; no schedule = one cycle") {
  Slots s;
  s.str(1, "ProfilerStep#0").str(2, "ProfilerStep#1").str(3, "a").str(4, "b").str(5, "c");
  s.rec(Kind::kMark, 1, 0).push(3, 5).pop(10).rec(Kind::kMark, 2, 50).push(4, 60).pop(70).push(5, 90).pop(120);
  std::map<int, test::Collected> c;
  const Run run = test::analyse(test::Captures().process(7).frame(1, s).save("steps_marks.tprof"), {}, &c);
  const Process& p = run.processes.at(0);
  REQUIRE(p.steps.size() == 2);
  CHECK(p.steps[0].dur_ns == 50);
  CHECK(p.steps[0].marker_is_mark);
  CHECK(p.steps[1].start_ns == kEpoch + 50);
  CHECK(p.steps[1].dur_ns == 70);  // until the process's last event
  CHECK(p.steps[0].action == StepAction::kRecord);
  CHECK(p.steps[1].action == StepAction::kRecordAndSave);
  CHECK(p.steps[0].cycle == 0);
  CHECK(p.steps[1].cycle == 0);
  CHECK(cycle_count(p) == 1);
  CHECK(find(c[7], "c").step == 1);
  CHECK(find(c[7], "a").step == 0);
  CHECK(op(run, "ProfilerStep*") == nullptr);
  REQUIRE(op(run, "c"));
  CHECK(op(run, "c")->calls == 1);
}

TEST_CASE("steps: no markers make one implicit step; a custom regex picks markers") {
  Slots s;
  s.str(1, "iter").str(2, "x").push(1, 0).pop(10).push(1, 10).push(2, 12).pop(14).pop(20);
  const std::string path = test::Captures().process(7).frame(1, s).save("steps_custom.tprof");
  Run run = test::analyse(path);
  REQUIRE(run.processes.at(0).steps.size() == 1);
  const Step& only = run.processes[0].steps[0];
  CHECK(only.name.empty());
  CHECK_FALSE(only.marker);
  CHECK(only.action == StepAction::kRecordAndSave);
  CHECK(only.start_ns == kEpoch);
  CHECK(only.dur_ns == 20);
  CHECK(op(run, "iter")->calls == 2);

  AnalysisOptions custom;
  custom.step_marker = "^iter$";
  custom.schedule = Schedule{.wait = 0, .warmup = 0, .active = 1};
  run = test::analyse(path, custom);
  const Process& p = run.processes.at(0);
  REQUIRE(p.steps.size() == 2);
  CHECK(p.steps[1].name == "iter");
  CHECK(p.steps[1].index == 1);
  CHECK(p.steps[0].cycle == 0);
  CHECK(p.steps[1].cycle == 1);
  CHECK(cycle_count(p) == 2);

  custom.step_marker = "([";
  CHECK_THROWS_AS(test::analyse(path, custom), InputError);
}

TEST_CASE("steps: a marker pattern that is a plain prefix matches as the regex does; others run the regex") {
  const std::vector<std::string> patterns = {"^ProfilerStep#", "^ProfilerStep#[0-9]+$", "ProfilerStep", "^a.b",
                                             "^a\\.b", "^x|y", "^", "^(x)", "^a+", "^a?b", "^[ab]", "^a{2}", "^a$"};
  const std::vector<std::string> names = {"ProfilerStep#0", "ProfilerStep#12", "my ProfilerStep#1", "ProfilerStep",
                                          "axb", "a.b", "y", "yx", "x", "", "aab", "b", "a", "aa", "ab"};
  for (const std::string& pattern : patterns) {
    const StepMarker marker(pattern);
    const std::regex re(pattern, std::regex::ECMAScript);
    for (const std::string& name : names) {
      INFO(pattern << " on '" << name << "'");
      CHECK(marker.matches(name) == std::regex_search(name, re));
    }
  }
  CHECK_THROWS_AS(StepMarker("^Profiler(Step"), InputError);
}

TEST_CASE("steps: a process ending inside RECORD still closes its cycle") {
  Slots s;
  for (uint32_t k = 0; k < 3; ++k) s.str(k + 1, "ProfilerStep#" + std::to_string(k)).push(k + 1, k * 10).pop(k * 10 + 10);
  AnalysisOptions options;
  options.schedule = Schedule{.wait = 0, .warmup = 1, .active = 3};
  const Run run = test::analyse(test::Captures().process(7).frame(1, s).save("steps_short.tprof"), options);
  const Process& p = run.processes.at(0);
  REQUIRE(p.steps.size() == 3);
  CHECK(p.steps[0].action == StepAction::kWarmup);
  CHECK(p.steps[2].action == StepAction::kRecord);
  CHECK(p.steps[1].cycle == 0);
  CHECK(p.steps[2].cycle == 0);
  CHECK(cycle_count(p) == 1);
}

}  // namespace torchprof

namespace torchprof {

TEST_CASE("ops from RecordFunction callbacks: nested cpu_op rows with their own call fields") {
  // aten::conv2d [0,100] { aten::convolution [10,90] { aten::mkldnn_convolution [20,80] } }
  // then ConvolutionBackward0 [200,260] with conv2d's sequence number, on thread 1, in
  // the torchprof.ops domain (id 3); an NVTX range in the default domain around all.
  Slots t1;
  t1.str(1, "aten::conv2d").str(2, "aten::convolution").str(3, "aten::mkldnn_convolution");
  t1.str(4, "ConvolutionBackward0").str(5, "torchprof.ops").str(6, "outer");
  t1.rec(Kind::kDomain, 5, 0, 0, 0, 3);
  t1.push(6, 0);
  t1.rec(Kind::kOpBegin, 1, 0, wire::op_word(7, 0, 0), 11, 3)
      .rec(Kind::kOpBegin, 2, 10, wire::op_word(-1, 0, 0), 12, 3)
      .rec(Kind::kOpBegin, 3, 20, wire::op_word(-1, 0, 0), 13, 3)
      .rec(Kind::kOpEnd, 0, 80, 13, 0, 3)
      .rec(Kind::kOpEnd, 0, 90, 12, 0, 3)
      .rec(Kind::kOpEnd, 0, 100, 11, 0, 3)
      .rec(Kind::kOpBegin, 4, 200, wire::op_word(7, 1, 1), 14, 3)
      .rec(Kind::kOpEnd, 0, 260, 14, 0, 3);
  t1.pop(300);
  std::map<int, test::Collected> c;
  const Run run = test::analyse(test::Captures().process(1).frame(1, t1).save("op_records.tprof"), {}, &c);
  const test::Collected& p = c[1];
  const Event& conv = find(p, "aten::conv2d");
  REQUIRE(conv.op() != nullptr);
  CHECK(conv.op_call);
  CHECK(conv.payload == 11);
  CHECK(wire::op_word_sequence(conv.op_word) == 7);
  CHECK(conv.self_ns == 100 - 80);
  CHECK(find(p, "aten::convolution").self_ns == 80 - 60);
  CHECK(find(p, "aten::mkldnn_convolution").self_ns == 60);
  const Event& node = find(p, "ConvolutionBackward0");
  CHECK(wire::op_word_sequence(node.op_word) == 7);
  CHECK(wire::op_word_scope(node.op_word) == 1);
  CHECK(wire::op_word_fwd_thread(node.op_word) == 1);
  CHECK(node.category() == 0);  // the op word is not an NVTX category
  REQUIRE(op(run, "aten::convolution") != nullptr);
  CHECK(op(run, "aten::convolution")->kind == "cpu_op");
  CHECK(op(run, "aten::convolution")->self_cpu_ns == 20);
  CHECK(op(run, "outer")->self_cpu_ns == 300 - 100 - 60);
  CHECK(op(run, "outer")->kind == "nvtx");
}

}  // namespace torchprof
