#include <doctest/doctest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "analysis/analysis.h"
#include "formats/kineto_trace.h"
#include "common/wire/wire.h"

namespace torchprof {

namespace {

namespace fs = std::filesystem;
constexpr int64_t kT0 = 1'700'000'000'123'456'789;

struct StringSink : TraceSink {
  std::string text;
  void write(std::string_view bytes) override { text.append(bytes); }
};

Event range(const std::string& name, uint32_t tid, int64_t start, int64_t end) {
  Event e;
  e.name = name;
  e.tid = tid;
  e.start_ns = kT0 + start;
  e.end_ns = kT0 + end;
  return e;
}

// Two steps given by marks (so ProfilerStep# ranges are synthesized), one per cycle.
Run sample_run() {
  Run run;
  Process& p = run.processes.emplace_back();
  p.pid = 4242;
  p.exe = "/usr/bin/python3.11";
  p.worker = "host_4242";
  p.rank = 1;
  p.threads = {{.tid = 4242, .name = "", .is_main = true}, {.tid = 4243, .name = "loader"}};
  Event m0 = range("step", 4242, 0, 0);
  m0.kind = EventKind::kMark;
  Event m1 = range("step", 4242, 1000, 1000);
  m1.kind = EventKind::kMark;
  Event tagged = range("tagged \"quoted\"\n", 4243, 100, 350);
  tagged.set_domain("dom");
  tagged.set_category(3, "io");
  tagged.payload_type = static_cast<uint8_t>(wire::PayloadType::kDouble);
  tagged.payload = std::bit_cast<uint64_t>(2.5);
  p.events_list = {m0, range("forward", 4242, 10, 500), tagged, m1,
                   range("backward", 4242, 1100, 1600), range("bad\xff utf8", 4242, 1700, 1800)};
  AnalysisOptions options;
  options.step_marker = "^step$";
  options.schedule = Schedule{.wait = 0, .warmup = 0, .active = 1};
  analyse(run, options);
  return run;
}

nlohmann::json events_named(const nlohmann::json& trace, const std::string& name) {
  nlohmann::json found = nlohmann::json::array();
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("name", "") == name) found.push_back(e);
  }
  return found;
}

}  // namespace

TEST_CASE("trace: Kineto layout, relative timestamps, args, metadata") {
  Run run = sample_run();
  const Process& p = run.processes[0];
  REQUIRE(cycle_count(p) == 2);
  StringSink sink;
  render_kineto_trace(run, p, 0, "t0", sink);
  CHECK(sink.text.find("\"rank\": 1") != std::string::npos);  // HTA's regex
  auto trace = nlohmann::json::parse(sink.text);
  CHECK(trace["schemaVersion"] == 1);
  CHECK(trace["deviceProperties"].empty());
  CHECK(trace["displayTimeUnit"] == "ms");
  CHECK(trace["distributedInfo"]["rank"] == 1);
  CHECK(trace["distributedInfo"]["world_size"] == 2);
  CHECK(trace["baseTimeNanoseconds"] == kT0);
  CHECK(trace["traceName"] == "t0");

  auto forward = events_named(trace, "forward");
  REQUIRE(forward.size() == 1);
  CHECK(forward[0]["ph"] == "X");
  CHECK(forward[0]["cat"] == "user_annotation");
  CHECK(forward[0]["pid"] == 4242);
  CHECK(forward[0]["tid"] == 4242);
  CHECK(forward[0]["ts"].get<double>() == doctest::Approx(0.010));
  CHECK(forward[0]["dur"].get<double>() == doctest::Approx(0.490));
  CHECK(forward[0]["args"]["External id"].is_number());
  CHECK(sink.text.find("\"ts\": 0.010") != std::string::npos);

  auto tagged = events_named(trace, "tagged \"quoted\"\n");
  REQUIRE(tagged.size() == 1);
  CHECK(tagged[0]["tid"] == 4243);
  CHECK(tagged[0]["args"]["domain"] == "dom");
  CHECK(tagged[0]["args"]["category"] == "io");
  CHECK(tagged[0]["args"]["payload"] == 2.5);

  auto marks = events_named(trace, "step");
  REQUIRE(marks.size() == 1);
  CHECK(marks[0]["ph"] == "i");
  CHECK(marks[0]["s"] == "t");
  auto step = events_named(trace, "ProfilerStep#0");
  REQUIRE(step.size() == 1);
  CHECK(step[0]["ph"] == "X");
  CHECK(step[0]["dur"].get<double>() == doctest::Approx(1.0));
  CHECK(events_named(trace, "backward").empty());  // the other cycle's
  CHECK(events_named(trace, "ProfilerStep#1").empty());

  auto names = events_named(trace, "thread_name");
  REQUIRE(names.size() == 2);
  CHECK(names[0]["args"]["name"] == "thread 4242 (python3.11)");
  CHECK(names[1]["args"]["name"] == "loader");
  auto pname = events_named(trace, "process_name");
  REQUIRE(pname.size() == 1);
  CHECK(pname[0]["args"]["name"] == "python3.11");
  CHECK(events_named(trace, "process_labels").size() == 1);
  CHECK(events_named(trace, "process_sort_index").size() == 2);  // process + "Spans"
  CHECK(events_named(trace, "PyTorch Profiler (0)").size() == 1);
}

TEST_CASE("trace: invalid UTF-8 still yields valid JSON; no rank, no distributedInfo") {
  Run run = sample_run();
  run.processes[0].rank.reset();
  StringSink sink;
  render_kineto_trace(run, run.processes[0], 1, "t1", sink);
  auto trace = nlohmann::json::parse(sink.text);
  CHECK_FALSE(trace.contains("distributedInfo"));
  CHECK(events_named(trace, "bad\xEF\xBF\xBD utf8").size() == 1);
  CHECK(events_named(trace, "backward").size() == 1);
}

TEST_CASE("trace: one file per process per cycle, torch's names, gzip") {
  Run run = sample_run();
  fs::path dir = fs::temp_directory_path() / "torchprof_unit" / "traces";
  fs::remove_all(dir);
  auto files = write_kineto_traces(run, {dir.string(), /*gzip=*/false, ""});
  REQUIRE(files.size() == 2);
  std::regex tb_name(R"(^(.*?)(\.\d+)?\.pt\.trace\.json(?:\.gz)?$)");
  for (const TraceFile& f : files) {
    std::string name = fs::path(f.path).filename().string();
    std::smatch m;
    REQUIRE(std::regex_match(name, m, tb_name));
    CHECK(m[1] == "host_4242");
    std::ifstream in(f.path);
    auto parsed = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    CHECK(parsed.is_object());
  }
  // The cycle's end time names the file.
  CHECK(fs::path(files[0].path).filename() ==
        "host_4242." + std::to_string(kT0 + 1000) + ".pt.trace.json");
  // A second write never overwrites the first.
  auto again = write_kineto_traces(run, {dir.string(), false, ""});
  CHECK(again[0].path != files[0].path);

  auto gz = write_kineto_traces(run, {dir.string(), /*gzip=*/true, "custom"});
  REQUIRE(gz.size() == 2);
  CHECK(gz[0].path.ends_with(".pt.trace.json.gz"));
  CHECK(fs::path(gz[0].path).filename().string().rfind("custom.", 0) == 0);
  gzFile in = gzopen(gz[0].path.c_str(), "rb");
  REQUIRE(in);
  std::string text;
  char buf[4096];
  for (int n; (n = gzread(in, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  gzclose(in);
  auto trace = nlohmann::json::parse(text);
  CHECK(events_named(trace, "forward").size() == 1);
}

TEST_CASE("json: DecimalCounter counts up as std::to_string writes") {
  for (uint64_t start : {uint64_t{0}, uint64_t{7}, uint64_t{99'990}, uint64_t{999'999'990},
                         uint64_t{9'999'999'999'999'999'990u}, UINT64_MAX - 20}) {
    CAPTURE(start);
    json::DecimalCounter counter(start);
    for (uint64_t v = start;; ++v) {
      REQUIRE(counter.view() == std::to_string(v));
      if (v == start + 20) break;
      counter.increment();
    }
  }
  json::DecimalCounter counter;
  for (uint64_t v = 0; v <= 120'000; ++v, counter.increment()) {
    if (counter.view() != std::to_string(v)) FAIL("counter " << counter.view() << " at " << v);
  }
}

TEST_CASE("trace: External ids and Ev Idx count every annotation, across digit boundaries") {
  Run run;
  Process& p = run.processes.emplace_back();
  p.pid = 77;
  p.worker = "host_77";
  p.threads = {{.tid = 77, .name = "", .is_main = true}};
  constexpr int kRanges = 1200;
  for (int i = 0; i < kRanges; ++i) {
    Event e = range(i % 3 == 0 ? "a" : "b", 77, i * 10, i * 10 + 5);
    if (i % 100 == 50) e.kind = EventKind::kMark;
    p.events_list.push_back(e);
  }
  analyse(run, AnalysisOptions{});
  StringSink sink;
  render_kineto_trace(run, p, 0, "t", sink);
  const nlohmann::json trace = nlohmann::json::parse(sink.text);
  uint64_t seen = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("cat", "") != "user_annotation") continue;
    CAPTURE(seen);
    REQUIRE(e["args"]["External id"] == seen + 1);
    REQUIRE(e["args"]["Ev Idx"] == seen);
    ++seen;
  }
  CHECK(seen == kRanges);
}

}  // namespace torchprof
