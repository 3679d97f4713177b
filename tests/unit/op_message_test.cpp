// PyTorch op ranges: emit_nvtx's messages (and the bootstrap's, same format) parsed
// into cpu_op rows, grouped by shapes and stack, and shown as torch shows them.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/analysis.h"
#include "analysis/op_message.h"
#include "formats/folded_stacks.h"
#include "formats/kineto_trace.h"
#include "formats/table.h"

namespace torchprof {
namespace {

OpInfo parsed(std::string_view message, bool require_fields = true) {
  std::optional<OpInfo> op = parse_op_message(message, require_fields);
  REQUIRE(op.has_value());
  return *op;
}

Event range(const std::string& name, int64_t start, int64_t end, const std::string& domain = "") {
  Event e;
  e.name = name;
  e.tid = 1;
  e.start_ns = start;
  e.end_ns = end;
  e.set_domain(domain);
  return e;
}

Run run_of(std::vector<Event> events) {
  Run run;
  Process& p = run.processes.emplace_back();
  p.pid = 42;
  p.worker = "host_42";
  p.threads.push_back({1, "main", true, 0, 0});
  p.events_list = std::move(events);
  classify_pytorch_ops(p);
  return run;
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
  Run run = run_of({
      range("step", 0, 10'000),
      range("aten::addmm, seq = 1, op_id = 1", 100, 1'100),
      range("aten::addmm, seq = 2, op_id = 2", 2'000, 3'000),
      range("aten::mm", 4'000, 4'500, std::string(kPytorchOpsDomain)),  // the bootstrap's, no fields
      range("aten::mm, seq = 4", 5'000, 5'500, "my.domain"),          // another domain: a plain range
      range("load, seq = ", 6'000, 6'100),                            // malformed: the raw name
  });
  const Process& p = run.processes[0];
  CHECK(p.events_list[1].op() != nullptr);
  CHECK(p.events_list[1].name == "aten::addmm");
  CHECK(p.events_list[1].op()->sequence == 1);
  CHECK(p.events_list[3].op() != nullptr);
  CHECK(p.events_list[4].op() == nullptr);
  CHECK(p.events_list[5].op() == nullptr);
  CHECK(p.events_list[5].name == "load, seq = ");

  analyse(run, {});
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
    return std::vector<Event>{
        range("aten::addmm, sizes = [[4], [8, 3], [3, 4], [], []]", 0, 1'000),
        range("aten::addmm, sizes = [[4], [8, 3], [3, 4], [], []]", 2'000, 3'000),
        range("aten::addmm, sizes = [[4], [16, 3], [3, 4], [], []]", 4'000, 7'000),
        range("outer", 8'000, 9'000),
    };
  };
  Run plain = run_of(events());
  analyse(plain, {});
  REQUIRE(row(plain, "aten::addmm") != nullptr);
  CHECK(row(plain, "aten::addmm")->calls == 3);
  CHECK(make_table_rows(plain.ops, false, {}).shapes_width == 0);

  Run grouped = run_of(events());
  AnalysisOptions options;
  options.group_by_input_shape = true;
  analyse(grouped, options);
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
  Run run = run_of({
      range("aten::addmm, stack = " + fwd, 0, 3'000),
      range("aten::addmm, stack = " + fwd, 4'000, 7'000),
      range("aten::addmm, stack = /w/eval.py(8): <module>", 8'000, 9'000),
      range("aten::relu", 9'500, 9'600, std::string(kPytorchOpsDomain)),
  });
  analyse(run, {});
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
  Run run = run_of({range("aten::mm, stack = " + frame, 0, 1'000)});
  analyse(run, {});
  const TableRows rows = make_table_rows(run.ops, false, {});
  CHECK(rows.source_width == 75);
  const std::string table = render_table(rows);
  const std::string tail = frame.substr(frame.size() - 72);
  CHECK(table.find("..." + tail + "  ") != std::string::npos);
}

TEST_CASE("folded stacks: outermost frame first, the op last, self time in whole microseconds") {
  Run run = run_of({
      range("aten::addmm, stack = /w/t.py(21): forward; /w/t.py(40): <module>", 0, 3'400),
      range("aten::addmm, stack = /w/t.py(21): forward; /w/t.py(40): <module>", 4'000, 6'000),
      range("aten::t, stack = /w/t.py(21): forward; /w/t.py(40): <module>", 6'000, 6'500),  // < 1 µs
      range("aten::relu", 7'000, 9'000, std::string(kPytorchOpsDomain)),                 // no stack
  });
  analyse(run, {});
  CHECK(render_folded_stacks(run) == "/w/t.py(40): <module>;/w/t.py(21): forward;aten::addmm 5\n");
  Run none = run_of({range("aten::relu", 0, 9'000, std::string(kPytorchOpsDomain))});
  analyse(none, {});
  CHECK(render_folded_stacks(none).empty());
}

TEST_CASE("op ranges are cpu_op events in the trace with Kineto's argument names") {
  Run run = run_of({
      range("aten::addmm, seq = 3, op_id = 7, sizes = [[2, 3], [3, 4], []], stack = /w/t.py(5): f; /w/t.py(9): g",
            1'000, 2'000),
      range("forward", 0, 5'000),
  });
  analyse(run, {});
  const auto dir = std::filesystem::temp_directory_path() / ("tp_op_trace_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const std::vector<TraceFile> files = write_kineto_traces(run, {dir.string(), false, ""});
  REQUIRE(files.size() == 1);
  std::ifstream in(files[0].path);
  const nlohmann::json trace = nlohmann::json::parse(in);
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
