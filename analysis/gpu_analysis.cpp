#include "analysis/gpu_analysis.h"

#include <algorithm>
#include <limits>
#include <string>
#include <unordered_map>

namespace torchprof {

int64_t merged_length(std::vector<std::pair<int64_t, int64_t>> intervals) {
  // Mostly taken from records in start order: sorted already, apart from equal starts.
  if (!std::is_sorted(intervals.begin(), intervals.end())) std::sort(intervals.begin(), intervals.end());
  int64_t total = 0;
  int64_t cur_start = 0;
  int64_t cur_end = std::numeric_limits<int64_t>::min();
  for (const auto& [start, end] : intervals) {
    if (start > cur_end) {
      if (cur_end != std::numeric_limits<int64_t>::min()) total += cur_end - cur_start;
      cur_start = start;
      cur_end = end;
    } else {
      cur_end = std::max(cur_end, end);
    }
  }
  if (cur_end != std::numeric_limits<int64_t>::min()) total += cur_end - cur_start;
  return total;
}

bool in_recorded_step(const Process& proc, const GpuRecord& g) {
  return g.step >= 0 && static_cast<size_t>(g.step) < proc.steps.size() && proc.steps[g.step].cycle >= 0;
}

namespace {

void add_record(DeviceUsage& u, const GpuRecord& g) {
  switch (g.kind) {
    case GpuKind::kKernel:
      ++u.kernels;
      u.kernel_ns += g.dur_ns();
      break;
    case GpuKind::kMemcpy:
      ++u.memcpys;
      u.memcpy_ns += g.dur_ns();
      u.memcpy_bytes += g.bytes;
      break;
    case GpuKind::kMemset:
      ++u.memsets;
      u.memset_ns += g.dur_ns();
      u.memset_bytes += g.bytes;
      break;
    case GpuKind::kSync:
      ++u.syncs;
      return;
  }
  ++u.streams[g.stream].ops;
}

}  // namespace

namespace {

struct StepsWindow {
  int64_t start = std::numeric_limits<int64_t>::max();
  int64_t end = std::numeric_limits<int64_t>::min();
};

// From the first recorded step's start to the last one's end.
StepsWindow recorded_steps_window(const Process& proc) {
  StepsWindow w;
  for (const Step& s : proc.steps) {
    if (s.cycle < 0) continue;
    w.start = std::min(w.start, s.start_ns);
    w.end = std::max(w.end, s.start_ns + s.dur_ns);
  }
  return w;
}

// device_usage() over the records `records` (in the process's order).
std::vector<DeviceUsage> usage_of(const std::vector<const GpuRecord*>& records, const StepsWindow& window) {
  const int64_t steps_start = window.start;
  const int64_t steps_end = window.end;
  std::map<uint32_t, DeviceUsage> usage;
  std::map<uint32_t, std::vector<std::pair<int64_t, int64_t>>> kernels, all;
  std::map<std::pair<uint32_t, uint32_t>, std::vector<std::pair<int64_t, int64_t>>> streams;
  for (const GpuRecord* record : records) {
    const GpuRecord& g = *record;
    DeviceUsage& u = usage[g.device];
    if (u.kernels + u.memcpys + u.memsets + u.syncs == 0) {
      u.device = g.device;
      u.window_start_ns = std::min(steps_start, g.start_ns);
      u.window_end_ns = std::max(steps_end, g.end_ns);
    }
    u.window_start_ns = std::min(u.window_start_ns, g.start_ns);
    u.window_end_ns = std::max(u.window_end_ns, g.end_ns);
    add_record(u, g);
    if (g.kind == GpuKind::kSync) continue;
    all[g.device].emplace_back(g.start_ns, g.end_ns);
    streams[{g.device, g.stream}].emplace_back(g.start_ns, g.end_ns);
    if (g.kind == GpuKind::kKernel) kernels[g.device].emplace_back(g.start_ns, g.end_ns);
  }
  std::vector<DeviceUsage> out;
  for (auto& [device, u] : usage) {
    u.busy_ns = merged_length(std::move(kernels[device]));
    u.busy_all_ns = merged_length(std::move(all[device]));
    u.idle_ns = std::max<int64_t>(0, u.window_end_ns - u.window_start_ns - u.busy_ns);
    for (auto& [stream, st] : u.streams) st.busy_ns = merged_length(std::move(streams[{device, stream}]));
    out.push_back(std::move(u));
  }
  return out;
}

}  // namespace

std::vector<DeviceUsage> device_usage(const Process& proc, const GpuFilter& keep) {
  std::vector<const GpuRecord*> records;
  for (const GpuRecord& g : proc.gpu_records) {
    if (keep(g)) records.push_back(&g);
  }
  return usage_of(records, recorded_steps_window(proc));
}

std::vector<std::vector<const GpuRecord*>> gpu_records_per_step(const Process& proc) {
  std::vector<std::vector<const GpuRecord*>> by_step(proc.steps.size());
  for (const GpuRecord& g : proc.gpu_records) {
    if (g.step >= 0 && static_cast<size_t>(g.step) < by_step.size()) by_step[g.step].push_back(&g);
  }
  return by_step;
}

std::vector<std::vector<DeviceUsage>> device_usage_per_step(const Process& proc) {
  const std::vector<std::vector<const GpuRecord*>> by_step = gpu_records_per_step(proc);
  const StepsWindow window = recorded_steps_window(proc);
  std::vector<std::vector<DeviceUsage>> out;
  out.reserve(by_step.size());
  for (const auto& records : by_step) out.push_back(usage_of(records, window));
  return out;
}

MemoryUsage memory_usage(const Process& proc) {
  MemoryUsage m;
  for (const MemoryEvent& e : proc.memory_events) {
    int64_t& peak = m.peak_bytes[e.device];
    peak = std::max(peak, e.live_bytes);
    m.final_bytes[e.device] = e.live_bytes;
    if (e.alloc) {
      ++m.allocations;
      m.alloc_bytes += e.bytes;
    } else {
      ++m.frees;
      m.free_bytes += e.bytes;
    }
  }
  return m;
}

namespace {

// Step `s`'s peaks, given the running totals before its start (`live`) and the first
// memory event at or after its start.
std::map<uint32_t, int64_t> peak_from(const Process& proc, const Step& s, std::map<uint32_t, int64_t> live,
                                      size_t first) {
  std::map<uint32_t, int64_t> peak;
  for (size_t i = first; i < proc.memory_events.size(); ++i) {
    const MemoryEvent& e = proc.memory_events[i];
    if (e.ts_ns > s.start_ns + s.dur_ns) break;
    peak[e.device] = std::max({peak[e.device], live[e.device], e.live_bytes});
  }
  for (const auto& [device, bytes] : live) peak[device] = std::max(peak[device], bytes);
  return peak;
}

}  // namespace

std::map<uint32_t, int64_t> step_peak_bytes(const Process& proc, int step) {
  if (step < 0 || static_cast<size_t>(step) >= proc.steps.size()) return {};
  const Step& s = proc.steps[step];
  std::map<uint32_t, int64_t> live;  // what the step starts with
  size_t first = 0;
  for (; first < proc.memory_events.size() && proc.memory_events[first].ts_ns < s.start_ns; ++first) {
    live[proc.memory_events[first].device] = proc.memory_events[first].live_bytes;
  }
  return peak_from(proc, s, std::move(live), first);
}

std::vector<std::map<uint32_t, int64_t>> peak_bytes_per_step(const Process& proc) {
  std::vector<std::map<uint32_t, int64_t>> out;
  out.reserve(proc.steps.size());
  // Steps come in start order, so the events before each start only grow: one sweep.
  std::map<uint32_t, int64_t> live;
  size_t first = 0;
  int64_t last_start = std::numeric_limits<int64_t>::min();
  for (size_t k = 0; k < proc.steps.size(); ++k) {
    const Step& s = proc.steps[k];
    if (s.start_ns < last_start) {  // not in start order: each step on its own
      out.push_back(step_peak_bytes(proc, static_cast<int>(k)));
      continue;
    }
    last_start = s.start_ns;
    for (; first < proc.memory_events.size() && proc.memory_events[first].ts_ns < s.start_ns; ++first) {
      live[proc.memory_events[first].device] = proc.memory_events[first].live_bytes;
    }
    out.push_back(peak_from(proc, s, live, first));
  }
  return out;
}

}  // namespace torchprof
