#include <doctest/doctest.h>

#include <map>

#include "analysis_capture_builder.h"
#include "analysis/analysis.h"
#include "engine_test_util.h"

namespace torchprof {

using capture::ChunkType;
using test::CaptureBuilder;
using test::Slots;
using wire::Kind;

namespace {

constexpr uint64_t kMono = 1000;
constexpr int64_t kReal = 1'700'000'000'000'000'000;
constexpr int64_t epoch(uint64_t ts) { return kReal + static_cast<int64_t>(ts - kMono); }
// kThreadName's source (common/wire/wire.h): NVTX names win over the OS's.
constexpr uint64_t kOs = 1;
constexpr uint64_t kNvtx = 0;

void main_process(CaptureBuilder& b) {
  b.chunk(ChunkType::kHello, 1,
          test::hello_body(100, 1, kMono, kReal, "/usr/bin/python3", {"python3", "train.py"},
                           "node7", {"RANK=3", "WORLD_SIZE=4"}));
  Slots f0;
  f0.rec(Kind::kThreadStart, 0, 1000, 1)
      .push(1, 2000)
      .push(2, 2100)
      .pop(2200)
      .rec(Kind::kStart, 3, 2300, /*a=range id*/ 77, /*b=attr*/ 0)
      .rec(Kind::kMark, 4, 2400)
      .rec(Kind::kThreadName, 5, 0, 0, kOs)
      .rec(static_cast<Kind>(200), 0, 0, 0, 0, 0, /*extra=*/1)  // unknown kind + 1 slot
      .rec(Kind::kPush, 99, 0xFFFF)                             // lies inside the unknown slot
      .rec(Kind::kDomain, 9, 0, 0, 0, /*domain=*/1)
      .rec(Kind::kPush, 11, 2450, wire::make_attr(5, wire::PayloadType::kI64),
           static_cast<uint64_t>(-7), /*domain=*/1)
      .rec(Kind::kPop, 0, 2460, 0, 0, 1);
  // The previous line's unknown record swallows the 0xFFFF push as its continuation slot.
  b.chunk(ChunkType::kFrame, 1, test::frame_body(100, 0, f0));

  Slots t1;  // another thread ends range 77 and uses names defined in a later frame
  t1.rec(Kind::kEnd, 0, 3000, 77)
      .rec(Kind::kThreadName, 7, 0, 0, kNvtx)
      .rec(Kind::kThreadName, 8, 0, 0, kOs);
  b.chunk(ChunkType::kFrame, 1, test::frame_body(101, 0, t1));

  Slots f1;
  f1.str(1, "outer").str(2, "inner").str(3, "io").str(4, "tick").str(5, "main-os")
      .str(6, "never_popped").str(7, "worker-nvtx").str(8, "worker-os").str(9, "mydomain")
      .str(10, "cat-a").str(11, "in_domain")
      .rec(Kind::kCategory, 10, 0, 5, 0, /*domain=*/1)
      .pop(2600)
      .pop(2700)  // nothing open: ignored and counted
      .push(6, 2800)
      .rec(Kind::kDropped, 0, 0, 5, 50)
      .rec(Kind::kMark, 4, 2900);
  b.chunk(ChunkType::kFrame, 1, test::frame_body(100, 1, f1));

  Slots t1b;  // seq 2 after seq 0: one frame of thread 101 was lost
  t1b.push(2, 3100).pop(3200);
  b.chunk(ChunkType::kFrame, 1, test::frame_body(101, 2, t1b));
  b.chunk(ChunkType::kBye, 1, test::bye_body(wire::ExitKind::kSignal, 11, 100, 3, 4000));
  b.chunk(ChunkType::kConnClosed, 1, "");
}

void forked_then_exec(CaptureBuilder& b) {
  b.chunk(ChunkType::kHello, 2,
          test::hello_body(200, 100, kMono, kReal, "/usr/bin/python3", {"python3"}, "node7", {}));
  Slots fork_copy;
  fork_copy.str(1, "forked").push(1, 5000).pop(5100);
  b.chunk(ChunkType::kFrame, 2, test::frame_body(200, 0, fork_copy));
  b.chunk(ChunkType::kBye, 2, test::bye_body(wire::ExitKind::kExec, 0, 3, 0, 5200));
  b.chunk(ChunkType::kHello, 3,
          test::hello_body(200, 100, kMono, kReal, "/bin/tool", {"tool", "--fast"}, "node7",
                           {"TORCHPROF_WORKER_NAME=tool-worker"}));
  Slots image;  // string ids start over in the new image
  image.str(1, "exec_child").push(1, 6000).pop(6500);
  b.chunk(ChunkType::kFrame, 3, test::frame_body(200, 0, image));
  b.chunk(ChunkType::kBye, 3, test::bye_body(wire::ExitKind::kExit, 4, 3, 0, 7000));
}

const Process* by_pid(const Run& run, int pid) {
  for (const Process& p : run.processes) {
    if (p.pid == pid) return &p;
  }
  return nullptr;
}

const Event* event(const test::Collected& c, const std::string& name) {
  for (const Event& e : c.events) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

bool has_warning(const Process& p, const std::string& text) {
  for (const std::string& w : p.warnings) {
    if (w.find(text) != std::string::npos) return true;
  }
  return false;
}

// The events the engine handed on, per pid.
std::map<int, test::Collected> collected;

Run decode_sample() {
  CaptureBuilder b;
  b.chunk(ChunkType::kRunInfo, 0, R"({"command":["python3","train.py"],"host":"node7"})");
  main_process(b);
  forked_then_exec(b);
  b.chunk(ChunkType::kHello, 4,
          test::hello_body(300, 100, kMono, kReal, "/bin/true", {"true"}, "node7", {}));
  b.chunk(ChunkType::kBye, 4, test::bye_body(wire::ExitKind::kExit, 0, 0, 0, 1500));
  b.chunk(ChunkType::kRunEnd, 0, R"({"exit_code":139,"end_ns":1700000000000009999})");
  collected.clear();
  return test::analyse(b.save("decode_sample.tprof"), {}, &collected);
}

}  // namespace

TEST_CASE("decode: identity, clock, run info") {
  Run run = decode_sample();
  CHECK(run.command == std::vector<std::string>{"python3", "train.py"});
  CHECK(run.exit_code == 139);
  CHECK(run.host == "node7");
  CHECK(run.end_ns == 1700000000000009999);
  CHECK_FALSE(run.truncated);
  REQUIRE(run.processes.size() == 3);
  const Process& p = *by_pid(run, 100);
  CHECK(p.ppid == 1);
  CHECK(p.exe == "/usr/bin/python3");
  CHECK(p.cmdline == std::vector<std::string>{"python3", "train.py"});
  CHECK(p.rank == 3);
  CHECK(p.world_size == 4);
  CHECK(p.worker == "node7_100");
  CHECK(p.exit_signal == 11);
  CHECK(p.exit_code == 139);
  CHECK(p.start_ns == epoch(1000));
  CHECK(p.end_ns == epoch(4000));
  CHECK(p.dropped == 5);  // max(Bye 3, kDropped 5)
  CHECK(run.dropped_events == 5);
  CHECK(run.processes_without_events == 1);
}

TEST_CASE("decode: ranges, marks, payloads, cross-thread start/end, names defined later") {
  Run run = decode_sample();
  const Process& p = *by_pid(run, 100);
  const test::Collected& c = collected[100];
  const Event* outer = event(c, "outer");
  REQUIRE(outer);
  CHECK(outer->start_ns == epoch(2000));
  CHECK(outer->end_ns == epoch(2600));
  CHECK(outer->push_pop);
  const Event* io = event(c, "io");
  REQUIRE(io);
  CHECK_FALSE(io->push_pop);
  CHECK(io->tid == 100);
  CHECK(io->end_tid() == 101);
  CHECK(io->dur_ns() == 700);
  const Event* tick = event(c, "tick");
  REQUIRE(tick);
  CHECK(tick->kind == EventKind::kMark);
  CHECK(tick->end_ns == tick->start_ns);
  const Event* dom = event(c, "in_domain");
  REQUIRE(dom);
  CHECK(dom->domain() == "mydomain");
  CHECK(dom->category() == 5);
  CHECK(dom->category_name() == "cat-a");
  CHECK(dom->payload_type == static_cast<uint8_t>(wire::PayloadType::kI64));
  CHECK(static_cast<int64_t>(dom->payload) == -7);
  CHECK(dom->dur_ns() == 10);
  CHECK(event(c, "<lost #99>") == nullptr);  // the unknown kind's slot was skipped

  const Event* never = event(c, "never_popped");
  REQUIRE(never);
  CHECK(never->unterminated);
  CHECK(never->end_ns == epoch(2900));  // the thread's last timestamp
  CHECK(has_warning(p, "pops without a matching push"));
  CHECK(has_warning(p, "frames missing"));
  CHECK(has_warning(p, "never ended"));
  CHECK(c.named("inner").size() == 2);
  CHECK(c.events.size() == 8);  // outer, inner x2, io, tick x2, in_domain, never_popped
  CHECK(p.cpu_events == 8);
  CHECK(p.events == 8);
  // outer [2000,2600] holds inner [2100,2200] and in_domain [2450,2460] (another domain,
  // the same thread); io, ended on another thread, is no interval of this one: nobody's
  // child, nobody's parent.
  CHECK(outer->self_ns == 600 - 100 - 10);
  CHECK(io->self_ns == 700);
  CHECK(dom->self_ns == 10);
}

TEST_CASE("decode: threads, names, order") {
  Run run = decode_sample();
  const Process& p = *by_pid(run, 100);
  REQUIRE(p.threads.size() == 2);
  CHECK(p.threads[0].tid == 100);
  CHECK(p.threads[0].is_main);
  CHECK(p.threads[0].name == "main-os");
  CHECK(p.threads[0].dropped == 5);
  CHECK(p.threads[1].name == "worker-nvtx");  // NVTX beats the later OS name
  CHECK(p.threads[1].events == 1);
  CHECK(p.threads[1].tid == 101);
  CHECK(p.threads[0].events == 7);  // outer, inner, io, tick x2, in_domain, never_popped
  for (const Event& e : collected[100].events) CHECK((e.tid == 100 || e.tid == 101));
}

TEST_CASE("decode: a fork copy and its exec'd image are one process") {
  Run run = decode_sample();
  const Process* child = by_pid(run, 200);
  REQUIRE(child);
  CHECK(child->exe == "/bin/tool");
  CHECK(child->cmdline == std::vector<std::string>{"tool", "--fast"});
  CHECK(child->worker == "tool-worker");
  CHECK(child->exit_code == 4);
  CHECK_FALSE(child->exit_signal);
  CHECK(event(collected[200], "forked") != nullptr);
  CHECK(event(collected[200], "exec_child") != nullptr);
  CHECK(collected[200].events.size() == 2);
  CHECK(child->cpu_events == 2);
  CHECK(event(collected[200], "exec_child")->dur_ns() == 500);

  const Process* idle = by_pid(run, 300);
  REQUIRE(idle);
  CHECK(idle->cpu_events == 0);
  CHECK(collected[300].events.empty());
  CHECK(idle->exit_code == 0);
}

TEST_CASE("decode: damaged frames are skipped with a warning") {
  CaptureBuilder b;
  b.chunk(ChunkType::kHello, 1, test::hello_body(5, 1, kMono, kReal, "/a", {"a"}, "h", {}));
  Slots good;
  good.str(1, "ok").push(1, 2000).pop(2100);
  std::string bad = test::frame_body(5, 1, good);
  bad[bad.size() - 3] ^= 0x7F;  // corrupt the zstd stream (the chunk checksum is recomputed)
  b.chunk(ChunkType::kFrame, 1, test::frame_body(5, 0, good));
  b.chunk(ChunkType::kFrame, 1, bad);
  Run run = analyse_capture_file(b.save("bad_frame.tprof"), AnalysisOptions{});
  REQUIRE(run.processes.size() == 1);
  CHECK(run.processes[0].cpu_events == 1);
  REQUIRE(run.ops.size() == 1);
  CHECK(run.ops[0].calls == 1);
  CHECK(has_warning(run.processes[0], "could not be decompressed"));
  CHECK(run.processes[0].exit_code == std::nullopt);
}

}  // namespace torchprof
