#include "analysis/process_info.h"

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <string_view>

#include "common/python_program.h"

namespace torchprof {

namespace {

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

std::optional<int> env_int(const ConnInput& conn, std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    auto it = conn.env.find(key);
    if (it != conn.env.end()) {
      if (auto v = parse_int(it->second)) return v;
    }
  }
  return std::nullopt;
}

}  // namespace

void apply_run_info(const ScanResult& scan, Run& run) {
  const RunInfo& info = scan.info;
  if (!info.command.empty()) run.command = info.command;
  if (!info.host.empty()) run.host = info.host;
  if (info.start_ns != 0) run.start_ns = info.start_ns;
  if (info.end_ns != 0) run.end_ns = info.end_ns;
  run.exit_code = info.exit_code;
  run.warnings.insert(run.warnings.end(), info.warnings.begin(), info.warnings.end());
  for (const RunInfo::OutsideTool& t : info.outside_tools) run.outside_tools.push_back({t.variable, t.library, t.tool});
}

void apply_identity(const ConnInput& conn, Process& proc) {
  proc.pid = conn.hello.pid;
  proc.ppid = conn.hello.ppid;
  // The last image of a pid names it (a fork copy that exec'd shows as the new program).
  if (!conn.exe.empty()) proc.exe = conn.exe;
  if (!conn.cmdline.empty()) {
    if (!proc.cmdline.empty()) proc.earlier_images.push_back(proc.cmdline);
    proc.cmdline = conn.cmdline;
  }
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

// What a process that died of `signal` without its goodbye left: read from its shared
// buffers after its death (kRecovered), or lost after its last flush.
std::string killed_warning(const Process& p, int signal) {
  const std::string head = "ended by signal " + std::to_string(signal) + " before it said goodbye: ";
  if (!p.recovered) return head + "events after its last flush are lost (their number is not known)";
  std::string text = head + std::to_string(p.recovered_events) +
                     " events it had not sent were read from its shared buffers after its death";
  if (p.unrecovered_slots > 0) {
    text += "; " + std::to_string(p.unrecovered_slots) +
            " record slots it had not sent were outside them (private memory) or damaged, and are lost";
  }
  return text;
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
    target->warnings.push_back(killed_warning(*target, *scan.end_signal));
  }
}

void list_unheard_target(Run& run, const ScanResult& scan) {
  if (!scan.saw_run_end || !scan.end_signal || !scan.target_pid) return;
  for (const Process& p : run.processes) {
    if (p.pid == *scan.target_pid) return;
  }
  Process& p = run.processes.emplace_back();
  p.pid = *scan.target_pid;
  p.ppid = scan.launcher_pid.value_or(0);
  p.cmdline = run.command;
  p.exe = run.command.empty() ? std::string() : run.command.front();
  p.host = run.host;
  p.worker = p.host + "_" + std::to_string(p.pid);
  p.exit_signal = scan.end_signal;
  p.exit_code = 128 + *scan.end_signal;
  p.start_ns = run.start_ns;
  p.end_ns = run.end_ns;
  p.warnings.push_back("killed by signal " + std::to_string(*scan.end_signal) +
                       " before anything it recorded reached the collector: none of its events could be read "
                       "(their number is not known)");
  ++run.processes_without_events;
}

void add_decode_warnings(const ConnInput& conn, const DecodeLosses& losses, Process& proc) {
  auto warn = [&](uint64_t count, const char* what) {
    if (count > 0) proc.warnings.push_back(std::to_string(count) + " " + what);
  };
  warn(conn.damaged_frames, "frames were damaged in the capture and skipped");
  warn(losses.bad_frames, "frames could not be decompressed and were skipped");
  warn(losses.cut_records, "frames ended inside a record");
  warn(losses.lost_frames, "frames missing (sequence gap)");
  warn(losses.unmatched_pops, "pops without a matching push were ignored");
  warn(losses.pending_ends, "range ends without a matching start were ignored");
  warn(losses.unterminated, "ranges never ended; closed at the last timestamp of their thread");
  warn(losses.gap_closed, "ranges were open across missing frames; closed at their thread's last timestamp before the gap");
  warn(losses.unknown_strings, "records name strings whose definition was lost (shown as <lost #id>)");
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

namespace {

std::string base_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool runs_python(const Process& p) {
  const std::string exe = base_of(p.exe);
  const std::string arg0 = p.cmdline.empty() ? std::string() : base_of(p.cmdline.front());
  return python_program::is_python_name(exe.data(), exe.size()) ||
         python_program::is_python_name(arg0.data(), arg0.size());
}

bool has_arg_part(const Process& p, std::string_view part) {
  return std::any_of(p.cmdline.begin(), p.cmdline.end(),
                     [&](const std::string& a) { return a.find(part) != std::string::npos; });
}

}  // namespace

void assign_roles(Run& run) {
  static const std::set<std::string> kShells = {"sh", "bash", "dash", "zsh", "ksh", "fish", "busybox"};
  std::map<std::pair<int, std::string>, const Process*> by_pid;
  for (const Process& p : run.processes) by_pid[{p.pid, p.host}] = &p;
  for (Process& p : run.processes) {
    const auto parent = by_pid.find({p.ppid, p.host});
    const bool copy = parent != by_pid.end() && parent->second != &p && parent->second->cmdline == p.cmdline &&
                      parent->second->exe == p.exe;
    if (runs_python(p)) {
      if (has_arg_part(p, "compile_worker")) {
        p.role = "compile worker";
      } else {
        p.role = copy ? "python fork" : "python";
      }
    } else if (kShells.contains(base_of(p.exe)) || (!p.cmdline.empty() && kShells.contains(base_of(p.cmdline[0])))) {
      p.role = "shell";
    } else {
      p.role = "program";
    }
  }
}

}  // namespace torchprof
