// The overview (analysis/overview.h) on hand-built runs whose figures are worked out
// below: the step time breakdown by the plugin's precedence, steps widened to the GPU
// work they launched, HTA's idle split per device and per stream, launch statistics,
// copies, and the recommendations' rules one by one.
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <random>

#include <map>
#include <tuple>

#include "analysis/analysis.h"
#include "analysis/engine.h"
#include "analysis/overview.h"
#include "formats/advice.h"
#include "process_capture.h"

namespace torchprof {

namespace {

constexpr int64_t kUs = 1000;
constexpr int64_t kT0 = test::kEpoch;  // monotonic 0

// What a thread records, in µs: a range pushed and popped, a start/end range (which may
// overlap others without nesting), or a CUDA API call.
struct Cpu {
  enum Kind { kPushPop, kStartEnd, kRuntime, kDriver } kind = kPushPop;
  std::string name;
  int64_t start_us = 0;
  int64_t end_us = 0;
  uint64_t correlation = 0;
  uint32_t tid = 1;
};

Cpu range(const char* name, int64_t start_us, int64_t end_us, uint32_t tid = 1) {
  return {Cpu::kPushPop, name, start_us, end_us, 0, tid};
}

Cpu start_end(const std::string& name, int64_t start_us, int64_t end_us, uint32_t tid = 1) {
  return {Cpu::kStartEnd, name, start_us, end_us, 0, tid};
}

Cpu api(const char* name, int64_t start_us, int64_t end_us, uint64_t correlation, uint32_t tid = 1) {
  return {Cpu::kRuntime, name, start_us, end_us, correlation, tid};
}

struct Gpu {
  GpuKind kind = GpuKind::kKernel;
  std::string name;  // kernels: the recorded name (copies and memsets are named by their kinds)
  int64_t start_us = 0;
  int64_t end_us = 0;
  uint64_t correlation = 0;
  uint32_t stream = 7;
  uint64_t bytes = 0;
  uint8_t copy_kind = 0, src_kind = 0, dst_kind = 3;  // memsets: of device memory
};

Gpu gpu(GpuKind kind, const char* name, int64_t start_us, int64_t end_us, uint64_t correlation,
        uint32_t stream = 7) {
  Gpu g;
  g.kind = kind;
  g.name = name;
  g.start_us = start_us;
  g.end_us = end_us;
  g.correlation = correlation;
  g.stream = stream;
  return g;
}

// The records of each thread in the order a program writes them: at one time, ends
// first (the inner range first), then starts (the longer first), then API calls.
std::map<uint32_t, test::Slots> thread_slots(const std::vector<Cpu>& events, std::map<std::string, uint32_t>& names) {
  std::map<uint32_t, std::vector<std::tuple<int64_t, int, int64_t, size_t>>> order;
  for (size_t i = 0; i < events.size(); ++i) {
    const Cpu& e = events[i];
    auto& o = order[e.tid];
    if (e.kind == Cpu::kRuntime || e.kind == Cpu::kDriver) {
      o.emplace_back(e.start_us * kUs, 2, 0, i);
    } else {
      o.emplace_back(e.start_us * kUs, 1, -e.end_us, i);
      o.emplace_back(e.end_us * kUs, 0, -e.start_us, i);
    }
  }
  std::map<uint32_t, test::Slots> out;
  for (auto& [tid, records] : order) {
    std::sort(records.begin(), records.end());
    test::Slots& s = out[tid];
    for (const auto& [ns, what, key, i] : records) {
      const Cpu& e = events[i];
      const auto ts = static_cast<uint64_t>(ns);
      const uint32_t name = names.at(e.name);
      switch (e.kind) {
        case Cpu::kPushPop:
          if (what == 1) {
            s.push(name, ts);
          } else {
            s.pop(ts);
          }
          break;
        case Cpu::kStartEnd:
          s.rec(what == 1 ? wire::Kind::kStart : wire::Kind::kEnd, what == 1 ? name : 0, ts, i + 1);
          break;
        case Cpu::kRuntime:
        case Cpu::kDriver:
          s.api(name, ts, static_cast<uint64_t>(e.end_us * kUs), e.correlation, 211,
                e.kind == Cpu::kRuntime ? wire::Kind::kCudaRuntime : wire::Kind::kCudaDriver);
          break;
      }
    }
  }
  return out;
}

// Process 7 of these events (names defined first, on thread 1) and GPU records (on the
// activity thread, read last), through the engine.
Run analysed(const std::vector<Cpu>& events, const std::vector<Gpu>& gpu_records) {
  std::map<std::string, uint32_t> names;
  test::Slots defs;
  auto define = [&](const std::string& name) {
    if (names.emplace(name, static_cast<uint32_t>(names.size() + 1)).second) defs.str(names[name], name);
  };
  for (const Cpu& e : events) define(e.name);
  for (const Gpu& g : gpu_records) define(g.name);
  std::map<uint32_t, test::Slots> threads = thread_slots(events, names);
  test::Slots activity;
  for (const Gpu& g : gpu_records) {
    const auto start = static_cast<uint64_t>(g.start_us * kUs);
    const auto end = static_cast<uint64_t>(g.end_us * kUs);
    if (g.kind == GpuKind::kKernel) {
      activity.kernel(names.at(g.name), start, end, g.correlation, g.stream);
    } else {
      activity.copy(g.kind == GpuKind::kMemcpy ? wire::Kind::kMemcpy : wire::Kind::kMemset, start, end, g.correlation,
                    g.bytes, g.stream, g.copy_kind, g.src_kind, g.dst_kind);
    }
  }
  test::Captures c;
  c.process(7).frame(1, defs);
  for (const auto& [tid, slots] : threads) c.frame(tid, slots);
  c.frame(99, activity);
  EngineOutputs outputs;  // the overview's records and CPU roles
  return analyse_capture_file(c.save("overview.tprof"), AnalysisOptions{}, outputs);
}

// Thread 1, in µs:
//   ProfilerStep#0 [0, 100]
//     enumerate(DataLoader)#…__next__ [0, 30]
//     forward [30, 90]
//       cudaLaunchKernel [40, 45] #1  -> k1      [50, 70]  stream 7
//       cudaMemcpyAsync  [60, 62] #2  -> HtoD    [65, 80]  stream 8 (1 MiB, pageable)
//       cudaMemsetAsync  [62, 63] #3  -> memset  [88, 95]  stream 7
//   ProfilerStep#1 [100, 200]
//     forward [110, 150]
//       cudaLaunchKernel [120, 125] #4 -> k2     [130, 150] stream 7
//       cudaLaunchKernel [126, 127] #5 -> k3     [190, 230] stream 7 (past the step's host end)
Run worked_run() {
  std::vector<Cpu> ev = {
      range("ProfilerStep#0", 0, 100), range("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 30),
      range("forward", 30, 90), api("cudaLaunchKernel", 40, 45, 1), api("cudaMemcpyAsync", 60, 62, 2),
      api("cudaMemsetAsync", 62, 63, 3), range("ProfilerStep#1", 100, 200), range("forward", 110, 150),
      api("cudaLaunchKernel", 120, 125, 4), api("cudaLaunchKernel", 126, 127, 5)};
  Gpu copy = gpu(GpuKind::kMemcpy, "Memcpy HtoD (Pageable -> Device)", 65, 80, 2, 8);
  copy.bytes = 1 << 20;
  copy.copy_kind = 1;
  copy.src_kind = 1;
  copy.dst_kind = 3;
  std::vector<Gpu> g = {gpu(GpuKind::kKernel, "k1", 50, 70, 1), copy,
                             gpu(GpuKind::kMemset, "Memset (Device)", 88, 95, 3),
                             gpu(GpuKind::kKernel, "k2", 130, 150, 4), gpu(GpuKind::kKernel, "k3", 190, 230, 5)};
  return analysed(ev, g);
}

int64_t part(const StepBreakdown& s, BreakdownPart p) { return s.parts[p] / kUs; }

}  // namespace

TEST_CASE("overview: breakdown by precedence, steps widened to the GPU work they launched") {
  const Run run = worked_run();
  const Overview o = compute_overview(run);
  REQUIRE(o.steps.size() == 2);
  // Step 0 keeps its host interval (its GPU work ends at 95); step 1 ends with k3 at 230.
  const StepBreakdown& s0 = o.steps[0];
  CHECK(s0.start_ns == kT0);
  CHECK(s0.dur_ns == 100 * kUs);
  // kernel [50,70] = 20; memcpy [65,80] less the kernel = 10; memset [88,95] = 7;
  // runtime [40,45] = 5 (the other two calls lie inside the kernel); DataLoader [0,30];
  // CPU exec forward [30,90] less all of the above = 60-5-30-2 = 23; other [95,100] = 5.
  CHECK(part(s0, kPartKernel) == 20);
  CHECK(part(s0, kPartMemcpy) == 10);
  CHECK(part(s0, kPartMemset) == 7);
  CHECK(part(s0, kPartRuntime) == 5);
  CHECK(part(s0, kPartDataLoader) == 30);
  CHECK(part(s0, kPartCpuExec) == 23);
  CHECK(part(s0, kPartOther) == 5);
  const StepBreakdown& s1 = o.steps[1];
  CHECK(s1.start_ns == kT0 + 100 * kUs);
  CHECK(s1.dur_ns == 130 * kUs);
  // kernels [130,150] + [190,230] = 60; runtime 5 + 1; CPU exec [110,150] less those = 14;
  // other [100,110] + [150,190] = 50.
  CHECK(part(s1, kPartKernel) == 60);
  CHECK(part(s1, kPartRuntime) == 6);
  CHECK(part(s1, kPartCpuExec) == 14);
  CHECK(part(s1, kPartOther) == 50);
  CHECK(part(s1, kPartMemcpy) + part(s1, kPartMemset) + part(s1, kPartDataLoader) == 0);
  for (const StepBreakdown& s : o.steps) {
    int64_t sum = 0;
    for (int64_t v : s.parts) sum += v;
    CHECK(sum == s.dur_ns);
  }
  CHECK(o.total_ns == 230 * kUs);
  CHECK(o.total[kPartKernel] == 80 * kUs);
}

TEST_CASE("overview: GPU idle split per step as HTA classifies gaps, and HTA's per-stream split") {
  const Overview o = compute_overview(worked_run());
  REQUIRE(o.devices.size() == 1);
  const DeviceOverview& d = o.devices[0];
  REQUIRE(d.steps.size() == 2);
  // Device blocks: [50,80] (first launch 40), [88,95] (launched 62), [130,150] (120), [190,230] (126).
  // Step 0: [0,50) before anything (launched at 40: host wait), [80,88) 8 µs with its op
  // queued at 62 (kernel wait), [95,100) of the gap ended by k2, launched at 120 (host wait).
  CHECK(d.steps[0].idle.host_wait_ns == 55 * kUs);
  CHECK(d.steps[0].idle.kernel_wait_ns == 8 * kUs);
  CHECK(d.steps[0].idle.other_ns == 0);
  CHECK(d.steps[0].busy_ns == 37 * kUs);
  CHECK(d.steps[0].kernel_busy_ns == 20 * kUs);
  // Step 1: [100,130) rest of that host wait; [150,190) 40 µs with k3 queued at 126: other.
  CHECK(d.steps[1].idle.host_wait_ns == 30 * kUs);
  CHECK(d.steps[1].idle.kernel_wait_ns == 0);
  CHECK(d.steps[1].idle.other_ns == 40 * kUs);
  CHECK(d.steps[1].busy_ns == 60 * kUs);
  CHECK(d.steps_ns == 230 * kUs);
  CHECK(d.busy_ns + d.idle.total() == d.steps_ns);
  CHECK(d.kernel_busy_ns == 80 * kUs);
  CHECK(d.utilization_pct() == doctest::Approx(100.0 * 80 / 230));
  // Stream 7: k1, memset (gap 18, queued before: kernel wait), k2 (gap 35, launched after
  // the memset ended: host wait), k3 (gap 40, queued before: other). Stream 8: one op.
  REQUIRE(d.streams.size() == 2);
  CHECK(d.streams[0].stream == 7);
  CHECK(d.streams[0].ops == 4);
  CHECK(d.streams[0].idle.kernel_wait_ns == 18 * kUs);
  CHECK(d.streams[0].idle.host_wait_ns == 35 * kUs);
  CHECK(d.streams[0].idle.other_ns == 40 * kUs);
  CHECK(d.streams[1].idle.total() == 0);
}

TEST_CASE("overview: launch statistics and copies") {
  const Overview o = compute_overview(worked_run());
  const LaunchStats& l = o.launches;
  CHECK(l.kernels == 3);
  CHECK(l.launched == 3);
  CHECK(l.kernel_ns == 80 * kUs);
  CHECK(l.short_kernels == 0);
  // Launch calls 5, 5, 1 µs; delays (start - call end) 5, 5, 63 µs.
  CHECK(l.launch.p50_ns == 5 * kUs);
  CHECK(l.launch.max_ns == 5 * kUs);
  CHECK(l.delay.p50_ns == 5 * kUs);
  CHECK(l.delay.max_ns == 63 * kUs);
  CHECK(l.delay.mean_ns == 24333);
  CHECK(l.shorter_than_launch == 0);
  REQUIRE(o.copies.size() == 1);
  CHECK(o.copies[0].direction == "HtoD");
  CHECK(o.copies[0].pageable);
  CHECK(o.copies[0].bytes == (1u << 20));
  CHECK(o.copies[0].ns == 15 * kUs);
  // The DataLoader share is 30 / 230 = 13%: the plugin's rule (> 5%) fires; pageable
  // copies 15 / 230 = 6.5% (>= 5%) too; low utilisation is left out once a cause is named.
  std::vector<std::string> ids;
  for (const Recommendation& r : o.recommendations) ids.push_back(r.id);
  CHECK(ids == std::vector<std::string>{"dataloader", "pageable_copies"});
  CHECK(o.recommendations[0].text.find("DataLoader takes 13.0% of step time") == 0);
  CHECK(o.recommendations[1].text.find("HtoD copies from pageable memory: 1.0 MiB") == 0);
  const std::string text = render_advice(o, 0);
  CHECK(text.find("  DataLoader        15.000us   13.0%\n") != std::string::npos);  // 30 µs over 2 steps
  CHECK(text.find("  Step             115.000us  100.0%\n") != std::string::npos);
  CHECK(text.find("  - DataLoader takes 13.0%") != std::string::npos);
}

TEST_CASE("overview: GPU work no runtime call of a step launched moves the first step's start as the plugin does") {
  // A driver call (the plugin reads only runtime calls) launches a kernel that ends at 10,
  // before step 0's own first kernel (50): step 0 starts at 10, not 0.
  Cpu driver = api("cuLaunchKernel", 1, 2, 9);
  driver.kind = Cpu::kDriver;
  std::vector<Cpu> ev = {range("ProfilerStep#0", 0, 100), driver, api("cudaLaunchKernel", 40, 45, 1)};
  std::vector<Gpu> g = {gpu(GpuKind::kKernel, "triton", 5, 10, 9), gpu(GpuKind::kKernel, "k", 50, 70, 1)};
  const Run run = analysed(ev, g);
  const Overview o = compute_overview(run);
  REQUIRE(o.steps.size() == 1);
  CHECK(o.steps[0].start_ns == kT0 + 10 * kUs);
  CHECK(o.steps[0].dur_ns == 90 * kUs);
  // [10,50) before k (launched at 40, after the driver's kernel ended) and [70,100) after
  // it, with nothing more launched: host wait.
  CHECK(o.devices.at(0).steps.at(0).idle.host_wait_ns == 70 * kUs);
}

TEST_CASE("overview: DataLoader ranges are torch's names and the documented one for other programs") {
  for (const char* name : {"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                           "enumerate(DataPipe)#ShufflerIterDataPipe", "DataLoader", "DataLoader#next"}) {
    CHECK_MESSAGE(is_dataloader_range(name), name);
  }
  for (const char* name : {"data_wait", "DataLoaderX", "my DataLoader", "dataloader#next", "load_batch"}) {
    CHECK_MESSAGE(!is_dataloader_range(name), name);
  }
}

TEST_CASE("overview: interval helpers") {
  const Intervals a = merge_intervals({{5, 10}, {0, 3}, {2, 4}, {10, 12}, {20, 20}});
  CHECK(a == Intervals{{0, 4}, {5, 12}});
  CHECK(intersect_intervals(a, {{3, 6}, {11, 30}}) == Intervals{{3, 4}, {5, 6}, {11, 12}});
  CHECK(subtract_intervals(a, {{1, 2}, {6, 7}, {11, 40}}) == Intervals{{0, 1}, {2, 4}, {5, 6}, {7, 11}});
}

TEST_CASE("overview: parts sum to the step time on random runs") {
  std::mt19937_64 rng(27);
  for (int trial = 0; trial < 40; ++trial) {
    // Ranges on two threads that may overlap without nesting: start/end ranges.
    std::vector<Cpu> ev;
    std::vector<Gpu> g;
    uint64_t corr = 1;
    for (int s = 0; s < 4; ++s) {
      const int64_t base = s * 1000;
      ev.push_back(start_end("ProfilerStep#" + std::to_string(s), base, base + 1000));
      for (int i = 0; i < 6; ++i) {
        const int64_t start = base + static_cast<int64_t>(rng() % 900);
        const int64_t len = 1 + static_cast<int64_t>(rng() % 90);
        ev.push_back(start_end(rng() % 3 ? "op" : "enumerate(DataLoader)#x.__next__", start, start + len,
                               static_cast<uint32_t>(1 + rng() % 2)));
        const int64_t at = start + len / 2;
        ev.push_back(api("cudaLaunchKernel", at, at + 1, corr, static_cast<uint32_t>(1 + rng() % 2)));
        const int64_t gs = at + static_cast<int64_t>(rng() % 400);
        const GpuKind kind = static_cast<GpuKind>(rng() % 3);
        g.push_back(gpu(kind, "x", gs, gs + 1 + static_cast<int64_t>(rng() % 300), corr++, 7 + rng() % 2));
      }
    }
    const Overview o = compute_overview(analysed(ev, g));
    REQUIRE(o.steps.size() == 4);
    int64_t prev_end = std::numeric_limits<int64_t>::min();
    for (const StepBreakdown& s : o.steps) {
      int64_t sum = 0;
      for (int64_t v : s.parts) sum += v;
      CHECK(sum == s.dur_ns);
      CHECK(s.start_ns >= prev_end);
      prev_end = s.start_ns + s.dur_ns;
    }
    for (const DeviceOverview& d : o.devices) {
      for (const DeviceStep& ds : d.steps) CHECK(ds.busy_ns + ds.idle.total() == o.steps[ds.step].dur_ns);
    }
  }
}

TEST_CASE("overview: warm-up steps, the leading ones over twice the median of the rest") {
  auto steps_of = [](std::vector<int64_t> durs) {
    std::vector<StepBreakdown> steps;
    for (int64_t d : durs) steps.push_back(StepBreakdown{.dur_ns = d});
    return steps;
  };
  auto marks = [](const std::vector<StepBreakdown>& steps) {
    std::vector<bool> out;
    for (const StepBreakdown& s : steps) out.push_back(s.warmup);
    return out;
  };
  // A fast loader's first step (4.67 ms against 0.73 ms): warm-up.
  std::vector<StepBreakdown> s = steps_of({4670, 730, 720, 740, 735});
  mark_warmup(s, 0);
  CHECK(marks(s) == std::vector<bool>{true, false, false, false, false});
  // Two slow leading steps, then steady; a slow step later is not warm-up.
  s = steps_of({9000, 5000, 1000, 1100, 5000, 1000});
  mark_warmup(s, 0);
  CHECK(marks(s) == std::vector<bool>{true, true, false, false, false, false});
  // Exactly twice the median is steady; the last step never is warm-up.
  s = steps_of({2000, 1000, 1000});
  mark_warmup(s, 0);
  CHECK(marks(s) == std::vector<bool>{false, false, false});
  s = steps_of({5000});
  mark_warmup(s, 0);
  CHECK(marks(s) == std::vector<bool>{false});
  // Another process's steps, from `first` on.
  s = steps_of({100, 100, 800, 100, 100});
  mark_warmup(s, 2);
  CHECK(marks(s) == std::vector<bool>{false, false, true, false, false});
}

}  // namespace torchprof
