// What a process's flusher says of its buffers (kBufferUsage, kBufferRefused): decoded by
// the engine into the process's buffer fields and loss note (the table alone too), and
// written into summary.json.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "analysis_capture_builder.h"
#include "analysis/engine.h"
#include "formats/summary_json.h"

namespace torchprof {

using capture::ChunkType;
using test::CaptureBuilder;
using test::Slots;
using wire::Kind;

namespace {

constexpr uint64_t kMono = 1000;
constexpr int64_t kReal = 1'700'000'000'000'000'000;
constexpr uint64_t kMiB = uint64_t{1} << 20;

// One process (pid 40): ranges on its thread, 7 of them dropped, and its flusher's
// buffer records in a frame of their own (refusal: 0 none, else its reason and time).
std::string buffer_capture(const std::string& name, uint16_t refusal, uint64_t refused_at, uint64_t dropped = 7) {
  CaptureBuilder b;
  b.chunk(ChunkType::kHello, 1, test::hello_body(40, 1, kMono, kReal, "/bin/app", {"app"}, "node1", {}));
  Slots f;
  f.str(1, "step").push(1, kMono + 10).pop(kMono + 20).push(1, kMono + 30).pop(kMono + 40);
  f.rec(Kind::kDropped, 0, kMono + 50, dropped, 4 + dropped);
  b.chunk(ChunkType::kFrame, 1, test::frame_body(40, 0, f));
  Slots usage;
  usage.rec(Kind::kBufferUsage, 0, kMono + 60, 3 * kMiB, 4 * kMiB);
  if (refusal != 0) usage.rec(Kind::kBufferRefused, 0, refused_at, 4 * kMiB, 4 * kMiB - 4096, refusal);
  b.chunk(ChunkType::kFrame, 1, test::frame_body(40, 1, usage));
  Slots later;  // a higher peak said later wins; the first refusal stays
  later.rec(Kind::kBufferUsage, 0, kMono + 70, 4 * kMiB, 4 * kMiB);
  if (refusal != 0) later.rec(Kind::kBufferRefused, 0, refused_at + 5, 4 * kMiB, 4 * kMiB, 2);
  b.chunk(ChunkType::kFrame, 1, test::frame_body(40, 2, later));
  b.chunk(ChunkType::kBye, 1, test::bye_body(wire::ExitKind::kExit, 0, 4 + dropped, dropped, kMono + 100));
  return b.save(name);
}

Run analysed(const std::string& path) { return analyse_capture_file(path, AnalysisOptions{}); }

const Process& only(const Run& run) {
  REQUIRE(run.processes.size() == 1);
  return run.processes.front();
}

}  // namespace

TEST_CASE("buffer records: peak, cap and the first refusal, in the process, its note and summary.json") {
  const std::string path = buffer_capture("buffers_cap.tprof", /*refusal=*/1, kMono + 1'500'000'000);
  const Run run = analysed(path);
  const Process& p = only(run);
  CHECK(p.dropped == 7);
  CHECK(p.buffer_peak_bytes == 4 * kMiB);
  CHECK(p.buffer_cap_bytes == 4 * kMiB);
  CHECK(p.buffer_refusal == 1);
  CHECK(p.buffer_refused_ns == kReal + 1'500'000'000);
  CHECK(p.loss_note == "buffer cap of 4 MiB reached at 1.500 s into the process");
  REQUIRE(run.loss_notes.size() == 1);
  CHECK(run.loss_notes[0] == "pid 40: buffer cap of 4 MiB reached at 1.500 s into the process");
  bool warned = false;
  for (const std::string& w : p.warnings) warned = warned || w.starts_with(p.loss_note + "; events were dropped");
  CHECK(warned);
  const nlohmann::json j = nlohmann::json::parse(render_summary_json(run));
  const nlohmann::json& jp = j["processes"][0];
  CHECK(jp["buffer_peak_bytes"] == 4 * kMiB);
  CHECK(jp["buffer_cap_bytes"] == 4 * kMiB);
  CHECK(jp["buffer_cap_reached"] == true);
  CHECK(jp["buffer_cap_reached_ns"] == kReal + 1'500'000'000);
  CHECK(jp["buffer_out_of_memory"] == false);
  CHECK(jp["loss_note"] == p.loss_note);
  // The table alone reads the same.
  const Run table = analyse_capture_file(path, AnalysisOptions{}, table_only_outputs());
  const Process& s = only(table);
  CHECK(s.buffer_peak_bytes == p.buffer_peak_bytes);
  CHECK(s.buffer_refused_ns == p.buffer_refused_ns);
  CHECK(s.loss_note == p.loss_note);
  CHECK(table.loss_notes == run.loss_notes);
  CHECK(s.warnings == p.warnings);
}

TEST_CASE("buffer records: the system's refusal, a time in ms, and no note without a loss") {
  {
    const Run run = analysed(buffer_capture("buffers_system.tprof", /*refusal=*/2, kMono + 2'000'000));
    const Process& p = only(run);
    CHECK(p.loss_note == "the system refused buffer memory at 2.0 ms into the process");
    const nlohmann::json j = nlohmann::json::parse(render_summary_json(run));
    CHECK(j["processes"][0]["buffer_out_of_memory"] == true);
    CHECK(j["processes"][0]["buffer_cap_reached"] == false);
    CHECK(j["processes"][0]["buffer_cap_reached_ns"].is_null());
  }
  {
    const Run run = analysed(buffer_capture("buffers_none.tprof", /*refusal=*/0, 0));
    const Process& p = only(run);
    CHECK(p.buffer_peak_bytes == 4 * kMiB);  // grown, never refused
    CHECK(p.buffer_refused_ns == 0);
    CHECK(p.loss_note.empty());
    CHECK(run.loss_notes.empty());
    const nlohmann::json j = nlohmann::json::parse(render_summary_json(run));
    CHECK(j["processes"][0]["loss_note"].is_null());
  }
  {
    // Refused, yet nothing lost in the end (nothing dropped, nothing dropped by CUPTI).
    const Run run =
        analysed(buffer_capture("buffers_no_loss.tprof", /*refusal=*/1, kMono + 5, /*dropped=*/0));
    CHECK(only(run).loss_note.empty());
    CHECK(only(run).buffer_refused_ns != 0);
  }
}

}  // namespace torchprof
