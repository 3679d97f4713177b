// Writes small capture files by hand for the decoder tests: the real structs of
// common/wire/ and real zstd frames, so the tests exercise the same bytes the
// collector stores.
#pragma once

#include <zstd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/wire/capture_format.h"
#include "common/wire/wire.h"

namespace torchprof::test {

template <typename T>
inline void append_pod(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

// Builds the decompressed slot stream of one frame.
struct Slots {
  std::string raw;

  Slots& rec(wire::Kind kind, uint32_t name, uint64_t ts, uint64_t a = 0, uint64_t b = 0,
             uint16_t domain = 0, uint8_t extra = 0) {
    wire::Record r{static_cast<uint8_t>(kind), extra, domain, name, ts, a, b};
    append_pod(raw, r);
    return *this;
  }
  Slots& str(uint32_t id, const std::string& text) {
    auto extra = static_cast<uint8_t>(wire::slots_for_bytes(static_cast<uint32_t>(text.size())));
    rec(wire::Kind::kString, id, 0, text.size(), 0, 0, extra);
    std::string padded = text;
    padded.resize(size_t{extra} * wire::kSlotSize, '\0');
    raw += padded;
    return *this;
  }
  Slots& push(uint32_t name, uint64_t ts, uint16_t domain = 0) {
    return rec(wire::Kind::kPush, name, ts, 0, 0, domain);
  }
  Slots& pop(uint64_t ts, uint16_t domain = 0) { return rec(wire::Kind::kPop, 0, ts, 0, 0, domain); }

  // CUDA/GPU records, laid out as inject/ writes them (common/wire/wire.h kinds 32..42).
  template <typename T>
  Slots& with_extra(wire::Kind kind, uint32_t name, uint64_t ts, uint64_t a, uint64_t b, uint16_t domain,
                    const T& extra) {
    static_assert(sizeof(T) % wire::kSlotSize == 0);
    rec(kind, name, ts, a, b, domain, static_cast<uint8_t>(sizeof(T) / wire::kSlotSize));
    append_pod(raw, extra);
    return *this;
  }
  Slots& api(uint32_t name, uint64_t enter, uint64_t exit, uint64_t correlation, uint16_t cbid = 211,
             wire::Kind kind = wire::Kind::kCudaRuntime) {
    return rec(kind, name, enter, exit, correlation, cbid);
  }
  Slots& kernel(uint32_t name, uint64_t start, uint64_t end, uint64_t correlation, uint32_t stream,
                uint16_t device = 0, uint32_t graph_id = 0) {
    wire::GpuKernelExtra x{};
    x.stream = stream;
    x.context = 1;
    x.grid[0] = 216;
    x.grid[1] = x.grid[2] = 1;
    x.block[0] = 256;
    x.block[1] = x.block[2] = 1;
    x.registers_per_thread = 32;
    x.graph_id = graph_id;
    return with_extra(wire::Kind::kKernel, name, start, end, correlation, device, x);
  }
  Slots& copy(wire::Kind kind, uint64_t start, uint64_t end, uint64_t correlation, uint64_t bytes,
              uint32_t stream, uint8_t copy_kind, uint8_t src_kind, uint8_t dst_kind) {
    wire::GpuCopyExtra x{};
    x.bytes = bytes;
    x.stream = stream;
    x.context = 1;
    x.copy_kind = copy_kind;
    x.src_kind = src_kind;
    x.dst_kind = dst_kind;
    return with_extra(kind, 0, start, end, correlation, 0, x);
  }
  Slots& memory(bool alloc, uint64_t ts, uint64_t address, uint64_t bytes, uint64_t correlation) {
    wire::GpuMemoryExtra x{};
    x.operation = alloc ? 1 : 2;
    x.memory_kind = 3;  // device
    x.context = 1;
    x.correlation = correlation;
    return with_extra(wire::Kind::kMemory, 0, ts, address, bytes, 0, x);
  }
  Slots& device(uint16_t id, uint32_t name, const wire::GpuDeviceExtra& props) {
    return with_extra(wire::Kind::kDevice, name, 0, 0, 0, id, props);
  }
};

inline std::string hello_body(int32_t pid, int32_t ppid, uint64_t mono_ns, uint64_t real_ns,
                              const std::string& exe, const std::vector<std::string>& argv,
                              const std::string& host, const std::vector<std::string>& env) {
  std::string cmdline, envs;
  for (const auto& a : argv) cmdline += a + '\0';
  for (const auto& e : env) envs += e + '\0';
  wire::Hello h{};
  std::memcpy(h.magic, wire::kHelloMagic, sizeof h.magic);
  h.version = wire::kProtocolVersion;
  h.slot_size = wire::kSlotSize;
  h.pid = pid;
  h.ppid = ppid;
  h.mono_ns = mono_ns;
  h.real_ns = real_ns;
  h.exe_len = static_cast<uint32_t>(exe.size());
  h.cmdline_len = static_cast<uint32_t>(cmdline.size());
  h.host_len = static_cast<uint32_t>(host.size());
  h.env_len = static_cast<uint32_t>(envs.size());
  std::string body;
  append_pod(body, h);
  return body + exe + cmdline + host + envs;
}

inline std::string frame_body(uint32_t tid, uint32_t seq, const Slots& slots) {
  std::string compressed(ZSTD_compressBound(slots.raw.size()), '\0');
  size_t n = ZSTD_compress(compressed.data(), compressed.size(), slots.raw.data(),
                           slots.raw.size(), 1);
  compressed.resize(n);
  wire::FrameHeader fh{tid, static_cast<uint32_t>(wire::FrameEncoding::kZstdRaw),
                       static_cast<uint32_t>(slots.raw.size()), seq};
  std::string body;
  append_pod(body, fh);
  return body + compressed;
}

inline std::string bye_body(wire::ExitKind kind, int32_t status, uint64_t emitted,
                            uint64_t dropped, uint64_t mono_ns) {
  wire::Bye bye{static_cast<int32_t>(kind), status, emitted, dropped, mono_ns};
  std::string body;
  append_pod(body, bye);
  return body;
}

struct CaptureBuilder {
  std::string bytes;
  std::vector<size_t> chunk_offsets;

  uint32_t version;

  explicit CaptureBuilder(uint32_t file_version = capture::kFileVersion) : version(file_version) {
    capture::FileHeader h{};
    std::memcpy(h.magic, capture::kFileMagic, sizeof h.magic);
    h.version = version;
    h.wire_version = wire::kProtocolVersion;
    h.created_real_ns = 1'700'000'000'000'000'000ull;
    append_pod(bytes, h);
  }
  CaptureBuilder& chunk(capture::ChunkType type, uint32_t conn, const std::string& body) {
    chunk_offsets.push_back(bytes.size());
    capture::ChunkHeader c{static_cast<uint32_t>(type), conn, static_cast<uint32_t>(body.size()),
                           capture::chunk_check(version, body.data(), body.size())};
    if (version >= capture::kFirstMarkedVersion) {
      append_pod(bytes, capture::marked_head(c));
    } else {
      append_pod(bytes, c);
    }
    bytes += body;
    return *this;
  }
  std::string save(const std::string& name) const {
    auto dir = std::filesystem::temp_directory_path() / "torchprof_unit";
    std::filesystem::create_directories(dir);
    auto path = (dir / name).string();
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    return path;
  }
};

}  // namespace torchprof::test
