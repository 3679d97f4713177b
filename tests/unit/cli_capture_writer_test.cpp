#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "reading/capture_reader.h"
#include "collector/capture_writer.h"
#include "common/wire/wire.h"

namespace torchprof {
namespace {

namespace fs = std::filesystem;
using capture::ChunkType;

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() /
                 ("torchprof_writer_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::vector<Chunk> read_all(const std::string& path, bool* truncated = nullptr) {
  CaptureReader reader(path);
  std::vector<Chunk> chunks;
  Chunk c;
  while (reader.next(c)) chunks.push_back(c);
  if (truncated != nullptr) *truncated = reader.truncated();
  return chunks;
}

std::string text(const Chunk& c) { return std::string(c.body.begin(), c.body.end()); }

void write_sample(CaptureWriter& w) {
  REQUIRE(w.append_text(ChunkType::kRunInfo, 0, R"({"command":["app"]})"));
  const std::vector<char> frame(1000, 'f');
  REQUIRE(w.append(ChunkType::kFrame, 1, frame.data(), frame.size()));
  REQUIRE(w.append(ChunkType::kConnClosed, 1, nullptr, 0));
  REQUIRE(w.append_text(ChunkType::kRunEnd, 0, R"({"exit_code":3})"));
}

}  // namespace

TEST_CASE("capture writer: chunks read back in order with intact bodies") {
  const fs::path dir = fresh_dir("roundtrip");
  {
    CaptureWriter w(dir.string());
    write_sample(w);
    CHECK(w.chunks_written() == 4);
    w.close();
    CHECK(w.ok());
    CHECK_FALSE(w.append_text(ChunkType::kNote, 0, "after close"));
  }
  CaptureReader reader((dir / "capture.tprof").string());
  CHECK(reader.header().wire_version == wire::kProtocolVersion);
  bool truncated = true;
  const std::vector<Chunk> chunks = read_all((dir / "capture.tprof").string(), &truncated);
  CHECK_FALSE(truncated);
  REQUIRE(chunks.size() == 4);
  CHECK(chunks[0].header.type == static_cast<uint32_t>(ChunkType::kRunInfo));
  CHECK(text(chunks[0]) == R"({"command":["app"]})");
  CHECK(chunks[1].header.conn == 1);
  CHECK(chunks[1].body.size() == 1000);
  CHECK(chunks[2].header.size == 0);
  CHECK(text(chunks[3]) == R"({"exit_code":3})");
  fs::remove_all(dir);
}

TEST_CASE("capture writer: never overwrites an existing capture") {
  const fs::path dir = fresh_dir("exclusive");
  { CaptureWriter w(dir.string()); }
  CHECK_THROWS_AS(CaptureWriter(dir.string()), std::system_error);
  CHECK_THROWS_AS(CaptureWriter((dir / "missing").string()), std::system_error);
  fs::remove_all(dir);
}

TEST_CASE("capture writer: a file cut anywhere keeps every chunk before the cut") {
  const fs::path dir = fresh_dir("cut");
  const std::string path = (dir / "capture.tprof").string();
  {
    CaptureWriter w(dir.string());
    write_sample(w);
  }
  const uintmax_t full = fs::file_size(path);
  const std::string cut_path = (dir / "cut.tprof").string();
  size_t previous = 0;
  for (uintmax_t size = sizeof(capture::FileHeader); size <= full; ++size) {
    fs::copy_file(path, cut_path, fs::copy_options::overwrite_existing);
    fs::resize_file(cut_path, size);
    bool truncated = false;
    const std::vector<Chunk> chunks = read_all(cut_path, &truncated);
    CAPTURE(size);
    CHECK(chunks.size() >= previous);  // a longer prefix never loses a chunk
    previous = chunks.size();
    // Cut exactly between chunks: a clean end. Anywhere else: a partial tail.
    uintmax_t complete = sizeof(capture::FileHeader);
    for (const Chunk& c : chunks) complete += capture::chunk_head_size(capture::kFileVersion) + c.body.size();
    CHECK(truncated == (complete != size));
  }
  CHECK(previous == 4);
  fs::remove_all(dir);
}

}  // namespace torchprof
