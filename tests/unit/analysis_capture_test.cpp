#include <doctest/doctest.h>

#include "analysis_capture_builder.h"
#include "reading/capture_reader.h"
#include "analysis/engine.h"
#include "common/errors.h"

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
  for (size_t cut : {last + 3, last + 16 + 4}) {
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

TEST_CASE("capture reader: a checksum mismatch stops at that chunk") {
  CaptureBuilder b = three_chunks();
  b.bytes[b.chunk_offsets[1] + 16 + 20] ^= 0x5A;  // inside the Hello body
  CaptureReader reader(b.save("corrupt.tprof"));
  Chunk c;
  int chunks = 0;
  while (reader.next(c)) ++chunks;
  CHECK(chunks == 1);
  CHECK(reader.truncated());
  CHECK(reader.truncated_at() == b.chunk_offsets[1]);
  CHECK(reader.truncation_reason().find("checksum") != std::string::npos);

  Run run = analyse_capture_file(b.save("corrupt.tprof"), AnalysisOptions{});
  CHECK(run.truncated);
  CHECK(run.truncated_at == b.chunk_offsets[1]);
  CHECK(run.command == std::vector<std::string>{"./app", "-x"});
  CHECK(run.processes.empty());
}

}  // namespace torchprof
