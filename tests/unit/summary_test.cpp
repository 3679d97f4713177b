#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis_capture_builder.h"
#include "analysis/engine.h"
#include "formats/summary_json.h"
#include "pipeline/outputs.h"
#include "process_capture.h"

namespace torchprof {

namespace {

namespace fs = std::filesystem;
using capture::ChunkType;
using wire::Kind;

// A process with three ProfilerStep# ranges, each holding one "work" range.
std::string stepped_capture(const std::string& name, bool cut_tail) {
  test::CaptureBuilder b;
  b.chunk(ChunkType::kRunInfo, 0, R"({"command":["./app"],"host":"box"})");
  b.chunk(ChunkType::kHello, 1,
          test::hello_body(77, 1, 0, 1'700'000'000'000'000'000, "/opt/app", {"./app"}, "box", {}));
  test::Slots s;
  s.str(1, "ProfilerStep#0").str(2, "ProfilerStep#1").str(3, "ProfilerStep#2").str(4, "work");
  for (uint32_t k = 0; k < 3; ++k) {
    uint64_t t = 1000 + k * 1000;
    s.push(1 + k, t).push(4, t + 100).pop(t + 600).pop(t + 900);
  }
  s.rec(Kind::kDropped, 0, 0, 2, 20);
  b.chunk(ChunkType::kFrame, 1, test::frame_body(77, 0, s));
  b.chunk(ChunkType::kBye, 1, test::bye_body(wire::ExitKind::kExit, 3, 20, 2, 5000));
  b.chunk(ChunkType::kHello, 2,
          test::hello_body(78, 77, 0, 1'700'000'000'000'000'000, "/bin/sh", {"sh"}, "box", {}));
  b.chunk(ChunkType::kRunEnd, 0, R"({"exit_code":3})");
  if (cut_tail) b.bytes.resize(b.bytes.size() - 5);
  return b.save(name);
}

std::string read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("summary: schema torchprof.summary/1 fields") {
  // Process 1 on host h, killed by signal 9, with one step range [10, 20].
  test::Slots s;
  s.str(1, "ProfilerStep#0").push(1, 10).pop(20);
  const std::string path = test::Captures()
                               .run_info(R"({"command":["python","train.py"],"host":"h"})")
                               .process(1)
                               .frame(1, s)
                               .bye(30, wire::ExitKind::kSignal, 9)
                               .save("summary_fields.tprof");
  const Run run = analyse_capture_file(path, AnalysisOptions{});
  auto j = nlohmann::json::parse(render_summary_json(run, {"/o/traces/h_1.20.pt.trace.json"}, "/o"));
  CHECK(j["schema"] == "torchprof.summary/1");
  CHECK(j["command"] == nlohmann::json({"python", "train.py"}));
  CHECK(j["exit_code"] == 137);  // no run end: the first process stands for the target
  CHECK(j["dropped_events"] == 0);
  CHECK(j["truncated"] == false);
  CHECK(j["processes_without_events"] == 0);
  CHECK(j["warnings"].is_array());
  const auto& proc = j["processes"][0];
  CHECK(proc["pid"] == 1);
  CHECK(proc["rank"].is_null());
  CHECK(proc["exit_code"] == 137);
  CHECK(proc["exit_signal"] == 9);
  CHECK(proc["events"] == 1);
  CHECK(proc["steps"] == 1);
  CHECK(proc["threads"].is_array());
  const auto& step = j["steps"][0];
  CHECK(step["name"] == "ProfilerStep#0");
  CHECK(step["start_ns"] == test::kEpoch + 10);
  CHECK(step["dur_ns"] == 10);
  CHECK(step["action"] == "record_and_save");
  CHECK(j["ops"][0]["name"] == "ProfilerStep*");
  CHECK(j["ops"][0]["kind"] == "nvtx");
  CHECK(j["ops"][0]["input_shapes"].is_null());
  // A CPU-only run keeps the GPU fields, empty.
  CHECK(j["gpu"]["devices"] == nlohmann::json::array());
  CHECK(j["gpu"]["busy_ns"] == 0);
  CHECK(j["gpu"]["idle_ns"] == 0);
  CHECK(j["memory"]["peak_bytes_per_device"] == nlohmann::json::object());
  CHECK(j["memory"]["allocations"] == 0);
  CHECK(j["cupti_dropped"] == 0);
  CHECK(j["traces"][0] == "traces/h_1.20.pt.trace.json");
}

TEST_CASE("outputs: capture → table.txt, summary.json, traces; schedule applied") {
  fs::path out = fs::temp_directory_path() / "torchprof_unit" / "outputs";
  fs::remove_all(out);
  OutputOptions options;
  options.out_dir = out.string();
  options.schedule = "wait=1,warmup=0,active=2";
  std::ostringstream printed;
  OutputResult result = write_outputs(stepped_capture("stepped.tprof", false), options, printed);
  CHECK(result.target_exit_code == 3);
  CHECK_FALSE(result.truncated);
  CHECK(printed.str().find("Self CPU time total: 1.800us") != std::string::npos);
  CHECK(printed.str().find("2 events lost") != std::string::npos);
  CHECK(printed.str().find("warmup=0") != std::string::npos);
  CHECK(read(out / "table.txt") + "torchprof: 2 events lost\n" ==
        printed.str().substr(0, printed.str().find("torchprof: warning")));

  auto j = nlohmann::json::parse(read(out / "summary.json"));
  CHECK(j["exit_code"] == 3);
  CHECK(j["dropped_events"] == 2);
  CHECK(j["processes_without_events"] == 1);
  REQUIRE(j["steps"].size() == 3);
  CHECK(j["steps"][0]["action"] == "none");
  CHECK(j["steps"][2]["action"] == "record_and_save");
  CHECK(j["ops"].size() == 2);
  for (const auto& op : j["ops"]) CHECK(op["calls"] == 2);
  REQUIRE(j["traces"].size() == 1);
  CHECK(fs::exists(out / j["traces"][0].get<std::string>()));
}

TEST_CASE("outputs: truncated capture, formats, bad options") {
  fs::path out = fs::temp_directory_path() / "torchprof_unit" / "outputs_cut";
  fs::remove_all(out);
  OutputOptions options;
  options.out_dir = out.string();
  options.format = "csv";
  std::ostringstream printed;
  OutputResult result = write_outputs(stepped_capture("cut.tprof", true), options, printed);
  CHECK(result.truncated);
  CHECK(printed.str().rfind("Name,Self CPU %", 0) == 0);
  CHECK(printed.str().find("capture truncated at byte") != std::string::npos);

  options.format = "yaml";
  CHECK_THROWS_AS(write_outputs(stepped_capture("s.tprof", false), options, printed), InputError);
  options.format = "table";
  options.schedule = "active=0";
  CHECK_THROWS_AS(write_outputs(stepped_capture("s.tprof", false), options, printed), InputError);
  options.schedule = "";
  options.sort = "nope";
  CHECK_THROWS_AS(write_outputs(stepped_capture("s.tprof", false), options, printed), InputError);
  options.sort = "";
  options.quiet = true;
  options.write_files = false;
  std::ostringstream silent;
  write_outputs(stepped_capture("s.tprof", false), options, silent);
  CHECK(silent.str().empty());
}

}  // namespace torchprof
