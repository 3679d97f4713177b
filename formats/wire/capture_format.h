// Layout of capture.tprof: the collector's append-only record of a run.
//
//   FileHeader
//   Chunk header + body, Chunk header + body, …
//
// Chunks are appended with one write each, as messages arrive, so a run killed at
// any moment leaves a file whose every complete chunk is readable; a reader stops
// at the first short or damaged chunk and reports what it read. Bodies of kHello,
// kFrame and kBye chunks are the wire message bodies verbatim (wire.h); `conn`
// names the connection (one per process image) they came on.
#pragma once

#include <cstddef>
#include <cstdint>

namespace torchprof::capture {

constexpr char kFileMagic[8] = {'T', 'P', 'R', 'O', 'F', 'C', 'A', 'P'};
constexpr uint32_t kFileVersion = 1;
constexpr uint32_t kMaxChunkBody = 64u << 20;

struct FileHeader {
  char magic[8];
  uint32_t version;       // kFileVersion
  uint32_t wire_version;  // wire::kProtocolVersion of the frames inside
  uint64_t created_real_ns;
};

enum class ChunkType : uint32_t {
  kRunInfo = 1,     // conn 0; JSON text: command, host, start time, options
  kHello = 2,       // a process connected
  kFrame = 3,       // records of one thread
  kBye = 4,         // the process said goodbye
  kConnClosed = 5,  // connection ended (with or without Bye); empty body
  kRunEnd = 6,      // conn 0; JSON text: exit code of the target, end time
  kNote = 7,        // conn 0 or a connection; UTF-8 text: refused peers, bad frames
};

struct ChunkHeader {
  uint32_t type;   // ChunkType
  uint32_t conn;   // connection number, from 1; 0 for run-level chunks
  uint32_t size;   // body bytes
  uint32_t check;  // FNV-1a 32 of the body
};

constexpr uint32_t fnv1a32(const void* data, size_t n, uint32_t h = 2166136261u) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

static_assert(sizeof(FileHeader) == 24);
static_assert(offsetof(FileHeader, version) == 8);
static_assert(offsetof(FileHeader, created_real_ns) == 16);
static_assert(sizeof(ChunkHeader) == 16);
static_assert(offsetof(ChunkHeader, size) == 8);

}  // namespace torchprof::capture
