// The outputs of a varied capture, byte for byte, against files written by an
// earlier torchprof (tests/unit/golden/): the printed table and notes, table.txt,
// summary.json, every trace and the data of report.html. Changes made for speed or memory must
// leave them exactly as they were; a change meant to alter an output regenerates
// the files (see tests/unit/golden/README) and says so in its commit.
//
// The capture is built here from a fixed seed: two processes, nested ranges on
// three threads, steps and a schedule, marks, start/end ranges that end on another
// thread (before and after their start is written), domains, categories, payloads,
// strings defined in a later frame of another thread, API calls with kernels,
// copies, memsets, syncs and memory, a lost frame, an undefined string and an
// unterminated range.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "analysis_capture_builder.h"
#include "trace_canonical.h"
#include "analysis/engine.h"
#include "formats/sqlite_export.h"
#include "pipeline/outputs.h"

#include <sqlite3.h>

namespace torchprof {

using capture::ChunkType;
using test::CaptureBuilder;
using test::Slots;
using wire::Kind;

namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMono = 5'000;
constexpr uint64_t kReal = 1'700'000'000'000'000'000;

class Rng {
 public:
  explicit Rng(uint64_t seed) : x_(seed) {}
  uint64_t next() {
    x_ = x_ * 6364136223846793005ull + 1442695040888963407ull;
    return x_ >> 33;
  }
  uint64_t below(uint64_t n) { return next() % n; }

 private:
  uint64_t x_;
};

// String ids of the op names (1..), defined at the start of the main thread's stream.
const std::vector<std::string> kOps = {"forward", "backward", "aten::mm", "aten::add", "loss",
                                       "optimizer", "data \"quoted\"", "größe", "tab\there"};
constexpr uint32_t kOpBase = 1;
constexpr uint32_t kStepBase = 100;    // "ProfilerStep#k"
constexpr uint32_t kLaunch = 200;      // "cudaLaunchKernel"
constexpr uint32_t kMemcpyApi = 201;   // "cudaMemcpyAsync"
constexpr uint32_t kKernelA = 202;     // mangled
constexpr uint32_t kKernelB = 203;
constexpr uint32_t kDomainName = 204;  // "my.domain"
constexpr uint32_t kCategoryName = 205;
constexpr uint32_t kLate = 206;        // defined by another thread, in a later frame
constexpr uint32_t kAsync = 207;       // start/end range name
constexpr uint32_t kDevice = 208;
constexpr uint32_t kThreadNames = 210;
constexpr uint32_t kMarkName = 213;
constexpr uint32_t kUndefined = 999;   // never defined

struct ThreadStream {
  uint32_t tid;
  std::vector<Slots> frames;  // cut into several frames
  uint64_t now;
};

// Random nested push/pop ranges on a thread, with API calls that launch GPU work.
void nested(Rng& rng, Slots& s, uint64_t& now, int depth, uint64_t& correlation, Slots& gpu, bool domain) {
  const int children = static_cast<int>(rng.below(depth == 0 ? 4 : 3));
  for (int c = 0; c < children; ++c) {
    now += 1 + rng.below(50);
    const auto name = static_cast<uint32_t>(kOpBase + rng.below(kOps.size()));
    const bool in_domain = domain && rng.below(4) == 0;
    const uint16_t dom = in_domain ? 1 : 0;
    const uint64_t roll = rng.below(6);
    if (roll == 0) {
      s.rec(Kind::kPush, name, now, wire::make_attr(7, wire::PayloadType::kU64), 1234 + now, dom);
    } else if (roll == 1) {
      s.push(name, now, dom).rec(Kind::kPayload, 0, 0, wire::make_attr(in_domain ? 3 : 0, wire::PayloadType::kDouble),
                                 0x400921fb54442d18ull);
    } else {
      s.push(name, now, dom);
    }
    if (depth < 3) nested(rng, s, now, depth + 1, correlation, gpu, domain);
    if (rng.below(3) == 0) {
      // An API call that launches a kernel (or a copy), finished on the GPU later.
      const uint64_t enter = now + 1 + rng.below(5);
      const uint64_t exit = enter + 2 + rng.below(10);
      const uint64_t corr = ++correlation;
      const bool copy = rng.below(4) == 0;
      s.api(copy ? kMemcpyApi : kLaunch, enter, exit, corr);
      const uint64_t start = exit + rng.below(30);
      const uint64_t end = start + 1 + rng.below(100);
      if (copy) {
        gpu.copy(rng.below(2) ? Kind::kMemcpy : Kind::kMemset, start, end, corr, 4096 * (1 + rng.below(8)),
                 static_cast<uint32_t>(7 + rng.below(2)), 1, 1, 3);
      } else {
        gpu.kernel(rng.below(2) ? kKernelA : kKernelB, start, end, corr, static_cast<uint32_t>(7 + rng.below(2)));
      }
      now = exit;
    }
    if (rng.below(5) == 0) s.rec(Kind::kMark, kMarkName, now + 1, 0, 0);
    now += 1 + rng.below(40);
    s.pop(now, dom);
  }
}

std::string varied_capture() {
  Rng rng(20251129);
  CaptureBuilder b;
  b.chunk(ChunkType::kRunInfo, 0, R"({"command":["python3","train.py"],"host":"node1","start_ns":0})");

  // Process 101: main thread with 12 steps, a worker, and the CUPTI thread.
  b.chunk(ChunkType::kHello, 1,
          test::hello_body(101, 1, kMono, kReal, "/usr/bin/python3", {"python3", "train.py"}, "node1",
                           {"RANK=0", "WORLD_SIZE=2"}));
  Slots defs;
  for (size_t i = 0; i < kOps.size(); ++i) defs.str(kOpBase + static_cast<uint32_t>(i), kOps[i]);
  for (uint32_t k = 0; k < 12; ++k) defs.str(kStepBase + k, "ProfilerStep#" + std::to_string(k));
  defs.str(kLaunch, "cudaLaunchKernel").str(kMemcpyApi, "cudaMemcpyAsync");
  defs.str(kKernelA, "_Z10gemm_smallPfS_S_i").str(kKernelB, "relu_kernel");
  defs.str(kDomainName, "my.domain").str(kCategoryName, "io").str(kAsync, "prefetch");
  defs.str(kDevice, "Fake GPU").str(kThreadNames, "main-nvtx").str(kThreadNames + 1, "loader");
  defs.str(kMarkName, "checkpoint");
  defs.rec(Kind::kDomain, kDomainName, 0, 0, 0, 1).rec(Kind::kCategory, kCategoryName, 0, 3, 0, 1);

  uint64_t correlation = 0;
  Slots gpu;
  wire::GpuDeviceExtra props{};
  props.total_global_mem = 80ull << 30;
  props.compute_major = 9;
  props.max_threads_per_block = 1024;
  props.max_threads_per_multiprocessor = 2048;
  props.regs_per_block = 65536;
  props.warp_size = 32;
  props.shared_mem_per_block = 49152;
  props.num_sms = 132;
  props.regs_per_multiprocessor = 65536;
  props.shared_mem_per_multiprocessor = 233472;
  gpu.device(0, kDevice, props);

  std::vector<Slots> main_frames(1);
  main_frames[0] = defs;
  main_frames[0].rec(Kind::kThreadStart, 0, 10'000, 1).rec(Kind::kThreadName, kThreadNames, 0, 0, 0);
  main_frames[0].memory(true, 10'001, 0xA000, 1 << 20, 0);
  uint64_t now = 10'000;
  std::vector<std::pair<uint64_t, uint64_t>> steps;
  for (uint32_t k = 0; k < 12; ++k) {
    Slots& s = main_frames.back();
    now += 100;
    const uint64_t step_start = now;
    s.push(kStepBase + k, now);
    if (k == 3) s.rec(Kind::kStart, kAsync, now + 1, 77, wire::make_attr(0, wire::PayloadType::kI32), 0);
    if (k == 5) s.rec(Kind::kEnd, 0, now + 2, 78);  // its start comes later, from the worker
    if (k == 4) s.memory(true, now + 3, 0xB000, 4096, 0).memory(false, now + 4, 0xA000, 0, 0);
    nested(rng, s, now, 0, correlation, gpu, true);
    now += 10;
    s.pop(now);
    steps.emplace_back(step_start, now);
    if (k % 4 == 3) main_frames.emplace_back();  // next frame
  }
  main_frames.back().rec(Kind::kEnd, 0, now + 5, 79);

  // Worker thread: ranges during the steps, names defined late, a cross-thread end.
  std::vector<Slots> worker_frames(3);
  uint64_t wnow = 10'050;
  worker_frames[0].rec(Kind::kThreadStart, 0, wnow, 0).rec(Kind::kThreadName, kThreadNames + 1, 0, 0, 1);
  for (int i = 0; i < 30; ++i) {
    Slots& s = worker_frames[static_cast<size_t>(i / 10)];
    wnow += 40 + rng.below(200);
    s.push(i % 5 == 0 ? kLate : kOpBase + static_cast<uint32_t>(rng.below(kOps.size())), wnow);
    nested(rng, s, wnow, 1, correlation, gpu, false);
    wnow += 5;
    s.pop(wnow);
    if (i == 12) s.rec(Kind::kEnd, 0, wnow + 1, 77);  // ends the main thread's range
    if (i == 20) s.rec(Kind::kStart, kAsync, wnow + 1, 78, 0, 0);
    if (i == 22) s.rec(Kind::kStart, kAsync, wnow + 1, 79, wire::make_attr(3, wire::PayloadType::kNone), 1);
  }
  worker_frames[2].str(kLate, "late_defined");

  // GPU work nobody launched and a sync, on the CUPTI thread.
  gpu.kernel(kKernelB, now + 10, now + 20, 99'999, 7);
  wire::GpuSyncExtra sync{};
  sync.type = 3;
  sync.stream = 7;
  sync.context = 1;
  gpu.with_extra(Kind::kSync, 0, steps[6].first + 5, steps[6].first + 9, 0, 0, sync);

  // Frames in an interleaved order: main 0, worker 0, main 1, gpu, worker 1, main 2, worker 2.
  b.chunk(ChunkType::kFrame, 1, test::frame_body(1001, 0, main_frames[0]));
  b.chunk(ChunkType::kFrame, 1, test::frame_body(1002, 0, worker_frames[0]));
  b.chunk(ChunkType::kFrame, 1, test::frame_body(1001, 1, main_frames[1]));
  b.chunk(ChunkType::kFrame, 1, test::frame_body(1003, 0, gpu));
  b.chunk(ChunkType::kFrame, 1, test::frame_body(1002, 1, worker_frames[1]));
  for (size_t i = 2; i < main_frames.size(); ++i) {
    b.chunk(ChunkType::kFrame, 1, test::frame_body(1001, static_cast<uint32_t>(i), main_frames[i]));
  }
  b.chunk(ChunkType::kFrame, 1, test::frame_body(1002, 2, worker_frames[2]));
  b.chunk(ChunkType::kBye, 1, test::bye_body(wire::ExitKind::kExit, 0, 5000, 0, now + 1000));

  // Process 102: a child with mark steps, an undefined string, a lost frame and an
  // unterminated range.
  b.chunk(ChunkType::kHello, 2,
          test::hello_body(102, 101, kMono, kReal, "/usr/bin/worker", {"worker", "--fast"}, "node1", {}));
  Slots c0;
  c0.str(1, "iter").str(2, "work").str(3, "inner");
  c0.rec(Kind::kThreadStart, 0, 20'000, 1);
  uint64_t cnow = 20'000;
  for (int k = 0; k < 5; ++k) {
    cnow += 10;
    c0.rec(Kind::kMark, 1, cnow, 0, 0);
    for (int j = 0; j < 3; ++j) {
      c0.push(2, cnow + 1).push(j == 1 ? kUndefined : 3, cnow + 2).pop(cnow + 5).pop(cnow + 9);
      cnow += 12;
    }
  }
  Slots c2;
  c2.push(2, cnow + 50).push(3, cnow + 60).pop(cnow + 70);  // "work" never popped
  b.chunk(ChunkType::kFrame, 2, test::frame_body(2001, 0, c0));
  b.chunk(ChunkType::kFrame, 2, test::frame_body(2001, 2, c2));  // frame 1 lost
  b.chunk(ChunkType::kBye, 2, test::bye_body(wire::ExitKind::kExit, 3, 100, 4, cnow + 100));
  b.chunk(ChunkType::kRunEnd, 0, R"({"exit_code":0,"end_ns":0})");
  return b.save("golden_varied.tprof");
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The output folder's path appears in summary.json and the traces' names.
std::string normalise(std::string text, const std::string& dir) {
  for (size_t at = text.find(dir); at != std::string::npos; at = text.find(dir, at)) {
    text.replace(at, dir.size(), "OUT");
  }
  return text;
}

struct Golden {
  const char* name;      // file prefix in tests/unit/golden/
  const char* schedule;  // "" = every step
};

void check_against_golden(const Golden& g) {
  const std::string capture = varied_capture();
  const fs::path out = fs::temp_directory_path() / "torchprof_unit" / (std::string("golden_") + g.name);
  fs::remove_all(out);
  OutputOptions options;
  options.out_dir = out.string();
  options.schedule = g.schedule;
  std::ostringstream printed;
  write_outputs(capture, options, printed);

  const fs::path golden = fs::path(TORCHPROF_SOURCE_DIR) / "tests" / "unit" / "golden";
  std::map<std::string, std::string> produced;
  produced["printed.txt"] = printed.str();
  for (const char* file : {"table.txt", "summary.json"}) {
    produced[file] = normalise(read_file(out / file), out.string());
  }
  // report.html: its data only (the page's CSS and JS change on their own).
  const std::string html = read_file(out / "report.html");
  const std::string marker = "<script type=\"application/json\" id=\"tp-data\">";
  const size_t data = html.find(marker);
  REQUIRE(data != std::string::npos);
  const size_t data_end = html.find("</script>", data);
  REQUIRE(data_end != std::string::npos);
  produced["report-data.json"] =
      normalise(html.substr(data + marker.size(), data_end - data - marker.size()), out.string());
  std::vector<fs::path> traces;
  for (const auto& entry : fs::directory_iterator(out / "traces")) traces.push_back(entry.path());
  std::sort(traces.begin(), traces.end());
  for (size_t i = 0; i < traces.size(); ++i) {
    produced["trace" + std::to_string(i) + ".json"] = normalise(read_file(traces[i]), out.string());
  }
  for (const auto& [file, text] : produced) {
    const fs::path expected = golden / (std::string(g.name) + "." + file);
    INFO("compare with " << expected.string());
    REQUIRE(fs::exists(expected));
    if (file.starts_with("trace")) {
      // Traces are compared in their canonical form (trace_canonical.h).
      CHECK(test::canonical_trace(text) == test::canonical_trace(read_file(expected)));
    } else {
      CHECK(text == read_file(expected));
    }
  }
  size_t expected_traces = 0;
  for (const auto& entry : fs::directory_iterator(golden)) {
    const std::string f = entry.path().filename().string();
    expected_traces += f.starts_with(std::string(g.name) + ".trace") ? 1 : 0;
  }
  CHECK(expected_traces == traces.size());
}

}  // namespace

TEST_CASE("golden outputs: a varied capture, every step recorded") {
  check_against_golden({"all_steps", ""});
}

TEST_CASE("golden outputs: a varied capture under a schedule") {
  check_against_golden({"scheduled", "wait=1,warmup=1,active=2,repeat=2,skip_first=1"});
}

// `torchprof export --type sqlite` of the same capture: as many rows as the engine
// counted, each kind in its nsys table, kernels joined to their launches, and what nsys
// leaves NULL left NULL.
TEST_CASE("sqlite export: the varied capture in nsys's tables") {
  const std::string capture = varied_capture();
  const fs::path db_path = fs::temp_directory_path() / "torchprof_unit" / "golden_varied.sqlite";
  fs::remove(db_path);
  Run run;
  {
    SqliteExport db(db_path.string(), "test");
    EngineOutputs eo;
    eo.traces = db.factory();
    run = analyse_capture_file(capture, AnalysisOptions{}, eo);
    const SqliteExportCounts counts = db.finish(run);
    CHECK(counts.gpu > 0);
  }
  uint64_t api_calls = 0, kernels = 0, copies = 0, memsets = 0, ranges = 0;
  for (const OpStats& op : run.ops) {
    if (op.kind == "cuda_api") api_calls += op.calls;
    if (op.kind == "kernel") kernels += op.calls;
    if (op.kind == "memcpy") copies += op.calls;
    if (op.kind == "memset") memsets += op.calls;
    if (op.kind == "nvtx") ranges += op.calls;
  }
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  auto count = [&](const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    INFO(sql);
    REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_step(stmt) == SQLITE_ROW);
    const int64_t n = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    return n;
  };
  CHECK(count("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME") == static_cast<int64_t>(api_calls));
  CHECK(count("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL") == static_cast<int64_t>(kernels));
  CHECK(count("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY") == static_cast<int64_t>(copies));
  CHECK(count("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET") == static_cast<int64_t>(memsets));
  // The table counts ranges (step markers as one ProfilerStep* row); marks are no rows.
  CHECK(count("SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60)") == static_cast<int64_t>(ranges));
  CHECK(count("SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 34 AND end IS NOT NULL") == 0);
  CHECK(count("SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 34") > 0);
  // Start/end ranges that ended on another thread say where; none that did not.
  CHECK(count("SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 60 AND endGlobalTid IS NOT NULL") > 0);
  CHECK(count("SELECT count(*) FROM NVTX_EVENTS WHERE endGlobalTid = globalTid") == 0);
  // Named domains are eventType 75 rows, and their ranges point at them.
  CHECK(count("SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 75") > 0);
  CHECK(count("SELECT count(*) FROM NVTX_EVENTS AS n WHERE n.domainId != 0 AND n.eventType != 75 AND NOT EXISTS "
              "(SELECT 1 FROM NVTX_EVENTS AS d WHERE d.eventType = 75 AND d.domainId = n.domainId "
              "AND (d.globalTid & ~0xFFFFFF) = (n.globalTid & ~0xFFFFFF))") == 0);
  CHECK(count("SELECT count(*) FROM NVTX_EVENTS WHERE coalesce(uint64Value, int64Value, doubleValue, "
              "uint32Value, int32Value, floatValue) IS NOT NULL") > 0);
  // Every kernel but the one the run warns about is joined to its launch on its process.
  CHECK(count("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL AS k WHERE NOT EXISTS (SELECT 1 FROM "
              "CUPTI_ACTIVITY_KIND_RUNTIME AS r WHERE r.correlationId = k.correlationId AND "
              "k.globalPid = (r.globalTid & ~0xFFFFFF))") <= 1);
  CHECK(count("SELECT count(DISTINCT (globalTid >> 24) & 0xFFFFFF) FROM ThreadNames") ==
        static_cast<int64_t>(run.processes.size()));
  CHECK(count("SELECT count(*) FROM PROCESSES") == static_cast<int64_t>(run.processes.size()));
  CHECK(count("SELECT count(*) FROM TORCH_STEPS") == 12);
  CHECK(count("SELECT count(*) FROM StringIds AS s WHERE s.id IN (SELECT demangledName FROM "
              "CUPTI_ACTIVITY_KIND_KERNEL) AND s.value = 'gemm_small(float*, float*, float*, int)'") == 1);
  CHECK(count("SELECT count(*) FROM META_DATA_EXPORT WHERE name = 'EXPORT_SCHEMA_VERSION' AND value = '3.16.1'") == 1);
  sqlite3_close(db);
}

TEST_CASE("sqlite export: kernel short names and global thread ids as nsys gives them") {
  CHECK(kernel_short_name("gemm_small(float*, float*, float*, int)") == "gemm_small");
  CHECK(kernel_short_name("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
                          "at::detail::Array<char*, 1>>(int, at::native::FillFunctor<float>, "
                          "at::detail::Array<char*, 1>)") == "vectorized_elementwise_kernel");
  CHECK(kernel_short_name("ampere_sgemm_128x64_tn") == "ampere_sgemm_128x64_tn");
  CHECK(kernel_short_name("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>("
                          "cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4::Params)") == "Kernel2");
  CHECK(kernel_short_name("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)") ==
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  const int64_t g = sqlite_global_tid(5081, 5082);
  CHECK(((g >> 24) & 0xFFFFFF) == 5081);
  CHECK((g & 0xFFFFFF) == 5082);
  CHECK(sqlite_global_pid(5081) == (g & ~int64_t{0xFFFFFF}));
  CHECK(((g >> 48) & 0xFF) == 1);  // the VM id nsys gives a local run
}

}  // namespace torchprof
