#include <doctest/doctest.h>

#include "analysis_capture_builder.h"
#include "reading/capture_reader.h"
#include "analysis/engine.h"
#include "common/errors.h"
#include "engine_test_util.h"

namespace torchprof {

using capture::ChunkType;
using test::CaptureBuilder;

namespace {

CaptureBuilder three_chunks() {
  CaptureBuilder b;
  b.chunk(ChunkType::kRunInfo, 0, R"({"command":["./app","-x"],"host":"h"})");
  b.chunk(ChunkType::kHello, 1,
          test::hello_body(10, 1, 1000, 5000, "/bin/app", {"./app", "-x"}, "h", {}));
  b.chunk(ChunkType::kNote, 0, "something odd");
  return b;
}

std::string error_of(const std::string& path) {
  try {
    CaptureReader reader(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("capture reader: reads every intact chunk in order") {
  CaptureBuilder b = three_chunks();
  CaptureReader reader(b.save("intact.tprof"));
  Chunk c;
  REQUIRE(reader.next(c));
  CHECK(c.header.type == static_cast<uint32_t>(ChunkType::kRunInfo));
  REQUIRE(reader.next(c));
  CHECK(c.header.conn == 1);
  REQUIRE(reader.next(c));
  CHECK(std::string(c.body.begin(), c.body.end()) == "something odd");
  CHECK_FALSE(reader.next(c));
  CHECK_FALSE(reader.truncated());
}

TEST_CASE("capture reader: missing, foreign and newer files are input errors") {
  CHECK(error_of("/nonexistent/dir/capture.tprof").find("cannot open capture") != std::string::npos);

  CaptureBuilder foreign;
  foreign.bytes = "{\"hello\": \"this is json, not a capture\"}";
  CHECK(error_of(foreign.save("foreign.tprof")).find("not a torchprof capture") != std::string::npos);

  CaptureBuilder tiny;
  tiny.bytes = "TPR";
  CHECK(error_of(tiny.save("tiny.tprof")).find("not a torchprof capture") != std::string::npos);

  CaptureBuilder newer(capture::kFileVersion + 1);
  std::string message = error_of(newer.save("newer.tprof"));
  CHECK(message.find("version " + std::to_string(capture::kFileVersion + 1)) != std::string::npos);
  CHECK(message.find('\n') == std::string::npos);
}

TEST_CASE("capture reader: a cut tail stops reading and reports the offset") {
  CaptureBuilder b = three_chunks();
  const size_t last = b.chunk_offsets.back();
  for (size_t cut : {last + 3, last + sizeof(capture::MarkedHead) + 4}) {
    CAPTURE(cut);
    CaptureBuilder cut_file = b;
    cut_file.bytes.resize(cut);
    CaptureReader reader(cut_file.save("cut.tprof"));
    Chunk c;
    int chunks = 0;
    while (reader.next(c)) ++chunks;
    CHECK(chunks == 2);
    CHECK(reader.truncated());
    CHECK(reader.truncated_at() == last);
  }
}

TEST_CASE("capture reader: version 2 has no marks: a checksum mismatch stops there, reported as corruption") {
  CaptureBuilder b(2);
  b.chunk(ChunkType::kRunInfo, 0, R"({"command":["./app","-x"],"host":"h"})");
  b.chunk(ChunkType::kHello, 1, test::hello_body(10, 1, 1000, 5000, "/bin/app", {"./app", "-x"}, "h", {}));
  b.chunk(ChunkType::kNote, 0, "something odd");
  b.bytes[b.chunk_offsets[1] + 16 + 20] ^= 0x5A;  // inside the Hello body
  CaptureReader reader(b.save("corrupt_v2.tprof"));
  Chunk c;
  int chunks = 0;
  while (reader.next(c)) ++chunks;
  CHECK(chunks == 1);
  CHECK_FALSE(reader.truncated());
  CHECK(reader.corrupted());
  CHECK(reader.first_damage_at() == b.chunk_offsets[1]);
  CHECK(reader.damaged_bytes() == b.bytes.size() - b.chunk_offsets[1]);

  Run run = analyse_capture_file(b.save("corrupt_v2.tprof"), AnalysisOptions{});
  CHECK_FALSE(run.truncated);
  CHECK(run.corrupted);
  CHECK(run.corrupt_at == b.chunk_offsets[1]);
  CHECK(run.command == std::vector<std::string>{"./app", "-x"});
  CHECK(run.processes.empty());
}

TEST_CASE("capture reader: a damaged body is stepped over and reading goes on") {
  CaptureBuilder b = three_chunks();
  b.bytes[b.chunk_offsets[1] + 24 + 20] ^= 0x5A;  // inside the Hello body
  CaptureReader reader(b.save("corrupt.tprof"));
  Chunk c;
  std::vector<uint32_t> types;
  while (reader.next(c)) types.push_back(c.header.type);
  CHECK(types == std::vector<uint32_t>{1, 7});  // RunInfo, Note: the Hello is skipped
  CHECK_FALSE(reader.truncated());
  REQUIRE(reader.damage().size() == 1);
  CHECK(reader.damage()[0].offset == b.chunk_offsets[1]);
  CHECK(reader.damage()[0].type == static_cast<uint32_t>(ChunkType::kHello));
  CHECK(reader.damage()[0].skipped == b.chunk_offsets[2] - b.chunk_offsets[1]);

  CaptureReader keeping(b.save("corrupt.tprof"));
  keeping.keep_damaged(true);
  int damaged = 0;
  while (keeping.next(c)) damaged += c.damaged ? 1 : 0;
  CHECK(damaged == 1);
  CHECK(keeping.damage_count() == 1);
}

TEST_CASE("capture reader: any damaged byte of a chunk head costs that chunk at most") {
  const CaptureBuilder b = three_chunks();
  const size_t head = b.chunk_offsets[1];
  for (size_t i = 0; i < sizeof(capture::MarkedHead); ++i) {
    for (uint8_t flip : {uint8_t{0x01}, uint8_t{0xFF}}) {
      CAPTURE(i);
      CAPTURE(int{flip});
      CaptureBuilder damaged = b;
      damaged.bytes[head + i] = static_cast<char>(damaged.bytes[head + i] ^ flip);
      CaptureReader reader(damaged.save("head.tprof"));
      Chunk c;
      std::vector<std::string> bodies;
      while (reader.next(c)) bodies.emplace_back(c.body.begin(), c.body.end());
      CHECK_FALSE(reader.truncated());
      CHECK(reader.corrupted());
      CHECK(reader.first_damage_at() == head);
      REQUIRE(bodies.size() >= 2);
      CHECK(bodies.back() == "something odd");
      // The mark, the size and the check of the head: the body checks against where the
      // next chunk starts, so the chunk is read whole.
      const bool repairable = i < 8 || (i >= 16 && i < 20);
      if (repairable) CHECK(bodies.size() == 3);
      if (bodies.size() == 3) CHECK(reader.damaged_bytes() == 0);
    }
  }
}

TEST_CASE("capture reader: a sync word inside a body is not taken for a chunk") {
  CaptureBuilder b;
  std::string fake(sizeof(capture::MarkedHead), 'x');
  std::memcpy(fake.data(), &capture::kChunkSync, sizeof capture::kChunkSync);
  b.chunk(ChunkType::kRunInfo, 0, R"({"command":["./app"]})");
  b.chunk(ChunkType::kNote, 0, "before " + fake + " after");
  b.chunk(ChunkType::kNote, 0, "the next one");
  b.bytes[b.chunk_offsets[1] + 4] ^= 0x10;  // the second chunk's head check
  b.bytes[b.chunk_offsets[1] + 9] ^= 0x10;  // and its type: not repairable
  CaptureReader reader(b.save("sync_in_body.tprof"));
  Chunk c;
  std::vector<std::string> bodies;
  while (reader.next(c)) bodies.emplace_back(c.body.begin(), c.body.end());
  REQUIRE(bodies.size() == 2);
  CHECK(bodies[1] == "the next one");
  CHECK(reader.damage_count() == 1);
  CHECK(reader.damaged_bytes() == b.chunk_offsets[2] - b.chunk_offsets[1]);
  CHECK_FALSE(reader.truncated());
}

TEST_CASE("capture reader: a torn last chunk is truncation, not corruption") {
  CaptureBuilder b = three_chunks();
  b.bytes.resize(b.bytes.size() - 3);
  CaptureReader reader(b.save("torn.tprof"));
  Chunk c;
  int chunks = 0;
  while (reader.next(c)) ++chunks;
  CHECK(chunks == 2);
  CHECK(reader.truncated());
  CHECK_FALSE(reader.corrupted());
}

TEST_CASE("analysis: a damaged frame costs its records; open ranges close at the gap, lost names show as <lost #id>") {
  constexpr uint64_t kMono = 1000;
  constexpr int64_t kReal = 1'700'000'000'000'000'000;
  auto epoch = [&](uint64_t ts) { return kReal + static_cast<int64_t>(ts - kMono); };
  CaptureBuilder b;
  b.chunk(ChunkType::kRunInfo, 0, R"({"command":["./app"]})");
  b.chunk(ChunkType::kHello, 1, test::hello_body(100, 1, kMono, kReal, "/bin/app", {"./app"}, "h", {}));
  test::Slots f0, f1, f2;
  f0.str(1, "outer").str(2, "work").push(1, 1000).push(2, 1100).pop(1200);
  f1.str(3, "late").pop(1500).push(3, 1600).pop(1700);
  f2.push(2, 2000).pop(2100).push(3, 2200).pop(2300).pop(2400);
  b.chunk(ChunkType::kFrame, 1, test::frame_body(100, 0, f0));
  b.chunk(ChunkType::kFrame, 1, test::frame_body(100, 1, f1));
  b.chunk(ChunkType::kFrame, 1, test::frame_body(100, 2, f2));
  b.chunk(ChunkType::kBye, 1, test::bye_body(wire::ExitKind::kExit, 0, 6, 0, 3000));
  b.chunk(ChunkType::kConnClosed, 1, "");
  b.bytes[b.chunk_offsets[3] + sizeof(capture::MarkedHead) + 20] ^= 0x40;  // inside frame 1's body

  std::map<int, test::Collected> collected;
  const Run run = test::analyse(b.save("lost_frame.tprof"), {}, &collected);
  CHECK(run.corrupted);
  CHECK_FALSE(run.truncated);
  CHECK(run.corrupt_chunks == 1);
  CHECK(run.corrupt_at == b.chunk_offsets[3]);
  REQUIRE(run.processes.size() == 1);
  const Process& p = run.processes[0];
  CHECK(p.exit_code == 0);  // the Bye after the damage was read
  const test::Collected& c = collected[100];
  const std::vector<const Event*> outer = c.named("outer");
  REQUIRE(outer.size() == 1);
  CHECK(outer[0]->unterminated);
  CHECK(outer[0]->end_ns == epoch(1200));  // the thread's last time before the gap
  CHECK(c.named("work").size() == 2);
  const std::vector<const Event*> lost = c.named("<lost #3>");
  REQUIRE(lost.size() == 1);
  CHECK(lost[0]->dur_ns() == 100);
  auto warned = [&](const std::string& text) {
    for (const std::string& w : p.warnings) {
      if (w.find(text) != std::string::npos) return true;
    }
    return false;
  };
  CHECK(warned("1 frames were damaged in the capture"));
  CHECK(warned("1 frames missing"));
  CHECK(warned("1 ranges were open across missing frames"));
  CHECK(warned("<lost #id>"));
  CHECK(warned("1 pops without a matching push"));
  CHECK_FALSE(warned("never ended"));
}

TEST_CASE("analysis: a target killed before its first flush is listed from the launcher's account") {
  CaptureBuilder b;
  b.chunk(ChunkType::kRunInfo, 0, R"({"command":["./app"],"host":"h","launcher_pid":10})");
  b.chunk(ChunkType::kRunEnd, 0, R"({"exit_code":137,"signal":9,"pid":4242,"end_real_ns":5000})");
  const Run run = analyse_capture_file(b.save("unheard.tprof"), AnalysisOptions{});
  REQUIRE(run.processes.size() == 1);
  const Process& p = run.processes[0];
  CHECK(p.pid == 4242);
  CHECK(p.ppid == 10);
  CHECK(p.exit_signal == 9);
  CHECK(p.exit_code == 137);
  CHECK(p.events == 0);
  CHECK(run.processes_without_events == 1);
  REQUIRE(p.warnings.size() == 1);
  CHECK(p.warnings[0].find("killed by signal 9 before anything it recorded reached the collector") != std::string::npos);

  // An older capture without the pid, or a target that exited: nothing is made up.
  CaptureBuilder old;
  old.chunk(ChunkType::kRunInfo, 0, R"({"command":["./app"]})");
  old.chunk(ChunkType::kRunEnd, 0, R"({"exit_code":137,"signal":9})");
  CHECK(analyse_capture_file(old.save("unheard_old.tprof"), AnalysisOptions{}).processes.empty());
  CaptureBuilder exited;
  exited.chunk(ChunkType::kRunEnd, 0, R"({"exit_code":0,"signal":null,"pid":4242})");
  CHECK(analyse_capture_file(exited.save("unheard_exit.tprof"), AnalysisOptions{}).processes.empty());
}

}  // namespace torchprof
