// The engine (analysis/engine.h) on captures of what programs write: strings defined in
// a later frame of another thread, back-to-back ranges, API calls holding driver calls,
// GPU records read before their API call, start/end ranges written after what they hold
// (as the Python bootstrap writes its steps), PyTorch op ranges, steps read after the
// records they hold, unended ranges, fork-then-exec images of one pid, and the degenerate
// cases the engine's nesting rules give an answer for. Expected rows and self times are
// worked out by hand beside each check. engine_passes_test.cpp has the two-pass cases
// and capture windows.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/schedule.h"
#include "engine_test_util.h"
#include "process_capture.h"

namespace torchprof {

using test::kEpoch;
using test::Slots;
using wire::Kind;

namespace {

// The table, row by row in its order, as text.
std::vector<std::string> table(const Run& run) { return test::table_text(run.ops); }

bool has_warning(const Process& p, const std::string& text) {
  for (const std::string& w : p.warnings) {
    if (w.find(text) != std::string::npos) return true;
  }
  return false;
}

// The event named `name` that starts at monotonic `start`.
const Event& at(const test::Collected& c, const std::string& name, int64_t start) {
  for (const Event* e : c.named(name)) {
    if (e->start_ns == kEpoch + start) return *e;
  }
  FAIL("no " << name << " at " << start);
  static Event none;
  return none;
}

}  // namespace

TEST_CASE("engine: nesting, names defined in a later frame of another thread, steps and schedule") {
  Slots t1;  // names 5 and 6 are defined later, in thread 2's frame
  t1.str(1, "ProfilerStep#0").str(2, "ProfilerStep#1").str(3, "fwd").str(4, "bwd")
      .push(3, 1100).pop(1150)  // before the first step: in no step, counted without a schedule
      .push(1, 2000).push(3, 2100).push(5, 2200).pop(2300).pop(2500).push(4, 2600).pop(2900).pop(3000)
      .push(2, 3010).push(3, 3100).rec(Kind::kMark, 6, 3150).pop(3200).push(4, 3300)
      .pop(3800);  // bwd; step 1 stays open: closed at the thread's last timestamp
  Slots t2;
  t2.str(5, "matmul").str(6, "tick").push(3, 2050).push(5, 2060).pop(2070).pop(3500).pop(3600);  // unmatched pop
  const std::string path =
      test::Captures().process(10).frame(1, t1).frame(2, t2).bye(4000).save("engine_steps.tprof");

  std::map<int, test::Collected> c;
  const Run run = test::analyse(path, {}, &c);
  const Process& p = run.processes.at(0);
  REQUIRE(p.steps.size() == 2);
  CHECK(p.steps[1].start_ns == kEpoch + 3010);
  CHECK(p.steps[1].dur_ns == 3800 - 3010);
  std::map<std::string, OpStats> rows = test::rows_by_kind_and_name(run);
  // Two steps recorded: fwd of the first step (2100-2500, holding matmul 2200-2300), of
  // thread 2 (2050-3500, holding matmul 2060-2070) and of the second step (3100-3200);
  // fwd before the first step (1100-1150) counts too: there is no schedule.
  CHECK(rows["nvtx fwd"].calls == 4);
  CHECK(rows["nvtx fwd"].cpu_total_ns == 50 + 400 + 1450 + 100);
  CHECK(rows["nvtx fwd"].self_cpu_ns == 50 + 300 + 1440 + 100);
  CHECK(rows["nvtx matmul"].calls == 2);
  CHECK(rows["nvtx matmul"].cpu_total_ns == 100 + 10);
  // Step 0 [2000,3000] holds fwd 400 and bwd 300; step 1 [3010,3800] fwd 100 and bwd 500.
  CHECK(rows["nvtx ProfilerStep*"].calls == 2);
  CHECK(rows["nvtx ProfilerStep*"].cpu_total_ns == 1000 + 790);
  CHECK(rows["nvtx ProfilerStep*"].self_cpu_ns == (1000 - 700) + (790 - 600));
  CHECK(rows.count("nvtx tick") == 0);  // marks are not rows
  CHECK(at(c[10], "tick", 3150).kind == EventKind::kMark);
  CHECK(at(c[10], "ProfilerStep#1", 3010).unterminated);
  CHECK(at(c[10], "fwd", 2050).tid == 2);
  CHECK(at(c[10], "fwd", 2050).step == 0);
  CHECK(has_warning(p, "1 pops without a matching push"));
  CHECK(has_warning(p, "1 ranges never ended"));

  AnalysisOptions options;
  options.schedule = parse_schedule("wait=1,warmup=0,active=1", nullptr, nullptr);
  rows = test::rows_by_kind_and_name(test::analyse(path, options));
  CHECK(rows["nvtx fwd"].calls == 1);  // the second step's only
  CHECK(rows["nvtx fwd"].cpu_total_ns == 100);
  CHECK(rows["nvtx ProfilerStep*"].calls == 1);
  CHECK(rows["nvtx ProfilerStep*"].self_cpu_ns == 790 - 600);
  options.schedule.reset();
  options.step_marker = "^never$";  // no marker: the process is one step
  rows = test::rows_by_kind_and_name(test::analyse(path, options));
  CHECK(rows["nvtx fwd"].calls == 4);
  CHECK(rows["nvtx fwd"].cpu_total_ns == 50 + 400 + 1450 + 100);
  CHECK(rows["nvtx ProfilerStep*"].calls == 2);  // still folded into one row
}

// Back-to-back ranges, as a tight loop writes them: a range often starts at the
// nanosecond the one before it ended, on a fast clock.
TEST_CASE("engine: a range that starts as another ends follows it") {
  Slots t1;
  t1.str(1, "ProfilerStep#0").str(2, "ProfilerStep#1").str(3, "fwd").str(4, "bwd").str(5, "mm")
      .push(1, 1000).push(3, 1000).push(5, 1010).pop(1020).push(5, 1020).pop(1040).pop(1040)  // fwd: 40, mm 10+20
      .push(4, 1040).push(5, 1050).pop(1050).pop(1090)  // bwd: an empty mm inside, started apart
      .pop(1100)
      .push(2, 1100).push(3, 1100).pop(1200).push(4, 1200).pop(1300).pop(1300);  // step 1 starts as step 0 ends
  const std::string path = test::Captures().process(10).frame(1, t1).bye(2000).save("engine_back_to_back.tprof");

  std::map<std::string, OpStats> rows = test::rows_by_kind_and_name(test::analyse(path));
  CHECK(rows["nvtx ProfilerStep*"].calls == 2);
  CHECK(rows["nvtx ProfilerStep*"].self_cpu_ns == (100 - 40 - 50) + (200 - 100 - 100));
  CHECK(rows["nvtx fwd"].calls == 2);
  CHECK(rows["nvtx fwd"].self_cpu_ns == (40 - 30) + 100);
  CHECK(rows["nvtx mm"].calls == 3);
  CHECK(rows["nvtx mm"].cpu_total_ns == 10 + 20 + 0);
  CHECK(rows["nvtx bwd"].self_cpu_ns == 50 + 100);
  AnalysisOptions options;
  options.schedule = parse_schedule("wait=1,warmup=0,active=1", nullptr, nullptr);
  rows = test::rows_by_kind_and_name(test::analyse(path, options));
  CHECK(rows["nvtx ProfilerStep*"].calls == 1);
  CHECK(rows["nvtx ProfilerStep*"].self_cpu_ns == 200 - 100 - 100);
  CHECK(rows["nvtx fwd"].calls == 1);
  CHECK(rows.count("nvtx mm") == 0);  // only in step 0
}

TEST_CASE("engine: API calls holding driver calls, GPU records read before their call") {
  // The activity thread's first frame comes before the frame of the call it names (and
  // names its kernel with a string defined in that later frame).
  Slots early;
  early.kernel(6, 2300, 2400, 10, 7);
  Slots t1;
  t1.str(1, "ProfilerStep#0").str(2, "ProfilerStep#1").str(3, "fwd").str(4, "cudaLaunchKernel")
      .str(5, "cuLaunchKernel").str(6, "_Z4gemmv").str(7, "relu_kernel").str(8, "cudaMemcpyAsync")
      .str(9, "cudaStreamSynchronize")
      .push(1, 2000).push(3, 2100)
      .api(5, 2210, 2240, 11, 307, Kind::kCudaDriver)  // written first: it returns first
      .api(4, 2200, 2250, 10)                          // holds the driver call
      .api(8, 2300, 2320, 12)
      .pop(2500)                                       // fwd
      .api(4, 2600, 2650, 13)                          // two kernels: a graph's
      .api(9, 2700, 2800, 14)
      .pop(3000)                                       // step 0
      .push(2, 3010).push(3, 3100).api(4, 3150, 3180, 20).pop(3200).pop(3800);
  Slots late;
  late.copy(Kind::kMemcpy, 2330, 2340, 12, 4096, 7, 1, 1, 3)
      .memory(true, 2310, 0x1000, 4096, 12)
      .kernel(7, 2700, 2720, 13, 7)
      .kernel(7, 2720, 2750, 13, 7)
      .with_extra(Kind::kSync, 0, 2710, 2790, 14, 0, wire::GpuSyncExtra{})
      .kernel(6, 3300, 3500, 20, 7)
      .kernel(7, 5000, 5010, 999, 7);  // no call names it; in no step
  const std::string path = test::Captures()
                               .process(10)
                               .frame(99, early)
                               .frame(1, t1)
                               .frame(99, late)
                               .bye(6000)
                               .save("engine_gpu.tprof");

  std::map<int, test::Collected> c;
  const Run run = test::analyse(path, {}, &c);
  CHECK(run.has_gpu);
  std::map<std::string, OpStats> rows = test::rows_by_kind_and_name(run);
  // fwd holds the calls of kernel 10 (100 ns) and copy 12 (10 ns) in step 0 and of
  // kernel 20 (200 ns) in step 1; the graph's two kernels (20 + 30 ns) are step 0's own.
  CHECK(rows["nvtx fwd"].self_cuda_ns == 100 + 10 + 200);
  CHECK(rows["nvtx fwd"].cuda_total_ns == 100 + 10 + 200);
  // fwd [2100,2500]: the runtime call's 50 ns (the driver call's 30 inside it) and the
  // copy call's 20; fwd [3100,3200]: one call of 30.
  CHECK(rows["nvtx fwd"].self_cpu_ns == (400 - 50 - 20) + (100 - 30));
  CHECK(rows["nvtx ProfilerStep*"].self_cuda_ns == 20 + 30);
  CHECK(rows["nvtx ProfilerStep*"].cuda_total_ns == 310 + 50);
  // Step 0 [2000,3000]: fwd 400, the graph launch 50, the sync call 100.
  CHECK(rows["nvtx ProfilerStep*"].self_cpu_ns == (1000 - 400 - 50 - 100) + (790 - 100));
  CHECK(rows["kernel gemm()"].calls == 2);
  CHECK(rows["kernel gemm()"].mangled == "_Z4gemmv");
  CHECK(rows["kernel gemm()"].self_cuda_ns == 100 + 200);
  CHECK(rows["kernel relu_kernel"].calls == 3);  // the record in no step counts: there is no schedule
  CHECK(rows["memcpy Memcpy HtoD (Pageable -> Device)"].calls == 1);
  CHECK(rows["cuda_api cudaLaunchKernel"].calls == 3);
  CHECK(rows["cuda_api cudaLaunchKernel"].cpu_total_ns == 50 + 50 + 30);
  CHECK(rows["cuda_api cudaLaunchKernel"].self_cpu_ns == 20 + 50 + 30);  // less the driver call
  CHECK(rows["cuda_api cuLaunchKernel"].calls == 1);
  CHECK(rows["cuda_api cuLaunchKernel"].self_cpu_ns == 30);
  const Process& p = run.processes.at(0);
  CHECK(p.warnings == std::vector<std::string>{"1 GPU records have no recorded launching API call; they count in no range"});
  // The kernel read before its call found it once the call was read.
  const test::Collected::GpuCall* gemm = nullptr;
  for (const test::Collected::GpuCall& g : c[10].gpu) {
    if (g.gpu.correlation == 10) gemm = &g;
  }
  REQUIRE(gemm);
  CHECK(gemm->launch.known);
  CHECK(gemm->launch.first);
  CHECK(gemm->launch.start_ns == kEpoch + 2200);
  CHECK(gemm->launch.tid == 1);
  CHECK(gemm->gpu.step == 0);
  CHECK(at(c[10], "cuLaunchKernel", 2210).self_ns == 30);
  CHECK(at(c[10], "cudaLaunchKernel", 2200).self_ns == 20);
  // The allocation is the copy call's: its thread and step.
  REQUIRE(p.memory_events.size() == 1);
  CHECK(p.memory_events[0].tid == 1);
  CHECK(p.memory_events[0].step == 0);

  AnalysisOptions options;
  options.step_marker = "^never$";  // one step: the unmatched kernel counts too
  rows = test::rows_by_kind_and_name(test::analyse(path, options));
  CHECK(rows["kernel relu_kernel"].calls == 3);
  CHECK(rows["nvtx fwd"].self_cuda_ns == 100 + 10 + 200);
}

// The Python bootstrap's steps, written whole once each ended, in their own domain:
// consecutive ones meet at one nanosecond or overlap by a few. Then the NVTX kinds of
// start/end range: one ended on another thread (its end read first), one ended on its
// own thread around a range, one never ended, an end without a start.
TEST_CASE("engine: start/end ranges written after what they hold, as the bootstrap writes its steps") {
  Slots t2;  // read first
  t2.str(7, "load").str(4, "aten::mm")
      .rec(Kind::kEnd, 0, 5600, 50)                         // of thread 1's load at 5000
      .rec(Kind::kEnd, 0, 5650, 99)                         // no start
      .rec(Kind::kStart, 7, 5700, 53).push(4, 5800).pop(5900);  // never ended: up to the goodbye
  Slots t1;
  t1.str(1, "ProfilerStep#0").str(2, "ProfilerStep#1").str(3, "ProfilerStep#2").str(5, "cudaLaunchKernel")
      .str(8, "train").str(20, "torchprof").rec(Kind::kDomain, 20, 0, 0, 0, 1)
      .push(8, 1000)
      .push(4, 1200).api(5, 1300, 1350, 10).pop(1500).api(5, 1600, 1650, 11)
      .rec(Kind::kStart, 1, 1100, 1, 0, 1).rec(Kind::kEnd, 0, 2000, 1, 0, 1)   // step 0, written as it ends
      .push(4, 2100).pop(2900)
      .rec(Kind::kStart, 2, 2000, 2, 0, 1).rec(Kind::kEnd, 0, 3003, 2, 0, 1)   // step 1: begins as step 0 ends
      .push(4, 3100).pop(3900)
      .rec(Kind::kStart, 3, 3000, 3, 0, 1).rec(Kind::kEnd, 0, 4000, 3, 0, 1)   // step 2: begins 3 ns before step 1 ends
      .rec(Kind::kStart, 7, 5000, 50)                                          // ends on thread 2
      .rec(Kind::kStart, 7, 6000, 51).push(4, 6100).pop(6200).rec(Kind::kEnd, 0, 6500, 51)
      .pop(9000);
  Slots activity;
  activity.kernel(6, 1400, 1500, 10, 7).kernel(6, 1700, 1760, 11, 7).str(6, "_Z4gemmv");
  const std::string path = test::Captures()
                               .process(10)
                               .frame(2, t2)
                               .frame(1, t1)
                               .frame(99, activity)
                               .bye(10000)
                               .save("engine_start_end.tprof");

  std::map<int, test::Collected> c;
  const Run run = test::analyse(path, {}, &c);
  REQUIRE(run.processes.at(0).steps.size() == 3);
  std::map<std::string, OpStats> rows = test::rows_by_kind_and_name(run);
  // Three steps of 900, 1000 and 1000 ns, holding an op each (300, 800, 800 ns) and
  // step 0 a launch of 50 ns; step 1 would end 3 ns after step 2 begins: step ranges of
  // a thread never intersect, so it ends where step 2 begins.
  CHECK(rows["nvtx ProfilerStep*"].calls == 3);
  CHECK(rows["nvtx ProfilerStep*"].cpu_total_ns == 900 + 1000 + 1000);
  CHECK(rows["nvtx ProfilerStep*"].self_cpu_ns == (900 - 300 - 50) + (1000 - 800) + (1000 - 800));
  CHECK(rows["nvtx ProfilerStep*"].self_cuda_ns == 60);  // the kernel launched in the step itself
  CHECK(rows["nvtx ProfilerStep*"].cuda_total_ns == 100 + 60);
  CHECK(rows["nvtx aten::mm"].calls == 5);  // those at 5800 and 6100 are in no step, counted all the same
  CHECK(rows["nvtx aten::mm"].self_cpu_ns == 250 + 800 + 800 + 100 + 100);
  CHECK(rows["nvtx aten::mm"].self_cuda_ns == 100);
  CHECK(rows["nvtx train"].calls == 1);  // it began before the first step: counted without a schedule
  CHECK(at(c[10], "ProfilerStep#1", 2000).self_ns == 1000 - 800);
  CHECK(at(c[10], "ProfilerStep#1", 2000).end_ns == kEpoch + 3000);
  CHECK(at(c[10], "ProfilerStep#2", 3000).self_ns == 1000 - 800);
  CHECK_FALSE(at(c[10], "ProfilerStep#2", 3000).push_pop);
  CHECK(at(c[10], "ProfilerStep#2", 3000).domain() == "torchprof");

  AnalysisOptions options;
  options.step_marker = "^never$";  // one step spanning the process
  c.clear();
  const Run whole = test::analyse(path, options, &c);
  rows = test::rows_by_kind_and_name(whole);
  // train holds the three steps and the load at 6000; the load ended on thread 2 is
  // nobody's child, and the one never ended lasts until the goodbye at 10000.
  CHECK(rows["nvtx train"].self_cpu_ns == 8000 - 900 - 1003 - 1000 - 500);
  CHECK(rows["nvtx load"].calls == 3);
  CHECK(rows["nvtx load"].cpu_total_ns == 600 + 500 + 4300);
  CHECK(rows["nvtx load"].self_cpu_ns == 600 + 400 + 4200);
  CHECK(at(c[10], "load", 5000).end_tid() == 2);
  CHECK(at(c[10], "load", 5700).unterminated);
  CHECK(at(c[10], "load", 5700).end_ns == kEpoch + 10000);
  CHECK(whole.processes.at(0).warnings ==
        std::vector<std::string>{"1 range ends without a matching start were ignored",
                                 "1 ranges never ended; closed at the last timestamp of their thread"});
}

TEST_CASE("engine: PyTorch op ranges") {
  Slots t1;
  // emit_nvtx's messages (default domain) carry seq and op_id: one string per call. The
  // bootstrap's (its own domain) repeat, with shapes and a Python stack. A step marker
  // that is an op. A range in another domain whose text looks like an op is not one.
  t1.str(1, "ProfilerStep#0, seq = 1").str(2, "aten::mm, seq = 7, op_id = 3, sizes = [[2, 3], [3, 4]]")
      .str(3, "aten::mm, seq = 8, op_id = 4, sizes = [[5, 5], [5, 5]]")
      .str(4, "aten::add, sizes = [[2], [2]], stack = train.py(12): step; train.py(30): main")
      .str(5, "torchprof.ops").str(6, "other").str(7, "load, seq = 1").str(8, "cudaLaunchKernel")
      .str(9, "_Z4gemmv").str(10, "aten::relu, seq = oops")
      .rec(Kind::kDomain, 5, 0, 0, 0, 1).rec(Kind::kDomain, 6, 0, 0, 0, 2)
      .push(1, 1000)
      .push(2, 1100).api(8, 1150, 1170, 40).pop(1300)
      .push(3, 1400).pop(1450)
      .push(4, 1500, 1).pop(1600, 1)
      .push(4, 1700, 1).pop(1750, 1)
      .push(10, 1760, 1).pop(1770, 1)  // malformed, in the ops domain: an op named by its message
      .push(7, 1800, 2).pop(1900, 2)   // another domain: an nvtx row
      .push(10, 1910).pop(1920)        // malformed, default domain: an nvtx row
      .push(10, 1930, 2).pop(1940, 2)  // the same name in a third domain: the same nvtx row
      .pop(2000);
  Slots gpu;
  gpu.kernel(9, 1200, 1260, 40, 7);
  const std::string path = test::Captures().process(10).frame(1, t1).frame(99, gpu).bye(3000).save("engine_ops.tprof");

  const Run run = test::analyse(path);
  REQUIRE(run.processes.at(0).steps.size() == 1);
  CHECK(run.processes[0].steps[0].name == "ProfilerStep#0");  // the op's name
  std::map<std::string, OpStats> rows = test::rows_by_kind_and_name(run);
  CHECK(rows["cpu_op aten::mm"].calls == 2);
  CHECK(rows["cpu_op aten::mm"].self_cuda_ns == 60);
  CHECK(rows["cpu_op aten::mm"].self_cpu_ns == 200 - 20 + 50);
  CHECK(rows["cpu_op aten::add"].calls == 2);
  CHECK(rows["cpu_op aten::add"].stack == std::vector<std::string>{"train.py(12): step", "train.py(30): main"});
  CHECK(rows["cpu_op ProfilerStep*"].cuda_total_ns == 60);
  CHECK(rows["cpu_op ProfilerStep*"].calls == 1);
  // The step [1000,2000] holds mm 200 + 50, add 100 + 50, the relus 10 * 3 and load 100.
  CHECK(rows["cpu_op ProfilerStep*"].self_cpu_ns == 1000 - 250 - 150 - 30 - 100);
  CHECK(rows["cpu_op aten::relu, seq = oops"].calls == 1);
  CHECK(rows["nvtx aten::relu, seq = oops"].calls == 2);
  CHECK(rows["nvtx load, seq = 1"].calls == 1);

  AnalysisOptions options;
  options.step_marker = "^ProfilerStep#[0-9]+$";  // the op's name matches, its message does not
  CHECK(table(test::analyse(path, options)) == table(run));
  REQUIRE(test::analyse(path, options).processes.at(0).steps.size() == 1);

  options.group_by_input_shape = true;  // the two aten::mm calls differ in shapes
  int mm_rows = 0;
  for (const OpStats& op : test::analyse(path, options).ops) mm_rows += op.name == "aten::mm" ? 1 : 0;
  CHECK(mm_rows == 2);
}

// Steps are known before anything is counted: a step read after the records it holds
// (another thread's, in a later frame) still holds them.
TEST_CASE("engine: a step read after the records it holds") {
  Slots a;
  a.str(1, "ProfilerStep#0").str(2, "ProfilerStep#1").str(3, "fwd")
      .push(1, 1000).push(3, 1100).pop(1400).pop(2000)
      .push(2, 2100).push(3, 2520).pop(2540).pop(3000);
  // Another thread's step, read after thread 1's steps and what they hold: the fwd at
  // 2520 is in it (the later step holding a time has it).
  Slots late;
  late.str(4, "ProfilerStep#late").str(5, "bwd").push(4, 2500).push(5, 2550).pop(2580).pop(2600);
  const std::string path =
      test::Captures().process(10).frame(1, a).frame(2, late).bye(4000).save("engine_late_step.tprof");

  AnalysisOptions options;
  options.schedule = parse_schedule("wait=2,warmup=0,active=1", nullptr, nullptr);  // the third step alone
  std::map<int, test::Collected> c;
  const Run run = test::analyse(path, options, &c);
  REQUIRE(run.processes.at(0).steps.size() == 3);
  CHECK(run.processes[0].steps[2].name == "ProfilerStep#late");
  std::map<std::string, OpStats> rows = test::rows_by_kind_and_name(run);
  CHECK(rows["nvtx ProfilerStep*"].calls == 1);
  CHECK(rows["nvtx fwd"].calls == 1);
  CHECK(rows["nvtx fwd"].cpu_total_ns == 20);
  CHECK(rows["nvtx bwd"].calls == 1);
  CHECK(at(c[10], "fwd", 2520).step == 2);

  // Thread 2's step after those of thread 1.
  Slots after;
  after.str(4, "ProfilerStep#late").str(5, "bwd").push(4, 3100).push(5, 3150).pop(3180).pop(3300);
  const std::string later =
      test::Captures().process(10).frame(1, a).frame(2, after).bye(4000).save("engine_later_step.tprof");
  options.schedule = parse_schedule("wait=1,warmup=0,active=2", nullptr, nullptr);  // steps 1 and 2 counted
  rows = test::rows_by_kind_and_name(test::analyse(later, options));
  CHECK(rows["nvtx fwd"].calls == 1);  // the one in step 0 is not counted
  CHECK(rows["nvtx fwd"].cpu_total_ns == 20);
  CHECK(rows["nvtx bwd"].calls == 1);
  CHECK(rows["nvtx ProfilerStep*"].calls == 2);
}

// A start/end range written whole once it ended (as the bootstrap writes its ranges),
// read after what it holds.
TEST_CASE("engine: a start/end range read after the records it holds") {
  Slots a;
  a.str(1, "ProfilerStep#0").str(2, "ProfilerStep#1").str(3, "fwd").str(7, "load")
      .push(1, 1000).push(3, 1100).pop(1200).pop(2000);
  Slots next;
  next.rec(Kind::kStart, 7, 1050, 5).rec(Kind::kEnd, 0, 1500, 5).push(2, 2100).push(3, 2200).pop(2300).pop(3000);
  const std::string path =
      test::Captures().process(10).frame(1, a).frame(1, next).bye(4000).save("engine_late_start_end.tprof");
  std::map<int, test::Collected> c;
  std::map<std::string, OpStats> rows = test::rows_by_kind_and_name(test::analyse(path, {}, &c));
  // Step 0 [1000,2000] holds load [1050,1500], which holds fwd [1100,1200].
  CHECK(rows["nvtx load"].calls == 1);
  CHECK(rows["nvtx load"].self_cpu_ns == 450 - 100);
  CHECK(rows["nvtx ProfilerStep*"].self_cpu_ns == (1000 - 450) + (900 - 100));
  CHECK(at(c[10], "fwd", 1100).self_ns == 100);
}

TEST_CASE("engine: unended ranges close at their thread's last record, start/end ranges at the image's end") {
  // Thread 1: a [100..], b [200..], c [300,400], then a mark at 900: a and b never end.
  Slots t1;
  t1.str(1, "a").str(2, "b").str(3, "c").str(4, "m").str(5, "s").str(6, "d");
  t1.push(1, 100).push(2, 200).push(3, 300).pop(400).rec(Kind::kMark, 4, 900);
  // Thread 2: a start/end range s from 1000, never ended, holding d [1100,1200].
  Slots t2;
  t2.rec(Kind::kStart, 5, 1000, 1).push(6, 1100).pop(1200);
  std::map<int, test::Collected> c;
  const Run run = test::analyse(
      test::Captures().process(10).frame(1, t1).frame(2, t2).bye(5000).save("engine_unended.tprof"), {}, &c);
  const test::Collected& p = c[10];
  // b closes at 900 first (the one ending first), as a's child: b 700 (c 100 inside),
  // a 800 (b inside); s runs to the goodbye at 5000.
  CHECK(at(p, "c", 300).self_ns == 100);
  CHECK(at(p, "b", 200).self_ns == 700 - 100);
  CHECK(at(p, "b", 200).end_ns == kEpoch + 900);
  CHECK(at(p, "b", 200).unterminated);
  CHECK(at(p, "a", 100).self_ns == 800 - 700);
  CHECK(at(p, "a", 100).unterminated);
  CHECK_FALSE(at(p, "c", 300).unterminated);
  CHECK(at(p, "s", 1000).end_ns == kEpoch + 5000);
  CHECK(at(p, "s", 1000).self_ns == 4000 - 100);
  CHECK(at(p, "s", 1000).unterminated);
  std::map<std::string, OpStats> rows = test::rows_by_kind_and_name(run);
  CHECK(rows["nvtx a"].cpu_total_ns == 800);
  CHECK(rows["nvtx s"].cpu_total_ns == 4000);
  CHECK(has_warning(run.processes.at(0), "3 ranges never ended"));
}

TEST_CASE("engine: a fork copy and its exec'd image are one process, string ids starting over") {
  Slots fork_copy;
  fork_copy.str(1, "forked").push(1, 5000).pop(5100);
  Slots image;  // string ids start over in the new image
  image.str(1, "exec_child").str(2, "inner").push(1, 6000).push(2, 6100).pop(6200).pop(6500);
  test::Captures caps;
  caps.process(200, {}, "h", "/usr/bin/python3").frame(200, fork_copy).bye(5200, wire::ExitKind::kExec);
  caps.process(200, {}, "h", "/bin/tool").frame(200, image).bye(7000, wire::ExitKind::kExit, 4);
  std::map<int, test::Collected> c;
  const Run run = test::analyse(caps.save("engine_exec.tprof"), {}, &c);
  REQUIRE(run.processes.size() == 1);
  const Process& p = run.processes[0];
  CHECK(p.exe == "/bin/tool");
  CHECK(p.exit_code == 4);
  CHECK(p.cpu_events == 3);
  REQUIRE(p.steps.size() == 1);  // one step over both images
  CHECK(p.steps[0].start_ns == kEpoch + 5000);
  CHECK(c[200].discarded == 0);  // two images: read in two passes from the start
  std::map<std::string, OpStats> rows = test::rows_by_kind_and_name(run);
  CHECK(rows["nvtx forked"].calls == 1);
  CHECK(rows["nvtx forked"].cpu_total_ns == 100);
  CHECK(rows["nvtx exec_child"].calls == 1);
  CHECK(rows["nvtx exec_child"].self_cpu_ns == 500 - 100);
  CHECK(rows["nvtx inner"].calls == 1);
  CHECK(rows.size() == 3);
}

// What the engine's nesting rules (analysis/engine.h) answer where interval nesting
// has none, or a different one: ties at one nanosecond follow record order; a pop
// closes the last open range of its own domain; a range that ends while one opened
// inside it is open leaves that one to the range around it.
TEST_CASE("engine: ties, overlapping domains and crossing ranges") {
  auto rows_of = [](const std::string& file, const Slots& s) {
    return test::rows_by_kind_and_name(test::analyse(test::Captures().process(10).frame(1, s).save(file)));
  };
  Slots tie;  // b starts at the nanosecond a ended, and is empty: read after a's pop, a sibling
  tie.str(1, "a").str(2, "b").push(1, 1000).pop(1100).push(2, 1100).pop(1100);
  std::map<std::string, OpStats> rows = rows_of("engine_tie.tprof", tie);
  CHECK(rows["nvtx a"].self_cpu_ns == 100);
  CHECK(rows["nvtx b"].self_cpu_ns == 0);
  Slots after_empty;  // b starts at the nanosecond the empty a ended: a is not inside b
  after_empty.str(1, "a").str(2, "b").push(1, 1000).pop(1000).push(2, 1000).pop(1100);
  rows = rows_of("engine_after_empty.tprof", after_empty);
  CHECK(rows["nvtx a"].self_cpu_ns == 0);
  CHECK(rows["nvtx b"].self_cpu_ns == 100);
  Slots domains;  // b (domain 1) opens inside a (domain 0) and outlives it: neither holds the other
  domains.str(1, "a").str(2, "b").push(1, 1000).push(2, 1100, 1).pop(1200).pop(1300, 1);
  rows = rows_of("engine_domains.tprof", domains);
  CHECK(rows["nvtx a"].self_cpu_ns == 200);
  CHECK(rows["nvtx b"].self_cpu_ns == 200);
  Slots crossing;  // a start/end range that begins inside a range and outlives it
  crossing.str(1, "a").str(2, "r").push(1, 1000).pop(1200).rec(Kind::kStart, 2, 1100, 7).rec(Kind::kEnd, 0, 1300, 7)
      .push(1, 1400).pop(1500);
  rows = rows_of("engine_crossing.tprof", crossing);
  CHECK(rows["nvtx a"].calls == 2);
  CHECK(rows["nvtx a"].self_cpu_ns == 200 + 100);
  CHECK(rows["nvtx r"].self_cpu_ns == 200);
  Slots nested_domains;  // properly nested across domains: interval nesting
  nested_domains.str(1, "a").str(2, "b").push(1, 1000).push(2, 1100, 1).pop(1200, 1).pop(1300);
  rows = rows_of("engine_nested_domains.tprof", nested_domains);
  CHECK(rows["nvtx a"].self_cpu_ns == 300 - 100);
}

}  // namespace torchprof
