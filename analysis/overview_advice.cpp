// The overview's recommendations: each rule tests one figure of the overview against
// its threshold (OverviewThresholds) and, when it fires, says the figure and what to do.
// The rules for causes of an idle GPU come first; the plugin's low-utilisation rule only
// speaks when none of them explains the idle time.
#include <cstdio>
#include <string>

#include "analysis/overview.h"
#include "common/text.h"

namespace torchprof {

namespace {

std::string pct_text(double pct) { return format_fixed(pct, 1, "%"); }

std::string time_text(double ns) {
  if (ns >= 1e9) return format_fixed(ns / 1e9, 2, " s");
  if (ns >= 1e6) return format_fixed(ns / 1e6, 2, " ms");
  if (ns >= 1e3) return format_fixed(ns / 1e3, 2, " us");
  return format_fixed(ns, 0, " ns");
}

std::string bytes_text(double b) {
  if (b >= 1024.0 * 1024.0 * 1024.0) return format_fixed(b / (1024.0 * 1024.0 * 1024.0), 2, " GiB");
  if (b >= 1024.0 * 1024.0) return format_fixed(b / (1024.0 * 1024.0), 1, " MiB");
  if (b >= 1024.0) return format_fixed(b / 1024.0, 1, " KiB");
  return format_fixed(b, 0, " B");
}

double share(int64_t part, int64_t whole) {
  return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

// The device whose GPU waits longest for the host, as a share of its steps' time.
const DeviceOverview* most_host_wait(const Overview& o) {
  const DeviceOverview* worst = nullptr;
  for (const DeviceOverview& d : o.devices) {
    if (worst == nullptr || share(d.idle.host_wait_ns, d.steps_ns) > share(worst->idle.host_wait_ns, worst->steps_ns)) {
      worst = &d;
    }
  }
  return worst;
}

// From the steady steps: a first batch's start-up (workers forking, files opening) is
// warm-up, not a slow loader.
void dataloader_rule(const Overview& o, std::vector<Recommendation>& out) {
  if (o.steady_steps == 0) return;
  const double pct = o.steady_pct(o.steady[kPartDataLoader]);
  if (!(pct > o.thresholds.dataloader_pct)) return;
  const double n = static_cast<double>(o.steady_steps);
  const size_t warmup = o.steps.size() - o.steady_steps;
  std::string basis = warmup > 0 ? ", over " + std::to_string(o.steady_steps) + " steady steps after " +
                                       std::to_string(warmup) + " of warm-up"
                                 : "";
  if (o.steps.size() < 3) basis += "; fewer than 3 steps: this may include warm-up";
  out.push_back({"dataloader",
                 "DataLoader takes " + pct_text(pct) + " of step time (" +
                     time_text(static_cast<double>(o.steady[kPartDataLoader]) / n) + " of " +
                     time_text(static_cast<double>(o.steady_ns) / n) + " per step" + basis +
                     "): raise num_workers on the DataLoader so that worker processes load "
                     "batches ahead, and set pin_memory=True",
                 pct, o.thresholds.dataloader_pct});
}

void sync_rule(const Overview& o, std::vector<Recommendation>& out) {
  const double per_step = static_cast<double>(o.syncs_in_steps) / static_cast<double>(o.steps.size());
  const double pct = o.pct(o.sync_stall_ns);
  const DeviceOverview* d = most_host_wait(o);
  if (o.syncs.empty() || d == nullptr || per_step < 1.0 || pct < o.thresholds.sync_stall_pct) return;
  const double host_wait = share(d->idle.host_wait_ns, d->steps_ns);
  if (host_wait < o.thresholds.sync_host_wait_pct) return;
  const SyncStats& top = o.syncs.front();
  out.push_back({"sync",
                 "CPU blocked in synchronisation for " + pct_text(pct) + " of step time (" + format_fixed(per_step, 1) +
                     " per step, most in " + top.name + ", " +
                     time_text(static_cast<double>(top.stall_ns) / static_cast<double>(top.calls)) +
                     " each), and after it GPU " + std::to_string(d->device) + " waits for the host " +
                     pct_text(host_wait) +
                     " of step time: drop per-step .item(), .cpu(), print of CUDA tensors and explicit "
                     "synchronize() calls, or read results back once every few steps",
                 pct, o.thresholds.sync_stall_pct});
}

void short_kernel_rule(const Overview& o, std::vector<Recommendation>& out) {
  const LaunchStats& l = o.launches;
  const double pct = share(l.short_kernel_ns, l.kernel_ns);
  const DeviceOverview* d = most_host_wait(o);
  if (l.short_kernels == 0 || d == nullptr || pct < o.thresholds.short_kernel_time_pct) return;
  const double waiting = share(d->idle.host_wait_ns + d->idle.kernel_wait_ns, d->steps_ns);
  if (waiting < o.thresholds.launch_idle_pct) return;
  out.push_back({"short_kernels",
                 pct_text(pct) + " of GPU kernel time in kernels shorter than " +
                     time_text(static_cast<double>(o.thresholds.short_kernel_ns)) + " (" +
                     format_fixed(static_cast<double>(l.short_kernels) / static_cast<double>(o.steps.size()), 1) +
                     " per step, median " + time_text(static_cast<double>(l.duration.p50_ns)) +
                     "; GPU " + std::to_string(d->device) + " idle " + pct_text(waiting) +
                     " of step time waiting for launches): fuse them with torch.compile, or capture the "
                     "step as a CUDA graph",
                 pct, o.thresholds.short_kernel_time_pct});
}

void pageable_rule(const Overview& o, std::vector<Recommendation>& out) {
  uint64_t calls = 0, bytes = 0;
  int64_t ns = 0;
  std::string directions;
  for (const CopyStats& c : o.copies) {
    if (!c.pageable) continue;
    calls += c.calls;
    bytes += c.bytes;
    ns += c.ns;
    if (directions.find(c.direction) == std::string::npos) directions += (directions.empty() ? "" : "/") + c.direction;
  }
  const double pct = o.pct(ns);
  if (calls == 0 || pct < o.thresholds.pageable_pct) return;
  const double gbps = ns > 0 ? static_cast<double>(bytes) / static_cast<double>(ns) : 0.0;
  out.push_back({"pageable_copies",
                 directions + " copies from pageable memory: " + bytes_text(static_cast<double>(bytes)) + " at " +
                     format_fixed(gbps, 2, " GB/s") + " (" + std::to_string(calls) + (calls == 1 ? " copy, " : " copies, ") + pct_text(pct) +
                     " of step time): pin the host buffers (pin_memory=True on the DataLoader, "
                     "tensor.pin_memory()) and copy with non_blocking=True",
                 pct, o.thresholds.pageable_pct});
}

void utilization_rule(const Overview& o, std::vector<Recommendation>& out) {
  const DeviceOverview* low = nullptr;
  for (const DeviceOverview& d : o.devices) {
    if (d.kernel_busy_ns == 0) continue;  // the plugin's GPUs are those that ran kernels
    if (low == nullptr || d.utilization_pct() < low->utilization_pct()) low = &d;
  }
  if (low == nullptr || !(low->utilization_pct() < o.thresholds.low_utilization_pct)) return;
  auto of_steps = [&](int64_t ns) { return pct_text(share(ns, low->steps_ns)); };
  const bool host_bound = low->idle.host_wait_ns >= low->idle.kernel_wait_ns + low->idle.other_ns;
  out.push_back({"low_utilization",
                 "GPU " + std::to_string(low->device) + " runs kernels " + pct_text(low->utilization_pct()) +
                     " of step time (idle " + of_steps(low->idle.total()) + ": " +
                     of_steps(low->idle.host_wait_ns) + " waiting for the host, " +
                     of_steps(low->idle.kernel_wait_ns) + " between kernels, " + of_steps(low->idle.other_ns) +
                     " other): " +
                     (host_bound ? "the CPU does not keep it fed (CPU exec is " + pct_text(o.pct(o.total[kPartCpuExec])) +
                                       " of the step): move CPU work out of the step, or raise the batch size"
                                 : std::string("raise the batch size")),
                 low->utilization_pct(), o.thresholds.low_utilization_pct});
}

// --profile-memory's leak finding: the tensor bytes at step boundaries keep rising.
void memory_leak_rule(const Overview& o, std::vector<Recommendation>& out) {
  if (!o.memory_leak) return;
  const LeakFinding& f = *o.memory_leak;
  std::string text = "Tensor memory grows by " + std::to_string(f.bytes_per_step) + " bytes (" +
                     bytes_text(static_cast<double>(f.bytes_per_step)) + ") per step: it rose at " +
                     std::to_string(f.rises) + " of " + std::to_string(f.steps) + " step boundaries";
  if (!f.ops.empty()) {
    const SurvivingAllocations& s = f.ops.front();
    text += "; what outlives the steps is allocated by " + s.op +
            (s.top.empty() || s.top == s.op ? std::string() : " (called from " + s.top + ")") + ", " +
            std::to_string(s.allocations) + " allocations of " + bytes_text(static_cast<double>(s.bytes)) +
            " made in " + std::to_string(s.steps) + " steps";
  }
  text += ": keep loss.item() instead of the loss tensor, detach() what is kept across steps, or clear "
          "what grows each step";
  out.push_back({"memory_leak", text, static_cast<double>(f.bytes_per_step), 0});
}

// CUDA tensors: the caching allocator retried cudaMalloc, ran out, or holds much unused.
void memory_fragmentation_rule(const Overview& o, std::vector<Recommendation>& out) {
  if (!o.memory_fragmentation) return;
  const FragmentationFinding& f = *o.memory_fragmentation;
  std::string text;
  if (f.alloc_retries > 0 || f.ooms > 0) {
    text = "The CUDA caching allocator retried cudaMalloc " + std::to_string(f.alloc_retries) +
           " times after freeing its cache (each retry synchronises the device)";
    if (f.ooms > 0) text += " and ran out of memory " + std::to_string(f.ooms) + " times";
  } else {
    text = "The CUDA caching allocator holds memory it does not use";
  }
  if (f.allocated_at_peak >= 0) {
    text += "; at the most allocated, " + bytes_text(static_cast<double>(f.allocated_at_peak)) + ", it held " +
            bytes_text(static_cast<double>(f.reserved_at_peak)) + " (" +
            bytes_text(static_cast<double>(f.unused())) + " unused)";
  }
  text += ": set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, keep tensor shapes the same from step to "
          "step, or lower the batch size";
  const double figure = f.alloc_retries > 0 ? static_cast<double>(f.alloc_retries) : static_cast<double>(f.unused());
  out.push_back({"memory_fragmentation", text, figure, 0});
}

}  // namespace

std::vector<Recommendation> recommend(const Overview& o) {
  std::vector<Recommendation> out;
  if (o.steps.empty() || o.total_ns <= 0) return out;
  dataloader_rule(o, out);
  sync_rule(o, out);
  short_kernel_rule(o, out);
  pageable_rule(o, out);
  if (out.empty()) utilization_rule(o, out);
  memory_leak_rule(o, out);
  memory_fragmentation_rule(o, out);
  return out;
}

}  // namespace torchprof
