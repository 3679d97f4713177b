// The engine's passes (analysis/engine.h): a process is first read once, as one step;
// what needs its steps or definitions first (a step marker, a start/end range, a string
// used before the frame that defines it) sends it to two passes, and what the first
// attempt handed the trace sink is discarded. The table and the traces' events are those
// one pass gives the same events. Then what decides the steps beside markers: on-demand
// capture windows and --capture-range.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/capture_range.h"
#include "analysis/schedule.h"
#include "engine_test_util.h"
#include "process_capture.h"
#include "trace_files.h"

namespace torchprof {

using test::kEpoch;
using test::Slots;
using wire::Kind;

namespace {

std::vector<std::string> table(const Run& run) { return test::table_text(run.ops); }

// The events a sink was handed, in one order whatever the order they came in.
std::vector<std::tuple<int64_t, int64_t, std::string, int64_t, int32_t>> events_of(const test::Collected& c) {
  std::vector<std::tuple<int64_t, int64_t, std::string, int64_t, int32_t>> out;
  for (const Event& e : c.events) out.emplace_back(e.start_ns, e.end_ns, e.name.str(), e.self_ns, e.step);
  std::sort(out.begin(), out.end());
  return out;
}

// Analyses `one` (read in one pass) and `two` (that needs two) and checks that they
// give the same table, the same notes and the same events and GPU records, and that
// only the second discarded a first attempt.
void check_same(const std::string& one, const std::string& two, const AnalysisOptions& options) {
  std::map<int, test::Collected> c1, c2;
  const Run r1 = test::analyse(one, options, &c1);
  const Run r2 = test::analyse(two, options, &c2);
  REQUIRE(r1.processes.size() == 1);
  REQUIRE(r2.processes.size() == 1);
  const int pid = r1.processes[0].pid;
  CHECK(c1[pid].discarded == 0);
  CHECK(c2[pid].discarded == 1);
  CHECK(c1[pid].finished == 1);
  CHECK(c2[pid].finished == 1);
  CHECK(table(r1) == table(r2));
  CHECK(r1.processes[0].warnings == r2.processes[0].warnings);
  CHECK(r1.processes[0].cpu_events == r2.processes[0].cpu_events);
  CHECK(events_of(c1[pid]) == events_of(c2[pid]));
  CHECK(c1[pid].gpu.size() == c2[pid].gpu.size());
  CHECK(r1.processes[0].gpu_records.size() == r2.processes[0].gpu_records.size());
  // The table alone reads the same.
  CHECK(table(analyse_capture_file(two, options, table_only_outputs())) == table(r1));
}

// Process 10: thread 1 holds ProfilerStep#0 [1000,5000] { fwd [1100,1500] { launch
// [1200,1250] #1 }, bwd [2000,2500] }; the kernel [1300,1400] comes on the activity
// thread after it. `fwd_start_end`: fwd is a start/end range, written once it ended (as
// the bootstrap writes its ranges). `late_bwd`: the name "bwd" is defined in a later
// frame of thread 2, after thread 1 used it.
std::string step_capture(const std::string& file, bool fwd_start_end, bool late_bwd) {
  Slots t1;
  t1.str(1, "ProfilerStep#0").str(2, "fwd").str(4, "cudaLaunchKernel").str(5, "_Z1kv").str(6, "other");
  if (!late_bwd) t1.str(3, "bwd");
  t1.push(1, 1000);
  if (!fwd_start_end) t1.push(2, 1100);
  t1.api(4, 1200, 1250, 1);
  if (fwd_start_end) {
    t1.rec(Kind::kStart, 2, 1100, 9).rec(Kind::kEnd, 0, 1500, 9);
  } else {
    t1.pop(1500);
  }
  t1.push(3, 2000).pop(2500).pop(5000);
  Slots t2;
  if (late_bwd) t2.str(3, "bwd");
  t2.push(6, 3000).pop(3500);
  Slots gpu;
  gpu.kernel(5, 1300, 1400, 1, 7);
  return test::Captures().process(10).frame(1, t1).frame(2, t2).frame(99, gpu).bye(6000).save(file);
}

}  // namespace

TEST_CASE("engine passes: a step marker, a start/end range, a string used before its definition") {
  AnalysisOptions no_marker;
  no_marker.step_marker = "^never$";
  const std::string plain = step_capture("passes_plain.tprof", false, false);
  // A step marker: ProfilerStep#0 holds everything, so its step is what the one step of
  // a process without markers is (ProfilerStep#N is folded into ProfilerStep* either way).
  {
    std::map<int, test::Collected> c;
    const Run marked = test::analyse(plain, {}, &c);
    CHECK(c[10].discarded == 1);
    CHECK(marked.processes.at(0).steps.at(0).marker);
    CHECK(table(marked) == table(test::analyse(plain, no_marker)));
  }
  check_same(plain, step_capture("passes_start_end.tprof", true, false), no_marker);
  check_same(plain, step_capture("passes_late_string.tprof", false, true), no_marker);
  // The rows, by hand: the step [1000,5000] holds fwd 400 and bwd 500; fwd holds the
  // launch's 50 and the kernel's 100 ns of GPU time.
  std::map<std::string, OpStats> rows = test::rows_by_kind_and_name(test::analyse(step_capture("passes_both.tprof", true, true)));
  CHECK(rows["nvtx ProfilerStep*"].self_cpu_ns == 4000 - 400 - 500);
  CHECK(rows["nvtx ProfilerStep*"].cuda_total_ns == 100);
  CHECK(rows["nvtx fwd"].self_cpu_ns == 400 - 50);
  CHECK(rows["nvtx fwd"].self_cuda_ns == 100);
  CHECK(rows["nvtx bwd"].calls == 1);
  CHECK(rows["nvtx other"].calls == 1);  // thread 2's range belongs to the step by its time
}

TEST_CASE("engine passes: a step marker found after many events discards what the first attempt handed on") {
  // Frame 0: 500 fwd ranges before any step; frame 1: ProfilerStep#0 holding one more.
  Slots before;
  before.str(1, "fwd").str(2, "ProfilerStep#0");
  for (uint64_t i = 0; i < 500; ++i) before.push(1, 1000 + i * 10).pop(1005 + i * 10);
  Slots step;
  step.push(2, 7000).push(1, 7100).pop(7200).pop(8000);
  std::map<int, test::Collected> c;
  const Run run = test::analyse(
      test::Captures().process(10).frame(1, before).frame(1, step).bye(9000).save("passes_late_marker.tprof"), {}, &c);
  CHECK(c[10].discarded == 1);
  // The step, the fwd inside it and the 500 before it (outside every step, counted without
  // a schedule), each once: nothing of the first attempt.
  REQUIRE(c[10].events.size() == 502);
  CHECK(c[10].named("fwd").size() == 501);
  CHECK(c[10].named("fwd").back()->start_ns == kEpoch + 7100);
  CHECK(run.processes.at(0).cpu_events == 502);
  std::map<std::string, OpStats> rows = test::rows_by_kind_and_name(run);
  CHECK(rows["nvtx fwd"].calls == 501);
  CHECK(rows["nvtx ProfilerStep*"].calls == 1);
  CHECK(rows["nvtx ProfilerStep*"].self_cpu_ns == 1000 - 100);
  // Traces too: only the second pass's file.
  const test::Traced t =
      test::traced(test::Captures().process(10).frame(1, before).frame(1, step).bye(9000).save("passes_late_marker.tprof"),
                   {}, {test::trace_dir("passes_late_marker"), false});
  REQUIRE(t.files.size() == 1);
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(test::trace_dir("passes_late_marker"))) {
    ++entries;
  }
  CHECK(entries == 1);  // the first attempt's file is gone
  const nlohmann::json trace = test::trace_json(t.files[0].path);
  size_t fwd = 0;
  for (const auto& e : trace["traceEvents"]) fwd += e.value("name", "") == "fwd" ? 1 : 0;
  CHECK(fwd == 501);
}

TEST_CASE("engine passes: on-demand capture windows make the steps and cycles") {
  // Process 20, no step markers: windows [1000,2000] (a command's) and [3000,4000] (a
  // trigger's), each one step and one cycle. r [1100,1500]; r [3100,3900] launching a
  // kernel of 200 ns from a call of 100.
  Slots a;
  a.str(1, "r").str(2, "cudaLaunchKernel").str(3, "_Z1kv");
  a.rec(Kind::kCaptureWindow, 0, 1000, 1, 1, 0).push(1, 1100).pop(1500).rec(Kind::kCaptureWindow, 0, 2000, 1, 0, 0);
  a.rec(Kind::kCaptureWindow, 0, 3000, 2, 1, 1).push(1, 3100).api(2, 3200, 3300, 1).pop(3900);
  a.rec(Kind::kCaptureWindow, 0, 4000, 2, 0, 1);
  Slots gpu;
  gpu.kernel(3, 3400, 3600, 1, 7);
  // Process 21, with markers, recording from its start until 2500 (window 0), then a
  // trigger's window [5000,6000]: steps 0 and 1 in the first, 2 and 3 in the second.
  Slots b;
  for (uint32_t k = 0; k < 4; ++k) b.str(k + 1, "ProfilerStep#" + std::to_string(k));
  b.push(1, 1000).pop(2000).push(2, 2100).pop(2400).rec(Kind::kCaptureWindow, 0, 2500, 0, 0, 0);
  b.rec(Kind::kCaptureWindow, 0, 5000, 1, 1, 1).push(3, 5100).pop(5500).push(4, 5600).pop(5900);
  b.rec(Kind::kCaptureWindow, 0, 6000, 1, 0, 1);
  test::Captures caps;
  caps.process(20).frame(1, a).frame(99, gpu).bye(5000);
  caps.process(21).frame(1, b).bye(7000);
  const std::string path = caps.save("passes_windows.tprof");

  AnalysisOptions options;
  options.schedule = parse_schedule("wait=1,warmup=0,active=1", nullptr, nullptr);  // the windows replace it
  std::map<int, test::Collected> c;
  const Run run = test::analyse(path, options, &c);
  REQUIRE(run.processes.size() == 2);
  const Process& pa = run.processes[0];
  REQUIRE(pa.capture_windows.size() == 2);
  CHECK(pa.capture_windows[0].source == "command");
  CHECK(pa.capture_windows[1].source == "trigger");
  CHECK(pa.capture_windows[1].id == 2);
  REQUIRE(pa.steps.size() == 2);
  CHECK(pa.steps[0].start_ns == kEpoch + 1000);
  CHECK(pa.steps[0].dur_ns == 1000);
  CHECK(pa.steps[1].cycle == 1);
  CHECK(cycle_count(pa) == 2);
  CHECK(c[20].discarded == 1);  // the first window record sends it to two passes
  for (size_t i = 0; i < c[20].events.size(); ++i) {
    const Event& e = c[20].events[i];
    if (e.name == "r") CHECK(c[20].ids[i].cycle == (e.start_ns < kEpoch + 3000 ? 0 : 1));
  }
  REQUIRE(c[20].gpu.size() == 1);
  CHECK(c[20].gpu[0].cycle == 1);

  const Process& pb = run.processes[1];
  REQUIRE(pb.capture_windows.size() == 2);
  CHECK(pb.capture_windows[0].id == 0);
  CHECK(pb.capture_windows[0].end_ns == kEpoch + 2500);
  REQUIRE(pb.steps.size() == 4);
  CHECK(pb.steps[0].cycle == 0);
  CHECK(pb.steps[1].action == StepAction::kRecordAndSave);
  CHECK(pb.steps[1].cycle == 0);
  CHECK(pb.steps[2].action == StepAction::kRecord);
  CHECK(pb.steps[3].cycle == 1);

  std::map<std::string, OpStats> rows = test::rows_by_kind_and_name(run);
  CHECK(rows["nvtx r"].calls == 2);
  CHECK(rows["nvtx r"].cpu_total_ns == 400 + 800);
  CHECK(rows["nvtx r"].self_cpu_ns == 400 + 800 - 100);
  CHECK(rows["nvtx r"].self_cuda_ns == 200);
  CHECK(rows["nvtx ProfilerStep*"].calls == 4);  // every step of process 21, despite the schedule
  CHECK(rows["nvtx ProfilerStep*"].cpu_total_ns == 1000 + 300 + 400 + 300);
}

TEST_CASE("engine passes: --capture-range keeps what lies in its windows, and the GPU work launched there") {
  // Thread 1: a launch [800,850] #3 before the window; the window [1000,2000] holds op
  // [1100,1300] with a launch [1200,1250] #1; after it, op [2500,2600] with a launch #2.
  // Kernels: #3's runs inside the window [1050,1080], #1's past its end [1900,2100],
  // #2's [2580,2590].
  auto capture_of = [](const std::string& file, bool nvtx) {
    Slots s;
    s.str(1, "window").str(2, "op").str(3, "cudaLaunchKernel").str(4, "_Z2k1v").str(5, "_Z2k2v").str(6, "_Z2k3v");
    s.api(3, 800, 850, 3);
    if (nvtx) {
      s.push(1, 1000);
    } else {
      s.rec(Kind::kCudaProfiler, 0, 1000, 1);
    }
    s.push(2, 1100).api(3, 1200, 1250, 1).pop(1300);
    if (nvtx) {
      s.pop(2000);
    } else {
      s.rec(Kind::kCudaProfiler, 0, 2000, 0);
    }
    s.push(2, 2500).api(3, 2550, 2560, 2).pop(2600);
    Slots gpu;
    gpu.kernel(6, 1050, 1080, 3, 7).kernel(4, 1900, 2100, 1, 7).kernel(5, 2580, 2590, 2, 7);
    return test::Captures().process(10).frame(1, s).frame(99, gpu).bye(3000).save(file);
  };
  for (const bool nvtx : {true, false}) {
    CAPTURE(nvtx);
    AnalysisOptions options;
    std::string error;
    options.capture_range = *parse_capture_range(nvtx ? "nvtx:window" : "cudaProfilerApi", &error);
    std::map<int, test::Collected> c;
    const Run run = test::analyse(capture_of(nvtx ? "range_nvtx.tprof" : "range_profiler.tprof", nvtx), options, &c);
    CHECK(c[10].discarded == 0);  // a capture range is read in two passes from the start
    std::map<std::string, OpStats> rows = test::rows_by_kind_and_name(run);
    CHECK(rows["nvtx op"].calls == 1);
    CHECK(rows["nvtx op"].self_cpu_ns == 200 - 50);
    CHECK(rows["nvtx op"].self_cuda_ns == 200);
    CHECK(rows["cuda_api cudaLaunchKernel"].calls == 1);
    CHECK(rows["kernel k1()"].calls == 1);
    CHECK(rows.count("kernel k2()") == 0);  // launched after the window
    CHECK(rows.count("kernel k3()") == 0);  // launched before it, though it ran inside
    if (nvtx) {
      CHECK(rows["nvtx window"].self_cpu_ns == 1000 - 200);
      CHECK(rows["nvtx window"].cuda_total_ns == 200);
    }
    CHECK(rows.size() == (nvtx ? 4u : 3u));
    CHECK(c[10].gpu.size() == 1);
    CHECK(c[10].named("op").size() == 1);
    // k3's call was recorded, outside the window: k3 is no record without a call.
    CHECK(run.processes.at(0).warnings.empty());
  }
  // A range that never happens: nothing is reported, and the process says why.
  AnalysisOptions options;
  std::string error;
  options.capture_range = *parse_capture_range("nvtx:absent", &error);
  const Run none = test::analyse(capture_of("range_absent.tprof", true), options);
  CHECK(none.ops.empty());
  const std::vector<std::string>& warnings = none.processes.at(0).warnings;
  CHECK(std::find(warnings.begin(), warnings.end(), no_window_warning(options.capture_range)) != warnings.end());
}

}  // namespace torchprof
