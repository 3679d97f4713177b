#include "analysis/gpu_analysis.h"

#include <algorithm>
#include <limits>
#include <string>
#include <unordered_map>

namespace torchprof {

namespace {

// Index of the step whose interval holds `t` (the later one on ties), -1 for none.
int32_t step_at(const Process& proc, int64_t t) {
  const std::vector<Step>& steps = proc.steps;
  auto after = std::upper_bound(steps.begin(), steps.end(), t,
                                [](int64_t v, const Step& s) { return v < s.start_ns; });
  for (auto k = after - steps.begin() - 1; k >= 0; --k) {
    if (t <= steps[k].start_ns + steps[k].dur_ns) return static_cast<int32_t>(k);
  }
  return -1;
}

// The innermost range around event `i` (API calls nest under ranges only).
int32_t enclosing_range(const std::vector<Event>& ev, int32_t i) {
  for (int32_t p = ev[i].parent; p >= 0; p = ev[p].parent) {
    if (ev[p].kind == EventKind::kRange) return p;
  }
  return -1;
}

std::unordered_map<uint64_t, int32_t> api_by_correlation(const std::vector<Event>& ev) {
  std::unordered_map<uint64_t, int32_t> by_corr;
  for (size_t i = 0; i < ev.size(); ++i) {
    if (is_cuda_api(ev[i].kind) && ev[i].correlation != 0) {
      by_corr.emplace(ev[i].correlation, static_cast<int32_t>(i));
    }
  }
  return by_corr;
}

void attribute_memory(Process& proc, const std::unordered_map<uint64_t, int32_t>& by_corr) {
  std::map<uint32_t, int64_t> live;
  std::unordered_map<uint64_t, uint64_t> blocks;  // (device << 48 ^ address) → bytes
  for (MemoryEvent& m : proc.memory_events) {
    auto api = m.correlation != 0 ? by_corr.find(m.correlation) : by_corr.end();
    m.step = api != by_corr.end() ? proc.events_list[api->second].step : step_at(proc, m.ts_ns);
    uint64_t key = (uint64_t{m.device} << 48) ^ m.address;
    int64_t& total = live[m.device];
    if (m.alloc) {
      blocks[key] = m.bytes;
      total += static_cast<int64_t>(m.bytes);
    } else if (auto b = blocks.find(key); b != blocks.end()) {
      // Blocks allocated before tracing began are unknown: they do not lower the total.
      total -= static_cast<int64_t>(b->second);
      blocks.erase(b);
    }
    m.live_bytes = total;
  }
}

}  // namespace

void attribute_gpu(Process& proc) {
  const std::vector<Event>& ev = proc.events_list;
  proc.cuda_times.clear();
  if (proc.gpu_events.empty() && proc.memory_events.empty()) return;
  proc.cuda_times.assign(ev.size(), CudaTime{});
  std::vector<CudaTime>& cuda = proc.cuda_times;
  const auto by_corr = api_by_correlation(ev);
  uint64_t unmatched = 0;
  for (GpuEvent& g : proc.gpu_events) {
    g.api = g.range = -1;
    auto it = by_corr.find(g.correlation);
    if (it != by_corr.end()) {
      g.api = it->second;
      g.range = enclosing_range(ev, g.api);
      // GPU work that ends after its step's CPU side still counts for that step.
      g.step = ev[g.api].step;
    } else {
      g.step = step_at(proc, g.start_ns);
      if (g.kind != GpuKind::kSync) ++unmatched;
    }
    if (g.kind == GpuKind::kSync || g.range < 0) continue;
    const int64_t dur = g.dur_ns();
    cuda[static_cast<size_t>(g.range)].self_ns += dur;
    for (int32_t r = g.range; r >= 0; r = ev[r].parent) {
      if (ev[r].kind == EventKind::kRange) cuda[static_cast<size_t>(r)].total_ns += dur;
    }
  }
  if (unmatched > 0) {
    proc.warnings.push_back(std::to_string(unmatched) +
                            " GPU records have no recorded launching API call; they count in no range");
  }
  attribute_memory(proc, by_corr);
}

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

bool in_recorded_step(const Process& proc, const GpuEvent& g) {
  return g.step >= 0 && static_cast<size_t>(g.step) < proc.steps.size() && proc.steps[g.step].cycle >= 0;
}

namespace {

void add_record(DeviceUsage& u, const GpuEvent& g) {
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
std::vector<DeviceUsage> usage_of(const std::vector<const GpuEvent*>& records, const StepsWindow& window) {
  const int64_t steps_start = window.start;
  const int64_t steps_end = window.end;
  std::map<uint32_t, DeviceUsage> usage;
  std::map<uint32_t, std::vector<std::pair<int64_t, int64_t>>> kernels, all;
  std::map<std::pair<uint32_t, uint32_t>, std::vector<std::pair<int64_t, int64_t>>> streams;
  for (const GpuEvent* record : records) {
    const GpuEvent& g = *record;
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
  std::vector<const GpuEvent*> records;
  for (const GpuEvent& g : proc.gpu_events) {
    if (keep(g)) records.push_back(&g);
  }
  return usage_of(records, recorded_steps_window(proc));
}

std::vector<std::vector<const GpuEvent*>> gpu_records_per_step(const Process& proc) {
  std::vector<std::vector<const GpuEvent*>> by_step(proc.steps.size());
  for (const GpuEvent& g : proc.gpu_events) {
    if (g.step >= 0 && static_cast<size_t>(g.step) < by_step.size()) by_step[g.step].push_back(&g);
  }
  return by_step;
}

std::vector<std::vector<DeviceUsage>> device_usage_per_step(const Process& proc) {
  const std::vector<std::vector<const GpuEvent*>> by_step = gpu_records_per_step(proc);
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
