#include "reading/capture_scan.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

namespace torchprof {

using capture::ChunkType;

namespace {

// Splits a NUL-separated block ("a\0b\0") into its parts; a missing final NUL is tolerated.
std::vector<std::string> split_nul(const char* p, size_t n) {
  std::vector<std::string> parts;
  size_t begin = 0;
  for (size_t i = 0; i <= n; ++i) {
    if (i == n || p[i] == '\0') {
      if (i > begin || (i < n)) parts.emplace_back(p + begin, i - begin);
      begin = i + 1;
    }
  }
  return parts;
}

// Fills the identity fields of `conn` from a Hello body; false when it is malformed.
// `damaged`: the body failed its check; its text fields are cut to what the body holds.
bool parse_hello(const std::vector<uint8_t>& body, ConnInput& conn, bool damaged = false) {
  if (body.size() < sizeof(wire::Hello)) return false;
  wire::Hello h;
  std::memcpy(&h, body.data(), sizeof h);
  if (damaged) {
    uint64_t left = body.size() - sizeof h;
    for (uint32_t* len : {&h.exe_len, &h.cmdline_len, &h.host_len, &h.env_len}) {
      *len = static_cast<uint32_t>(std::min<uint64_t>(*len, left));
      left -= *len;
    }
  }
  uint64_t need = uint64_t{sizeof h} + h.exe_len + h.cmdline_len + h.host_len + h.env_len;
  if (need > body.size()) return false;
  const char* p = reinterpret_cast<const char*>(body.data()) + sizeof h;
  conn.hello = h;
  conn.exe.assign(p, h.exe_len);
  p += h.exe_len;
  conn.cmdline = split_nul(p, h.cmdline_len);
  p += h.cmdline_len;
  conn.host.assign(p, h.host_len);
  p += h.host_len;
  for (std::string& entry : split_nul(p, h.env_len)) {
    size_t eq = entry.find('=');
    if (eq != std::string::npos) conn.env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return true;
}

template <typename T>
std::optional<T> json_get(const nlohmann::json& j, std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    auto it = j.find(key);
    if (it != j.end() && !it->is_null()) {
      try {
        return it->template get<T>();
      } catch (const nlohmann::json::exception&) {
      }
    }
  }
  return std::nullopt;
}

void apply_run_json(const Chunk& chunk, RunInfo& run) {
  nlohmann::json j = nlohmann::json::parse(chunk.body.begin(), chunk.body.end(), nullptr,
                                           /*allow_exceptions=*/false);
  if (!j.is_object()) {
    run.warnings.push_back("run information in the capture is not valid JSON");
    return;
  }
  if (auto cmd = json_get<std::vector<std::string>>(j, {"command"})) run.command = *cmd;
  if (auto host = json_get<std::string>(j, {"host"})) run.host = *host;
  if (auto s = json_get<int64_t>(j, {"start_ns", "start_real_ns", "start_time_ns"})) {
    run.start_ns = *s;
  }
  if (auto e = json_get<int64_t>(j, {"end_ns", "end_real_ns", "end_time_ns"})) run.end_ns = *e;
  if (auto code = json_get<int>(j, {"exit_code"})) run.exit_code = *code;
  if (auto tools = j.find("outside_tools"); tools != j.end() && tools->is_array()) {
    for (const nlohmann::json& t : *tools) {
      if (!t.is_object()) continue;
      run.outside_tools.push_back({t.value("variable", ""), t.value("library", ""), t.value("tool", "")});
    }
  }
}

void note_launcher_view(const Chunk& chunk, ScanResult& scan) {
  nlohmann::json j = nlohmann::json::parse(chunk.body.begin(), chunk.body.end(), nullptr,
                                           /*allow_exceptions=*/false);
  if (!j.is_object()) return;
  if (auto sig = json_get<int>(j, {"signal"})) scan.end_signal = sig;
  if (auto pid = json_get<int>(j, {"launcher_pid"})) scan.launcher_pid = pid;
  if (chunk.header.type == static_cast<uint32_t>(ChunkType::kRunEnd)) {
    if (auto pid = json_get<int>(j, {"pid"}); pid && *pid > 0) scan.target_pid = pid;
  }
}

}  // namespace

// First sweep over the file: identities, frame locations, goodbyes, run info.
ScanResult scan_capture(CaptureReader& reader) {
  ScanResult scan;
  RunInfo& run = scan.info;
  std::unordered_map<uint32_t, ConnInput*> by_id;
  uint64_t orphan_chunks = 0;
  Chunk chunk;
  reader.keep_damaged(true);
  while (reader.next(chunk)) {
    auto type = static_cast<ChunkType>(chunk.header.type);
    if (chunk.damaged && type != ChunkType::kHello) {
      // Only a Hello's identity is worth reading from a body that failed its check.
      auto it = by_id.find(chunk.header.conn);
      if (it != by_id.end()) {
        if (type == ChunkType::kFrame) ++it->second->damaged_frames;
        if (type == ChunkType::kBye) it->second->damaged_bye = true;
      }
      continue;
    }
    if (type == ChunkType::kRunInfo || type == ChunkType::kRunEnd) {
      apply_run_json(chunk, run);
      if (type == ChunkType::kRunEnd) scan.saw_run_end = true;
      note_launcher_view(chunk, scan);
      continue;
    }
    if (type == ChunkType::kNote) {
      run.warnings.emplace_back(chunk.body.begin(), chunk.body.end());
      continue;
    }
    if (type == ChunkType::kHello) {
      auto conn = std::make_unique<ConnInput>();
      conn->id = chunk.header.conn;
      if (!parse_hello(chunk.body, *conn, chunk.damaged)) {
        run.warnings.push_back("connection " + std::to_string(conn->id) +
                               (chunk.damaged ? ": hello damaged in the capture, its records are ignored"
                                              : ": malformed hello, its records are ignored"));
        continue;
      }
      if (chunk.damaged) {
        run.warnings.push_back("connection " + std::to_string(conn->id) + " (pid " + std::to_string(conn->hello.pid) +
                               "): its hello was damaged in the capture; the process's command, environment or "
                               "clock may be shown wrong");
      }
      by_id[conn->id] = conn.get();
      scan.conns.push_back(std::move(conn));
      continue;
    }
    auto it = by_id.find(chunk.header.conn);
    if (it == by_id.end()) {
      ++orphan_chunks;
      continue;
    }
    ConnInput& conn = *it->second;
    if (type == ChunkType::kFrame) {
      FrameRef ref{chunk.body_offset, chunk.header.size, 0};
      if (chunk.body.size() >= sizeof(wire::FrameHeader)) {
        wire::FrameHeader fh;
        std::memcpy(&fh, chunk.body.data(), sizeof fh);
        if (fh.raw_size <= capture::kMaxChunkBody) ref.slots = fh.raw_size / wire::kSlotSize;
      }
      conn.frames.push_back(ref);
    } else if (type == ChunkType::kBye && chunk.body.size() >= sizeof(wire::Bye)) {
      wire::Bye bye;
      std::memcpy(&bye, chunk.body.data(), sizeof bye);
      conn.bye = bye;
    } else if (type == ChunkType::kConnClosed) {
      conn.closed = true;
    }
  }
  if (orphan_chunks > 0) {
    run.warnings.push_back(std::to_string(orphan_chunks) +
                           " chunks belong to no known connection and were ignored");
  }
  return scan;
}

}  // namespace torchprof
