// PyTorch op ranges: emit_nvtx's messages (and the bootstrap's, same format) parsed
// into cpu_op rows, grouped by shapes and stack, and shown as torch shows them.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include <algorithm>
#include <map>
#include <tuple>

#include "analysis/analysis.h"
#include "analysis/op_message.h"
#include "engine_test_util.h"
#include "formats/folded_stacks.h"
#include "formats/kineto_trace.h"
#include "formats/table.h"
#include "process_capture.h"
#include "trace_files.h"

namespace torchprof {
namespace {

OpInfo parsed(std::string_view message, bool require_fields = true) {
  std::optional<OpInfo> op = parse_op_message(message, require_fields);
  REQUIRE(op.has_value());
  return *op;
}

struct Range {
  std::string name;
  uint64_t start = 0;
  uint64_t end = 0;
  std::string domain;  // "" NVTX's default domain
};

Range range(const std::string& name, uint64_t start, uint64_t end, const std::string& domain = "") {
  return {name, start, end, domain};
}

// A capture of process 42 (worker host_42) whose thread 1 pushes and pops `ranges`
// (disjoint or nested) in time order, each name a string and each domain named once.
std::string capture_of(const std::vector<Range>& ranges, const std::string& file) {
  test::Slots s;
  std::map<std::string, uint32_t> names;
  std::map<std::string, uint16_t> domains;
  for (const Range& r : ranges) {
    if (names.emplace(r.name, static_cast<uint32_t>(names.size() + 1)).second) s.str(names[r.name], r.name);
    if (!r.domain.empty() && domains.emplace(r.domain, static_cast<uint16_t>(domains.size() + 1)).second) {
      const auto id = static_cast<uint32_t>(1000 + domains.size());
      s.str(id, r.domain).rec(wire::Kind::kDomain, id, 0, 0, 0, domains[r.domain]);
    }
  }
  // (time, pop before push, pushes: the longer first, pops: the later start first, index)
  std::vector<std::tuple<uint64_t, int, int64_t, size_t>> order;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const Range& r = ranges[i];
    order.emplace_back(r.start, 1, -static_cast<int64_t>(r.end), i);
    order.emplace_back(r.end, 0, -static_cast<int64_t>(r.start), i);
  }
  std::sort(order.begin(), order.end());
  for (const auto& [ts, is_push, key, i] : order) {
    const Range& r = ranges[i];
    const uint16_t domain = r.domain.empty() ? 0 : domains[r.domain];
    if (is_push) {
      s.push(names[r.name], ts, domain);
    } else {
      s.pop(ts, domain);
    }
  }
  return test::Captures().process(42, {}, "host").frame(1, s).save(file);
}

Run run_of(const std::vector<Range>& ranges, const AnalysisOptions& options = {},
           std::map<int, test::Collected>* collected = nullptr) {
  return test::analyse(capture_of(ranges, "op_ranges.tprof"), options, collected);
}

// The event the engine handed on that starts at monotonic `start`.
const Event& at(const test::Collected& c, uint64_t start) {
  for (const Event& e : c.events) {
    if (e.start_ns == test::kEpoch + static_cast<int64_t>(start)) return e;
  }
  FAIL("no event at " << start);
  static Event none;
  return none;
}

const OpStats* row(const Run& run, const std::string& name, const std::string& shapes = "") {
  for (const OpStats& op : run.ops) {
    if (op.name == name && op.input_shapes == shapes) return &op;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("emit_nvtx messages of torch 1.x and 2.x parse into name, seq, op_id and sizes") {
  OpInfo op = parsed("aten::addmm, seq = 3, op_id = 7, sizes = [[2, 3], [3, 4], []], "
                     "input_op_ids = [(5,0), (6,0)]");
  CHECK(op.name == "aten::addmm");
  CHECK(op.sequence == 3);
  CHECK(op.op_id == 7);
  CHECK(op.input_shapes == "[[2, 3], [3, 4], []]");
  CHECK(op.stack.empty());

  op = parsed("aten::mul, seq = 12");  // torch 1.x without record_shapes
  CHECK(op.name == "aten::mul");
  CHECK(op.sequence == 12);
  CHECK(op.input_shapes.empty());

  op = parsed("aten::empty, op_id = 9");  // no autograd sequence number
  CHECK(op.sequence == -1);
  CHECK(op.op_id == 9);

  // Names with ':' and spaces, and a list of tensor lists (newer torch).
  op = parsed("autograd::engine::evaluate_function: AddmmBackward0, seq = 0, op_id = 30, "
              "sizes = [[[2, 3], [4]], [5], []]");
  CHECK(op.name == "autograd::engine::evaluate_function: AddmmBackward0");
  CHECK(op.input_shapes == "[[[2, 3], [4]], [5], []]");
  CHECK(parsed("aten::cat, sizes = []").input_shapes == "[]");
  CHECK(parsed("aten::zeros, sizes = [[-1, 0]]").input_shapes == "[[-1, 0]]");

  // --with-flops: torch's count, between the sizes and the stack.
  op = parsed("aten::mm, sizes = [[4, 5], [5, 6]], flops = 240, stack = f.py(3): g");
  CHECK(op.flops == 240);
  CHECK(op.input_shapes == "[[4, 5], [5, 6]]");
  CHECK(op.stack == std::vector<std::string>{"f.py(3): g"});
  CHECK(parsed("aten::mm, sizes = []").flops == 0);
  CHECK_FALSE(parse_op_message("aten::mm, flops = -3").has_value());
  CHECK_FALSE(parse_op_message("aten::mm, flops = 1, flops = 2").has_value());
}

// The variants nvtx_observer.cpp's enterNVTX writes through util.cpp's getNvtxStr (torch
// 1.13 to 2.11): op_id = fn.handle() on every range, record_function's included (their
// seq is -1, so no seq); with record_shapes, list inputs flattened into sizes
// (inputSizes(fn, true)) and one input_op_ids pair per input, "(0,-1)" for an input no
// op produced (a scalar, None, an undefined tensor).
TEST_CASE("emit_nvtx's format variants: record_function ranges, unproduced inputs, flattened lists") {
  OpInfo op = parsed("aten::add, seq = 41, op_id = 1207, sizes = [[16, 4], [16, 4], []], "
                     "input_op_ids = [(1205,0), (1206,0), (0,-1)]");
  CHECK(op.name == "aten::add");
  CHECK(op.sequence == 41);
  CHECK(op.op_id == 1207);
  CHECK(op.input_shapes == "[[16, 4], [16, 4], []]");

  // A record_function range (DataLoader's, the optimizer's) under emit_nvtx.
  op = parsed("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__, op_id = 88");
  CHECK(op.name == "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
  CHECK(op.sequence == -1);
  CHECK(op.op_id == 88);
  op = parsed("Optimizer.step#SGD.step, op_id = 90, sizes = [[]], input_op_ids = [(0,-1)]");
  CHECK(op.name == "Optimizer.step#SGD.step");
  CHECK(op.input_shapes == "[[]]");

  // aten::cat of a tensor list: the list's tensors flattened, then the dim.
  op = parsed("aten::cat, seq = 7, op_id = 55, sizes = [[2, 3], [4, 3], []], "
              "input_op_ids = [(50,0), (51,0), (0,-1)]");
  CHECK(op.input_shapes == "[[2, 3], [4, 3], []]");
  CHECK(parsed("aten::empty, op_id = 3, sizes = [], input_op_ids = []").input_shapes == "[]");

  const char* malformed[] = {
      "aten::add, op_id = 1, input_op_ids = [(-1,0)]",   // op ids are unsigned
      "aten::add, op_id = 1, input_op_ids = [(1,-)]",    // sign without digits
      "aten::add, op_id = 1, input_op_ids = [(1,0),(2,0)]",  // not torch's separator
      "aten::add, op_id = 1, input_op_ids = [(1,0), ]",  // empty item
      "aten::add, op_id = 1, input_op_ids = [(1)]",      // no output number
      "aten::add, op_id = 1, input_op_ids = [1,0]",      // no parentheses
  };
  for (const char* m : malformed) {
    CAPTURE(m);
    CHECK_FALSE(parse_op_message(m).has_value());
  }
}

TEST_CASE("torchprof's stack field: frames innermost first, to the end of the message") {
  OpInfo op = parsed("aten::addmm, sizes = [[4], [8, 3]], stack = /w/train.py(21): forward; "
                     "/w/train.py(40): <module>");
  CHECK(op.name == "aten::addmm");
  CHECK(op.input_shapes == "[[4], [8, 3]]");
  REQUIRE(op.stack.size() == 2);
  CHECK(op.stack[0] == "/w/train.py(21): forward");
  CHECK(op.stack[1] == "/w/train.py(40): <module>");
  // A name with ", " in it: the first known field starts the fields.
  op = parsed("my, range, stack = a.py(1): f");
  CHECK(op.name == "my, range");
  CHECK(op.stack == std::vector<std::string>{"a.py(1): f"});
}

TEST_CASE("torchprof's types field: each input's dtype, kept as the JSON list torch writes") {
  OpInfo op = parsed("aten::add, sizes = [[2, 3], [], []], types = [\"float\", \"Scalar\", \"\"], flops = 6");
  CHECK(op.input_shapes == "[[2, 3], [], []]");
  CHECK(op.input_types == "[\"float\", \"Scalar\", \"\"]");
  CHECK(op.flops == 6);
  CHECK(parsed("aten::ones, types = []").input_types == "[]");
  CHECK(parsed("aten::mm, types = [\"long int\", \"c10::Half\"]").input_types == "[\"long int\", \"c10::Half\"]");
  const char* malformed[] = {
      "aten::mm, types = [float]",              // not quoted
      "aten::mm, types = [\"float\"",           // never closed
      "aten::mm, types = [\"float\",\"int\"]",  // not torch's separator
      "aten::mm, types = [\"a\\\"b\"]",          // a backslash in a name
      "aten::mm, types = [\"float]",            // an unterminated name
  };
  for (const char* m : malformed) {
    CAPTURE(m);
    CHECK_FALSE(parse_op_message(m).has_value());
  }
}

TEST_CASE("plain names and malformed messages are not ops; nothing throws") {
  CHECK_FALSE(parse_op_message("forward").has_value());
  CHECK_FALSE(parse_op_message("").has_value());
  CHECK_FALSE(parse_op_message("load, batch 3").has_value());
  // Without required fields (the ops domain), a plain name is an op.
  CHECK(parsed("aten::relu", /*require_fields=*/false).name == "aten::relu");
  const char* malformed[] = {
      ", seq = 1",                                  // empty name
      "aten::mm, seq = ",                           // no number
      "aten::mm, seq = 1x",                         // trailing garbage
      "aten::mm, seq = 99999999999999999999999",    // out of range
      "aten::mm, seq = 1, seq = 2",                 // repeated key
      "aten::mm, seq = 1, color = 3",               // unknown key after a known one
      "aten::mm, seq = 1,",                         // dangling separator
      "aten::mm, op_id = -4",                       // negative id
      "aten::mm, sizes = [[2, 3], [3, 4]",          // never closed
      "aten::mm, sizes = [[2, 3]]]",                // closed once too often
      "aten::mm, sizes = [[2 3]]",                  // no separator
      "aten::mm, sizes = [[2,3]]",                  // not torch's separator
      "aten::mm, sizes = [x]",                      // not a number
      "aten::mm, sizes = [[-]]",                    // sign without digits
      "aten::mm, sizes = [[[[[[[[[[1]]]]]]]]]]",    // deeper than torch writes
      "aten::mm, sizes = [[1], ]",                  // empty item
      "aten::mm, input_op_ids = [(1,0)",            // never closed
      "aten::mm, input_op_ids = [x]",               // not ids
      "aten::mm, sizes = [[1]] trailing",           // text after a field
  };
  for (const char* m : malformed) {
    CAPTURE(m);
    CHECK_FALSE(parse_op_message(m).has_value());
    CHECK_FALSE(parse_op_message(m, /*require_fields=*/false).has_value());
  }
  // Every prefix of a valid message parses or is refused, without crashing.
  const std::string full = "aten::addmm, seq = 3, op_id = 7, sizes = [[2, 3], [3, 4], []], "
                           "input_op_ids = [(5,0)], stack = a.py(1): f; b.py(2): g";
  for (size_t n = 0; n <= full.size(); ++n) (void)parse_op_message(std::string_view(full).substr(0, n));
  // Binary garbage.
  std::string garbage = "x, sizes = [";
  for (int c = 0; c < 256; ++c) garbage += static_cast<char>(c);
  CHECK_FALSE(parse_op_message(garbage).has_value());
}

TEST_CASE("op ranges become cpu_op rows named after the op; other ranges keep their names") {
  std::map<int, test::Collected> c;
  const Run run = run_of({
      range("step", 0, 10'000),
      range("aten::addmm, seq = 1, op_id = 1", 100, 1'100),
      range("aten::addmm, seq = 2, op_id = 2", 2'000, 3'000),
      range("aten::mm", 4'000, 4'500, std::string(kPytorchOpsDomain)),  // the bootstrap's, no fields
      range("aten::mm, seq = 4", 5'000, 5'500, "my.domain"),          // another domain: a plain range
      range("load, seq = ", 6'000, 6'100),                            // malformed: the raw name
  }, {}, &c);
  const test::Collected& p = c[42];
  REQUIRE(at(p, 100).op() != nullptr);
  CHECK(at(p, 100).name == "aten::addmm");
  CHECK(at(p, 100).op()->sequence == 1);
  CHECK(at(p, 100).op()->op_id == 1);
  CHECK(at(p, 2'000).op()->sequence == 2);
  CHECK(at(p, 4'000).op() != nullptr);
  CHECK(at(p, 4'000).name == "aten::mm");
  CHECK(at(p, 5'000).op() == nullptr);
  CHECK(at(p, 5'000).domain() == "my.domain");
  CHECK(at(p, 6'000).op() == nullptr);
  CHECK(at(p, 6'000).name == "load, seq = ");
  CHECK(at(p, 0).self_ns == 10'000 - 2'000 - 500 - 500 - 100);

  const OpStats* addmm = row(run, "aten::addmm");
  REQUIRE(addmm != nullptr);
  CHECK(addmm->kind == "cpu_op");
  CHECK(addmm->calls == 2);
  CHECK(addmm->cpu_total_ns == 2'000);
  REQUIRE(row(run, "aten::mm") != nullptr);
  CHECK(row(run, "aten::mm")->kind == "cpu_op");
  CHECK(row(run, "aten::mm, seq = 4") != nullptr);
  CHECK(row(run, "step")->kind == "nvtx");
  CHECK(row(run, "step")->self_cpu_ns == 10'000 - 2'000 - 500 - 500 - 100);
}

TEST_CASE("group by input shape: one row per (op, shapes), an Input Shapes column") {
  auto events = [] {
    return std::vector<Range>{
        range("aten::addmm, sizes = [[4], [8, 3], [3, 4], [], []]", 0, 1'000),
        range("aten::addmm, sizes = [[4], [8, 3], [3, 4], [], []]", 2'000, 3'000),
        range("aten::addmm, sizes = [[4], [16, 3], [3, 4], [], []]", 4'000, 7'000),
        range("outer", 8'000, 9'000),
    };
  };
  const Run plain = run_of(events());
  REQUIRE(row(plain, "aten::addmm") != nullptr);
  CHECK(row(plain, "aten::addmm")->calls == 3);
  CHECK(make_table_rows(plain.ops, false, {}).shapes_width == 0);

  AnalysisOptions options;
  options.group_by_input_shape = true;
  const Run grouped = run_of(events(), options);
  const OpStats* small = row(grouped, "aten::addmm", "[[4], [8, 3], [3, 4], [], []]");
  const OpStats* big = row(grouped, "aten::addmm", "[[4], [16, 3], [3, 4], [], []]");
  REQUIRE(small != nullptr);
  REQUIRE(big != nullptr);
  CHECK(small->calls == 2);
  CHECK(big->calls == 1);

  const TableRows rows = make_table_rows(grouped.ops, false, {"cpu_time_total", 0});
  CHECK(rows.shapes_width == std::string("[[4], [16, 3], [3, 4], [], []]").size() + 4);
  const std::string table = render_table(rows);
  std::istringstream lines(table);
  std::string rule, header, line;
  std::getline(lines, rule);
  std::getline(lines, header);
  CHECK(header.ends_with("# of Calls  " + std::string(rows.shapes_width - 12, ' ') + "Input Shapes  "));
  CHECK(rule.size() == header.size());
  std::getline(lines, line);  // rule
  std::getline(lines, line);  // the 3 µs row first (cpu_time_total)
  CHECK(line.ends_with("  1      [[4], [16, 3], [3, 4], [], []]  "));
  CHECK(line.size() == header.size());
  CHECK(table.find("[]  \n") != std::string::npos);  // "outer" has no shapes: torch prints []
}

TEST_CASE("with stacks: rows keyed by their first frames, a left-aligned Source Location column") {
  const std::string fwd = "/w/train.py(21): forward; /w/train.py(40): <module>";
  const Run run = run_of({
      range("aten::addmm, stack = " + fwd, 0, 3'000),
      range("aten::addmm, stack = " + fwd, 4'000, 7'000),
      range("aten::addmm, stack = /w/eval.py(8): <module>", 8'000, 9'000),
      range("aten::relu", 9'500, 9'600, std::string(kPytorchOpsDomain)),
  });
  int addmm_rows = 0;
  for (const OpStats& op : run.ops) addmm_rows += op.name == "aten::addmm";
  CHECK(addmm_rows == 2);
  const TableRows rows = make_table_rows(run.ops, false, {"cpu_time_total", 0});
  REQUIRE(rows.rows[0].stack.size() == 2);
  CHECK(rows.rows[0].calls == 2);
  const size_t width = std::string("/w/train.py(40): <module>").size() + 4;  // the longest frame
  CHECK(rows.source_width == width);
  auto padded = [&](const std::string& text) { return text + std::string(width - text.size() + 2, ' '); };
  const std::string table = render_table(rows);
  std::istringstream lines(table);
  std::string rule, header, first, second, blank;
  std::getline(lines, rule);
  std::getline(lines, header);
  std::getline(lines, rule);
  std::getline(lines, first);
  std::getline(lines, second);
  std::getline(lines, blank);
  CHECK(header.ends_with("# of Calls  " + padded("Source Location")));
  CHECK(first.ends_with("  2  " + padded("/w/train.py(21): forward")));
  CHECK(second.ends_with(std::string(12, ' ') + "  " + padded("/w/train.py(40): <module>")));
  CHECK(second.find_first_not_of(' ') == header.size() - rows.source_width - 2);
  CHECK(blank == std::string(header.size(), ' '));
  CHECK(first.size() == header.size());
}

TEST_CASE("long frames are cut at the front as torch's trim_path does") {
  std::string frame = "/very/long/path/" + std::string(100, 'd') + "/train.py(21): forward";
  const Run run = run_of({range("aten::mm, stack = " + frame, 0, 1'000)});
  const TableRows rows = make_table_rows(run.ops, false, {});
  CHECK(rows.source_width == 75);
  const std::string table = render_table(rows);
  const std::string tail = frame.substr(frame.size() - 72);
  CHECK(table.find("..." + tail + "  ") != std::string::npos);
}

TEST_CASE("folded stacks: outermost frame first, the op last, self time in whole microseconds") {
  const Run run = run_of({
      range("aten::addmm, stack = /w/t.py(21): forward; /w/t.py(40): <module>", 0, 3'400),
      range("aten::addmm, stack = /w/t.py(21): forward; /w/t.py(40): <module>", 4'000, 6'000),
      range("aten::t, stack = /w/t.py(21): forward; /w/t.py(40): <module>", 6'000, 6'500),  // < 1 µs
      range("aten::relu", 7'000, 9'000, std::string(kPytorchOpsDomain)),                 // no stack
  });
  CHECK(render_folded_stacks(run) == "/w/t.py(40): <module>;/w/t.py(21): forward;aten::addmm 5\n");
  const Run none = run_of({range("aten::relu", 0, 9'000, std::string(kPytorchOpsDomain))});
  CHECK(render_folded_stacks(none).empty());
}

TEST_CASE("op ranges are cpu_op events in the trace with Kineto's argument names") {
  const std::string capture = capture_of(
      {
          range("aten::addmm, seq = 3, op_id = 7, sizes = [[2, 3], [3, 4], []], stack = /w/t.py(5): f; /w/t.py(9): g",
                1'000, 2'000),
          range("forward", 0, 5'000),
      },
      "op_trace.tprof");
  const auto dir = std::filesystem::temp_directory_path() / ("tp_op_trace_" + std::to_string(::getpid()));
  const test::Traced t = test::traced(capture, {}, {dir.string(), false});
  REQUIRE(t.files.size() == 1);
  const nlohmann::json trace = test::trace_json(t.files[0].path);
  std::filesystem::remove_all(dir);
  const nlohmann::json* op = nullptr;
  const nlohmann::json* annotation = nullptr;
  for (const auto& ev : trace["traceEvents"]) {
    if (ev.value("name", "") == "aten::addmm") op = &ev;
    if (ev.value("name", "") == "forward") annotation = &ev;
  }
  REQUIRE(op != nullptr);
  REQUIRE(annotation != nullptr);
  CHECK((*op)["cat"] == "cpu_op");
  CHECK((*annotation)["cat"] == "user_annotation");
  const auto& args = (*op)["args"];
  CHECK(args["Sequence number"] == 3);
  CHECK(args["Fwd thread id"] == 0);
  CHECK(args["Input Dims"] == nlohmann::json::parse("[[2, 3], [3, 4], []]"));
  CHECK(args["Call stack"] == "/w/t.py(5): f;/w/t.py(9): g");
  CHECK(args.contains("External id"));
}

}  // namespace torchprof
