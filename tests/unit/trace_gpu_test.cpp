// GPU parts of the outputs: Kineto trace rows on pid = device / tid = stream, ac2g
// flows, [memory] instants, deviceProperties; summary.json's gpu and memory
// sections; the table's CUDA columns; the --stats reports.
#include <doctest/doctest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "analysis_capture_builder.h"
#include "analysis_gpu_capture.h"
#include "analysis/analysis.h"
#include "formats/kineto_gpu.h"
#include "formats/kineto_trace.h"
#include "formats/stats.h"
#include "formats/summary_json.h"
#include "formats/table.h"
#include "trace_files.h"

namespace torchprof {

namespace {

// The GPU capture through the engine, with every output and its trace.
const test::Traced& gpu_traced() {
  static const test::Traced t = test::traced(test::gpu_nested_capture(), {}, {test::trace_dir("trace_gpu"), false});
  return t;
}

const Run& gpu_run() { return gpu_traced().run; }

nlohmann::json trace_of() {
  REQUIRE(gpu_traced().files.size() == 1);
  return test::trace_json(gpu_traced().files[0].path);
}

std::vector<nlohmann::json> with(const nlohmann::json& trace, const std::string& key, const std::string& value) {
  std::vector<nlohmann::json> found;
  for (const auto& e : trace["traceEvents"]) {
    if (e.contains(key) && e[key].is_string() && e[key] == value) found.push_back(e);
  }
  return found;
}

}  // namespace

TEST_CASE("trace gpu: kernels and copies on pid = device, tid = stream, with Kineto's args") {
  auto trace = trace_of();
  REQUIRE(trace["deviceProperties"].size() == 1);
  CHECK(trace["deviceProperties"][0]["name"] == "Fake GPU");
  CHECK(trace["deviceProperties"][0]["numSms"] == 108);

  auto kernels = with(trace, "cat", "kernel");
  REQUIRE(kernels.size() == 5);
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& k : kernels) by_name[k["name"]] = k;
  const auto& matmul = by_name.at("matmul(float*, float*, float*, int)");
  CHECK(matmul["pid"] == 0);
  CHECK(matmul["tid"] == 7);
  CHECK(matmul["dur"].get<double>() == doctest::Approx(4.0));
  CHECK(matmul["args"]["mangled name"] == "_Z6matmulPfS_S_i");
  CHECK(matmul["args"]["correlation"] == 1);
  CHECK(matmul["args"]["grid"] == nlohmann::json::parse("[216, 1, 1]"));
  CHECK(matmul["args"]["blocks per SM"].get<double>() == doctest::Approx(2.0));
  CHECK(matmul["args"]["warps per SM"].get<double>() == doctest::Approx(16.0));
  CHECK(matmul["args"]["est. achieved occupancy %"] == 25);  // 2 blocks x 8 warps of 64
  CHECK(by_name.at("nodeA()")["args"]["graph id"] == 5);

  // The kernel's External id is the one of the range around its launch.
  auto train = with(trace, "name", "train").at(0);
  CHECK(matmul["args"]["External id"] == train["args"]["External id"]);
  CHECK(by_name.at("orphan()")["args"]["External id"] == 0);  // never null, as in Kineto

  auto copies = with(trace, "cat", "gpu_memcpy");
  REQUIRE(copies.size() == 1);
  CHECK(copies[0]["name"] == "Memcpy HtoD (Pageable -> Device)");
  CHECK(copies[0]["tid"] == 9);
  CHECK(copies[0]["args"]["bytes"] == 1 << 20);
  CHECK(copies[0]["args"]["memory bandwidth (GB/s)"].get<double>() == doctest::Approx(1048.576));

  auto runtime = with(trace, "cat", "cuda_runtime");
  CHECK(runtime.size() == 8);
  for (const auto& r : runtime) {
    CHECK(r["pid"] == 42);
    CHECK(r["tid"] == 100);
    CHECK(r["args"].contains("cbid"));
  }
}

TEST_CASE("trace gpu: every flow start has one finish with the same id") {
  auto trace = trace_of();
  std::multiset<uint64_t> starts, finishes;
  for (const auto& f : with(trace, "cat", "ac2g")) {
    if (f["ph"] == "s") {
      starts.insert(f["id"].get<uint64_t>());
      CHECK(f["pid"] == 42);
    } else {
      CHECK(f["ph"] == "f");
      CHECK(f["bp"] == "e");
      CHECK(f["pid"] == 0);
      finishes.insert(f["id"].get<uint64_t>());
    }
  }
  // Launches #1..#4; the graph launch (#4) has two kernels, so two finishes.
  CHECK(std::set<uint64_t>(starts.begin(), starts.end()) == std::set<uint64_t>{1, 2, 3, 4});
  CHECK(starts.size() == 4);
  CHECK(finishes.count(4) == 2);
  CHECK(finishes.size() == 5);  // not the orphan: its launch is unknown
}

TEST_CASE("trace gpu: [memory] instants and GPU process metadata") {
  auto trace = trace_of();
  auto memory = with(trace, "name", "[memory]");
  REQUIRE(memory.size() == 4);
  CHECK(memory[0]["args"]["Device Type"] == 1);
  CHECK(memory[0]["args"]["Bytes"] == 4096);
  CHECK(memory[2]["args"]["Bytes"] == -4096);
  CHECK(memory[1]["args"]["Total Allocated"] == 12288);
  CHECK(memory[3]["args"]["Total Allocated"] == 9216);
  CHECK(memory[0]["tid"] == 100);

  bool gpu_label = false, stream_name = false;
  for (const auto& m : with(trace, "ph", "M")) {
    if (m["pid"] == 0 && m["name"] == "process_labels") gpu_label = m["args"]["labels"] == "GPU 0";
    if (m["pid"] == 0 && m["tid"] == 9 && m["name"] == "thread_name") stream_name = m["args"]["name"] == "stream 9 ";
  }
  CHECK(gpu_label);
  CHECK(stream_name);
}

TEST_CASE("summary gpu: devices, busy/idle, memory, drops") {
  const Run& run = gpu_run();
  auto j = nlohmann::json::parse(render_summary_json(run));
  CHECK(j["schema"] == "torchprof.summary/1");
  REQUIRE(j["gpu"]["devices"].size() == 1);
  const auto& d = j["gpu"]["devices"][0];
  CHECK(d["name"] == "Fake GPU");
  CHECK(d["busy_ns"] == 7000);
  CHECK(d["idle_ns"] == 13500);
  CHECK(d["kernels"] == 5);
  CHECK(d["streams"]["9"]["ops"] == 1);
  CHECK(j["gpu"]["busy_ns"] == 7000);
  CHECK(j["gpu"]["idle_ns"] == 13500);
  CHECK(j["memory"]["peak_bytes_per_device"]["0"] == 12288);
  CHECK(j["memory"]["allocations"] == 3);
  CHECK(j["memory"]["frees"] == 1);
  CHECK(j["memory"]["peak_bytes_per_step"][0]["peak_bytes_per_device"]["0"] == 12288);
  CHECK(j["cupti_dropped"] == 5);
  CHECK(j["steps"][0]["gpu_busy_ns"] == 7000);
  bool kernel_row = false;
  for (const auto& o : j["ops"]) {
    if (o["kind"] == "kernel" && o["name"] == "relu(float*, int)") {
      kernel_row = o["mangled_name"] == "_Z4reluPfi" && o["self_cuda_ns"] == 1000 && o["cpu_total_ns"] == 0;
    }
  }
  CHECK(kernel_row);
}

TEST_CASE("table gpu: CUDA columns, sorted by CUDA total, trailer") {
  const Run& run = gpu_run();
  TableRows rows = make_table_rows(run.ops, run.has_gpu, {});
  CHECK(rows.sort_key == "cuda_time_total");
  REQUIRE_FALSE(rows.rows.empty());
  CHECK(rows.rows[0].name == "train");
  std::string text = render_table(rows);
  CHECK(text.find("Self CUDA %") != std::string::npos);
  CHECK(text.find("Self CUDA time total: ") != std::string::npos);
}

TEST_CASE("stats: nsys-style kernel, API and memory summaries") {
  const Run& run = gpu_run();
  std::ostringstream out;
  render_stats(run, out);
  const std::string text = out.str();
  CHECK(text.find("CUDA GPU Kernel Summary (cuda_gpu_kern_sum)") != std::string::npos);
  CHECK(text.find("CUDA API Summary (cuda_api_sum)") != std::string::npos);
  CHECK(text.find("[CUDA memcpy Host-to-Device]") != std::string::npos);
  CHECK(text.find("CUDA GPU MemOps Summary (by Size)") != std::string::npos);
  // matmul: 4000 of 7000 ns of kernel time, one instance.
  auto line_start = text.find("matmul(float*, float*, float*, int)");
  REQUIRE(line_start != std::string::npos);
  std::string line = text.substr(text.rfind('\n', line_start) + 1, line_start - text.rfind('\n', line_start));
  CHECK(line.find("57.1") != std::string::npos);
  CHECK(line.find("4,000") != std::string::npos);
  // cudaMalloc: 3 calls of 100 ns.
  auto malloc_at = text.find(" cudaMalloc\n");
  REQUIRE(malloc_at != std::string::npos);
  std::string malloc_line = text.substr(text.rfind('\n', malloc_at) + 1, malloc_at - text.rfind('\n', malloc_at));
  CHECK(malloc_line.find("300") != std::string::npos);
}

TEST_CASE("trace gpu: unknown device properties leave the occupancy out; a context sync's stream is unsigned") {
  GpuEvent k;
  k.kind = GpuKind::kKernel;
  k.grid[0] = k.grid[1] = k.grid[2] = 1;
  k.block[0] = 128;
  k.block[1] = k.block[2] = 1;
  k.start_ns = 1000;
  k.end_ns = 2000;
  json::Buffer out;
  kineto::append_gpu_event(out, k, 0, 0, nullptr);
  auto kernel = nlohmann::json::parse(out.view());
  CHECK_FALSE(kernel["args"].contains("blocks per SM"));
  CHECK_FALSE(kernel["args"].contains("warps per SM"));
  CHECK_FALSE(kernel["args"].contains("est. achieved occupancy %"));
  CHECK(kernel["args"]["grid"] == nlohmann::json::parse("[1, 1, 1]"));
  CHECK(kernel["args"]["External id"] == 0);
  GpuEvent sync;
  sync.kind = GpuKind::kSync;
  sync.name = "Context Sync";
  sync.stream = ~0u;
  sync.start_ns = 1000;
  sync.end_ns = 3000;
  json::Buffer sync_out;
  kineto::append_gpu_event(sync_out, sync, 0, 7, nullptr);
  auto row = nlohmann::json::parse(sync_out.view());
  CHECK(row["args"]["stream"] == 4294967295u);
}

TEST_CASE("trace gpu: occupancy estimate is limited by registers") {
  GpuEvent k;
  k.grid[0] = 1000;
  k.grid[1] = k.grid[2] = 1;
  k.block[0] = 1024;
  k.block[1] = k.block[2] = 1;
  k.registers_per_thread = 64;  // 64 K registers per block: one block per SM
  GpuDevice d;
  d.num_sms = 100;
  d.warp_size = 32;
  d.max_threads_per_multiprocessor = 2048;
  d.regs_per_multiprocessor = 65536;
  auto occ = kineto::estimate_occupancy(k, d);
  CHECK(occ.blocks_per_sm == doctest::Approx(10.0));
  CHECK(occ.achieved_percent == 50);
}

}  // namespace torchprof

namespace torchprof {

TEST_CASE("trace gpu: deviceProperties for every device with rows; NCCL kernels name the backend") {
  enum : uint32_t { kLaunch = 1, kNccl, kGemm, kGpuName, kRange };
  test::Slots cpu;
  cpu.str(kLaunch, "cudaLaunchKernel").str(kRange, "step");
  cpu.push(kRange, 1000).api(kLaunch, 2000, 2100, 1).api(kLaunch, 2200, 2300, 2).pop(9000);
  wire::GpuDeviceExtra props{};
  props.num_sms = 132;
  props.warp_size = 32;
  props.max_threads_per_multiprocessor = 2048;
  test::Slots gpu;
  gpu.str(kNccl, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
  gpu.str(kGemm, "_Z4gemmv").str(kGpuName, "Fake GPU");
  gpu.device(0, kGpuName, props);
  gpu.kernel(kGemm, 3000, 4000, 1, 7, 0).kernel(kNccl, 3000, 5000, 2, 9, 1);  // device 1: no device record
  test::CaptureBuilder b;
  b.chunk(capture::ChunkType::kHello, 1,
          test::hello_body(43, 1, 0, 1'700'000'000'000'000'000, "/bin/app", {"app"}, "h", {"RANK=1", "WORLD_SIZE=2"}));
  b.chunk(capture::ChunkType::kFrame, 1, test::frame_body(100, 0, cpu));
  b.chunk(capture::ChunkType::kFrame, 1, test::frame_body(200, 0, gpu));
  const test::Traced t = test::traced(b.save("gpu_two_devices.tprof"), {}, {test::trace_dir("trace_two_devices"), false});
  REQUIRE(t.files.size() == 1);
  const nlohmann::json trace = test::trace_json(t.files[0].path);
  REQUIRE(trace["deviceProperties"].size() == 2);
  CHECK(trace["deviceProperties"][0]["numSms"] == 132);
  CHECK(trace["deviceProperties"][1]["id"] == 1);
  CHECK_FALSE(trace["deviceProperties"][1].contains("numSms"));  // unknown, not 0
  CHECK(trace["distributedInfo"]["backend"] == "nccl");
  CHECK(trace["distributedInfo"]["rank"] == 1);
}

}  // namespace torchprof
