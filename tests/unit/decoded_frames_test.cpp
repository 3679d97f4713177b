#include "reading/decoded_frames.h"

#include <doctest/doctest.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>

#include "analysis_capture_builder.h"
#include "reading/capture_scan.h"
#include "engine_test_util.h"

namespace torchprof {

namespace {

using capture::ChunkType;
using test::CaptureBuilder;
using test::Slots;

constexpr uint64_t kMono = 1000;
constexpr int64_t kReal = 1'700'000'000'000'000'000;
constexpr uint32_t kFrames = 40;

std::string range_name(uint32_t k) {
  std::string name = "r";
  name += std::to_string(k);
  return name;
}

// One process whose main thread wrote kFrames frames: frame k holds the range "r<k>"
// (names 1..kFrames are defined in frame 0), and frames 7 and 23 are damaged.
std::string many_frames(const std::string& file) {
  CaptureBuilder b;
  b.chunk(ChunkType::kHello, 1, test::hello_body(9, 1, kMono, kReal, "/bin/app", {"app"}, "h", {}));
  for (uint32_t k = 0; k < kFrames; ++k) {
    Slots s;
    if (k == 0) {
      for (uint32_t n = 1; n <= kFrames; ++n) s.str(n, range_name(n - 1));
    }
    s.push(k + 1, 2000 + 100 * k).pop(2050 + 100 * k);
    std::string body = test::frame_body(9, k, s);
    if (k == 7 || k == 23) body[body.size() - 3] ^= 0x7F;  // the zstd stream no longer decodes
    b.chunk(ChunkType::kFrame, 1, body);
  }
  return b.save(file);
}

}  // namespace

TEST_CASE("decoded frames: every frame in order, damaged ones flagged, ahead or inline") {
  static_assert(kFrames >= DecodedFrames::kThreadedFrames + DecodedFrames::kAhead);
  CaptureReader reader(many_frames("many_frames.tprof"));
  ScanResult scanned = scan_capture(reader);
  REQUIRE(scanned.conns.size() == 1);
  REQUIRE(scanned.conns[0]->frames.size() == kFrames);
  for (DecodedFrames::Mode mode : {DecodedFrames::Mode::kAhead, DecodedFrames::Mode::kInline}) {
    CAPTURE(static_cast<int>(mode));
    DecodedFrames frames(reader, scanned.conns[0]->frames, mode);
    uint32_t k = 0;
    while (const DecodedFrames::Frame* f = frames.next()) {
      // Held for a while: the thread, decoding ahead meanwhile, must not write into it.
      if (k % 8 == 2) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      CHECK(f->ok == (k != 7 && k != 23));
      if (f->ok) {
        CHECK(f->header.seq == k);
        // A push and a pop, plus the definitions in frame 0.
        CHECK(f->raw.size() / wire::kSlotSize == (k == 0 ? 2 + kFrames * 2 : 2));
      }
      ++k;
    }
    CHECK(k == kFrames);
    CHECK(frames.next() == nullptr);
  }
}

TEST_CASE("decoded frames: left after a few frames, the thread stops") {
  CaptureReader reader(many_frames("many_frames_left.tprof"));
  ScanResult scanned = scan_capture(reader);
  REQUIRE(scanned.conns.size() == 1);
  for (int taken = 0; taken < 3; ++taken) {
    DecodedFrames frames(reader, scanned.conns[0]->frames);
    for (int i = 0; i < taken; ++i) REQUIRE(frames.next() != nullptr);
  }  // each destructor returned: the thread, blocked ahead of the caller, was stopped
  // The reader is still usable from the start.
  DecodedFrames again(reader, scanned.conns[0]->frames);
  REQUIRE(again.next() != nullptr);
  CHECK(again.next()->header.seq == 1);
}

TEST_CASE("decoded frames: the engine reads all 40 frames") {
  const std::string path = many_frames("many_frames_decode.tprof");
  std::map<int, test::Collected> collected;
  Run run = test::analyse(path, {}, &collected);
  REQUIRE(run.processes.size() == 1);
  const Process& p = run.processes[0];
  CHECK(p.cpu_events == kFrames - 2);
  const std::vector<Event>& events = collected[9].events;
  REQUIRE(events.size() == kFrames - 2);
  size_t i = 0;
  for (uint32_t k = 0; k < kFrames; ++k) {
    if (k == 7 || k == 23) continue;
    CHECK(events[i].name == range_name(k));
    CHECK(events[i].start_ns == kReal + static_cast<int64_t>(2000 + 100 * k - kMono));
    ++i;
  }
  bool warned = false;
  for (const std::string& w : p.warnings) warned = warned || w.find("2 frames could not be decompressed") != std::string::npos;
  CHECK(warned);
  size_t rows = 0;
  for (const OpStats& op : run.ops) rows += op.calls;
  CHECK(rows == kFrames - 2);
  // The table alone reads the same.
  const Run table = analyse_capture_file(path, AnalysisOptions{}, table_only_outputs());
  REQUIRE(table.ops.size() == run.ops.size());
  for (size_t r = 0; r < run.ops.size(); ++r) CHECK(table.ops[r].calls == run.ops[r].calls);
}

}  // namespace torchprof
