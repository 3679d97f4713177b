// GPU records through the engine: attribution of GPU time to NVTX ranges as
// torch.profiler does it, GPU rows, graph launches, steps, memory and usage.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "analysis_capture_builder.h"
#include "analysis_gpu_capture.h"
#include "analysis/analysis.h"
#include "analysis/gpu_analysis.h"
#include "analysis/gpu_decode.h"
#include "engine_test_util.h"

namespace torchprof {

using capture::ChunkType;
using test::CaptureBuilder;
using test::Slots;
using wire::Kind;

namespace {

constexpr int64_t kR0 = 1'700'000'000'000'000'000;  // epoch ns of monotonic 0
constexpr uint8_t kHtoD = 1, kPageable = 1, kDevice = 3;

enum Str : uint32_t {
  kTrain = 1, kInner, kLaunch, kMemcpyAsync, kGraphLaunch, kMalloc, kFree,
  kMatmul, kRelu, kNodeA, kNodeB, kGpuName, kNotice, kOrphan, kStep0, kStep1
};

Slots strings() {
  Slots s;
  s.str(kTrain, "train").str(kInner, "inner").str(kLaunch, "cudaLaunchKernel");
  s.str(kMemcpyAsync, "cudaMemcpyAsync").str(kGraphLaunch, "cudaGraphLaunch");
  s.str(kMalloc, "cudaMalloc").str(kFree, "cudaFree").str(kMatmul, "_Z6matmulPfS_S_i");
  s.str(kRelu, "_Z4reluPfi").str(kNodeA, "_Z5nodeAv").str(kNodeB, "_Z5nodeBv");
  s.str(kGpuName, "Fake GPU").str(kNotice, "GPU tracing off: test notice").str(kOrphan, "_Z6orphanv");
  s.str(kStep0, "ProfilerStep#0").str(kStep1, "ProfilerStep#1");
  return s;
}

// train [1000, 20000]
//   cudaLaunchKernel [2000, 2500] #1 → matmul [3000, 7000] stream 7
//   inner [5000, 12000]
//     cudaLaunchKernel [6000, 6400] #2 → relu [8000, 9000] stream 7
//     inner [7000, 10000]
//       cudaMemcpyAsync [7500, 7700] #3 → HtoD 1 MiB [9500, 10500] stream 9
//   cudaGraphLaunch [13000, 13300] #4 → nodeA [14000, 14500], nodeB [14500, 15500] (graph 5)
//   cudaMalloc #5 (4096 @0x1000), cudaMalloc #6 (8192 @0x2000), cudaFree #7 (0x1000),
//   cudaMalloc #8 (1024 @0x3000)
// orphan kernel #99 [21000, 21500] (its API record was lost)
}  // namespace

std::string test::gpu_nested_capture() {
  Slots cpu = strings();
  cpu.push(kTrain, 1000).api(kLaunch, 2000, 2500, 1).push(kInner, 5000).api(kLaunch, 6000, 6400, 2);
  cpu.push(kInner, 7000).api(kMemcpyAsync, 7500, 7700, 3, 41).pop(10000).pop(12000);
  cpu.api(kGraphLaunch, 13000, 13300, 4, 311);
  cpu.api(kMalloc, 15000, 15100, 5, 20).api(kMalloc, 15200, 15300, 6, 20);
  cpu.api(kFree, 16000, 16100, 7, 22).api(kMalloc, 16200, 16300, 8, 20).pop(20000);

  wire::GpuDeviceExtra props{};
  props.total_global_mem = 80ull << 30;
  props.num_sms = 108;
  props.warp_size = 32;
  props.max_threads_per_multiprocessor = 2048;
  props.regs_per_multiprocessor = 65536;
  props.shared_mem_per_multiprocessor = 167936;
  Slots gpu;
  gpu.device(0, kGpuName, props);
  // CUPTI hands records over unordered.
  gpu.kernel(kNodeB, 14500, 15500, 4, 7, 0, 5).kernel(kMatmul, 3000, 7000, 1, 7);
  gpu.kernel(kRelu, 8000, 9000, 2, 7).kernel(kNodeA, 14000, 14500, 4, 7, 0, 5);
  gpu.copy(Kind::kMemcpy, 9500, 10500, 3, 1 << 20, 9, kHtoD, kPageable, kDevice);
  gpu.kernel(kOrphan, 21000, 21500, 99, 7);
  gpu.memory(true, 15050, 0x1000, 4096, 5).memory(true, 15250, 0x2000, 8192, 6);
  gpu.memory(false, 16050, 0x1000, 4096, 7).memory(true, 16250, 0x3000, 1024, 8);
  gpu.rec(Kind::kGpuDropped, 0, 17000, 3).rec(Kind::kGpuDropped, 0, 18000, 5);

  CaptureBuilder b;
  b.chunk(ChunkType::kHello, 1, test::hello_body(42, 1, 0, kR0, "/bin/app", {"app"}, "h", {}));
  b.chunk(ChunkType::kFrame, 1, test::frame_body(100, 0, cpu));
  b.chunk(ChunkType::kFrame, 1, test::frame_body(200, 0, gpu));
  return b.save("gpu_nested.tprof");
}

namespace {

std::string nested_capture() { return test::gpu_nested_capture(); }

Run analysed(const std::string& path, const AnalysisOptions& options = {},
             std::map<int, test::Collected>* collected = nullptr) {
  return test::analyse(path, options, collected);
}

const OpStats* op(const Run& run, const std::string& name, const std::string& kind) {
  for (const OpStats& o : run.ops) {
    if (o.name == name && o.kind == kind) return &o;
  }
  return nullptr;
}

// The event named `name` that starts at monotonic `start`.
const Event& event_at(const test::Collected& c, const std::string& name, int64_t start) {
  for (const Event* e : c.named(name)) {
    if (e->start_ns == kR0 + start) return *e;
  }
  FAIL("no " << name << " at " << start);
  static Event none;
  return none;
}

// The external id the trace gives the event named `name` that starts at `start`.
uint32_t external_id(const test::Collected& c, const std::string& name, int64_t start) {
  const Event& e = event_at(c, name, start);
  return c.ids[static_cast<size_t>(&e - c.events.data())].external_id;
}

const test::Collected::GpuCall* gpu_named(const test::Collected& c, const std::string& name) {
  for (const test::Collected::GpuCall& g : c.gpu) {
    if (g.gpu.name == name) return &g;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("gpu decode: kernels, copies, memory, devices and drops reach the model") {
  std::map<int, test::Collected> c;
  Run run = analysed(nested_capture(), {}, &c);
  REQUIRE(run.processes.size() == 1);
  const Process& p = run.processes[0];
  CHECK(run.has_gpu);
  CHECK(p.gpu_records.size() == 6);
  CHECK(std::is_sorted(p.gpu_records.begin(), p.gpu_records.end(),
                       [](const GpuRecord& x, const GpuRecord& y) { return x.start_ns < y.start_ns; }));
  const GpuRecord& first = p.gpu_records[0];
  CHECK(first.kind == GpuKind::kKernel);
  CHECK(first.name == "matmul(float*, float*, float*, int)");
  CHECK(first.start_ns == kR0 + 3000);
  CHECK(first.dur_ns() == 4000);
  CHECK(first.stream == 7);
  CHECK(first.api_known);
  CHECK(first.api_name == "cudaLaunchKernel");
  CHECK(first.api_start_ns == kR0 + 2000);
  CHECK(first.api_runtime);
  // The whole record reaches the trace sink.
  REQUIRE(c[42].gpu.size() == 6);
  const test::Collected::GpuCall* matmul = gpu_named(c[42], "matmul(float*, float*, float*, int)");
  REQUIRE(matmul);
  CHECK(matmul->gpu.mangled == "_Z6matmulPfS_S_i");
  CHECK(matmul->gpu.correlation == 1);
  CHECK(matmul->gpu.grid[0] == 216);
  CHECK(matmul->cycle == 0);
  auto copy = std::find_if(p.gpu_records.begin(), p.gpu_records.end(),
                           [](const GpuRecord& g) { return g.kind == GpuKind::kMemcpy; });
  REQUIRE(copy != p.gpu_records.end());
  CHECK(copy->name == "Memcpy HtoD (Pageable -> Device)");
  CHECK(copy->bytes == 1u << 20);
  CHECK(copy->api_name == "cudaMemcpyAsync");
  CHECK(p.memory_events.size() == 4);
  REQUIRE(p.devices.size() == 1);
  CHECK(p.devices[0].name == "Fake GPU");
  CHECK(p.devices[0].num_sms == 108);
  CHECK(p.cupti_dropped == 5);  // cumulative counts: the last one is the total
  CHECK(run.cupti_dropped == 5);
  CHECK(c[42].named("cudaLaunchKernel").size() == 2);
  CHECK(c[42].named("cudaLaunchKernel")[0]->kind == EventKind::kCudaRuntime);
  CHECK(p.end_ns == kR0 + 21500);  // the process span covers its GPU work
  CHECK(p.cpu_events == 3 + 8);    // ranges and API calls
  CHECK(p.events == 11 + 6 + 4);   // CPU events, GPU records and memory events
}

TEST_CASE("gpu analysis: Self CUDA and CUDA total of nested ranges, as torch") {
  std::map<int, test::Collected> c;
  Run run = analysed(nested_capture(), {}, &c);
  const Process& p = run.processes[0];
  const OpStats* train = op(run, "train", "nvtx");
  REQUIRE(train);
  CHECK(train->self_cuda_ns == 4000 + 500 + 1000);  // matmul + the graph's two kernels
  CHECK(train->cuda_total_ns == 5500 + 2000);       // and relu and the copy, inside the inners
  // API calls are CPU children of their range.
  CHECK(event_at(c[42], "train", 1000).self_ns == 19000 - 7000 - 500 - 300 - 4 * 100);
  CHECK(event_at(c[42], "inner", 5000).self_ns == 7000 - 400 - 3000);
  CHECK(event_at(c[42], "inner", 7000).self_ns == 3000 - 200);
  CHECK(train->self_cpu_ns == 19000 - 7000 - 500 - 300 - 4 * 100);

  const OpStats* inner = op(run, "inner", "nvtx");
  REQUIRE(inner);
  CHECK(inner->calls == 2);
  CHECK(inner->self_cuda_ns == 1000 + 1000);  // relu in the outer one, the copy in the inner one
  CHECK(inner->cuda_total_ns == 2000 + 1000);  // a name nested in itself counts once per event
  const OpStats* launch = op(run, "cudaLaunchKernel", "cuda_api");
  REQUIRE(launch);
  CHECK(launch->calls == 2);
  CHECK(launch->self_cpu_ns == 900);
  CHECK(launch->cuda_total_ns == 0);  // as torch: kernels hang under the op, not the launch
  const OpStats* matmul = op(run, "matmul(float*, float*, float*, int)", "kernel");
  REQUIRE(matmul);
  CHECK(matmul->mangled == "_Z6matmulPfS_S_i");
  CHECK(matmul->self_cuda_ns == 4000);
  CHECK(matmul->cuda_total_ns == 4000);
  CHECK(matmul->cpu_total_ns == 0);
  const OpStats* copy = op(run, "Memcpy HtoD (Pageable -> Device)", "memcpy");
  REQUIRE(copy);
  CHECK(copy->self_cuda_ns == 1000);
  const OpStats* orphan = op(run, "orphan()", "kernel");
  REQUIRE(orphan);  // a row of its own even without its launch
  CHECK(orphan->self_cuda_ns == 500);
  CHECK(std::any_of(p.warnings.begin(), p.warnings.end(),
                    [](const std::string& w) { return w.find("1 GPU records have no") == 0; }));
  // The orphan reaches the trace without a launch.
  const test::Collected::GpuCall* lost = gpu_named(c[42], "orphan()");
  REQUIRE(lost);
  CHECK_FALSE(lost->launch.known);
}

TEST_CASE("gpu analysis: graph kernels go to the range around cudaGraphLaunch") {
  std::map<int, test::Collected> c;
  Run run = analysed(nested_capture(), {}, &c);
  const uint32_t train = external_id(c[42], "train", 1000);
  CHECK(train != 0);
  int graph_kernels = 0;
  int flows = 0;
  for (const test::Collected::GpuCall& g : c[42].gpu) {
    if (g.gpu.graph_id != 5) continue;
    ++graph_kernels;
    REQUIRE(g.launch.known);
    CHECK(g.launch.start_ns == kR0 + 13000);  // cudaGraphLaunch
    CHECK(g.launch.tid == 100);
    CHECK(g.launch.enclosing_id == train);
    flows += g.launch.first ? 1 : 0;
  }
  CHECK(graph_kernels == 2);
  CHECK(flows == 1);  // one flow from the launch, to its first kernel
  for (const GpuRecord& g : run.processes[0].gpu_records) {
    if (g.name == "nodeA()" || g.name == "nodeB()") CHECK(g.api_name == "cudaGraphLaunch");
  }
  // The kernels inside the inners name the innermost range around their launch.
  CHECK(gpu_named(c[42], "relu(float*, int)")->launch.enclosing_id == external_id(c[42], "inner", 5000));
  CHECK(gpu_named(c[42], "Memcpy HtoD (Pageable -> Device)")->launch.enclosing_id ==
        external_id(c[42], "inner", 7000));
}

TEST_CASE("gpu analysis: memory running total, peak and usage of the device") {
  Run run = analysed(nested_capture());
  const Process& p = run.processes[0];
  MemoryUsage m = memory_usage(p);
  CHECK(m.peak_bytes.at(0) == 4096 + 8192);
  CHECK(m.final_bytes.at(0) == 8192 + 1024);
  CHECK(m.allocations == 3);
  CHECK(m.frees == 1);
  CHECK(m.free_bytes == 4096);
  CHECK(p.memory_events[2].live_bytes == 8192);
  CHECK(step_peak_bytes(p, 0).at(0) == 12288);

  auto usage = device_usage(p, [&](const GpuRecord& g) { return in_recorded_step(p, g); });
  REQUIRE(usage.size() == 1);
  CHECK(usage[0].kernels == 5);
  CHECK(usage[0].memcpys == 1);
  CHECK(usage[0].busy_ns == 4000 + 1000 + 1500 + 500);  // graph kernels touch: merged
  CHECK(usage[0].busy_all_ns == 7000 + 1000);
  CHECK(usage[0].window_end_ns - usage[0].window_start_ns == 20500);
  CHECK(usage[0].idle_ns == 20500 - 7000);
  CHECK(usage[0].streams.at(7).ops == 5);
  CHECK(usage[0].streams.at(9).busy_ns == 1000);
}

TEST_CASE("gpu analysis: GPU work counts for the step of its launch") {
  // ProfilerStep#0 [1000, 5000] launches a kernel that runs [6000, 9000], inside
  // ProfilerStep#1's CPU time. Only step 0 is recorded.
  Slots cpu = strings();
  cpu.push(kStep0, 1000).api(kLaunch, 2000, 2200, 1).pop(5000);
  cpu.push(kStep1, 5000).api(kLaunch, 5500, 5700, 2).pop(9500);
  Slots gpu;
  gpu.kernel(kMatmul, 6000, 9000, 1, 7).kernel(kRelu, 9000, 9400, 2, 7);
  CaptureBuilder b;
  b.chunk(ChunkType::kHello, 1, test::hello_body(43, 1, 0, kR0, "/bin/app", {"app"}, "h", {}));
  b.chunk(ChunkType::kFrame, 1, test::frame_body(100, 0, cpu));
  b.chunk(ChunkType::kFrame, 1, test::frame_body(200, 0, gpu));
  AnalysisOptions options;
  options.schedule = Schedule{.wait = 0, .warmup = 0, .active = 1, .repeat = 1};
  Run run = analysed(b.save("gpu_steps.tprof"), options);
  const Process& p = run.processes[0];
  REQUIRE(p.steps.size() == 2);
  REQUIRE(p.gpu_records.size() == 2);
  CHECK(p.gpu_records[0].step == 0);
  CHECK(p.gpu_records[1].step == 1);
  const OpStats* step = op(run, "ProfilerStep*", "nvtx");
  REQUIRE(step);
  CHECK(step->calls == 1);
  CHECK(step->cuda_total_ns == 3000);
  CHECK(op(run, "matmul(float*, float*, float*, int)", "kernel"));
  CHECK_FALSE(op(run, "relu(float*, int)", "kernel"));  // launched in the unrecorded step

  // The all-steps forms give each step what the one-step forms give it.
  const auto per_step = device_usage_per_step(p);
  REQUIRE(per_step.size() == 2);
  for (int32_t k = 0; k < 2; ++k) {
    auto one = device_usage(p, [&](const GpuRecord& g) { return g.step == k; });
    REQUIRE(per_step[k].size() == one.size());
    REQUIRE(one.size() == 1);
    CHECK(per_step[k][0].kernels == one[0].kernels);
    CHECK(per_step[k][0].kernel_ns == one[0].kernel_ns);
    CHECK(per_step[k][0].busy_ns == one[0].busy_ns);
    CHECK(per_step[k][0].window_start_ns == one[0].window_start_ns);
    CHECK(per_step[k][0].window_end_ns == one[0].window_end_ns);
  }
  CHECK(per_step[0][0].kernel_ns == 3000);
  CHECK(per_step[1][0].kernel_ns == 400);
}

TEST_CASE("gpu analysis: peak memory of every step in one sweep") {
  Process p;
  for (int k = 0; k < 3; ++k) {
    Step& s = p.steps.emplace_back();
    s.index = k;
    s.start_ns = 1000 * (k + 1);
    s.dur_ns = 500;
  }
  // device 0: 100 before step 0, 300 inside it, 50 between steps 0 and 1, nothing in step 1,
  // 700 in step 2; device 1 appears only in step 2.
  auto mem = [&](int64_t ts, uint32_t device, int64_t live) {
    MemoryEvent& m = p.memory_events.emplace_back();
    m.ts_ns = ts;
    m.device = device;
    m.live_bytes = live;
  };
  mem(500, 0, 100);
  mem(1200, 0, 300);
  mem(1700, 0, 50);
  mem(3100, 0, 700);
  mem(3200, 1, 64);
  const auto all = peak_bytes_per_step(p);
  REQUIRE(all.size() == 3);
  for (int k = 0; k < 3; ++k) CHECK(all[k] == step_peak_bytes(p, k));
  CHECK(all[0].at(0) == 300);
  CHECK(all[1].at(0) == 50);
  CHECK(all[2].at(0) == 700);
  CHECK(all[2].at(1) == 64);
  CHECK(all[1].count(1) == 0);
}

TEST_CASE("gpu decode: notices, names of copies, memsets and syncs") {
  CHECK(memcpy_row_name(2, 3, 1) == "Memcpy DtoH (Device -> Pageable)");
  CHECK(memcpy_row_name(8, 3, 3) == "Memcpy DtoD (Device -> Device)");
  CHECK(memset_row_name(3) == "Memset (Device)");
  CHECK(sync_row_name(3) == "Stream Sync");
  CHECK(demangle("triton_poi_fused_add_0") == "triton_poi_fused_add_0");
  CHECK(demangle("_Z4tinyv") == "tiny()");

  Slots s = strings();
  s.push(kTrain, 100).pop(200);
  s.rec(Kind::kGpuNotice, kNotice, 50).rec(Kind::kGpuNotice, kNotice, 60);
  s.rec(Kind::kCudaProfiler, 0, 70, 1).rec(Kind::kCudaProfiler, 0, 150, 0);
  CaptureBuilder b;
  b.chunk(ChunkType::kHello, 1, test::hello_body(44, 1, 0, kR0, "/bin/app", {"app"}, "h", {}));
  b.chunk(ChunkType::kFrame, 1, test::frame_body(100, 0, s));
  Run run = analysed(b.save("gpu_notice.tprof"));
  const Process& p = run.processes[0];
  CHECK_FALSE(run.has_gpu);
  REQUIRE(p.gpu_notices.size() == 1);  // the same notice once
  CHECK(run.gpu_notices == std::vector<std::string>{"pid 44: GPU tracing off: test notice"});
  REQUIRE(p.profiler_toggles.size() == 2);
  CHECK(p.profiler_toggles[0].start);
  CHECK(p.profiler_toggles[1].ts_ns == kR0 + 150);
  CHECK(op(run, "train", "nvtx"));
}

TEST_CASE("gpu analysis: merged interval length") {
  CHECK(merged_length({}) == 0);
  CHECK(merged_length({{0, 10}, {5, 15}, {20, 30}}) == 25);
  CHECK(merged_length({{20, 30}, {0, 10}, {10, 12}}) == 22);
  CHECK(merged_length({{0, 100}, {10, 20}}) == 100);
}

}  // namespace torchprof
