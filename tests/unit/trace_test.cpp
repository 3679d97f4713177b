// The Kineto traces the engine writes (formats/kineto_trace.h) of hand-built captures:
// the layout, relative timestamps, args and metadata, file names, gzip, External ids.
#include <doctest/doctest.h>

#include <bit>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "analysis/analysis.h"
#include "common/wire/wire.h"
#include "formats/fwdbwd.h"
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

namespace torchprof {

TEST_CASE("trace: fwdbwd flows link each forward op to its backward op, as Kineto pairs them") {
  // Thread 4242 (torch's thread 1): aten::matmul [10,100] { aten::mm [20,90] }, both of
  // sequence number 5; aten::add [110,120] (sequence 6, no backward); aten::empty [130,140]
  // (no sequence number). Thread 4243 (autograd's worker): evaluate_function [290,360]
  // { MmBackward0 [300,350] }, both of forward thread 1 and sequence 5; AddBackward0
  // [400,410] of forward thread 2 (no forward op on that thread); then, on thread 4242,
  // aten::mm again [500,520] (sequence 5) and its MmBackward0 [600,610] on thread 4242.
  auto ns = [](int64_t t) { return kAt + static_cast<uint64_t>(t); };
  Slots t1;
  t1.str(1, "aten::matmul").str(2, "aten::mm").str(3, "aten::add").str(4, "aten::empty").str(5, "torchprof.ops");
  t1.str(6, "MmBackward0");
  t1.rec(Kind::kDomain, 5, 0, 0, 0, 3).rec(Kind::kThreadStart, 0, ns(0), 1);
  t1.rec(Kind::kOpBegin, 1, ns(10), wire::op_word(5, 0, 0, 1), 11, 3)
      .rec(Kind::kOpBegin, 2, ns(20), wire::op_word(5, 0, 0, 1), 12, 3)
      .rec(Kind::kOpEnd, 0, ns(90), 12, 0, 3)
      .rec(Kind::kOpEnd, 0, ns(100), 11, 0, 3)
      .rec(Kind::kOpBegin, 3, ns(110), wire::op_word(6, 0, 0, 1), 13, 3)
      .rec(Kind::kOpEnd, 0, ns(120), 13, 0, 3)
      .rec(Kind::kOpBegin, 4, ns(130), wire::op_word(-1, 0, 0, 1), 14, 3)
      .rec(Kind::kOpEnd, 0, ns(140), 14, 0, 3)
      .rec(Kind::kOpBegin, 2, ns(500), wire::op_word(5, 0, 0, 1), 15, 3)
      .rec(Kind::kOpEnd, 0, ns(520), 15, 0, 3)
      .rec(Kind::kOpBegin, 6, ns(600), wire::op_word(5, 1, 1), 16, 3)
      .rec(Kind::kOpEnd, 0, ns(610), 16, 0, 3);
  Slots t2;
  t2.str(7, "autograd::engine::evaluate_function: MmBackward0").str(6, "MmBackward0").str(8, "AddBackward0");
  t2.str(5, "torchprof.ops");
  t2.rec(Kind::kDomain, 5, 0, 0, 0, 3).rec(Kind::kThreadStart, 0, ns(280), 0);
  t2.rec(Kind::kOpBegin, 7, ns(290), wire::op_word(5, 1, 1), 21, 3)
      .rec(Kind::kOpBegin, 6, ns(300), wire::op_word(5, 1, 1), 22, 3)
      .rec(Kind::kOpEnd, 0, ns(350), 22, 0, 3)
      .rec(Kind::kOpEnd, 0, ns(360), 21, 0, 3)
      .rec(Kind::kOpBegin, 8, ns(400), wire::op_word(6, 1, 2), 23, 3)
      .rec(Kind::kOpEnd, 0, ns(410), 23, 0, 3);
  const std::string capture = test::Captures().process(4242).frame(4242, t1).frame(4243, t2).save("fwdbwd.tprof");
  const test::Traced t = test::traced(capture, AnalysisOptions{}, {test::trace_dir("trace_fwdbwd"), false});
  REQUIRE(t.files.size() == 1);
  const nlohmann::json trace = test::trace_json(t.files[0].path);
  std::vector<nlohmann::json> starts, finishes;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("cat", "") != "fwdbwd") continue;
    CHECK(e["name"] == "fwdbwd");
    CHECK(e["pid"] == 4242);
    (e["ph"] == "s" ? starts : finishes).push_back(e);
  }
  REQUIRE(starts.size() == 2);
  REQUIRE(finishes.size() == 2);
  // The op a flow end sits on: the X event of that name on that thread starting there.
  auto at = [&](const std::string& name, uint32_t tid, size_t nth) {
    size_t seen = 0;
    for (const auto& e : trace["traceEvents"]) {
      if (e.value("ph", "") == "X" && e.value("name", "") == name && e["tid"] == tid && seen++ == nth) return e["ts"];
    }
    FAIL("no X event " << name);
    return nlohmann::json();
  };
  // Ids from 1 in the order of the backward ops' ends; the inner aten::mm (it started
  // later) holds the pair, not aten::matmul; the first MmBackward0 to end takes it, so
  // evaluate_function gets none; the second aten::mm is linked to the second MmBackward0.
  CHECK(starts[0]["id"] == 1);
  CHECK(finishes[0]["id"] == 1);
  CHECK(starts[0]["tid"] == 4242);
  CHECK(starts[0]["ts"] == at("aten::mm", 4242, 0));
  CHECK(finishes[0]["tid"] == 4243);
  CHECK(finishes[0]["ts"] == at("MmBackward0", 4243, 0));
  CHECK(finishes[0]["bp"] == "e");
  CHECK(starts[1]["id"] == 2);
  CHECK(starts[1]["ts"] == at("aten::mm", 4242, 1));
  CHECK(finishes[1]["tid"] == 4242);
  CHECK(finishes[1]["ts"] == at("MmBackward0", 4242, 0));
  // Forward ops keep Fwd thread id 0 in their args; backward ops carry theirs.
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("name", "") == "aten::mm") CHECK(e["args"]["Fwd thread id"] == 0);
    if (e.value("name", "") == "AddBackward0") CHECK(e["args"]["Fwd thread id"] == 2);
  }
}

TEST_CASE("fwdbwd: a forward op whose own thread was not recorded links nothing") {
  kineto::FwdBwdLinks links;
  links.add(1, 0, 10, wire::op_word(3, 0, 0));     // forward, own thread unknown
  links.add(2, 20, 30, wire::op_word(3, 1, 1));    // its backward
  CHECK(links.links().empty());
  links.clear();
  links.add(1, 0, 10, wire::op_word(3, 0, 0, 1));
  links.add(2, 20, 30, wire::op_word(3, 1, 1));
  links.add(2, 40, 50, wire::op_word(3, 1, 1));    // a second backward of the same pair: none
  const std::vector<kineto::FwdBwdLink> l = links.links();
  REQUIRE(l.size() == 1);
  CHECK(l[0].forward.tid == 1);
  CHECK(l[0].backward.ts_ns == 20);
}

}  // namespace torchprof
