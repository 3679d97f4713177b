#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <string>

#include "analysis_capture_builder.h"
#include "analysis/analysis.h"
#include "analysis/schedule.h"
#include "analysis/stream_table.h"
#include "stream_table_test_util.h"

namespace torchprof {

using capture::ChunkType;
using test::CaptureBuilder;
using test::Slots;
using wire::Kind;
using stream_test::check_same;
using stream_test::hello;
using stream_test::rows;
using stream_test::warnings;

namespace {

// The table read without reading ahead for the steps: two passes when there are steps.
StreamedTable two_passes(const std::string& path, const AnalysisOptions& options) {
  std::string why;
  std::optional<StreamedTable> t = stream_table(path, options, &why, /*read_ahead_steps=*/false);
  INFO("refused: " << why);
  REQUIRE(t.has_value());
  return *t;
}

// The streamed table, which must equal the one made without reading ahead.
StreamedTable streamed_ok(const std::string& path, const AnalysisOptions& options) {
  std::string why;
  std::optional<StreamedTable> t = stream_table(path, options, &why);
  INFO("refused: " << why);
  REQUIRE(t.has_value());
  const StreamedTable two = two_passes(path, options);
  CHECK(rows(t->run) == rows(two.run));
  CHECK(warnings(t->run) == warnings(two.run));
  CHECK(t->events == two.events);
  return *t;
}

// The rows by "KIND NAME".
std::map<std::string, OpStats> by_kind_and_name(const Run& run) {
  std::map<std::string, OpStats> out;
  for (const OpStats& op : run.ops) out[op.kind + " " + op.name] = op;
  return out;
}

std::string refusal(const std::string& path) {
  std::string why;
  std::optional<StreamedTable> t = stream_table(path, AnalysisOptions{}, &why);
  return t ? std::string("(accepted)") : why;
}

}  // namespace

TEST_CASE("stream_table: nesting, late names, steps and schedule as the full analysis") {
  CaptureBuilder b;
  b.chunk(ChunkType::kHello, 1, hello(10));
  Slots t1;  // names 5 and 6 are defined later, in thread 2's frame
  t1.str(1, "ProfilerStep#0").str(2, "ProfilerStep#1").str(3, "fwd").str(4, "bwd")
      .push(3, 1100).pop(1150)  // before the first step: counted in no step
      .push(1, 2000).push(3, 2100).push(5, 2200).pop(2300).pop(2500).push(4, 2600).pop(2900).pop(3000)
      .push(2, 3000 + 10).push(3, 3100).rec(Kind::kMark, 6, 3150).pop(3200).push(4, 3300)
      .pop(3800);  // bwd; step 1 stays open: closed at the thread's last timestamp
  b.chunk(ChunkType::kFrame, 1, test::frame_body(1, 0, t1));
  Slots t2;
  t2.str(5, "matmul").str(6, "tick").push(3, 2050).push(5, 2060).pop(2070).pop(3500).pop(3600);  // unmatched pop
  b.chunk(ChunkType::kFrame, 1, test::frame_body(2, 0, t2));
  b.chunk(ChunkType::kBye, 1, test::bye_body(wire::ExitKind::kExit, 0, 10, 0, 4000));
  const std::string path = b.save("stream_steps.tprof");

  AnalysisOptions options;
  const StreamedTable every = streamed_ok(path, options);
  CHECK(every.passes == 2);
  check_same(path, options, every);
  // Two steps recorded: fwd of the first step (2100-2500), of thread 2 (2050-3500) and
  // of the second step (3100-3200); fwd before the first step is not counted.
  bool found = false;
  for (const OpStats& op : every.run.ops) {
    if (op.name == "fwd") {
      found = true;
      CHECK(op.calls == 3);
      CHECK(op.cpu_total_ns == 400 + 1450 + 100);
      CHECK(op.self_cpu_ns == 300 + 1440 + 100);
    }
  }
  CHECK(found);

  options.schedule = parse_schedule("wait=1,warmup=0,active=1", nullptr, nullptr);
  check_same(path, options, streamed_ok(path, options));
  options.step_marker = "^never$";  // no marker: one step, one pass
  const StreamedTable one = streamed_ok(path, options);
  CHECK(one.passes == 1);
  check_same(path, options, one);
}

// Back-to-back ranges, as a tight loop writes them: a range often starts at the
// nanosecond the one before it ended, on a fast clock.
TEST_CASE("stream_table: a range that starts as another ends follows it, as in the full analysis") {
  CaptureBuilder b;
  b.chunk(ChunkType::kHello, 1, hello(10));
  Slots t1;
  t1.str(1, "ProfilerStep#0").str(2, "ProfilerStep#1").str(3, "fwd").str(4, "bwd").str(5, "mm")
      .push(1, 1000).push(3, 1000).push(5, 1010).pop(1020).push(5, 1020).pop(1040).pop(1040)  // fwd: 40, mm 10+20
      .push(4, 1040).push(5, 1050).pop(1050).pop(1090)  // bwd: an empty mm inside, started apart
      .pop(1100)
      .push(2, 1100).push(3, 1100).pop(1200).push(4, 1200).pop(1300).pop(1300);  // step 1 starts as step 0 ends
  b.chunk(ChunkType::kFrame, 1, test::frame_body(1, 0, t1));
  b.chunk(ChunkType::kBye, 1, test::bye_body(wire::ExitKind::kExit, 0, 10, 0, 2000));
  const std::string path = b.save("stream_back_to_back.tprof");

  AnalysisOptions options;
  const StreamedTable t = streamed_ok(path, options);
  check_same(path, options, t);
  std::map<std::string, OpStats> by_name = by_kind_and_name(t.run);
  CHECK(by_name["nvtx ProfilerStep*"].calls == 2);
  CHECK(by_name["nvtx ProfilerStep*"].self_cpu_ns == (100 - 40 - 50) + (200 - 100 - 100));
  CHECK(by_name["nvtx fwd"].calls == 2);
  CHECK(by_name["nvtx fwd"].self_cpu_ns == (40 - 30) + 100);
  CHECK(by_name["nvtx mm"].calls == 3);
  CHECK(by_name["nvtx mm"].cpu_total_ns == 10 + 20 + 0);
  CHECK(by_name["nvtx bwd"].self_cpu_ns == 50 + 100);
  options.schedule = parse_schedule("wait=1,warmup=0,active=1", nullptr, nullptr);
  check_same(path, options, streamed_ok(path, options));
}

TEST_CASE("stream_table: refuses what only the full analysis handles") {
  auto capture = [](const std::string& name, const Slots& slots, int images = 1) {
    CaptureBuilder b;
    for (int i = 0; i < images; ++i) {
      b.chunk(ChunkType::kHello, i + 1, hello(10));
      b.chunk(ChunkType::kFrame, i + 1, test::frame_body(1, 0, slots));
    }
    return b.save(name);
  };
  Slots start_end;
  start_end.str(1, "r").rec(Kind::kStart, 1, 1000, 7).rec(Kind::kEnd, 0, 1100, 7);
  CHECK(refusal(capture("stream_start.tprof", start_end)) == "(accepted)");
  Slots crossing;  // a start/end range that begins inside a range and outlives it
  crossing.str(1, "a").str(2, "r").push(1, 1000).pop(1200).rec(Kind::kStart, 2, 1100, 7).rec(Kind::kEnd, 0, 1300, 7)
      .push(1, 1400).pop(1500);
  CHECK(refusal(capture("stream_crossing.tprof", crossing)).find("overlap") != std::string::npos);
  Slots in_call;  // a start/end range that ends inside an API call
  in_call.str(1, "cudaLaunchKernel").str(2, "r").rec(Kind::kStart, 2, 900, 7).rec(Kind::kEnd, 0, 1050, 7)
      .api(1, 1000, 1100, 5);
  CHECK(refusal(capture("stream_in_call.tprof", in_call)).find("overlap") != std::string::npos);
  Slots held_call;  // a start/end range that begins between a runtime call's start and its driver call's
  held_call.str(1, "cuLaunchKernel").str(2, "cudaLaunchKernel").str(3, "r")
      .api(1, 1010, 1020, 6, 307, Kind::kCudaDriver).api(2, 1000, 1030, 5)
      .rec(Kind::kStart, 3, 1005, 7).rec(Kind::kEnd, 0, 1200, 7);
  CHECK(refusal(capture("stream_held_call.tprof", held_call)).find("overlap") != std::string::npos);
  Slots at_push;  // a start/end range that ends at the nanosecond a range begins
  at_push.str(1, "a").str(2, "r").rec(Kind::kStart, 2, 900, 7).rec(Kind::kEnd, 0, 1000, 7).push(1, 1000).pop(1100);
  CHECK(refusal(capture("stream_at_push.tprof", at_push)).find("nanosecond") != std::string::npos);
  Slots at_later_push;  // the same, the range's end already known when a push before it was read
  at_later_push.str(1, "a").str(2, "r").rec(Kind::kStart, 2, 900, 7).rec(Kind::kEnd, 0, 1000, 7).push(1, 950)
      .pop(980).push(1, 1000).pop(1100);
  CHECK(refusal(capture("stream_at_later_push.tprof", at_later_push)).find("nanosecond") != std::string::npos);
  Slots api;
  api.str(1, "cudaLaunchKernel").api(1, 1000, 1100, 5);
  CHECK(refusal(capture("stream_api.tprof", api)) == "(accepted)");
  Slots outlives;  // the call returns after the range around it has ended
  outlives.str(1, "a").str(2, "cudaLaunchKernel").push(1, 1000).api(2, 1050, 1200, 5).pop(1100);
  CHECK(refusal(capture("stream_outlives.tprof", outlives)).find("ends after the range") != std::string::npos);
  Slots inside;  // a range pushed while a call was running
  inside.str(1, "a").str(2, "cudaLaunchKernel").push(1, 1000).api(2, 900, 1100, 5).pop(1200);
  CHECK(refusal(capture("stream_inside.tprof", inside)).find("back in time") != std::string::npos);
  Slots overlap;  // two calls on one thread that overlap without one holding the other
  overlap.str(1, "cudaLaunchKernel").api(1, 1000, 1100, 5).api(1, 1050, 1200, 6);
  CHECK(refusal(capture("stream_overlap.tprof", overlap)).find("overlap") != std::string::npos);
  Slots shared;  // two calls with one correlation id: which one a GPU record names is the list's order
  shared.str(1, "cudaLaunchKernel").api(1, 1000, 1100, 5).api(1, 1200, 1300, 5);
  CHECK(refusal(capture("stream_shared.tprof", shared)).find("correlation") != std::string::npos);
  Slots op;
  op.str(1, "aten::add, seq = 3").push(1, 1000).pop(1100);
  CHECK(refusal(capture("stream_op.tprof", op)) == "(accepted)");
  Slots domains;  // domain 1 opens inside domain 0 and outlives it
  domains.str(1, "a").str(2, "b").push(1, 1000).push(2, 1100, 1).pop(1200).pop(1300, 1);
  CHECK(refusal(capture("stream_domains.tprof", domains)).find("domains") != std::string::npos);
  Slots tie;  // b starts at the nanosecond a ended, and is empty: interval nesting puts it inside a
  tie.str(1, "a").str(2, "b").push(1, 1000).pop(1100).push(2, 1100).pop(1100);
  CHECK(refusal(capture("stream_tie.tprof", tie)).find("nanosecond") != std::string::npos);
  Slots after_empty;  // b starts at the nanosecond the empty a ended: interval nesting puts a inside b
  after_empty.str(1, "a").str(2, "b").push(1, 1000).pop(1000).push(2, 1000).pop(1100);
  CHECK(refusal(capture("stream_after_empty.tprof", after_empty)).find("nanosecond") != std::string::npos);
  Slots back;
  back.str(1, "a").push(1, 1000).pop(900);
  CHECK(refusal(capture("stream_back.tprof", back)).find("back in time") != std::string::npos);
  Slots plain;
  plain.str(1, "a").push(1, 1000).pop(1100);
  CHECK(refusal(capture("stream_plain.tprof", plain)) == "(accepted)");
  CHECK(refusal(capture("stream_exec.tprof", plain, 2)).find("two images") != std::string::npos);
}

TEST_CASE("stream_table: CUDA API calls and GPU records as the full analysis") {
  CaptureBuilder b;
  b.chunk(ChunkType::kHello, 1, hello(10));
  // The activity thread's first frame comes before the frame of the call it names.
  Slots early;
  early.kernel(6, 2300, 2400, 10, 7);
  b.chunk(ChunkType::kFrame, 1, test::frame_body(99, 0, early));
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
  b.chunk(ChunkType::kFrame, 1, test::frame_body(1, 0, t1));
  Slots late;
  late.copy(Kind::kMemcpy, 2330, 2340, 12, 4096, 7, 1, 1, 3)
      .memory(true, 2310, 0x1000, 4096, 12)
      .kernel(7, 2700, 2720, 13, 7)
      .kernel(7, 2720, 2750, 13, 7)
      .with_extra(Kind::kSync, 0, 2710, 2790, 14, 0, wire::GpuSyncExtra{})
      .kernel(6, 3300, 3500, 20, 7)
      .kernel(7, 5000, 5010, 999, 7);  // no call names it; in no step
  b.chunk(ChunkType::kFrame, 1, test::frame_body(99, 1, late));
  b.chunk(ChunkType::kBye, 1, test::bye_body(wire::ExitKind::kExit, 0, 10, 0, 6000));
  const std::string path = b.save("stream_gpu.tprof");

  AnalysisOptions options;
  const StreamedTable t = streamed_ok(path, options);
  CHECK(t.passes == 1);  // step 0 is known from its pop on, before step 1 is read
  CHECK(two_passes(path, options).passes == 2);
  check_same(path, options, t);
  CHECK(t.run.has_gpu);
  std::map<std::string, OpStats> by_name = by_kind_and_name(t.run);
  // fwd holds the calls of kernel 10 and copy 12 in step 0 and of kernel 20 in step 1.
  CHECK(by_name["nvtx fwd"].self_cuda_ns == 100 + 10 + 200);
  CHECK(by_name["nvtx fwd"].cuda_total_ns == 100 + 10 + 200);
  CHECK(by_name["nvtx fwd"].self_cpu_ns == (400 - 50 - 20) + (100 - 30));
  CHECK(by_name["nvtx ProfilerStep*"].self_cuda_ns == 20 + 30);
  CHECK(by_name["nvtx ProfilerStep*"].cuda_total_ns == 310 + 50);
  CHECK(by_name["kernel gemm()"].calls == 2);
  CHECK(by_name["kernel gemm()"].mangled == "_Z4gemmv");
  CHECK(by_name["kernel relu_kernel"].calls == 2);  // the record in no step is not counted
  CHECK(by_name["cuda_api cudaLaunchKernel"].calls == 3);
  CHECK(by_name["cuda_api cudaLaunchKernel"].cpu_total_ns == 50 + 50 + 30);
  CHECK(by_name["cuda_api cudaLaunchKernel"].self_cpu_ns == 20 + 50 + 30);  // less the driver call
  CHECK(by_name["cuda_api cuLaunchKernel"].calls == 1);
  CHECK(t.run.processes.at(0).warnings ==
        std::vector<std::string>{"1 GPU records have no recorded launching API call; they count in no range"});

  options.schedule = parse_schedule("wait=1,warmup=0,active=1", nullptr, nullptr);
  check_same(path, options, streamed_ok(path, options));
  options.step_marker = "^never$";  // one step, one pass: the unmatched kernel counts too
  const StreamedTable one = streamed_ok(path, options);
  CHECK(one.passes == 1);
  check_same(path, options, one);
}

// The Python bootstrap's steps, written whole once each ended, in their own domain:
// consecutive ones meet at one nanosecond or overlap by a few. Then the NVTX kinds of
// start/end range: one ended on another thread (its end read first), one ended on its
// own thread around a range, one never ended, an end without a start.
TEST_CASE("stream_table: start/end ranges as the full analysis") {
  CaptureBuilder b;
  b.chunk(ChunkType::kHello, 1, hello(10));
  Slots t2;  // read first
  t2.str(7, "load").str(4, "aten::mm")
      .rec(Kind::kEnd, 0, 5600, 50)                         // of thread 1's load at 5000
      .rec(Kind::kEnd, 0, 5650, 99)                         // no start
      .rec(Kind::kStart, 7, 5700, 53).push(4, 5800).pop(5900);  // never ended: up to the goodbye
  b.chunk(ChunkType::kFrame, 1, test::frame_body(2, 0, t2));
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
  b.chunk(ChunkType::kFrame, 1, test::frame_body(1, 0, t1));
  Slots activity;
  activity.kernel(6, 1400, 1500, 10, 7).kernel(6, 1700, 1760, 11, 7).str(6, "_Z4gemmv");
  b.chunk(ChunkType::kFrame, 1, test::frame_body(99, 0, activity));
  b.chunk(ChunkType::kBye, 1, test::bye_body(wire::ExitKind::kExit, 0, 10, 0, 10000));
  const std::string path = b.save("stream_start_end.tprof");

  AnalysisOptions options;
  const StreamedTable steps = streamed_ok(path, options);
  // Read once: the frames of thread 1 wait for its steps, and those of thread 2 (read
  // first, after every step) for the end of the capture.
  CHECK(steps.passes == 1);
  CHECK(two_passes(path, options).passes == 2);
  check_same(path, options, steps);
  std::map<std::string, OpStats> by_name = by_kind_and_name(steps.run);
  // Three steps of 900, 1003 and 1000 ns, holding an op each (300, 800, 800 ns) and
  // step 0 a launch of 50 ns; step 2 is not held by step 1.
  CHECK(by_name["nvtx ProfilerStep*"].calls == 3);
  CHECK(by_name["nvtx ProfilerStep*"].cpu_total_ns == 900 + 1003 + 1000);
  CHECK(by_name["nvtx ProfilerStep*"].self_cpu_ns == (900 - 300 - 50) + (1003 - 800) + (1000 - 800));
  CHECK(by_name["nvtx ProfilerStep*"].self_cuda_ns == 60);  // the kernel launched in the step itself
  CHECK(by_name["nvtx ProfilerStep*"].cuda_total_ns == 100 + 60);
  CHECK(by_name["nvtx aten::mm"].calls == 3);  // those at 5800 and 6100 are in no step
  CHECK(by_name["nvtx aten::mm"].self_cpu_ns == 250 + 800 + 800);
  CHECK(by_name["nvtx aten::mm"].self_cuda_ns == 100);
  CHECK(by_name.count("nvtx train") == 0);  // it began before the first step

  options.step_marker = "^never$";  // one step spanning the process: two passes still
  const StreamedTable whole = streamed_ok(path, options);
  CHECK(whole.passes == 2);
  check_same(path, options, whole);
  by_name = by_kind_and_name(whole.run);
  // train holds the three steps and the load at 6000; the load ended on thread 2 is
  // nobody's child, and the one never ended lasts until the goodbye at 10000.
  CHECK(by_name["nvtx train"].self_cpu_ns == 8000 - 900 - 1003 - 1000 - 500);
  CHECK(by_name["nvtx load"].calls == 3);
  CHECK(by_name["nvtx load"].cpu_total_ns == 600 + 500 + 4300);
  CHECK(by_name["nvtx load"].self_cpu_ns == 600 + 400 + 4200);
  CHECK(whole.run.processes.at(0).warnings ==
        std::vector<std::string>{"1 range ends without a matching start were ignored",
                                 "1 ranges never ended; closed at the last timestamp of their thread"});
}

TEST_CASE("stream_table: PyTorch op ranges as the full analysis") {
  CaptureBuilder b;
  b.chunk(ChunkType::kHello, 1, hello(10));
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
  b.chunk(ChunkType::kFrame, 1, test::frame_body(1, 0, t1));
  Slots gpu;
  gpu.kernel(9, 1200, 1260, 40, 7);
  b.chunk(ChunkType::kFrame, 1, test::frame_body(99, 0, gpu));
  b.chunk(ChunkType::kBye, 1, test::bye_body(wire::ExitKind::kExit, 0, 10, 0, 3000));
  const std::string path = b.save("stream_ops.tprof");

  AnalysisOptions options;
  const StreamedTable t = streamed_ok(path, options);
  CHECK(t.passes == 1);  // "ProfilerStep#0, seq = 1" is the op ProfilerStep#0: a marker, told when it ends
  CHECK(two_passes(path, options).passes == 2);
  check_same(path, options, t);
  std::map<std::string, OpStats> by_name = by_kind_and_name(t.run);
  CHECK(by_name["cpu_op aten::mm"].calls == 2);
  CHECK(by_name["cpu_op aten::mm"].self_cuda_ns == 60);
  CHECK(by_name["cpu_op aten::mm"].self_cpu_ns == 200 - 20 + 50);
  CHECK(by_name["cpu_op aten::add"].calls == 2);
  CHECK(by_name["cpu_op aten::add"].stack == std::vector<std::string>{"train.py(12): step", "train.py(30): main"});
  CHECK(by_name["cpu_op ProfilerStep*"].cuda_total_ns == 60);
  CHECK(by_name["cpu_op aten::relu, seq = oops"].calls == 1);
  CHECK(by_name["nvtx aten::relu, seq = oops"].calls == 2);
  CHECK(by_name["nvtx load, seq = 1"].calls == 1);

  options.step_marker = "^ProfilerStep#[0-9]+$";  // the op's name matches, its message does not
  const StreamedTable anchored = streamed_ok(path, options);
  CHECK(two_passes(path, options).passes == 2);
  CHECK(anchored.passes == 1);
  check_same(path, options, anchored);

  options.group_by_input_shape = true;  // the two aten::mm calls differ in shapes
  const StreamedTable shapes = streamed_ok(path, options);
  check_same(path, options, shapes);
  int mm_rows = 0;
  for (const OpStats& op : shapes.run.ops) mm_rows += op.name == "aten::mm" ? 1 : 0;
  CHECK(mm_rows == 2);
}

// Steps found as the capture is read, then one that begins before what the pass
// following the scan has read: the connection is read again, in two passes, and the
// table is the same.
TEST_CASE("stream_table: a step found after the records it holds were counted sends the capture to two passes") {
  CaptureBuilder b;
  b.chunk(ChunkType::kHello, 1, hello(10));
  Slots a;
  a.str(1, "ProfilerStep#0").str(2, "ProfilerStep#1").str(3, "fwd")
      .push(1, 1000).push(3, 1100).pop(1400).pop(2000)
      .push(2, 2100).push(3, 2520).pop(2540).pop(3000);
  b.chunk(ChunkType::kFrame, 1, test::frame_body(1, 0, a));
  // Another thread's step, read after thread 1's steps and what they hold: the fwd at
  // 2520 is in it (the later step holding a time has it).
  Slots late;
  late.str(4, "ProfilerStep#late").str(5, "bwd").push(4, 2500).push(5, 2550).pop(2580).pop(2600);
  b.chunk(ChunkType::kFrame, 1, test::frame_body(2, 0, late));
  b.chunk(ChunkType::kBye, 1, test::bye_body(wire::ExitKind::kExit, 0, 10, 0, 4000));
  const std::string path = b.save("stream_late_step.tprof");

  AnalysisOptions options;
  options.schedule = parse_schedule("wait=2,warmup=0,active=1", nullptr, nullptr);  // the third step alone
  const StreamedTable t = streamed_ok(path, options);
  CHECK(t.passes == 2);
  check_same(path, options, t);
  std::map<std::string, OpStats> by_name = by_kind_and_name(t.run);
  CHECK(by_name["nvtx ProfilerStep*"].calls == 1);
  CHECK(by_name["nvtx fwd"].calls == 1);
  CHECK(by_name["nvtx fwd"].cpu_total_ns == 20);
  CHECK(by_name["nvtx bwd"].calls == 1);

  // Thread 2's step after those of thread 1: read once.
  Slots after;
  after.str(4, "ProfilerStep#late").str(5, "bwd").push(4, 3100).push(5, 3150).pop(3180).pop(3300);
  CaptureBuilder c;
  c.chunk(ChunkType::kHello, 1, hello(10));
  c.chunk(ChunkType::kFrame, 1, test::frame_body(1, 0, a));
  c.chunk(ChunkType::kFrame, 1, test::frame_body(2, 0, after));
  c.chunk(ChunkType::kBye, 1, test::bye_body(wire::ExitKind::kExit, 0, 10, 0, 4000));
  const std::string later = c.save("stream_later_step.tprof");
  options.schedule = parse_schedule("wait=1,warmup=0,active=2", nullptr, nullptr);  // steps 1 and 2 counted
  const StreamedTable once = streamed_ok(later, options);
  CHECK(once.passes == 1);
  check_same(later, options, once);
  by_name = by_kind_and_name(once.run);
  CHECK(by_name["nvtx fwd"].calls == 1);  // the one in step 0 is not counted
  CHECK(by_name["nvtx fwd"].cpu_total_ns == 20);
  CHECK(by_name["nvtx bwd"].calls == 1);
  CHECK(by_name["nvtx ProfilerStep*"].calls == 2);
}

// A start/end range written whole once it ended (as the bootstrap writes its ranges),
// read after the pass following the scan has counted what it holds: two passes.
TEST_CASE("stream_table: a start/end range found after the records it holds were counted: two passes") {
  CaptureBuilder b;
  b.chunk(ChunkType::kHello, 1, hello(10));
  Slots a;
  a.str(1, "ProfilerStep#0").str(2, "ProfilerStep#1").str(3, "fwd").str(7, "load")
      .push(1, 1000).push(3, 1100).pop(1200).pop(2000);
  b.chunk(ChunkType::kFrame, 1, test::frame_body(1, 0, a));
  Slots next;
  next.rec(Kind::kStart, 7, 1050, 5).rec(Kind::kEnd, 0, 1500, 5).push(2, 2100).push(3, 2200).pop(2300).pop(3000);
  b.chunk(ChunkType::kFrame, 1, test::frame_body(1, 1, next));
  b.chunk(ChunkType::kBye, 1, test::bye_body(wire::ExitKind::kExit, 0, 10, 0, 4000));
  const std::string path = b.save("stream_late_start_end.tprof");
  AnalysisOptions options;
  const StreamedTable t = streamed_ok(path, options);
  CHECK(t.passes == 2);
  check_same(path, options, t);
  std::map<std::string, OpStats> by_name = by_kind_and_name(t.run);
  CHECK(by_name["nvtx load"].calls == 1);
  CHECK(by_name["nvtx load"].self_cpu_ns == 450 - 100);  // it holds the fwd at 1100
  CHECK(by_name["nvtx ProfilerStep*"].self_cpu_ns == (1000 - 450) + (900 - 100));
}

// A first step found only past the frames a first pass holds while it reads ahead:
// it goes on as a first pass, and a second pass follows.
TEST_CASE("stream_table: the first step found past the frames held: two passes") {
  CaptureBuilder b;
  b.chunk(ChunkType::kHello, 1, hello(10));
  uint64_t ts = 1000;
  uint32_t seq = 0;
  constexpr int kFrames = 34;  // of 1 MiB: past how far a first pass reads ahead
  for (int f = 0; f < kFrames; ++f) {
    Slots s;
    if (f == 0) s.str(1, "fwd").str(2, "ProfilerStep#0");
    while (s.raw.size() + 4 * wire::kSlotSize <= (size_t{1} << 20)) {
      s.push(1, ts).pop(ts + 5);
      ts += 10;
    }
    if (f == kFrames - 1) s.push(2, ts).push(1, ts + 1).pop(ts + 2).pop(ts + 3);
    b.chunk(ChunkType::kFrame, 1, test::frame_body(1, seq++, s));
  }
  b.chunk(ChunkType::kBye, 1, test::bye_body(wire::ExitKind::kExit, 0, 10, 0, ts + 100));
  const std::string path = b.save("stream_late_first_step.tprof");
  AnalysisOptions options;
  const StreamedTable t = streamed_ok(path, options);
  CHECK(t.passes == 2);
  check_same(path, options, t);
  std::map<std::string, OpStats> by_name = by_kind_and_name(t.run);
  CHECK(by_name["nvtx fwd"].calls == 1);  // the one in the step
  CHECK(by_name["nvtx ProfilerStep*"].calls == 1);
}

}  // namespace torchprof
