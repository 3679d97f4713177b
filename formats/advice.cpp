#include "formats/advice.h"

#include <algorithm>
#include <cstdio>

#include "common/text.h"
#include "formats/table.h"

namespace torchprof {

namespace {

std::string t(double ns) { return format_time_us(ns / 1000.0); }

std::string pct(double part, double whole) { return format_fixed(whole > 0 ? 100.0 * part / whole : 0.0, 1, "%"); }

std::string pad(const std::string& s, size_t width, bool left = false) {
  if (s.size() >= width) return s;
  return left ? s + std::string(width - s.size(), ' ') : std::string(width - s.size(), ' ') + s;
}

std::string bytes_text(double b) {
  if (b >= 1024.0 * 1024.0 * 1024.0) return format_fixed(b / (1024.0 * 1024.0 * 1024.0), 2, " GiB");
  if (b >= 1024.0 * 1024.0) return format_fixed(b / (1024.0 * 1024.0), 1, " MiB");
  if (b >= 1024.0) return format_fixed(b / 1024.0, 1, " KiB");
  return format_fixed(b, 0, " B");
}

void breakdown(const Overview& o, std::string& out) {
  const double n = static_cast<double>(o.steps.size());
  out += "Step time breakdown, " + std::to_string(o.steps.size()) + (o.steps.size() == 1 ? " step" : " steps") +
         " (average per step; each moment counted once, in this order)\n";
  for (int r = 0; r < kBreakdownParts; ++r) {
    out += "  " + pad(breakdown_part_label(r), 14, true) + pad(t(static_cast<double>(o.total[r]) / n), 12) + "  " +
           pad(pct(static_cast<double>(o.total[r]), static_cast<double>(o.total_ns)), 6) + "\n";
  }
  out += "  " + pad("Step", 14, true) + pad(t(static_cast<double>(o.total_ns) / n), 12) + "  100.0%\n";
}

void per_step(const Overview& o, int step_rows, std::string& out) {
  if (o.steps.size() < 2) return;
  const size_t shown = step_rows <= 0 ? o.steps.size() : std::min<size_t>(o.steps.size(), static_cast<size_t>(step_rows));
  bool several = false;
  for (const StepBreakdown& s : o.steps) several = several || s.pid != o.steps.front().pid;
  out += "\nPer step (share of the step)\n  " + pad("Step", 22, true) + pad("Time", 12);
  for (int r = 0; r < kBreakdownParts; ++r) out += pad(breakdown_part_key(r), 13);
  out += "\n";
  for (size_t i = 0; i < shown; ++i) {
    const StepBreakdown& s = o.steps[i];
    std::string name = s.name.empty() ? "(whole process)" : s.name;
    if (several) name = std::to_string(s.pid) + ":" + name;
    out += "  " + pad(name, 22, true) + pad(t(static_cast<double>(s.dur_ns)), 12);
    for (int r = 0; r < kBreakdownParts; ++r) {
      out += pad(pct(static_cast<double>(s.parts[r]), static_cast<double>(s.dur_ns)), 13);
    }
    out += "\n";
  }
  if (shown < o.steps.size()) out += "  " + std::to_string(o.steps.size() - shown) + " more steps in summary.json\n";
}

void devices(const Overview& o, std::string& out) {
  if (o.devices.empty()) return;
  bool several = false;
  for (const DeviceOverview& d : o.devices) several = several || d.pid != o.devices.front().pid;
  out += "\nGPU time over the steps (idle causes as HolisticTraceAnalysis tells them)\n";
  for (const DeviceOverview& d : o.devices) {
    const double w = static_cast<double>(d.steps_ns);
    out += "  GPU " + std::to_string(d.device) + (several ? " of pid " + std::to_string(d.pid) : "") +
           ": kernels " + pct(static_cast<double>(d.kernel_busy_ns), w) + " (utilisation), busy " +
           pct(static_cast<double>(d.busy_ns), w) + " with copies and memsets; idle " +
           pct(static_cast<double>(d.idle.total()), w) + ": host wait " +
           pct(static_cast<double>(d.idle.host_wait_ns), w) + ", kernel wait " +
           pct(static_cast<double>(d.idle.kernel_wait_ns), w) + ", other " +
           pct(static_cast<double>(d.idle.other_ns), w) + "\n";
  }
}

void launches(const Overview& o, std::string& out) {
  const LaunchStats& l = o.launches;
  if (l.kernels == 0) return;
  out += "\nKernels: " + std::to_string(l.kernels) + ", " + t(static_cast<double>(l.kernel_ns)) + " in all; " +
         std::to_string(l.short_kernels) + " shorter than " + t(static_cast<double>(o.thresholds.short_kernel_ns)) +
         " (" + pct(static_cast<double>(l.short_kernel_ns), static_cast<double>(l.kernel_ns)) + " of kernel time)\n";
  out += "  kernel duration    median " + t(static_cast<double>(l.duration.p50_ns)) + ", p90 " +
         t(static_cast<double>(l.duration.p90_ns)) + ", max " + t(static_cast<double>(l.duration.max_ns)) + "\n";
  if (l.launched == 0) return;
  out += "  launch call (CPU)  median " + t(static_cast<double>(l.launch.p50_ns)) + ", p90 " +
         t(static_cast<double>(l.launch.p90_ns)) + ", max " + t(static_cast<double>(l.launch.max_ns)) + "; " +
         std::to_string(l.shorter_than_launch) + " kernels ran shorter than their launch call\n";
  out += "  launch delay       median " + t(static_cast<double>(l.delay.p50_ns)) + ", p90 " +
         t(static_cast<double>(l.delay.p90_ns)) + ", p99 " + t(static_cast<double>(l.delay.p99_ns)) + ", max " +
         t(static_cast<double>(l.delay.max_ns)) + " (GPU start after the call returned)\n";
}

void copies(const Overview& o, std::string& out) {
  if (o.copies.empty()) return;
  out += "\nCopies\n";
  for (const CopyStats& c : o.copies) {
    out += "  " + pad(c.name, 36, true) + pad(std::to_string(c.calls) + " x", 8) +
           pad(bytes_text(static_cast<double>(c.bytes)), 12) + pad(format_fixed(c.gb_per_s(), 2, " GB/s"), 13) +
           (c.pageable ? "  pageable host memory" : "") + "\n";
  }
}

void syncs(const Overview& o, std::string& out) {
  if (o.syncs.empty()) return;
  out += "\nSynchronisations that block the CPU: " + std::to_string(o.syncs_in_steps) + " (" +
         format_fixed(static_cast<double>(o.syncs_in_steps) / static_cast<double>(o.steps.size()), 1) + " per step), " +
         pct(static_cast<double>(o.sync_stall_ns), static_cast<double>(o.total_ns)) + " of step time\n";
  for (const SyncStats& s : o.syncs) {
    out += "  " + pad(s.name, 36, true) + pad(std::to_string(s.calls) + " x", 8) + pad(t(static_cast<double>(s.stall_ns)), 12) +
           "\n";
  }
}

}  // namespace

std::string render_advice(const Overview& o, int step_rows) {
  std::string out = "torchprof overview\n";
  if (o.steps.empty()) return out + "No recorded steps: nothing to break down.\n";
  breakdown(o, out);
  per_step(o, step_rows, out);
  devices(o, out);
  launches(o, out);
  copies(o, out);
  syncs(o, out);
  out += "\nRecommendations\n";
  if (o.recommendations.empty()) {
    out += "  none: no figure above crosses its threshold (man torchprof-report, OVERVIEW)\n";
  }
  for (const Recommendation& r : o.recommendations) out += "  - " + r.text + "\n";
  return out;
}

}  // namespace torchprof
