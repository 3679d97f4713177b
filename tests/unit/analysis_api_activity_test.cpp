// API calls from CUPTI's RUNTIME / DRIVER activity records (wire kCudaApiActivity,
// TORCHPROF_CUDA_API=activity): written by the converting thread, they are placed among
// the calling thread's records by time, and the analysis must come out as it does for
// the same calls recorded by callbacks on their threads.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "analysis_capture_builder.h"
#include "analysis/analysis.h"
#include "engine_test_util.h"

namespace torchprof {

using capture::ChunkType;
using test::CaptureBuilder;
using test::Slots;
using wire::Kind;

namespace {

constexpr int64_t kR0 = 1'700'000'000'000'000'000;
constexpr uint16_t kLaunchCbid = 211, kMemsetCbid = 51, kMallocCbid = 20, kCuLaunchCbid = 307;

enum Str : uint32_t { kTrain = 1, kInner, kSide, kLaunch, kMemset, kMalloc, kCuLaunch, kKernA, kKernB, kKernC, kKernD };

Slots strings() {
  Slots s;
  s.str(kTrain, "train").str(kInner, "inner").str(kSide, "side").str(kLaunch, "cudaLaunchKernel");
  s.str(kMemset, "cudaMemsetAsync").str(kMalloc, "cudaMalloc").str(kCuLaunch, "cuLaunchKernel");
  s.str(kKernA, "_Z1av").str(kKernB, "_Z1bv").str(kKernC, "_Z1cv").str(kKernD, "_Z1dv");
  return s;
}

struct Call {
  uint32_t tid;
  uint32_t name;
  uint64_t start, end, correlation;
  uint16_t cbid;
  bool driver;
};

// Thread 100:  train [1000, 20000]
//                cudaLaunchKernel [2000, 2500] #1 → a
//                inner [5000, 12000]
//                  cudaLaunchKernel [6000, 6400] #2 → b   (makes cuLaunchKernel [6100, 6300] #50)
//                  cudaMemsetAsync [11000, 12000] #3      (ends as inner ends: inside it)
//                cuLaunchKernel [13000, 13200] #4 → d     (the driver called directly)
// Thread 101:  side [3000, 4000]
//                cudaLaunchKernel [3500, 3600] #5 → c
// Thread 102:  cudaMalloc [15000, 15100] #6               (no other record of its own)
const std::vector<Call>& calls() {
  static const std::vector<Call> all = {
      {100, kLaunch, 2000, 2500, 1, kLaunchCbid, false},   {100, kLaunch, 6000, 6400, 2, kLaunchCbid, false},
      {100, kMemset, 11000, 12000, 3, kMemsetCbid, false}, {100, kCuLaunch, 13000, 13200, 4, kCuLaunchCbid, true},
      {101, kLaunch, 3500, 3600, 5, kLaunchCbid, false},   {102, kMalloc, 15000, 15100, 6, kMallocCbid, false},
  };
  return all;
}

Slots gpu_records() {
  Slots gpu;
  gpu.kernel(kKernA, 3000, 4000, 1, 7).kernel(kKernB, 8000, 9000, 2, 7).kernel(kKernC, 4000, 4500, 5, 7);
  gpu.kernel(kKernD, 14000, 16000, 4, 7);
  return gpu;
}

// The program's threads; with `callbacks`, each call a record on its thread at its end.
std::string twin_capture(bool callbacks) {
  auto api = [&](Slots& s, size_t i) {
    if (!callbacks) return;
    const Call& c = calls()[i];
    s.api(c.name, c.start, c.end, c.correlation, c.cbid, c.driver ? Kind::kCudaDriver : Kind::kCudaRuntime);
  };
  Slots main = strings();
  main.push(kTrain, 1000);
  api(main, 0);
  main.push(kInner, 5000);
  api(main, 1);
  api(main, 2);
  main.pop(12000);
  api(main, 3);
  main.pop(20000);
  Slots side;
  side.push(kSide, 3000);
  api(side, 4);
  side.pop(4000);
  Slots other;
  api(other, 5);
  if (!callbacks) other.rec(Kind::kThreadStart, 0, 14000);

  Slots gpu = gpu_records();
  if (!callbacks) {
    // As CUPTI hands them over: in no particular order, with the driver call a runtime
    // call made inside it (left out, as the callbacks never record it).
    std::vector<Call> records = calls();
    records.push_back({100, kCuLaunch, 6100, 6300, 50, kCuLaunchCbid, true});
    std::reverse(records.begin(), records.end());
    for (const Call& c : records) {
      wire::GpuApiExtra x{};
      x.tid = c.tid;
      x.driver = c.driver ? 1 : 0;
      gpu.with_extra(Kind::kCudaApiActivity, c.name, c.start, c.end, c.correlation, c.cbid, x);
    }
  }

  CaptureBuilder b;
  b.chunk(ChunkType::kHello, 1, test::hello_body(42, 1, 0, kR0, "/bin/app", {"app"}, "h", {}));
  // The GPU stream's frame comes first: the calls must wait for their threads' records.
  b.chunk(ChunkType::kFrame, 1, test::frame_body(200, 0, gpu));
  b.chunk(ChunkType::kFrame, 1, test::frame_body(100, 0, main));
  b.chunk(ChunkType::kFrame, 1, test::frame_body(101, 0, side));
  b.chunk(ChunkType::kFrame, 1, test::frame_body(102, 0, other));
  return b.save(callbacks ? "api_callbacks.tprof" : "api_activity.tprof");
}

using Row = std::tuple<std::string, std::string, uint64_t, int64_t, int64_t, int64_t, int64_t>;

std::vector<Row> rows(const Run& run) {
  std::vector<Row> out;
  for (const OpStats& o : run.ops) {
    out.emplace_back(o.name, o.kind, o.calls, o.self_cpu_ns, o.cpu_total_ns, o.self_cuda_ns, o.cuda_total_ns);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// API calls as the traces get them: name, thread, start, and the range around them.
using ApiEvent = std::tuple<std::string, uint32_t, int64_t, int64_t, std::string>;

std::vector<ApiEvent> api_events(const test::Collected& c) {
  std::map<uint32_t, std::string> range_of_id;
  for (size_t i = 0; i < c.events.size(); ++i) {
    if (c.events[i].kind == EventKind::kRange) range_of_id[c.ids[i].external_id] = c.events[i].name;
  }
  std::vector<ApiEvent> out;
  for (size_t i = 0; i < c.events.size(); ++i) {
    const Event& e = c.events[i];
    if (e.kind != EventKind::kCudaRuntime && e.kind != EventKind::kCudaDriver) continue;
    const auto found = range_of_id.find(c.ids[i].enclosing_id);
    out.emplace_back(e.name, e.tid, e.start_ns - kR0, e.end_ns - kR0,
                     found != range_of_id.end() ? found->second : std::string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("api activity records: placed on their threads by time, as callback records are") {
  std::map<int, test::Collected> by_callbacks;
  std::map<int, test::Collected> by_activity;
  const Run ours = test::analyse(twin_capture(false), {}, &by_activity);
  const Run theirs = test::analyse(twin_capture(true), {}, &by_callbacks);
  REQUIRE(ours.processes.size() == 1);
  CHECK(rows(ours) == rows(theirs));
  const std::vector<ApiEvent> events = api_events(by_activity[42]);
  CHECK(events == api_events(by_callbacks[42]));
  // What the twins agree on, spelled out.
  const std::vector<ApiEvent> expected = {
      {"cuLaunchKernel", 100, 13000, 13200, "train"},       {"cudaLaunchKernel", 100, 2000, 2500, "train"},
      {"cudaLaunchKernel", 100, 6000, 6400, "inner"},       {"cudaLaunchKernel", 101, 3500, 3600, "side"},
      {"cudaMalloc", 102, 15000, 15100, ""},                {"cudaMemsetAsync", 100, 11000, 12000, "inner"},
  };
  CHECK(events == expected);
  for (const OpStats& o : ours.ops) {
    if (o.name == "inner") {
      CHECK(o.self_cuda_ns == 1000);  // b
      CHECK(o.self_cpu_ns == 7000 - 400 - 1000);
    }
    if (o.name == "train") CHECK(o.self_cuda_ns == 1000 + 2000);  // a, d
    if (o.name == "side") CHECK(o.self_cuda_ns == 500);           // c
    if (o.name == "cuLaunchKernel") CHECK(o.calls == 1);           // not the one inside #2
  }
}

}  // namespace torchprof
