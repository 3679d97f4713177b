// The Kineto traces the engine writes (formats/kineto_trace.h) of hand-built captures:
// the layout, relative timestamps, args and metadata, file names, gzip, External ids.
#include <doctest/doctest.h>

#include <bit>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "analysis/analysis.h"
#include "common/wire/wire.h"
#include "formats/json_writer.h"
#include "process_capture.h"
#include "trace_files.h"

namespace torchprof {

using test::Slots;
using wire::Kind;

namespace {

namespace fs = std::filesystem;
constexpr uint64_t kAt = 123'456'789;             // monotonic time of the first step
constexpr int64_t kT0 = test::kEpoch + kAt;       // its epoch time

// Process 4242 (/usr/bin/python3.11 on host "host", rank 1 when `ranked`): two steps
// given by marks "step" at 0 and 1000 (so ProfilerStep# ranges are synthesized), one per
// cycle. Thread 4242 (main): forward [10,500], backward [1100,1600], "bad\xff utf8"
// [1700,1800]; thread 4243 "loader": a range in domain "dom", category 3 "io", with a
// double payload, [100,350].
std::string sample_capture(bool ranked) {
  Slots main;
  main.str(1, "step").str(2, "forward").str(3, "backward").str(4, "bad\xff utf8").str(5, "tagged \"quoted\"\n");
  main.str(6, "dom").str(7, "io").str(8, "loader");
  main.rec(Kind::kDomain, 6, 0, 0, 0, 1).rec(Kind::kCategory, 7, 0, 3, 0, 1);
  main.rec(Kind::kThreadStart, 0, kAt, 1).rec(Kind::kMark, 1, kAt).push(2, kAt + 10).pop(kAt + 500);
  main.rec(Kind::kMark, 1, kAt + 1000).push(3, kAt + 1100).pop(kAt + 1600).push(4, kAt + 1700).pop(kAt + 1800);
  Slots loader;
  loader.rec(Kind::kThreadStart, 0, kAt + 100, 0).rec(Kind::kThreadName, 8, 0, 0, 0);
  loader.rec(Kind::kPush, 5, kAt + 100, wire::make_attr(3, wire::PayloadType::kDouble), std::bit_cast<uint64_t>(2.5), 1)
      .pop(kAt + 350, 1);
  std::vector<std::string> env;
  if (ranked) env.push_back("RANK=1");
  return test::Captures()
      .process(4242, env, "host", "/usr/bin/python3.11")
      .frame(4242, main)
      .frame(4243, loader)
      .save(ranked ? "trace_sample_ranked.tprof" : "trace_sample.tprof");
}

AnalysisOptions sample_options() {
  AnalysisOptions options;
  options.step_marker = "^step$";
  options.schedule = Schedule{.wait = 0, .warmup = 0, .active = 1};
  return options;
}

test::Traced sample_traces(bool ranked, const std::string& dir) {
  return test::traced(sample_capture(ranked), sample_options(), {test::trace_dir(dir), false});
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
  const test::Traced t = sample_traces(true, "trace_layout");
  const Process& p = t.run.processes.at(0);
  REQUIRE(cycle_count(p) == 2);
  REQUIRE(t.files.size() == 2);
  CHECK(t.files[0].cycle == 0);
  const std::string text = test::trace_text(t.files[0].path);
  CHECK(text.find("\"rank\": 1") != std::string::npos);  // HTA's regex
  auto trace = nlohmann::json::parse(text);
  CHECK(trace["schemaVersion"] == 1);
  CHECK(trace["deviceProperties"].empty());
  CHECK(trace["displayTimeUnit"] == "ms");
  CHECK(trace["distributedInfo"]["rank"] == 1);
  CHECK(trace["distributedInfo"]["world_size"] == 2);
  CHECK(trace["baseTimeNanoseconds"] == kT0);
  CHECK(trace["traceName"] == t.files[0].path);

  auto forward = events_named(trace, "forward");
  REQUIRE(forward.size() == 1);
  CHECK(forward[0]["ph"] == "X");
  CHECK(forward[0]["cat"] == "user_annotation");
  CHECK(forward[0]["pid"] == 4242);
  CHECK(forward[0]["tid"] == 4242);
  CHECK(forward[0]["ts"].get<double>() == doctest::Approx(0.010));
  CHECK(forward[0]["dur"].get<double>() == doctest::Approx(0.490));
  CHECK(forward[0]["args"]["External id"].is_number());
  CHECK(text.find("\"ts\": 0.010") != std::string::npos);

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
  const test::Traced t = sample_traces(false, "trace_no_rank");
  REQUIRE(t.files.size() == 2);
  auto trace = test::trace_json(t.files[1].path);
  CHECK_FALSE(trace.contains("distributedInfo"));
  CHECK(events_named(trace, "bad\xEF\xBF\xBD utf8").size() == 1);
  CHECK(events_named(trace, "backward").size() == 1);
  CHECK(events_named(trace, "ProfilerStep#1").size() == 1);
  CHECK(trace["baseTimeNanoseconds"] == kT0 + 1000);  // the cycle's own start
}

TEST_CASE("trace: one file per process per cycle, torch's names, gzip") {
  const std::string dir = test::trace_dir("traces");
  const test::Traced t = test::traced(sample_capture(true), sample_options(), {dir, /*gzip=*/false});
  REQUIRE(t.files.size() == 2);
  std::regex tb_name(R"(^(.*?)(\.\d+)?\.pt\.trace\.json(?:\.gz)?$)");
  for (const TraceFile& f : t.files) {
    std::string name = fs::path(f.path).filename().string();
    std::smatch m;
    REQUIRE(std::regex_match(name, m, tb_name));
    CHECK(m[1] == "host_4242");
    CHECK(f.worker == "host_4242");
    CHECK(f.pid == 4242);
    auto parsed = nlohmann::json::parse(test::trace_text(f.path), nullptr, /*allow_exceptions=*/false);
    CHECK(parsed.is_object());
  }
  // The cycle's end time names the file.
  CHECK(fs::path(t.files[0].path).filename() == "host_4242." + std::to_string(kT0 + 1000) + ".pt.trace.json");
  // No partial file is left behind.
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  CHECK(entries == 2);
  // A second write never overwrites the first.
  const test::Traced again = test::traced(sample_capture(true), sample_options(), {dir, false}, /*clear_dir=*/false);
  REQUIRE(again.files.size() == 2);
  CHECK(again.files[0].path != t.files[0].path);
  CHECK(fs::exists(t.files[0].path));

  // Gzipped, under another worker name (as pipeline/outputs.cpp names them once the run is read).
  KinetoTraces traces({dir, /*gzip=*/true});
  EngineOutputs outputs;
  outputs.traces = traces.factory();
  const Run run = analyse_capture_file(sample_capture(true), sample_options(), outputs);
  const std::vector<TraceFile> gz =
      traces.finish([&](const TraceFile&) { return trace_worker_name(run, run.processes.at(0), "custom"); });
  REQUIRE(gz.size() == 2);
  CHECK(gz[0].path.ends_with(".pt.trace.json.gz"));
  CHECK(fs::path(gz[0].path).filename().string().rfind("custom.", 0) == 0);
  CHECK(gz[0].worker == "custom");
  size_t forward = 0;
  for (const TraceFile& f : gz) forward += events_named(test::trace_json(f.path), "forward").size();
  CHECK(forward == 1);
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
  // 1200 annotations on one thread, one after another: every hundredth a mark.
  Slots s;
  s.str(1, "a").str(2, "b");
  constexpr int kRanges = 1200;
  for (int i = 0; i < kRanges; ++i) {
    const uint32_t name = i % 3 == 0 ? 1 : 2;
    const auto at = static_cast<uint64_t>(i) * 10;
    if (i % 100 == 50) {
      s.rec(Kind::kMark, name, at);
    } else {
      s.push(name, at).pop(at + 5);
    }
  }
  const test::Traced t = test::traced(test::Captures().process(77).frame(77, s).save("trace_ids.tprof"), {},
                                      {test::trace_dir("trace_ids"), false});
  REQUIRE(t.files.size() == 1);
  const nlohmann::json trace = test::trace_json(t.files[0].path);
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
