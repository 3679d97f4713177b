#include "collector/capture_scan.h"

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

std::optional<int> parse_int(const std::string& text) {
  if (text.empty()) return std::nullopt;
  try {
    size_t used = 0;
    int v = std::stoi(text, &used);
    if (used != text.size()) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Fills the identity fields of `conn` from a Hello body; false when it is malformed.
bool parse_hello(const std::vector<uint8_t>& body, ConnInput& conn) {
  if (body.size() < sizeof(wire::Hello)) return false;
  wire::Hello h;
  std::memcpy(&h, body.data(), sizeof h);
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

std::optional<int> env_int(const ConnInput& conn, std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    auto it = conn.env.find(key);
    if (it != conn.env.end()) {
      if (auto v = parse_int(it->second)) return v;
    }
  }
  return std::nullopt;
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

void apply_run_json(const Chunk& chunk, Run& run) {
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
}

void note_launcher_view(const Chunk& chunk, ScanResult& scan) {
  nlohmann::json j = nlohmann::json::parse(chunk.body.begin(), chunk.body.end(), nullptr,
                                           /*allow_exceptions=*/false);
  if (!j.is_object()) return;
  if (auto sig = json_get<int>(j, {"signal"})) scan.end_signal = sig;
  if (auto pid = json_get<int>(j, {"launcher_pid"})) scan.launcher_pid = pid;
}

}  // namespace

void apply_identity(const ConnInput& conn, Process& proc) {
  proc.pid = conn.hello.pid;
  proc.ppid = conn.hello.ppid;
  // The last image of a pid names it (a fork copy that exec'd shows as the new program).
  if (!conn.exe.empty()) proc.exe = conn.exe;
  if (!conn.cmdline.empty()) proc.cmdline = conn.cmdline;
  if (!conn.host.empty()) proc.host = conn.host;
  if (auto r = env_int(conn, {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"})) proc.rank = r;
  if (auto w = env_int(conn, {"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"})) {
    proc.world_size = w;
  }
  if (auto l = env_int(conn, {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"})) {
    proc.local_rank = l;
  }
  auto worker = conn.env.find("TORCHPROF_WORKER_NAME");
  if (worker != conn.env.end() && !worker->second.empty()) {
    proc.worker = worker->second;
  } else if (proc.worker.empty()) {
    proc.worker = proc.host + "_" + std::to_string(proc.pid);
  }
}

void apply_bye(const wire::Bye& bye, Process& proc) {
  switch (static_cast<wire::ExitKind>(bye.exit_kind)) {
    case wire::ExitKind::kExit:
      proc.exit_code = bye.exit_status;
      proc.exit_signal.reset();
      break;
    case wire::ExitKind::kSignal:
      proc.exit_signal = bye.exit_status;
      proc.exit_code = 128 + bye.exit_status;
      break;
    default:
      break;  // exec: the next image reports; unknown: nothing to say
  }
}

// First sweep over the file: identities, frame locations, goodbyes, run info.
ScanResult scan_capture(CaptureReader& reader, Run& run) {
  ScanResult scan;
  std::unordered_map<uint32_t, ConnInput*> by_id;
  uint64_t orphan_chunks = 0;
  Chunk chunk;
  while (reader.next(chunk)) {
    auto type = static_cast<ChunkType>(chunk.header.type);
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
      if (!parse_hello(chunk.body, *conn)) {
        run.warnings.push_back("connection " + std::to_string(conn->id) +
                               ": malformed hello, its records are ignored");
        continue;
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

// A target that died without a Bye (SIGKILL, OOM killer) still has the launcher's
// account of its end. Without a RunEnd (the launcher itself died) the first process
// stands for the target.
void apply_launcher_view(Run& run, const ScanResult& scan) {
  if (run.processes.empty()) return;
  if (!scan.saw_run_end) {
    if (run.processes.front().exit_code) run.exit_code = *run.processes.front().exit_code;
    return;
  }
  Process* target = &run.processes.front();
  for (Process& p : run.processes) {
    if (scan.launcher_pid && p.ppid == *scan.launcher_pid) {
      target = &p;
      break;
    }
  }
  if (target->exit_code) return;
  target->exit_code = run.exit_code;
  if (scan.end_signal) {
    target->exit_signal = scan.end_signal;
    target->warnings.push_back("ended by signal " + std::to_string(*scan.end_signal) +
                               " before it said goodbye: events after its last flush are lost");
  }
}

void add_decode_warnings(const ConnInput& conn, const DecodeLosses& losses, Process& proc) {
  auto warn = [&](uint64_t count, const char* what) {
    if (count > 0) proc.warnings.push_back(std::to_string(count) + " " + what);
  };
  warn(losses.bad_frames, "frames could not be decompressed and were skipped");
  warn(losses.cut_records, "frames ended inside a record");
  warn(losses.lost_frames, "frames missing (sequence gap)");
  warn(losses.unmatched_pops, "pops without a matching push were ignored");
  warn(losses.pending_ends, "range ends without a matching start were ignored");
  warn(losses.unterminated, "ranges never ended; closed at the last timestamp of their thread");
  warn(losses.unknown_strings, "records name strings that were never defined");
  if (!conn.bye && conn.closed && !conn.frames.empty()) {
    proc.warnings.push_back("image " + conn.exe + " ended without saying goodbye (killed?)");
  }
}

bool BufferReport::take(const wire::Record& r, const wire::Hello& hello) {
  if (r.kind == static_cast<uint8_t>(wire::Kind::kBufferUsage)) {
    peak_bytes = std::max(peak_bytes, r.a);
    cap_bytes = r.b;
    return true;
  }
  if (r.kind != static_cast<uint8_t>(wire::Kind::kBufferRefused)) return false;
  if (refused_ns == 0) {
    refused_ns = record_epoch_ns(hello, r.ts);
    refused_after_ns = r.ts > hello.mono_ns ? r.ts - hello.mono_ns : 0;
    refusal = r.domain;
    held_bytes = r.b;
    cap_bytes = r.a;
  }
  return true;
}

void BufferReport::apply(Process& proc) const {
  proc.buffer_peak_bytes = std::max(proc.buffer_peak_bytes, peak_bytes);
  if (cap_bytes != 0) proc.buffer_cap_bytes = cap_bytes;
  if (refused_ns != 0 && proc.buffer_refused_ns == 0) {
    proc.buffer_refused_ns = refused_ns;
    proc.buffer_refused_after_ns = refused_after_ns;
    proc.buffer_refusal = refusal;
  }
}

void note_buffer_losses(Process& proc) {
  if (proc.buffer_refused_ns == 0 || !proc.loss_note.empty()) return;
  if (proc.dropped == 0 && proc.cupti_dropped == 0) return;  // refused, then nothing was lost after all
  char when[64];
  const double after = static_cast<double>(proc.buffer_refused_after_ns);
  if (after < 1e9) {
    std::snprintf(when, sizeof when, "%.1f ms", after / 1e6);
  } else {
    std::snprintf(when, sizeof when, "%.3f s", after / 1e9);
  }
  if (proc.buffer_refusal == static_cast<uint16_t>(wire::BufferRefusal::kSystem)) {
    proc.loss_note = std::string("the system refused buffer memory at ") + when + " into the process";
    proc.warnings.push_back(proc.loss_note + "; events were dropped for want of it");
    return;
  }
  char cap[32];
  if (proc.buffer_cap_bytes % (uint64_t{1} << 20) == 0) {
    std::snprintf(cap, sizeof cap, "%llu MiB", static_cast<unsigned long long>(proc.buffer_cap_bytes >> 20));
  } else {
    std::snprintf(cap, sizeof cap, "%llu KiB", static_cast<unsigned long long>(proc.buffer_cap_bytes >> 10));
  }
  proc.loss_note = std::string("buffer cap of ") + cap + " reached at " + when + " into the process";
  proc.warnings.push_back(proc.loss_note +
                          "; events were dropped while the buffers were full (TORCHPROF_BUFFER_LIMIT raises the cap)");
}

}  // namespace torchprof
