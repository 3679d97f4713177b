// The overview of an analysed run: where the step time goes, why the GPU is idle, how
// kernels are launched, copies and synchronisations, and the recommendations that follow
// from them. Definitions, each matched against its source:
//
// Step time breakdown (TensorBoard profiler plugin, tb_plugin/torch_tb_profiler/profiler/
// event_parser.py and overall_parser.py): every nanosecond of a step goes to the first of
// kernel > memcpy > memset > CUDA runtime > DataLoader > CPU exec > other that is busy
// then, over all threads and devices of the process, so the parts sum to the step time.
// Steps are the recorded steps, their host interval widened as the plugin widens it:
// a step starts at max(its host start, the previous step's end) and ends at the latest
// end of the GPU work launched by the CUDA runtime calls that lie wholly inside it (or
// at its host end when that is later). CUDA runtime = cuda_runtime calls (the plugin
// reads no cuda_driver events); DataLoader = ranges named `enumerate(DataLoader)#…` or
// `enumerate(DataPipe)#…` (torch's), or `DataLoader` / `DataLoader#…` (any program's own
// data loading, documented); CPU exec = every other range except step markers.
//
// GPU idle (HolisticTraceAnalysis, hta/analyzers/breakdown_analysis.py,
// _analyze_idle_time_for_stream): a gap before a GPU op is host wait when the op's
// launching API call began after the gap began (nothing was queued), else kernel wait
// when the gap is shorter than 30 µs (HTA's consecutive_kernel_delay = 30 in trace
// units, which are µs), else other. HTA's own split (per stream, gaps between
// consecutive ops) is in DeviceOverview::streams; per step the same rule is applied to
// the device's gaps (no kernel, memcpy or memset running on any stream), clipped to the
// step, so that busy + idle = step time.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/model.h"
#include "analysis/tensor_memory.h"

namespace torchprof {

// Thresholds; docs/outputs.md and man/torchprof-report.1 list them.
struct OverviewThresholds {
  int64_t kernel_wait_ns = 30'000;        // HTA's consecutive_kernel_delay
  int64_t short_kernel_ns = 10'000;       // "short kernel"
  int64_t launch_outlier_ns = 50'000;     // HTA's runtime_cutoff
  int64_t delay_outlier_ns = 100'000;     // HTA's launch_delay_cutoff
  double dataloader_pct = 5.0;            // the plugin's DataLoader rule (> 5% of the step)
  double low_utilization_pct = 50.0;      // the plugin's low GPU utilisation rule (< 50%)
  double short_kernel_time_pct = 50.0;    // short kernels' share of kernel time (>=)
  double launch_idle_pct = 10.0;          // ... with the GPU idle (host + kernel wait) this much of the step
  double pageable_pct = 5.0;              // pageable copies' GPU time, share of the step (>=)
  double sync_stall_pct = 10.0;           // CPU blocked in synchronisations, share of the step (>=)
  double sync_host_wait_pct = 10.0;       // ... with the GPU waiting for the host this much of the step
};

enum BreakdownPart : uint8_t { kPartKernel, kPartMemcpy, kPartMemset, kPartRuntime, kPartDataLoader,
                               kPartCpuExec, kPartOther, kBreakdownParts };
// "kernel", "memcpy", "memset", "cuda_runtime", "dataloader", "cpu_exec", "other".
const char* breakdown_part_key(int part);
// "Kernel", "Memcpy", "Memset", "CUDA runtime", "DataLoader", "CPU exec", "Other".
const char* breakdown_part_label(int part);

// Whether a range of this name is DataLoader time (as the plugin tells it).
bool is_dataloader_range(std::string_view name);

struct IdleSplit {
  int64_t host_wait_ns = 0;
  int64_t kernel_wait_ns = 0;
  int64_t other_ns = 0;
  int64_t total() const { return host_wait_ns + kernel_wait_ns + other_ns; }
  IdleSplit& operator+=(const IdleSplit& o) {
    host_wait_ns += o.host_wait_ns;
    kernel_wait_ns += o.kernel_wait_ns;
    other_ns += o.other_ns;
    return *this;
  }
};

struct StepBreakdown {
  int pid = 0;
  int index = 0;        // Step::index
  std::string name;
  int64_t start_ns = 0; // widened as the plugin widens it
  int64_t dur_ns = 0;
  std::array<int64_t, kBreakdownParts> parts{};  // sum == dur_ns
  // Warm-up, reported apart from the steady state the advice is drawn from: without a
  // schedule, one of the process's leading steps longer than twice the median of the
  // steps after it. (A schedule's wait and warmup steps are not counted at all.)
  bool warmup = false;
};

// One device over one step (of `steps`, by position).
struct DeviceStep {
  size_t step = 0;
  int64_t busy_ns = 0;         // kernels, memcpys and memsets (merged) inside the step
  int64_t kernel_busy_ns = 0;  // kernels alone (merged)
  IdleSplit idle;              // idle.total() == step duration - busy_ns
};

// HTA's idle split of one stream: gaps between consecutive GPU ops of the stream.
struct StreamIdle {
  uint32_t stream = 0;
  uint64_t ops = 0;
  IdleSplit idle;
};

struct DeviceOverview {
  int pid = 0;
  uint32_t device = 0;
  int64_t steps_ns = 0;        // the counted steps' time
  int64_t busy_ns = 0;         // sums of DeviceStep
  int64_t kernel_busy_ns = 0;
  IdleSplit idle;
  std::vector<DeviceStep> steps;
  std::vector<StreamIdle> streams;
  double utilization_pct() const;  // kernel_busy_ns / steps_ns (the plugin's GPU utilisation)
};

struct Distribution {
  uint64_t count = 0;
  int64_t mean_ns = 0, p50_ns = 0, p90_ns = 0, p99_ns = 0, max_ns = 0;
};

// Kernels of the recorded steps and the API calls that launched them.
struct LaunchStats {
  uint64_t kernels = 0;
  int64_t kernel_ns = 0;
  uint64_t short_kernels = 0;      // shorter than short_kernel_ns
  int64_t short_kernel_ns = 0;
  uint64_t launched = 0;           // kernels whose launching call was recorded
  uint64_t shorter_than_launch = 0;  // GPU duration < the launching call's (HTA's "short GPU kernels")
  uint64_t launch_outliers = 0;    // launching call longer than launch_outlier_ns
  uint64_t delay_outliers = 0;     // launch delay longer than delay_outlier_ns
  Distribution launch;             // launching call's duration (CPU)
  Distribution duration;           // kernel duration (GPU)
  Distribution delay;              // kernel start - launching call's end
};

struct CopyStats {
  std::string name;                // Kineto's, e.g. "Memcpy HtoD (Pageable -> Device)"
  std::string direction;           // HtoD, DtoH, DtoD, …
  bool pageable = false;           // host side is pageable memory
  uint64_t calls = 0;
  uint64_t bytes = 0;
  int64_t ns = 0;
  double gb_per_s() const { return ns > 0 ? static_cast<double>(bytes) / static_cast<double>(ns) : 0.0; }
};

struct SyncStats {
  std::string name;                // the API call that synchronised (or CUPTI's sync type)
  uint64_t calls = 0;
  int64_t stall_ns = 0;            // the CPU's time blocked (the synchronisation record's span)
};

struct Recommendation {
  std::string id;      // dataloader | sync | short_kernels | pageable_copies | low_utilization |
                       // memory_leak | memory_fragmentation
  std::string text;    // one line: the figure, then what to do
  double figure = 0;   // the share (percent) the rule tested
  double threshold = 0;
};

struct Overview {
  OverviewThresholds thresholds;
  std::vector<StepBreakdown> steps;   // counted steps of every counted process
  std::array<int64_t, kBreakdownParts> total{};  // sums over `steps`
  int64_t total_ns = 0;
  // The same over the steady steps (those not warm-up), which the advice is drawn from.
  std::array<int64_t, kBreakdownParts> steady{};
  int64_t steady_ns = 0;
  size_t steady_steps = 0;
  double steady_pct(int64_t ns) const {
    return steady_ns > 0 ? 100.0 * static_cast<double>(ns) / static_cast<double>(steady_ns) : 0.0;
  }
  // The gaps between CPU intervals the engine filled to keep them bounded
  // (Process::roles_filled_ns of the counted processes): at most this much of "other"
  // may show as CUDA runtime, DataLoader or CPU exec. 0 when nothing was filled.
  int64_t cpu_gaps_filled_ns = 0;
  std::vector<DeviceOverview> devices;
  LaunchStats launches;
  std::vector<CopyStats> copies;
  std::vector<SyncStats> syncs;
  uint64_t syncs_in_steps = 0;
  int64_t sync_stall_ns = 0;
  // --profile-memory: the first counted process whose tensor memory leaks, and its pid.
  std::optional<LeakFinding> memory_leak;
  int memory_leak_pid = 0;
  // And the first finding of fragmented CUDA tensor memory.
  std::optional<FragmentationFinding> memory_fragmentation;
  std::vector<Recommendation> recommendations;

  bool empty() const { return steps.empty(); }
  double pct(int64_t ns) const { return total_ns > 0 ? 100.0 * static_cast<double>(ns) / static_cast<double>(total_ns) : 0.0; }
};

// Needs analyse(). Counts the recorded steps of the processes that have step markers
// (of every process when none has).
Overview compute_overview(const Run& run, const OverviewThresholds& thresholds = {});

// Pieces, exposed for tests.
Intervals merge_intervals(Intervals v);
Intervals intersect_intervals(const Intervals& a, const Intervals& b);
Intervals subtract_intervals(const Intervals& a, const Intervals& b);
// Marks the leading steps of one process, steps[first..], longer than twice the median
// of the steps after them as warm-up.
void mark_warmup(std::vector<StepBreakdown>& steps, size_t first);
// The recorded steps of `proc` widened as the plugin widens them (see above), in order.
std::vector<std::pair<int64_t, int64_t>> widened_steps(const Process& proc, const std::vector<size_t>& steps);

}  // namespace torchprof
