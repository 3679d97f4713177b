#include "analysis/overview.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <string_view>

#include "analysis/gpu_analysis.h"

namespace torchprof {

namespace {

constexpr int64_t kMinusInf = std::numeric_limits<int64_t>::min();
constexpr int64_t kPlusInf = std::numeric_limits<int64_t>::max();

constexpr const char* kPartKeys[kBreakdownParts] = {"kernel", "memcpy", "memset", "cuda_runtime",
                                                    "dataloader", "cpu_exec", "other"};
constexpr const char* kPartLabels[kBreakdownParts] = {"Kernel", "Memcpy", "Memset", "CUDA runtime",
                                                      "DataLoader", "CPU exec", "Other"};

bool is_gpu_op(const GpuRecord& g) { return g.kind != GpuKind::kSync; }

// Length of `merged` (sorted, disjoint) inside [s, e).
int64_t covered(const Intervals& merged, int64_t s, int64_t e) {
  auto it = std::upper_bound(merged.begin(), merged.end(), s,
                             [](int64_t t, const std::pair<int64_t, int64_t>& iv) { return t < iv.second; });
  int64_t total = 0;
  for (; it != merged.end() && it->first < e; ++it) total += std::min(e, it->second) - std::max(s, it->first);
  return total;
}

// What the overview reads of a process: the events and GPU records of the counted steps,
// the same a trace of those steps holds (formats/kineto_trace.cpp), so that the plugin
// and HTA would compute the same figures from the trace.
class Scope {
 public:
  Scope(const Process& p, const std::vector<size_t>& ks) : p_(p), counted_(p.steps.size(), false) {
    for (size_t k : ks) counted_[k] = true;
  }
  const Process& process() const { return p_; }
  bool step(int32_t k) const { return k >= 0 && static_cast<size_t>(k) < counted_.size() && counted_[static_cast<size_t>(k)]; }
  bool has(const GpuRecord& g) const { return step(g.step); }
  bool op(const GpuRecord& g) const { return is_gpu_op(g) && has(g); }

 private:
  const Process& p_;
  std::vector<bool> counted_;
};

// The steps the overview counts, per process (indices into Process::steps): the recorded
// steps of processes with step markers, or of every process when none has a marker.
std::vector<std::vector<size_t>> counted_steps(const Run& run) {
  bool any_marked = false;
  for (const Process& p : run.processes) {
    for (const Step& s : p.steps) any_marked = any_marked || s.marker;
  }
  std::vector<std::vector<size_t>> out(run.processes.size());
  for (size_t i = 0; i < run.processes.size(); ++i) {
    const Process& p = run.processes[i];
    for (size_t k = 0; k < p.steps.size(); ++k) {
      const Step& s = p.steps[k];
      if (s.cycle >= 0 && (!any_marked || s.marker)) out[i].push_back(k);
    }
  }
  return out;
}

// --- the breakdown -------------------------------------------------------------------

// The busy intervals of each role, merged, in precedence order (other excluded): the GPU
// records' of the counted steps, and the CPU roles the engine merged over the recorded
// steps (Process::cpu_roles: the counted steps of a counted process are its recorded ones).
std::array<Intervals, kPartOther> role_intervals(const Scope& scope) {
  const Process& p = scope.process();
  std::array<Intervals, kPartOther> roles;
  for (const GpuRecord& g : p.gpu_records) {
    if (!scope.has(g)) continue;
    if (g.kind == GpuKind::kKernel) roles[kPartKernel].emplace_back(g.start_ns, g.end_ns);
    if (g.kind == GpuKind::kMemcpy) roles[kPartMemcpy].emplace_back(g.start_ns, g.end_ns);
    if (g.kind == GpuKind::kMemset) roles[kPartMemset].emplace_back(g.start_ns, g.end_ns);
  }
  for (int r = kPartKernel; r <= kPartMemset; ++r) roles[r] = merge_intervals(std::move(roles[r]));
  roles[kPartRuntime] = p.cpu_roles[0];
  roles[kPartDataLoader] = p.cpu_roles[1];
  roles[kPartCpuExec] = p.cpu_roles[2];
  return roles;
}

void add_breakdown(const Scope& scope, const std::vector<size_t>& ks, const Intervals& windows,
                   std::vector<StepBreakdown>& out) {
  const Process& p = scope.process();
  const std::array<Intervals, kPartOther> roles = role_intervals(scope);
  std::array<Intervals, kBreakdownParts> parts;
  Intervals slots = merge_intervals(windows);
  for (int r = 0; r < kPartOther; ++r) {
    parts[r] = intersect_intervals(roles[r], slots);
    slots = subtract_intervals(slots, parts[r]);
  }
  parts[kPartOther] = std::move(slots);
  for (size_t j = 0; j < ks.size(); ++j) {
    const Step& s = p.steps[ks[j]];
    StepBreakdown& b = out.emplace_back();
    b.pid = p.pid;
    b.index = s.index;
    b.name = s.name;
    b.start_ns = windows[j].first;
    b.dur_ns = windows[j].second - windows[j].first;
    for (int r = 0; r < kBreakdownParts; ++r) b.parts[r] = covered(parts[r], windows[j].first, windows[j].second);
  }
}

// --- GPU idle --------------------------------------------------------------------------

// A run of overlapping GPU ops of one device, and the earliest launch (API call start)
// among the ops that start it, when one is known.
struct Block {
  int64_t start = 0;
  int64_t end = 0;
  bool launch_known = false;
  int64_t launch = 0;
};

struct Launch {
  bool known = false;
  int64_t start = 0;
};

Launch launch_of(const GpuRecord& g) { return {g.api_known, g.api_start_ns}; }

enum class IdleKind { kHost, kKernel, kOther };

// HTA's rule for a gap [a, b) ended by an op launched at `launch`. No op after the gap
// (b = +inf): nothing more was queued, host wait.
IdleKind classify(int64_t a, int64_t b, Launch launch, int64_t kernel_wait_ns) {
  if (b == kPlusInf) return IdleKind::kHost;
  if (launch.known && launch.start > a) return IdleKind::kHost;
  if (a != kMinusInf && b - a < kernel_wait_ns) return IdleKind::kKernel;
  return IdleKind::kOther;
}

void add_idle(IdleSplit& split, IdleKind kind, int64_t ns) {
  if (kind == IdleKind::kHost) split.host_wait_ns += ns;
  if (kind == IdleKind::kKernel) split.kernel_wait_ns += ns;
  if (kind == IdleKind::kOther) split.other_ns += ns;
}

std::vector<Block> device_blocks(const Scope& scope, uint32_t device) {
  const Process& p = scope.process();
  std::vector<Block> blocks;
  for (const GpuRecord& g : p.gpu_records) {  // in start order
    if (!scope.op(g) || g.device != device) continue;
    const Launch l = launch_of(g);
    if (blocks.empty() || g.start_ns > blocks.back().end) {
      blocks.push_back({g.start_ns, g.end_ns, l.known, l.start});
      continue;
    }
    Block& b = blocks.back();
    b.end = std::max(b.end, g.end_ns);
    if (g.start_ns == b.start && l.known && (!b.launch_known || l.start < b.launch)) {
      b.launch_known = true;
      b.launch = l.start;
    }
  }
  return blocks;
}

// Idle of [s, e) against the device's blocks, each gap classified as a whole.
IdleSplit idle_in(const std::vector<Block>& blocks, int64_t s, int64_t e, int64_t kernel_wait_ns) {
  IdleSplit split;
  size_t i = static_cast<size_t>(std::upper_bound(blocks.begin(), blocks.end(), s,
                                                  [](int64_t t, const Block& b) { return t < b.end; }) -
                                 blocks.begin());
  int64_t t = s;
  while (t < e) {
    if (i < blocks.size() && blocks[i].start <= t) {
      t = std::min(e, blocks[i].end);
      ++i;
      continue;
    }
    const int64_t gap_start = i > 0 ? blocks[i - 1].end : kMinusInf;
    const int64_t gap_end = i < blocks.size() ? blocks[i].start : kPlusInf;
    const Launch next = i < blocks.size() ? Launch{blocks[i].launch_known, blocks[i].launch} : Launch{};
    const int64_t idle_end = std::min(e, gap_end);
    add_idle(split, classify(gap_start, gap_end, next, kernel_wait_ns), idle_end - t);
    t = idle_end;
  }
  return split;
}

// HTA's per-stream split over the recorded steps' ops of one device.
std::vector<StreamIdle> stream_idle(const Scope& scope, uint32_t device, int64_t kernel_wait_ns) {
  const Process& p = scope.process();
  std::map<uint32_t, std::vector<const GpuRecord*>> by_stream;
  for (const GpuRecord& g : p.gpu_records) {
    if (scope.op(g) && g.device == device) by_stream[g.stream].push_back(&g);
  }
  std::vector<StreamIdle> out;
  for (const auto& [stream, ops] : by_stream) {
    StreamIdle& s = out.emplace_back();
    s.stream = stream;
    s.ops = ops.size();
    for (size_t i = 1; i < ops.size(); ++i) {
      const int64_t prev_end = ops[i - 1]->end_ns;
      const int64_t gap = ops[i]->start_ns - prev_end;
      const Launch l = launch_of(*ops[i]);
      IdleKind kind = IdleKind::kOther;
      if (l.known && l.start > prev_end) {
        kind = IdleKind::kHost;
      } else if (gap < kernel_wait_ns) {
        kind = IdleKind::kKernel;
      }
      add_idle(s.idle, kind, gap);
    }
  }
  return out;
}

void add_devices(const Scope& scope, const Intervals& windows, size_t first_step, const OverviewThresholds& t,
                 std::vector<DeviceOverview>& out) {
  const Process& p = scope.process();
  std::map<uint32_t, Intervals> kernels;
  for (const GpuRecord& g : p.gpu_records) {
    if (!scope.op(g)) continue;
    Intervals& k = kernels[g.device];
    if (g.kind == GpuKind::kKernel) k.emplace_back(g.start_ns, g.end_ns);
  }
  for (auto& [device, kernel_intervals] : kernels) {
    const Intervals merged_kernels = merge_intervals(std::move(kernel_intervals));
    const std::vector<Block> blocks = device_blocks(scope, device);
    DeviceOverview& d = out.emplace_back();
    d.pid = p.pid;
    d.device = device;
    for (size_t j = 0; j < windows.size(); ++j) {
      const auto [s, e] = windows[j];
      DeviceStep& ds = d.steps.emplace_back();
      ds.step = first_step + j;
      ds.idle = idle_in(blocks, s, e, t.kernel_wait_ns);
      ds.busy_ns = (e - s) - ds.idle.total();
      ds.kernel_busy_ns = covered(merged_kernels, s, e);
      d.steps_ns += e - s;
      d.busy_ns += ds.busy_ns;
      d.kernel_busy_ns += ds.kernel_busy_ns;
      d.idle += ds.idle;
    }
    d.streams = stream_idle(scope, device, t.kernel_wait_ns);
  }
}

// --- kernels, copies, synchronisations --------------------------------------------------

Distribution distribution(std::vector<int64_t> v) {
  Distribution d;
  d.count = v.size();
  if (v.empty()) return d;
  std::sort(v.begin(), v.end());
  auto quantile = [&](double q) {  // linear interpolation, as numpy's default
    const double pos = q * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    const double value = static_cast<double>(v[lo]) + (pos - static_cast<double>(lo)) * static_cast<double>(v[hi] - v[lo]);
    return static_cast<int64_t>(std::llround(value));
  };
  double sum = 0;
  for (int64_t x : v) sum += static_cast<double>(x);
  d.mean_ns = static_cast<int64_t>(std::llround(sum / static_cast<double>(v.size())));
  d.p50_ns = quantile(0.5);
  d.p90_ns = quantile(0.9);
  d.p99_ns = quantile(0.99);
  d.max_ns = v.back();
  return d;
}

struct LaunchSamples {
  std::vector<int64_t> launch, duration, delay;
};

void add_launches(const Scope& scope, const OverviewThresholds& t, LaunchStats& s, LaunchSamples& samples) {
  const Process& p = scope.process();
  for (const GpuRecord& g : p.gpu_records) {
    if (g.kind != GpuKind::kKernel || !scope.has(g)) continue;
    ++s.kernels;
    s.kernel_ns += g.dur_ns();
    samples.duration.push_back(g.dur_ns());
    if (g.dur_ns() < t.short_kernel_ns) {
      ++s.short_kernels;
      s.short_kernel_ns += g.dur_ns();
    }
    if (!g.api_known) continue;
    const int64_t api_dur = g.api_end_ns - g.api_start_ns;
    ++s.launched;
    const int64_t delay = g.start_ns - g.api_end_ns;
    samples.launch.push_back(api_dur);
    samples.delay.push_back(delay);
    if (g.dur_ns() < api_dur) ++s.shorter_than_launch;
    if (api_dur > t.launch_outlier_ns) ++s.launch_outliers;
    if (delay > t.delay_outlier_ns) ++s.delay_outliers;
  }
}

const char* direction_of(uint8_t copy_kind) {
  // CUpti_ActivityMemcpyKind, in enum order (UNKNOWN = 0 … PTOP = 10).
  static constexpr const char* kKinds[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                           "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
  return copy_kind < std::size(kKinds) ? kKinds[copy_kind] : "Unknown";
}

constexpr uint8_t kMemoryKindPageable = 1;  // CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE

void add_copies(const Scope& scope, std::map<std::string, CopyStats>& copies) {
  for (const GpuRecord& g : scope.process().gpu_records) {
    if (g.kind != GpuKind::kMemcpy || !scope.has(g)) continue;
    CopyStats& c = copies[g.name.str()];
    c.name = g.name.str();
    c.direction = direction_of(g.copy_kind);
    c.pageable = g.src_kind == kMemoryKindPageable || g.dst_kind == kMemoryKindPageable;
    ++c.calls;
    c.bytes += g.bytes;
    c.ns += g.dur_ns();
  }
}

const char* sync_type_name(uint32_t type) {
  // CUpti_ActivitySynchronizationType: UNKNOWN, EVENT_SYNCHRONIZE, STREAM_WAIT_EVENT,
  // STREAM_SYNCHRONIZE, CONTEXT_SYNCHRONIZE.
  static constexpr const char* kTypes[] = {"synchronization", "cudaEventSynchronize", "cudaStreamWaitEvent",
                                           "cudaStreamSynchronize", "cudaDeviceSynchronize"};
  return type < std::size(kTypes) ? kTypes[type] : "synchronization";
}

void add_syncs(const Scope& scope, std::map<std::string, SyncStats>& syncs, Overview& o) {
  const Process& p = scope.process();
  for (const GpuRecord& g : p.gpu_records) {
    if (g.kind != GpuKind::kSync || !scope.has(g)) continue;
    const std::string name = g.api_known ? g.api_name.str() : std::string(sync_type_name(g.sync_type));
    SyncStats& s = syncs[name];
    s.name = name;
    ++s.calls;
    s.stall_ns += g.dur_ns();
    ++o.syncs_in_steps;
    o.sync_stall_ns += g.dur_ns();
  }
}

}  // namespace

const char* breakdown_part_key(int part) { return part >= 0 && part < kBreakdownParts ? kPartKeys[part] : ""; }
const char* breakdown_part_label(int part) { return part >= 0 && part < kBreakdownParts ? kPartLabels[part] : ""; }

bool is_dataloader_range(std::string_view name) {
  // torch's names, then the one any program may use for its own data loading.
  return name.starts_with("enumerate(DataLoader)#") || name.starts_with("enumerate(DataPipe)#") ||
         name == "DataLoader" || name.starts_with("DataLoader#");
}

double DeviceOverview::utilization_pct() const {
  return steps_ns > 0 ? 100.0 * static_cast<double>(kernel_busy_ns) / static_cast<double>(steps_ns) : 0.0;
}

Intervals merge_intervals(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals out;
  for (const auto& iv : v) {
    if (iv.second <= iv.first) continue;
    if (!out.empty() && iv.first <= out.back().second) {
      out.back().second = std::max(out.back().second, iv.second);
    } else {
      out.push_back(iv);
    }
  }
  return out;
}

Intervals intersect_intervals(const Intervals& a, const Intervals& b) {
  Intervals out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t s = std::max(a[i].first, b[j].first);
    const int64_t e = std::min(a[i].second, b[j].second);
    if (s < e) out.emplace_back(s, e);
    if (a[i].second < b[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return out;
}

Intervals subtract_intervals(const Intervals& a, const Intervals& b) {
  Intervals out;
  size_t j = 0;
  for (auto [s, e] : a) {
    while (j < b.size() && b[j].second <= s) ++j;
    for (size_t k = j; k < b.size() && b[k].first < e; ++k) {
      if (b[k].first > s) out.emplace_back(s, b[k].first);
      s = std::max(s, b[k].second);
    }
    if (s < e) out.emplace_back(s, e);
  }
  return out;
}

std::vector<std::pair<int64_t, int64_t>> widened_steps(const Process& p, const std::vector<size_t>& ks) {
  Intervals host;
  for (size_t k : ks) host.emplace_back(p.steps[k].start_ns, p.steps[k].start_ns + p.steps[k].dur_ns);
  if (host.empty()) return host;
  const Scope scope(p, ks);
  // Each step's GPU work: what the CUDA runtime calls wholly inside its host interval launched.
  std::vector<int64_t> dev_min(host.size(), kPlusInf), dev_max(host.size(), kMinusInf);
  std::vector<bool> matched(p.gpu_records.size(), false);
  bool any = false;
  for (size_t i = 0; i < p.gpu_records.size(); ++i) {
    const GpuRecord& g = p.gpu_records[i];
    if (!scope.op(g) || !g.api_known || !g.api_runtime) continue;
    auto after = std::upper_bound(host.begin(), host.end(), g.api_start_ns,
                                  [](int64_t t, const std::pair<int64_t, int64_t>& h) { return t < h.first; });
    if (after == host.begin()) continue;
    const auto j = static_cast<size_t>(after - host.begin() - 1);
    if (g.api_end_ns > host[j].second) continue;
    dev_min[j] = std::min(dev_min[j], g.start_ns);
    dev_max[j] = std::max(dev_max[j], g.end_ns);
    matched[i] = any = true;
  }
  if (!any) return host;
  int64_t prev_end = host[0].first;
  if (dev_min[0] != kPlusInf) {
    // GPU work launched outside any step that ends before the first step's own.
    for (size_t i = 0; i < p.gpu_records.size(); ++i) {
      const GpuRecord& g = p.gpu_records[i];
      if (scope.op(g) && !matched[i] && g.end_ns < dev_min[0]) prev_end = std::max(prev_end, g.end_ns);
    }
  }
  Intervals out;
  for (size_t j = 0; j < host.size(); ++j) {
    const int64_t start = std::max(prev_end, host[j].first);
    int64_t end = host[j].second;
    end = dev_min[j] == kPlusInf ? std::max(end, start) : std::max({end, dev_max[j], start});
    out.emplace_back(start, end);
    prev_end = end;
  }
  return out;
}

std::vector<Recommendation> recommend(const Overview& o);  // overview_advice.cpp

// Marks the leading steps of one process (steps[first..]) that are longer than twice
// the median of the steps after them; the last step is never warm-up.
void mark_warmup(std::vector<StepBreakdown>& steps, size_t first) {
  for (size_t k = first; k + 1 < steps.size(); ++k) {
    std::vector<int64_t> rest;
    for (size_t j = k + 1; j < steps.size(); ++j) rest.push_back(steps[j].dur_ns);
    std::nth_element(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(rest.size() / 2), rest.end());
    const int64_t median = rest[rest.size() / 2];
    if (steps[k].dur_ns <= 2 * median) return;
    steps[k].warmup = true;
  }
}

Overview compute_overview(const Run& run, const OverviewThresholds& thresholds) {
  Overview o;
  o.thresholds = thresholds;
  const std::vector<std::vector<size_t>> counted = counted_steps(run);
  std::map<std::string, CopyStats> copies;
  std::map<std::string, SyncStats> syncs;
  LaunchSamples samples;
  for (size_t i = 0; i < run.processes.size(); ++i) {
    const Process& p = run.processes[i];
    if (counted[i].empty()) continue;
    o.cpu_gaps_filled_ns += p.roles_filled_ns;
    const Scope scope(p, counted[i]);
    const Intervals windows = widened_steps(p, counted[i]);
    const size_t first_step = o.steps.size();
    add_breakdown(scope, counted[i], windows, o.steps);
    const bool scheduled = std::any_of(p.steps.begin(), p.steps.end(), [](const Step& s) {
      return s.action != StepAction::kRecord && s.action != StepAction::kRecordAndSave;
    });
    if (!scheduled) mark_warmup(o.steps, first_step);
    add_devices(scope, windows, first_step, thresholds, o.devices);
    add_launches(scope, thresholds, o.launches, samples);
    add_copies(scope, copies);
    add_syncs(scope, syncs, o);
  }
  for (const StepBreakdown& s : o.steps) {
    o.total_ns += s.dur_ns;
    for (int r = 0; r < kBreakdownParts; ++r) o.total[r] += s.parts[r];
    if (s.warmup) continue;
    ++o.steady_steps;
    o.steady_ns += s.dur_ns;
    for (int r = 0; r < kBreakdownParts; ++r) o.steady[r] += s.parts[r];
  }
  o.launches.launch = distribution(std::move(samples.launch));
  o.launches.duration = distribution(std::move(samples.duration));
  o.launches.delay = distribution(std::move(samples.delay));
  for (auto& [name, c] : copies) o.copies.push_back(std::move(c));
  for (auto& [name, s] : syncs) o.syncs.push_back(std::move(s));
  std::stable_sort(o.syncs.begin(), o.syncs.end(),
                   [](const SyncStats& a, const SyncStats& b) { return a.stall_ns > b.stall_ns; });
  for (size_t i = 0; i < run.processes.size(); ++i) {
    const Process& p = run.processes[i];
    if (counted[i].empty() || !p.tensor_summary) continue;
    if (!o.memory_leak) {
      o.memory_leak = leak_finding(*p.tensor_summary);
      o.memory_leak_pid = p.pid;
    }
    if (!o.memory_fragmentation) o.memory_fragmentation = fragmentation_finding(*p.tensor_summary);
  }
  o.recommendations = recommend(o);
  return o;
}

}  // namespace torchprof
