#include "analysis/engine.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <unordered_map>
#include <utility>

#include "analysis/capture_range.h"
#include "analysis/conn_pass.h"
#include "analysis/process_info.h"
#include "analysis/process_scan.h"
#include "analysis/rows.h"
#include "reading/capture_scan.h"
#include "reading/decoded_frames.h"

namespace torchprof {

namespace {

using engine::ConnPass;
using engine::NeedsScan;
using engine::OutputWants;
using engine::ProcessState;

// Frame bytes read so far against the total, reported at most once per percent.
class Progress {
 public:
  Progress(const std::function<void(uint64_t, uint64_t)>& callback, uint64_t total)
      : callback_(callback), total_(total) {}
  void add(uint64_t bytes) {
    done_ += bytes;
    if (!callback_ || total_ == 0) return;
    const uint64_t percent = std::min<uint64_t>(100, done_ * 100 / total_);
    if (percent == last_) return;
    last_ = percent;
    callback_(std::min(done_, total_), total_);
  }

 private:
  const std::function<void(uint64_t, uint64_t)>& callback_;
  uint64_t total_;
  uint64_t done_ = 0;
  uint64_t last_ = ~uint64_t{0};
};

// One connection's frames through `pass`, in order, decoded on this thread: a thread
// decoding ahead saves wall time but costs more CPU time in all (the frames are read on
// another core than the one that decoded them).
void read_conn(CaptureReader& reader, const ConnInput& conn, ConnPass& pass, Progress* progress) {
  DecodedFrames frames(reader, conn.frames, DecodedFrames::Mode::kInline);
  size_t k = 0;
  while (const DecodedFrames::Frame* frame = frames.next()) {
    if (frame->ok) {
      pass.frame(frame->header, frame->raw);
    } else {
      pass.bad_frame();
    }
    if (progress != nullptr) progress->add(conn.frames[k].size);
    ++k;
  }
  pass.finish();
}

bool ranged(const CaptureRange& range) {
  return range.kind == CaptureRange::Kind::kCudaProfilerApi || range.kind == CaptureRange::Kind::kNvtx;
}

// Device memory's running total per device, in time order (allocations made before
// tracing began are unknown: their release does not lower it).
void running_totals(std::vector<MemoryEvent>& events) {
  std::stable_sort(events.begin(), events.end(),
                   [](const MemoryEvent& x, const MemoryEvent& y) { return x.ts_ns < y.ts_ns; });
  std::unordered_map<uint32_t, int64_t> live;
  std::unordered_map<uint64_t, uint64_t> blocks;  // (device << 48 ^ address) -> bytes
  for (MemoryEvent& m : events) {
    const uint64_t key = (uint64_t{m.device} << 48) ^ m.address;
    int64_t& total = live[m.device];
    if (m.alloc) {
      blocks[key] = m.bytes;
      total += static_cast<int64_t>(m.bytes);
    } else if (auto b = blocks.find(key); b != blocks.end()) {
      total -= static_cast<int64_t>(b->second);
      blocks.erase(b);
    }
    m.live_bytes = total;
  }
}

class ProcessAnalysis {
 public:
  ProcessAnalysis(CaptureReader& reader, const std::vector<const ConnInput*>& conns, const AnalysisOptions& options,
                  const StepMarker& marker, const EngineOutputs& outputs, size_t index, Progress& progress)
      : reader_(reader), conns_(conns), options_(options), marker_(marker), outputs_(outputs), index_(index),
        progress_(progress) {
    wants_.records = outputs.records;
    wants_.timeline = outputs.timeline;
    wants_.stats = outputs.stats;
    wants_.folded = outputs.folded;
    wants_.memory_snapshot = outputs.memory_snapshot;
    wants_.memory_snapshot_entries = outputs.memory_snapshot_entries;
  }

  // Fills `proc` (whose identity is set) and returns its state for the run's assembly.
  std::unique_ptr<ProcessState> run(Process& proc) {
    const Process identity = proc;
    if (conns_.size() == 1 && !ranged(options_.capture_range)) {
      try {
        return one_pass(proc);
      } catch (const NeedsScan&) {
        if (sink_) sink_->discard();
        sink_.reset();
        proc = identity;
      }
    }
    return two_passes(proc);
  }

  std::unique_ptr<ProcessTraceSink> take_sink() { return std::move(sink_); }

 private:
  std::unique_ptr<ProcessState> state(Process& proc) {
    return std::make_unique<ProcessState>(proc, options_, marker_, wants_, index_);
  }

  // The process as one step, read once.
  std::unique_ptr<ProcessState> one_pass(Process& proc) {
    std::unique_ptr<ProcessState> st = state(proc);
    Step& s = st->steps.emplace_back();
    s.action = options_.schedule ? schedule_action(*options_.schedule, 0) : StepAction::kRecordAndSave;
    s.cycle = recorded(s.action) ? 0 : -1;
    proc.outside_steps_counted = !options_.schedule;  // nothing is outside its one step
    if (outputs_.traces) {
      // The process's span is learnt as it is read: its times are given from a second
      // before its connection (its first events come moments before it connects).
      constexpr int64_t kBeforeConnecting = 1'000'000'000;
      sink_ = outputs_.traces(proc, {}, static_cast<int64_t>(conns_.front()->hello.real_ns) - kBeforeConnecting);
      st->trace = sink_.get();
    }
    ConnPass pass(*conns_.front(), *st, nullptr);
    read_conn(reader_, *conns_.front(), pass, &progress_);
    // Without any CPU event the process has no step: its GPU records count in none.
    if (proc.cpu_events == 0 && st->any_gpu) throw NeedsScan{"GPU records without events"};
    if (proc.cpu_events == 0) {
      st->steps.clear();
    } else {
      st->steps.front().start_ns = proc.start_ns;
      st->steps.front().dur_ns = proc.end_ns - proc.start_ns;
    }
    proc.steps = st->steps;
    return st;
  }

  std::unique_ptr<ProcessState> two_passes(Process& proc) {
    scan_ = scan_process(reader_, conns_, options_, marker_, proc);
    std::unique_ptr<ProcessState> st = state(proc);
    st->scan = &scan_;
    st->steps = scan_.steps;
    st->outside_counts = proc.outside_steps_counted = !options_.schedule && proc.capture_toggles.empty();
    st->locator = std::make_unique<StepLocator>(st->steps);
    if (ranged(options_.capture_range)) st->windows = &scan_.windows;
    proc.steps = scan_.steps;
    if (outputs_.traces) {
      sink_ = outputs_.traces(proc, st->steps, st->outside_counts ? scan_.start_ns : 0);
      st->trace = sink_.get();
    }
    for (size_t c = 0; c < conns_.size(); ++c) {
      ConnPass pass(*conns_[c], *st, &scan_.conns[c]);
      read_conn(reader_, *conns_[c], pass, &progress_);
    }
    if (st->windows != nullptr && st->windows->empty() && (proc.cpu_events > 0 || st->any_gpu)) {
      st->late_warnings.push_back(no_window_warning(options_.capture_range));
    }
    return st;
  }

  CaptureReader& reader_;
  const std::vector<const ConnInput*>& conns_;
  const AnalysisOptions& options_;
  const StepMarker& marker_;
  const EngineOutputs& outputs_;
  size_t index_;
  Progress& progress_;
  OutputWants wants_;
  ProcessScan scan_;
  std::unique_ptr<ProcessTraceSink> sink_;
};

// What the process keeps once its passes are done.
void finish_process(ProcessState& st) {
  Process& proc = st.proc;
  proc.gpu_records = std::move(st.gpu_records);
  std::stable_sort(proc.gpu_records.begin(), proc.gpu_records.end(),
                   [](const GpuRecord& x, const GpuRecord& y) { return x.start_ns < y.start_ns; });
  proc.memory_events = std::move(st.memory_events);
  running_totals(proc.memory_events);
  if (st.tensors != nullptr && st.tensors->any()) {
    // Their running totals were kept as read: the events of steps not traced are not here.
    proc.tensor_memory = std::move(st.tensor_events);
    std::stable_sort(proc.tensor_memory.begin(), proc.tensor_memory.end(),
                     [](const MemoryEvent& x, const MemoryEvent& y) { return x.ts_ns < y.ts_ns; });
    proc.tensor_summary = st.tensors->finish(proc.steps.empty() ? st.steps : proc.steps);
  }
  if (st.history != nullptr) {
    proc.memory_history = st.history->finish();
    if (proc.memory_history->dropped > 0) {
      st.late_warnings.push_back("memory_snapshot.pickle holds the last " +
                                 std::to_string(proc.memory_history->max_entries) + " CUDA tensor entries: " +
                                 std::to_string(proc.memory_history->dropped) +
                                 " older ones left out (--memory-snapshot-entries)");
    }
  }
  for (size_t r = 0; r < st.roles.size(); ++r) {
    proc.roles_filled_ns += st.roles[r].filled_ns();
    proc.cpu_roles[r] = st.roles[r].take();
  }
  std::stable_sort(proc.threads.begin(), proc.threads.end(), [](const ThreadInfo& x, const ThreadInfo& y) {
    if (x.is_main != y.is_main) return x.is_main;
    return x.tid < y.tid;
  });
  proc.events = proc.cpu_events + st.gpu_events;
  proc.left_out_in_steps = st.left_out_in_steps;
  proc.left_out_outside_steps = st.left_out_outside;
  if (st.unmatched_gpu > 0) {
    st.late_warnings.push_back(std::to_string(st.unmatched_gpu) +
                               " GPU records have no recorded launching API call; they count in no range");
  }
}

void finish_run(Run& run, std::vector<std::unique_ptr<ProcessState>>& states, const EngineOutputs& outputs) {
  int64_t first = std::numeric_limits<int64_t>::max();
  int64_t last = 0;
  Rows rows;
  std::vector<TimelineSlice> slices;
  for (size_t i = 0; i < run.processes.size(); ++i) {
    Process& proc = run.processes[i];
    ProcessState& st = *states[i];
    run.dropped_events += proc.dropped;
    run.left_out_in_steps += proc.left_out_in_steps;
    run.left_out_outside_steps += proc.left_out_outside_steps;
    note_buffer_losses(proc);
    if (!proc.loss_note.empty()) run.loss_notes.push_back("pid " + std::to_string(proc.pid) + ": " + proc.loss_note);
    proc.warnings.insert(proc.warnings.end(), st.late_warnings.begin(), st.late_warnings.end());
    if (proc.cpu_events == 0 && st.gpu_events == 0) ++run.processes_without_events;
    run.cupti_dropped += proc.cupti_dropped;
    if (st.any_gpu) run.has_gpu = true;
    for (const std::string& n : proc.gpu_notices) run.gpu_notices.push_back("pid " + std::to_string(proc.pid) + ": " + n);
    if (proc.start_ns != 0) first = std::min(first, proc.start_ns);
    last = std::max(last, proc.end_ns);
    rows.merge(std::move(st.rows));
    run.timeline_slices += st.slices.seen();
    slices.insert(slices.end(), st.slices.kept().begin(), st.slices.kept().end());
    for (auto& [name, s] : st.stats.ranges) run.stats.ranges[name].merge(s);
    for (auto& [name, s] : st.stats.api) run.stats.api[name].merge(s);
    for (auto& [key, ns] : st.folded) run.folded[key] += ns;
    run.op_infos.insert(run.op_infos.end(), st.op_infos.begin(), st.op_infos.end());
  }
  if (run.start_ns == 0 && first != std::numeric_limits<int64_t>::max()) run.start_ns = first;
  if (run.end_ns == 0) run.end_ns = last;
  if (run.host.empty() && !run.processes.empty()) run.host = run.processes.front().host;
  if (run.command.empty() && !run.processes.empty()) run.command = run.processes.front().cmdline;
  run.ops = rows.take();
  for (const OpStats& op : run.ops) {
    if (op.self_cuda_ns != 0 || op.cuda_total_ns != 0) run.has_gpu = true;
  }
  if (outputs.timeline != 0) {
    engine::LongestSlices longest(outputs.timeline);
    for (const TimelineSlice& s : slices) longest.offer(s);
    longest.prune();
    run.timeline = std::move(longest.kept());
  }
}

}  // namespace

Run analyse_capture(CaptureReader& reader, const AnalysisOptions& options, const EngineOutputs& outputs) {
  const StepMarker marker(options.step_marker);
  Run run;
  const ScanResult scanned = scan_capture(reader);
  apply_run_info(scanned, run);
  run.truncated = reader.truncated();
  run.truncated_at = reader.truncated_at();
  run.corrupted = reader.corrupted();
  run.corrupt_chunks = reader.damage_count();
  run.corrupt_bytes = reader.damaged_bytes();
  run.corrupt_at = reader.first_damage_at();

  // Connections of the same pid (a fork copy that then exec'd) are one process.
  std::vector<std::vector<const ConnInput*>> groups;
  std::unordered_map<int, size_t> by_pid;
  uint64_t total = 0;
  for (const auto& conn : scanned.conns) {
    auto [it, fresh] = by_pid.try_emplace(conn->hello.pid, groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(conn.get());
    for (const FrameRef& f : conn->frames) total += f.size;
  }
  run.processes.resize(groups.size());
  for (size_t i = 0; i < groups.size(); ++i) {
    for (const ConnInput* conn : groups[i]) apply_identity(*conn, run.processes[i]);
  }
  Progress progress(outputs.progress, total);
  std::vector<std::unique_ptr<ProcessState>> states;
  for (size_t i = 0; i < groups.size(); ++i) {
    Process& proc = run.processes[i];
    ProcessAnalysis analysis(reader, groups[i], options, marker, outputs, i, progress);
    states.push_back(analysis.run(proc));
    for (const ConnInput* conn : groups[i]) {
      if (conn->bye) apply_bye(*conn->bye, proc);
    }
    finish_process(*states.back());
    states.back()->scan = nullptr;
    states.back()->trace = nullptr;
    // The process's traces are complete: their files close now, not at the run's end.
    if (std::unique_ptr<ProcessTraceSink> sink = analysis.take_sink()) sink->finish(run, proc);
  }
  apply_launcher_view(run, scanned);
  finish_run(run, states, outputs);
  list_unheard_target(run, scanned);
  assign_roles(run);
  return run;
}

Run analyse_capture_file(const std::string& path, const AnalysisOptions& options, const EngineOutputs& outputs) {
  CaptureReader reader(path);
  return analyse_capture(reader, options, outputs);
}

}  // namespace torchprof
