// The overview (analysis/overview.h) on hand-built runs whose figures are worked out
// below: the step time breakdown by the plugin's precedence, steps widened to the GPU
// work they launched, HTA's idle split per device and per stream, launch statistics,
// copies, and the recommendations' rules one by one.
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <random>

#include "analysis/analysis.h"
#include "analysis/overview.h"
#include "formats/advice.h"

namespace torchprof {

namespace {

constexpr int64_t kUs = 1000;

Event range(const char* name, int64_t start_us, int64_t end_us, uint32_t tid = 1) {
  Event e;
  e.name = name;
  e.start_ns = start_us * kUs;
  e.end_ns = end_us * kUs;
  e.tid = tid;
  return e;
}

Event api(const char* name, int64_t start_us, int64_t end_us, uint64_t correlation, uint32_t tid = 1) {
  Event e = range(name, start_us, end_us, tid);
  e.kind = EventKind::kCudaRuntime;
  e.correlation = correlation;
  return e;
}

GpuEvent gpu(GpuKind kind, const char* name, int64_t start_us, int64_t end_us, uint64_t correlation,
             uint32_t stream = 7) {
  GpuEvent g;
  g.kind = kind;
  g.name = name;
  g.start_ns = start_us * kUs;
  g.end_ns = end_us * kUs;
  g.correlation = correlation;
  g.stream = stream;
  return g;
}

Run analysed(std::vector<Event> events, std::vector<GpuEvent> gpu_events) {
  Run run;
  Process& p = run.processes.emplace_back();
  p.pid = 7;
  sort_events(events);
  p.start_ns = events.front().start_ns;
  for (const Event& e : events) p.end_ns = std::max(p.end_ns, e.end_ns);
  p.events_list = std::move(events);
  std::stable_sort(gpu_events.begin(), gpu_events.end(),
                   [](const GpuEvent& a, const GpuEvent& b) { return a.start_ns < b.start_ns; });
  p.gpu_events = std::move(gpu_events);
  analyse(run, AnalysisOptions{});
  return run;
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
  std::vector<Event> ev = {
      range("ProfilerStep#0", 0, 100), range("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 30),
      range("forward", 30, 90), api("cudaLaunchKernel", 40, 45, 1), api("cudaMemcpyAsync", 60, 62, 2),
      api("cudaMemsetAsync", 62, 63, 3), range("ProfilerStep#1", 100, 200), range("forward", 110, 150),
      api("cudaLaunchKernel", 120, 125, 4), api("cudaLaunchKernel", 126, 127, 5)};
  GpuEvent copy = gpu(GpuKind::kMemcpy, "Memcpy HtoD (Pageable -> Device)", 65, 80, 2, 8);
  copy.bytes = 1 << 20;
  copy.copy_kind = 1;
  copy.src_kind = 1;
  copy.dst_kind = 3;
  std::vector<GpuEvent> g = {gpu(GpuKind::kKernel, "k1", 50, 70, 1), copy,
                             gpu(GpuKind::kMemset, "Memset (Device)", 88, 95, 3),
                             gpu(GpuKind::kKernel, "k2", 130, 150, 4), gpu(GpuKind::kKernel, "k3", 190, 230, 5)};
  return analysed(std::move(ev), std::move(g));
}

int64_t part(const StepBreakdown& s, BreakdownPart p) { return s.parts[p] / kUs; }

}  // namespace

TEST_CASE("overview: breakdown by precedence, steps widened to the GPU work they launched") {
  const Run run = worked_run();
  const Overview o = compute_overview(run);
  REQUIRE(o.steps.size() == 2);
  // Step 0 keeps its host interval (its GPU work ends at 95); step 1 ends with k3 at 230.
  const StepBreakdown& s0 = o.steps[0];
  CHECK(s0.start_ns == 0);
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
  CHECK(s1.start_ns == 100 * kUs);
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
  Event driver = api("cuLaunchKernel", 1, 2, 9);
  driver.kind = EventKind::kCudaDriver;
  std::vector<Event> ev = {range("ProfilerStep#0", 0, 100), driver, api("cudaLaunchKernel", 40, 45, 1)};
  std::vector<GpuEvent> g = {gpu(GpuKind::kKernel, "triton", 5, 10, 9), gpu(GpuKind::kKernel, "k", 50, 70, 1)};
  const Run run = analysed(std::move(ev), std::move(g));
  const Overview o = compute_overview(run);
  REQUIRE(o.steps.size() == 1);
  CHECK(o.steps[0].start_ns == 10 * kUs);
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
    std::vector<Event> ev;
    std::vector<GpuEvent> g;
    uint64_t corr = 1;
    for (int s = 0; s < 4; ++s) {
      const int64_t base = s * 1000;
      ev.push_back(range(("ProfilerStep#" + std::to_string(s)).c_str(), base, base + 1000));
      for (int i = 0; i < 6; ++i) {
        const int64_t start = base + static_cast<int64_t>(rng() % 900);
        const int64_t len = 1 + static_cast<int64_t>(rng() % 90);
        ev.push_back(range(rng() % 3 ? "op" : "enumerate(DataLoader)#x.__next__", start, start + len, 1 + rng() % 2));
        const int64_t at = start + len / 2;
        ev.push_back(api("cudaLaunchKernel", at, at + 1, corr, 1 + rng() % 2));
        const int64_t gs = at + static_cast<int64_t>(rng() % 400);
        const GpuKind kind = static_cast<GpuKind>(rng() % 3);
        g.push_back(gpu(kind, "x", gs, gs + 1 + static_cast<int64_t>(rng() % 300), corr++, 7 + rng() % 2));
      }
    }
    const Overview o = compute_overview(analysed(std::move(ev), std::move(g)));
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

}  // namespace torchprof
