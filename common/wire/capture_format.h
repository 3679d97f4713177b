// Layout of capture.tprof: the collector's append-only record of a run.
//
//   FileHeader
//   ChunkMark + ChunkHeader + body, ChunkMark + ChunkHeader + body, …
//
// Chunks are appended with one write each, as messages arrive, so a run killed at
// any moment leaves a file whose every complete chunk is readable. Since version 3
// each chunk starts with a ChunkMark: a fixed sync word and a check of the header
// after it, so that a reader that meets a damaged chunk (a flipped byte, a torn
// sector) finds the next intact one by searching for the sync word and checking the
// header it opens, and goes on from there: damage costs the chunks it touches, not
// the rest of the file. A short tail (the run was killed mid-write) is truncation;
// a chunk that fails its checks with bytes after it is corruption. Versions 1 and 2
// have no marks: a reader stops at their first short or damaged chunk. Bodies of kHello,
// kFrame and kBye chunks are the wire message bodies verbatim (wire.h); `conn`
// names the connection (one per process image) they came on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace torchprof::capture {

constexpr char kFileMagic[8] = {'T', 'P', 'R', 'O', 'F', 'C', 'A', 'P'};
// 2: chunk checks are check_words() instead of FNV-1a (the collector's largest cost).
// 3: a ChunkMark before every chunk header (resynchronisation after damage).
constexpr uint32_t kFileVersion = 3;
// The oldest file version readers still take.
constexpr uint32_t kMinFileVersion = 1;
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
  uint32_t check;  // chunk_check() of the body: FNV-1a 32 in version 1, check_words() since 2
};

// Version 3 on: precedes every ChunkHeader. `sync` is kChunkSync; `head_check` is
// check_words() of the ChunkHeader that follows, so that a sync word met by chance
// inside a body (or a header with a damaged size) is not taken for a chunk.
struct ChunkMark {
  uint32_t sync;
  uint32_t head_check;
};
constexpr uint32_t kChunkSync = 0x4B4D5054u;  // "TPMK" in file order

// The first version whose chunks carry a ChunkMark.
constexpr uint32_t kFirstMarkedVersion = 3;
constexpr uint32_t fnv1a32(const void* data, size_t n, uint32_t h = 2166136261u) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

// FNV-1a's multiply-xor over 8-byte little-endian words instead of single bytes (the
// tail bytewise), length-seeded and folded to 32 bits: one dependent multiply per 8
// bytes, ~10x faster than FNV-1a per byte, and any change confined to one word still
// changes the 64-bit state. A torn-write and damage check, not a cryptographic hash.
inline uint32_t check_words(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 14695981039346656037ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, sizeof w);
    h = (h ^ w) * 1099511628211ull;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  h ^= h >> 29;
  return static_cast<uint32_t>(h ^ (h >> 32));
}

// The check of a chunk body in a file of `file_version`.
inline uint32_t chunk_check(uint32_t file_version, const void* data, size_t n) {
  return file_version < 2 ? fnv1a32(data, n) : check_words(data, n);
}

// The check of a chunk header (ChunkMark::head_check).
inline uint32_t head_check(const ChunkHeader& h) { return check_words(&h, sizeof h); }

// A marked chunk head (ChunkMark + ChunkHeader) for `h`, as version 3 on writes it.
struct MarkedHead {
  ChunkMark mark;
  ChunkHeader header;
};
inline MarkedHead marked_head(const ChunkHeader& h) { return MarkedHead{{kChunkSync, head_check(h)}, h}; }

// Bytes from a chunk's first byte to its body in a file of `file_version`.
constexpr size_t chunk_head_size(uint32_t file_version) {
  return file_version >= kFirstMarkedVersion ? sizeof(ChunkMark) + sizeof(ChunkHeader) : sizeof(ChunkHeader);
}

static_assert(sizeof(FileHeader) == 24);
static_assert(sizeof(ChunkMark) == 8);
static_assert(sizeof(MarkedHead) == 24);
static_assert(offsetof(FileHeader, version) == 8);
static_assert(offsetof(FileHeader, created_real_ns) == 16);
static_assert(sizeof(ChunkHeader) == 16);
static_assert(offsetof(ChunkHeader, size) == 8);

}  // namespace torchprof::capture
