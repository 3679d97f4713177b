#include "tests/fuzz/fuzz_targets.h"

#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "collector/analysis.h"
#include "collector/decode.h"
#include "formats/outputs.h"
#include "formats/wire/capture_format.h"
#include "formats/wire/frame_codec.h"
#include "formats/wire/wire.h"

namespace torchprof::fuzz {
namespace {

void append(std::vector<uint8_t>& out, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}

void append_chunk(std::vector<uint8_t>& out, capture::ChunkType type, uint32_t conn, const void* body,
                  size_t size) {
  capture::ChunkHeader h{static_cast<uint32_t>(type), conn, static_cast<uint32_t>(size),
                         capture::chunk_check(capture::kFileVersion, body, size)};
  append(out, &h, sizeof h);
  append(out, body, size);
}

// A capture with one process whose one frame is `frame_body`.
std::vector<uint8_t> wrap_frame(const uint8_t* frame_body, size_t size) {
  std::vector<uint8_t> file;
  capture::FileHeader fh{};
  std::memcpy(fh.magic, capture::kFileMagic, sizeof fh.magic);
  fh.version = capture::kFileVersion;
  fh.wire_version = wire::kProtocolVersion;
  append(file, &fh, sizeof fh);
  wire::Hello hello{};
  std::memcpy(hello.magic, wire::kHelloMagic, sizeof hello.magic);
  hello.version = wire::kProtocolVersion;
  hello.slot_size = wire::kSlotSize;
  hello.pid = 4242;
  hello.ppid = 1;
  hello.mono_ns = 1000;
  hello.real_ns = 1700000000000000000ull;
  append_chunk(file, capture::ChunkType::kHello, 1, &hello, sizeof hello);
  append_chunk(file, capture::ChunkType::kFrame, 1, frame_body, size);
  wire::Bye bye{static_cast<int32_t>(wire::ExitKind::kExit), 0, 0, 0, 5000};
  append_chunk(file, capture::ChunkType::kBye, 1, &bye, sizeof bye);
  append_chunk(file, capture::ChunkType::kConnClosed, 1, nullptr, 0);
  return file;
}

// A frame body: FrameHeader{encoding, raw_size} + zstd of `size` bytes at `data`.
std::vector<uint8_t> make_frame(wire::FrameEncoding encoding, uint32_t raw_size, const uint8_t* data, size_t size) {
  std::vector<uint8_t> body(sizeof(wire::FrameHeader) + ZSTD_compressBound(size));
  wire::FrameHeader fh{7, static_cast<uint32_t>(encoding), raw_size, 0};
  std::memcpy(body.data(), &fh, sizeof fh);
  size_t n = ZSTD_compress(body.data() + sizeof fh, body.size() - sizeof fh, data, size, 1);
  if (ZSTD_isError(n)) return {};
  body.resize(sizeof fh + n);
  return body;
}

std::vector<uint8_t> compress_records(const uint8_t* data, size_t size) {
  size = size / wire::kSlotSize * wire::kSlotSize;
  return make_frame(wire::FrameEncoding::kZstdRaw, static_cast<uint32_t>(size), data, size);
}

std::vector<uint8_t> delta_records(const uint8_t* data, size_t size) {
  const auto slots = static_cast<uint32_t>(size / wire::kSlotSize);
  std::vector<wire::Record> records(slots);
  if (slots != 0) std::memcpy(records.data(), data, size_t{slots} * wire::kSlotSize);
  std::vector<uint8_t> coded(wire::codec::encode_buffer_size(slots));
  size_t n = wire::codec::delta_encode(records.data(), slots, coded.data());
  return make_frame(wire::FrameEncoding::kZstdDelta, slots * wire::kSlotSize, coded.data(), n);
}

std::vector<uint8_t> delta_bytes(const uint8_t* data, size_t size) {
  if (size < 2) return {};
  const uint32_t slots = data[0] | (uint32_t{data[1]} << 8);
  return make_frame(wire::FrameEncoding::kZstdDelta, slots * wire::kSlotSize, data + 2, size - 2);
}

// CaptureReader takes a path: the bytes go into an anonymous in-memory file.
void decode_bytes(const uint8_t* data, size_t size) {
  int fd = memfd_create("torchprof-fuzz", MFD_CLOEXEC);
  if (fd < 0) return;
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  try {
    Run run = decode_capture_file("/proc/self/fd/" + std::to_string(fd));
    analyse(run, AnalysisOptions{});
  } catch (const InputError&) {
    // A clear refusal is a correct answer for a file that is not a capture.
  }
  close(fd);
}

}  // namespace

int run_one(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto mode = static_cast<Mode>(data[0]);
  ++data;
  --size;
  if (mode == Mode::kCapture) {
    decode_bytes(data, size);
  } else if (mode == Mode::kFrameBody) {
    std::vector<uint8_t> file = wrap_frame(data, size);
    decode_bytes(file.data(), file.size());
  } else if (mode == Mode::kRawRecords || mode == Mode::kDeltaRecords || mode == Mode::kDeltaBytes) {
    std::vector<uint8_t> body = mode == Mode::kRawRecords     ? compress_records(data, size)
                                : mode == Mode::kDeltaRecords ? delta_records(data, size)
                                                              : delta_bytes(data, size);
    std::vector<uint8_t> file = wrap_frame(body.data(), body.size());
    decode_bytes(file.data(), file.size());
  }
  return 0;
}

}  // namespace torchprof::fuzz
