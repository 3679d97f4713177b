#include "analysis/merge.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "analysis/analysis.h"
#include "analysis/rows.h"
#include "common/errors.h"

namespace torchprof {

namespace {

RunInput describe(const Run& run, const MergeSource& source) {
  RunInput in;
  in.label = source.label;
  in.capture = source.capture;
  in.command = run.command;
  in.exit_code = run.exit_code;
  in.host = run.host;
  in.truncated = run.truncated;
  in.corrupted = run.corrupted;
  in.processes = run.processes.size();
  return in;
}

// The same process in two inputs means the same run was given twice (or copied).
void refuse_repeats(const std::vector<Run>& runs, const std::vector<MergeSource>& sources) {
  std::map<std::tuple<std::string, int, int64_t>, size_t> seen;
  for (size_t i = 0; i < runs.size(); ++i) {
    for (const Process& p : runs[i].processes) {
      if (p.start_ns == 0) continue;  // never emitted: nothing to tell it apart
      auto [it, fresh] = seen.try_emplace({p.host, p.pid, p.start_ns}, i);
      if (fresh || it->second == i) continue;
      throw InputError(sources[it->second].label + " and " + sources[i].label +
                       " hold the same run (host " + p.host + ", pid " + std::to_string(p.pid) +
                       "): give each run once");
    }
  }
}

std::string prefixed(const std::string& label, const std::string& text) { return label + ": " + text; }

}  // namespace

Run merge_runs(std::vector<Run> runs, const std::vector<MergeSource>& sources) {
  if (runs.size() != sources.size()) throw std::logic_error("merge_runs: one source per run");
  refuse_repeats(runs, sources);
  Run merged;
  std::set<std::string> workers;  // worker names taken by earlier inputs
  std::set<std::string> own;      // and by the current one
  std::unordered_map<std::string, size_t> rows;  // op_row_key -> index in merged.ops
  for (size_t i = 0; i < runs.size(); ++i) {
    Run& run = runs[i];
    const std::string& label = sources[i].label;
    merged.inputs.push_back(describe(run, sources[i]));
    if (i == 0) {
      merged.command = run.command;
      merged.host = run.host;
      merged.start_ns = run.start_ns;
    }
    if (merged.exit_code == 0) merged.exit_code = run.exit_code;
    if (run.start_ns != 0) merged.start_ns = merged.start_ns == 0 ? run.start_ns : std::min(merged.start_ns, run.start_ns);
    merged.end_ns = std::max(merged.end_ns, run.end_ns);
    merged.dropped_events += run.dropped_events;
    merged.left_out_in_steps += run.left_out_in_steps;
    merged.left_out_outside_steps += run.left_out_outside_steps;
    merged.processes_without_events += run.processes_without_events;
    if (run.truncated && !merged.truncated) {
      merged.truncated = true;
      merged.truncated_at = run.truncated_at;
    }
    if (run.truncated) {
      merged.warnings.push_back(prefixed(label, "capture truncated at byte " + std::to_string(run.truncated_at)));
    }
    if (run.corrupted) {
      if (!merged.corrupted) merged.corrupt_at = run.corrupt_at;
      merged.corrupted = true;
      merged.corrupt_chunks += run.corrupt_chunks;
      merged.corrupt_bytes += run.corrupt_bytes;
      merged.warnings.push_back(prefixed(label, corruption_text(run)));
    }
    for (const std::string& w : run.warnings) merged.warnings.push_back(prefixed(label, w));
    merged.has_gpu = merged.has_gpu || run.has_gpu;
    merged.cupti_dropped += run.cupti_dropped;
    for (const std::string& n : run.gpu_notices) merged.gpu_notices.push_back(prefixed(label, n));
    for (const std::string& n : run.loss_notes) merged.loss_notes.push_back(prefixed(label, n));
    own.clear();
    for (Process& p : run.processes) {
      p.input = static_cast<int>(i);
      if (workers.count(p.worker)) {
        const std::string renamed = p.worker + "_in" + std::to_string(i);
        merged.warnings.push_back(prefixed(label, "worker " + p.worker + " is also in an earlier input; named " +
                                                      renamed + " here"));
        p.worker = renamed;
      }
      own.insert(p.worker);
      merged.processes.push_back(std::move(p));
    }
    workers.insert(own.begin(), own.end());
    // Rows by key, in the order of their first use: every row of an earlier input first.
    for (OpStats& op : run.ops) {
      auto [it, fresh] = rows.try_emplace(op_row_key(op, op.name), merged.ops.size());
      if (fresh) {
        merged.ops.push_back(std::move(op));
        continue;
      }
      OpStats& row = merged.ops[it->second];
      row.calls += op.calls;
      row.self_cpu_ns += op.self_cpu_ns;
      row.cpu_total_ns += op.cpu_total_ns;
      row.self_cuda_ns += op.self_cuda_ns;
      row.cuda_total_ns += op.cuda_total_ns;
      add_memory(row, op);
    }
    for (TimelineSlice& s : run.timeline) {
      s.input = static_cast<int>(i);
      merged.timeline.push_back(s);
    }
    merged.timeline_slices += run.timeline_slices;
    for (auto& [name, s] : run.stats.ranges) merged.stats.ranges[name].merge(s);
    for (auto& [name, s] : run.stats.api) merged.stats.api[name].merge(s);
    for (auto& [key, ns] : run.folded) merged.folded[key] += ns;
    merged.op_infos.insert(merged.op_infos.end(), run.op_infos.begin(), run.op_infos.end());
  }
  for (const OpStats& op : merged.ops) {
    if (op.self_cuda_ns != 0 || op.cuda_total_ns != 0) merged.has_gpu = true;
  }
  return merged;
}

}  // namespace torchprof
