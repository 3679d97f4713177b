// What the steps leave to the table and the traces (analysis/engine.h): without a
// schedule nothing is dropped for lying outside a step (setup before the first step
// marker, teardown after the last, another thread's work between steps), as
// torch.profiler without a schedule records the whole run; with one, what is left out is
// counted and said under the table. And step ranges of one thread never intersect: a
// start/end step range that ends after the next one began ends where that one begins.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/schedule.h"
#include "engine_test_util.h"
#include "formats/table.h"
#include "process_capture.h"
#include "trace_files.h"

namespace torchprof {

using test::kEpoch;
using test::Slots;
using wire::Kind;

namespace {

// Process 10. Thread 1: setup [100,500] holding a launch [200,250] #1 (its kernel
// [300,350]), ProfilerStep#0 [1000,2000] { fwd [1100,1300] }, ProfilerStep#1 [2000,3000]
// { fwd [2100,2300] }, teardown [3500,3900]. Thread 2: load [600,900] before the first
// step, load [1500,1600] inside step 0, load [3100,3200] after the last.
std::string outside_capture(const std::string& file) {
  Slots t1;
  t1.str(1, "setup").str(2, "ProfilerStep#0").str(3, "ProfilerStep#1").str(4, "fwd").str(5, "teardown");
  t1.str(6, "cudaLaunchKernel").str(7, "_Z1kv");
  t1.push(1, 100).api(6, 200, 250, 1).pop(500);
  t1.push(2, 1000).push(4, 1100).pop(1300).pop(2000);
  t1.push(3, 2000).push(4, 2100).pop(2300).pop(3000);
  t1.push(5, 3500).pop(3900);
  Slots t2;
  t2.str(8, "load");
  t2.push(8, 600).pop(900).push(8, 1500).pop(1600).push(8, 3100).pop(3200);
  Slots gpu;
  gpu.kernel(7, 300, 350, 1, 7);
  return test::Captures().process(10).frame(1, t1).frame(2, t2).frame(99, gpu).bye(4000).save(file);
}

}  // namespace

TEST_CASE("engine steps: without a schedule, what lies outside every step counts") {
  const std::string path = outside_capture("steps_outside.tprof");
  std::map<int, test::Collected> c;
  const Run run = test::analyse(path, {}, &c);
  REQUIRE(run.processes.size() == 1);
  const Process& p = run.processes[0];
  REQUIRE(p.steps.size() == 2);
  CHECK(p.outside_steps_counted);
  std::map<std::string, OpStats> rows = test::rows_by_kind_and_name(run);
  CHECK(rows["nvtx setup"].calls == 1);
  CHECK(rows["nvtx setup"].cpu_total_ns == 400);
  CHECK(rows["nvtx setup"].self_cpu_ns == 400 - 50);
  CHECK(rows["nvtx setup"].self_cuda_ns == 50);
  CHECK(rows["nvtx teardown"].calls == 1);
  CHECK(rows["nvtx load"].calls == 3);
  CHECK(rows["nvtx fwd"].calls == 2);
  CHECK(rows["nvtx ProfilerStep*"].calls == 2);
  CHECK(rows["cuda_api cudaLaunchKernel"].calls == 1);
  CHECK(rows["kernel k()"].calls == 1);
  CHECK(p.left_out_in_steps == 0);
  CHECK(p.left_out_outside_steps == 0);
  // In the one cycle's trace, every event.
  CHECK(c[10].named("setup").size() == 1);
  CHECK(c[10].named("teardown").size() == 1);
  CHECK(c[10].named("load").size() == 3);
  for (const EventIds& ids : c[10].ids) CHECK(ids.cycle == 0);
  REQUIRE(c[10].gpu.size() == 1);
  CHECK(c[10].gpu[0].cycle == 0);
  TableRows table = make_table_rows(run.ops, run.has_gpu, {"", 0});
  table.left_out_in_steps = run.left_out_in_steps;
  table.left_out_outside_steps = run.left_out_outside_steps;
  CHECK(left_out_line(table).empty());

  // The trace file begins with the process: setup is at or after its base, inside its
  // "PyTorch Profiler" span.
  const test::Traced t = test::traced(path, {}, {test::trace_dir("steps_outside"), false});
  REQUIRE(t.files.size() == 1);
  const nlohmann::json trace = test::trace_json(t.files[0].path);
  double setup_ts = -1, span_ts = -1, span_end = -1, teardown_end = -1;
  for (const auto& e : trace["traceEvents"]) {
    const std::string name = e.value("name", "");
    if (name == "setup") setup_ts = e["ts"].get<double>();
    if (name == "teardown") teardown_end = e["ts"].get<double>() + e["dur"].get<double>();
    if (name == "PyTorch Profiler (0)") {
      span_ts = e["ts"].get<double>();
      span_end = span_ts + e["dur"].get<double>();
    }
  }
  CHECK(setup_ts >= 0);
  CHECK(span_ts <= setup_ts);
  CHECK(span_end >= teardown_end);
}

TEST_CASE("engine steps: with a schedule, what is left out is counted and said under the table") {
  const std::string path = outside_capture("steps_outside_scheduled.tprof");
  AnalysisOptions options;
  options.schedule = parse_schedule("wait=0,warmup=1,active=1", nullptr, nullptr);  // step 0 warms up
  std::map<int, test::Collected> c;
  const Run run = test::analyse(path, options, &c);
  REQUIRE(run.processes.size() == 1);
  const Process& p = run.processes[0];
  CHECK_FALSE(p.outside_steps_counted);
  std::map<std::string, OpStats> rows = test::rows_by_kind_and_name(run);
  CHECK(rows.count("nvtx setup") == 0);
  CHECK(rows.count("nvtx teardown") == 0);
  CHECK(rows.count("cuda_api cudaLaunchKernel") == 0);
  CHECK(rows["nvtx fwd"].calls == 1);
  CHECK(rows["nvtx ProfilerStep*"].calls == 1);
  CHECK(rows.count("nvtx load") == 0);
  // Step 0 (warmup): its marker, its fwd, thread 2's load inside it. Outside every step:
  // setup, its launch and kernel, teardown, the two loads before and after the steps.
  CHECK(p.left_out_in_steps == 3);
  CHECK(p.left_out_outside_steps == 6);
  CHECK(run.left_out_in_steps == 3);
  CHECK(run.left_out_outside_steps == 6);
  TableRows table = make_table_rows(run.ops, run.has_gpu, {"", 0});
  table.left_out_in_steps = run.left_out_in_steps;
  table.left_out_outside_steps = run.left_out_outside_steps;
  CHECK(left_out_line(table) ==
        "Not in the table: 9 ranges, API calls and GPU records outside the recorded steps "
        "(3 in steps not recorded, 6 outside every step)\n");
  const std::string text = render_table(table);
  CHECK(text.ends_with(left_out_line(table)));
  CHECK(c[10].named("setup").empty());
}

// Thread 1 writes its steps as the Python bootstrap does, start/end ranges turned to our
// clock one by one: ProfilerStep#0 [1000,2175] ends 175 ns after #1 [2000,3000] begins;
// #2 [3000,4000] follows #1 exactly. fwd [2050,2100] is inside #1 (and inside #0's
// overhang). A ProfilerStep#9 [5000,5400] on thread 2 and a nested outer step range
// ProfilerStep#3 [4100,4900] holding ProfilerStep#4 [4200,4300] stay as they are.
TEST_CASE("engine steps: step ranges of one thread never overlap") {
  Slots t1;
  t1.str(1, "ProfilerStep#0").str(2, "ProfilerStep#1").str(3, "ProfilerStep#2").str(4, "fwd");
  t1.str(5, "ProfilerStep#3").str(6, "ProfilerStep#4");
  t1.rec(Kind::kStart, 1, 1000, 1).rec(Kind::kStart, 2, 2000, 2);
  t1.push(4, 2050).pop(2100);
  t1.rec(Kind::kEnd, 0, 2175, 1).rec(Kind::kEnd, 0, 3000, 2);
  t1.rec(Kind::kStart, 3, 3000, 3).rec(Kind::kEnd, 0, 4000, 3);
  t1.rec(Kind::kStart, 5, 4100, 4).rec(Kind::kStart, 6, 4200, 5).rec(Kind::kEnd, 0, 4300, 5);
  t1.rec(Kind::kEnd, 0, 4900, 4);
  Slots t2;
  t2.str(7, "ProfilerStep#9").rec(Kind::kStart, 7, 5000, 6).rec(Kind::kEnd, 0, 5400, 6);
  const std::string path =
      test::Captures().process(10).frame(1, t1).frame(2, t2).bye(6000).save("steps_untangled.tprof");
  std::map<int, test::Collected> c;
  const Run run = test::analyse(path, {}, &c);
  REQUIRE(run.processes.size() == 1);
  const std::vector<Step>& steps = run.processes[0].steps;
  REQUIRE(steps.size() == 6);
  CHECK(steps[0].dur_ns == 1000);  // ends where #1 begins
  CHECK(steps[1].dur_ns == 1000);
  CHECK(steps[2].dur_ns == 1000);
  CHECK(steps[3].dur_ns == 800);   // holds #4: they nest, they do not intersect
  CHECK(steps[4].dur_ns == 100);
  CHECK(steps[5].dur_ns == 400);
  // The trace events of the step ranges, per thread: none intersects another.
  std::vector<const Event*> marked;
  for (const Event& e : c[10].events) {
    if (e.name.str().starts_with("ProfilerStep#")) marked.push_back(&e);
  }
  REQUIRE(marked.size() == 6);
  for (const Event* a : marked) {
    for (const Event* b : marked) {
      if (a == b || a->tid != b->tid) continue;
      const bool nested = (a->start_ns <= b->start_ns && b->end_ns <= a->end_ns) ||
                          (b->start_ns <= a->start_ns && a->end_ns <= b->end_ns);
      const bool apart = a->end_ns <= b->start_ns || b->end_ns <= a->start_ns;
      INFO(a->name.str() << " [" << a->start_ns - kEpoch << "," << a->end_ns - kEpoch << "] and " << b->name.str()
                         << " [" << b->start_ns - kEpoch << "," << b->end_ns - kEpoch << "]");
      CHECK((nested || apart));
    }
  }
  CHECK(c[10].named("ProfilerStep#0").at(0)->end_ns == kEpoch + 2000);
  // fwd is #1's child alone: #0 ends before it begins.
  std::map<std::string, OpStats> rows = test::rows_by_kind_and_name(run);
  CHECK(rows["nvtx ProfilerStep*"].cpu_total_ns == 1000 + 1000 + 1000 + 800 + 100 + 400);
  CHECK(rows["nvtx ProfilerStep*"].self_cpu_ns == 1000 + 950 + 1000 + 700 + 100 + 400);

  // The written trace too.
  const test::Traced t = test::traced(path, {}, {test::trace_dir("steps_untangled"), false});
  REQUIRE(t.files.size() == 1);
  const nlohmann::json trace = test::trace_json(t.files[0].path);
  std::vector<std::pair<double, double>> spans;  // thread 1's steps
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X" || !e.value("name", "").starts_with("ProfilerStep#")) continue;
    if (e["tid"].get<uint64_t>() != 1 || e["name"] == "ProfilerStep#3" || e["name"] == "ProfilerStep#4") continue;
    spans.emplace_back(e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>());
  }
  std::sort(spans.begin(), spans.end());
  REQUIRE(spans.size() == 3);
  for (size_t k = 0; k + 1 < spans.size(); ++k) CHECK(spans[k].second <= spans[k + 1].first);
}

}  // namespace torchprof
