#include <doctest/doctest.h>

#include <regex>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "common/errors.h"

namespace torchprof {

namespace {

Event range(const std::string& name, uint32_t tid, int64_t start, int64_t end) {
  Event e;
  e.name = name;
  e.tid = tid;
  e.start_ns = start;
  e.end_ns = end;
  return e;
}

Event mark(const std::string& name, uint32_t tid, int64_t at) {
  Event e = range(name, tid, at, at);
  e.kind = EventKind::kMark;
  return e;
}

const Event& find(const Process& p, const std::string& name, int64_t start = -1) {
  for (const Event& e : p.events_list) {
    if (e.name == name && (start < 0 || e.start_ns == start)) return e;
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

}  // namespace

TEST_CASE("nesting: self time subtracts direct children only, per thread") {
  Process p;
  p.pid = 1;
  // Given out of order on purpose: analysis sorts by (tid, start, longer first).
  p.events_list = {range("child2", 1, 60, 90),   range("outer", 1, 0, 100),
                   range("grandchild", 1, 20, 30), range("child1", 1, 10, 50),
                   range("other_thread", 2, 5, 95), range("tail", 1, 100, 110)};
  compute_nesting(p);
  const Event& outer = find(p, "outer");
  CHECK(outer.parent == -1);
  CHECK(outer.self_ns == 100 - 40 - 30);
  CHECK(find(p, "child1").self_ns == 40 - 10);
  CHECK(find(p, "grandchild").self_ns == 10);
  CHECK(p.events_list[find(p, "child1").parent].name == "outer");
  CHECK(p.events_list[find(p, "grandchild").parent].name == "child1");
  // A range starting where another ends is a sibling, not a child.
  CHECK(find(p, "tail").parent == -1);
  // Other threads never nest into this one.
  CHECK(find(p, "other_thread").parent == -1);
  CHECK(find(p, "other_thread").self_ns == 90);
}

TEST_CASE("nesting: partial overlaps are not children; identical ranges nest once") {
  Process p;
  p.events_list = {range("a", 1, 0, 50), range("b", 1, 40, 80), range("c", 1, 45, 48),
                   range("same1", 2, 0, 10), range("same2", 2, 0, 10)};
  compute_nesting(p);
  CHECK(find(p, "b").parent == -1);
  CHECK(find(p, "a").self_ns == 50);  // b only overlaps a; c's innermost container is b
  CHECK(p.events_list[find(p, "c").parent].name == "b");
  CHECK(find(p, "b").self_ns == 40 - 3);
  const Event& s2 = find(p, "same2");
  CHECK(p.events_list[s2.parent].name == "same1");
  CHECK(find(p, "same1").self_ns == 0);
}

TEST_CASE("nesting: self time never negative with overlapping children") {
  Process p;
  p.events_list = {range("parent", 1, 0, 10), range("x", 1, 0, 8), range("y", 1, 2, 10)};
  compute_nesting(p);
  for (const Event& e : p.events_list) CHECK(e.self_ns >= 0);
}

TEST_CASE("steps: range markers, events by start, ops from recorded steps only") {
  Run run;
  Process& p = run.processes.emplace_back();
  p.pid = 7;
  p.events_list = {range("ProfilerStep#0", 1, 0, 100),   range("work", 1, 10, 20),
                   range("ProfilerStep#1", 1, 100, 200), range("work", 1, 110, 150),
                   range("ProfilerStep#2", 1, 200, 300), range("work", 1, 210, 215),
                   range("before_nothing", 2, 250, 260), mark("ping", 1, 220)};
  AnalysisOptions options;
  options.schedule = Schedule{.wait = 1, .warmup = 0, .active = 2};
  analyse(run, options);
  REQUIRE(p.steps.size() == 3);
  CHECK(p.steps[0].name == "ProfilerStep#0");
  CHECK(p.steps[1].start_ns == 100);
  CHECK(p.steps[1].dur_ns == 100);
  CHECK(p.steps[0].action == StepAction::kNone);
  CHECK(p.steps[1].action == StepAction::kRecord);
  CHECK(p.steps[2].action == StepAction::kRecordAndSave);
  CHECK(p.steps[0].cycle == -1);
  CHECK(p.steps[1].cycle == 0);
  CHECK(p.steps[2].cycle == 0);
  CHECK(find(p, "before_nothing").step == 2);  // other threads belong by time
  CHECK(find(p, "ping").step == 2);

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
  Run run;
  Process& p = run.processes.emplace_back();
  p.events_list = {mark("ProfilerStep#0", 1, 0), range("a", 1, 5, 10), mark("ProfilerStep#1", 1, 50),
                   range("b", 1, 60, 70), range("c", 1, 90, 120)};
  analyse(run, {});
  REQUIRE(p.steps.size() == 2);
  CHECK(p.steps[0].dur_ns == 50);
  CHECK(p.steps[1].start_ns == 50);
  CHECK(p.steps[1].dur_ns == 70);  // until the process's last event
  CHECK(p.steps[0].action == StepAction::kRecord);
  CHECK(p.steps[1].action == StepAction::kRecordAndSave);
  CHECK(p.steps[0].cycle == 0);
  CHECK(p.steps[1].cycle == 0);
  CHECK(cycle_count(p) == 1);
  CHECK(find(p, "c").step == 1);
  CHECK(op(run, "ProfilerStep*") == nullptr);
  CHECK(op(run, "c")->calls == 1);
}

TEST_CASE("steps: no markers make one implicit step; a custom regex picks markers") {
  Run run;
  Process& p = run.processes.emplace_back();
  p.events_list = {range("iter", 1, 0, 10), range("iter", 1, 10, 20), range("x", 1, 12, 14)};
  analyse(run, {});
  REQUIRE(p.steps.size() == 1);
  CHECK(p.steps[0].name.empty());
  CHECK(p.steps[0].marker == -1);
  CHECK(p.steps[0].action == StepAction::kRecordAndSave);
  CHECK(op(run, "iter")->calls == 2);

  AnalysisOptions custom;
  custom.step_marker = "^iter$";
  custom.schedule = Schedule{.wait = 0, .warmup = 0, .active = 1};
  analyse(run, custom);
  REQUIRE(p.steps.size() == 2);
  CHECK(p.steps[1].name == "iter");
  CHECK(p.steps[1].index == 1);
  CHECK(p.steps[0].cycle == 0);
  CHECK(p.steps[1].cycle == 1);
  CHECK(cycle_count(p) == 2);

  custom.step_marker = "([";
  CHECK_THROWS_AS(analyse(run, custom), InputError);
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
  Run run;
  Process& p = run.processes.emplace_back();
  for (int k = 0; k < 3; ++k) {
    p.events_list.push_back(range("ProfilerStep#" + std::to_string(k), 1, k * 10, k * 10 + 10));
  }
  AnalysisOptions options;
  options.schedule = Schedule{.wait = 0, .warmup = 1, .active = 3};
  analyse(run, options);
  CHECK(p.steps[0].action == StepAction::kWarmup);
  CHECK(p.steps[2].action == StepAction::kRecord);
  CHECK(p.steps[1].cycle == 0);
  CHECK(p.steps[2].cycle == 0);
  CHECK(cycle_count(p) == 1);
}

}  // namespace torchprof
