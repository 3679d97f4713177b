#include "formats/stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace torchprof {

namespace {

bool recorded(const Process& p, int32_t step) {
  return step >= 0 && static_cast<size_t>(step) < p.steps.size() && p.steps[step].cycle >= 0;
}

// "1,234,567" for integers, as nsys prints them.
std::string grouped(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string grouped_fixed(double v, int decimals) {
  char frac[32];
  std::snprintf(frac, sizeof frac, "%.*f", decimals, v - std::trunc(v));
  // frac is "0.xx" (or "1.00" after rounding up); keep the integer part exact.
  double whole = std::trunc(v) + (frac[0] == '1' ? 1 : 0);
  std::string f(frac);
  return grouped(static_cast<int64_t>(whole)) + f.substr(f.find('.'));
}

struct Summary {
  double total, avg, med, min, max, stddev;
};

Summary summarize(const Series& v) { return {v.total(), v.mean(), v.median(), v.min(), v.max(), v.stddev()}; }

void print_table(std::ostream& out, const std::vector<std::string>& headers,
                 const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(headers.size());
  for (size_t c = 0; c < headers.size(); ++c) {
    width[c] = headers[c].size();
    for (const auto& r : rows) width[c] = std::max(width[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (size_t c = 0; c < cells.size(); ++c) {
      const bool last = c + 1 == cells.size();  // the name column is left-aligned and last
      if (last) {
        s += cells[c];
      } else {
        s += std::string(width[c] - cells[c].size(), ' ') + cells[c] + "  ";
      }
    }
    out << ' ' << s << '\n';
  };
  line(headers);
  std::vector<std::string> rule;
  for (size_t c = 0; c < headers.size(); ++c) rule.push_back(std::string(width[c], '-'));
  line(rule);
  for (const auto& r : rows) line(r);
  out << '\n';
}

// Time summary: Time (%), Total Time (ns), Instances, Avg, Med, Min, Max, StdDev, Name.
void time_report(std::ostream& out, const std::string& title, const std::map<std::string, Series>& series,
                 const char* name_header) {
  if (series.empty()) return;
  double grand = 0;
  for (const auto& [name, s] : series) grand += s.total();
  std::vector<std::pair<std::string, Summary>> sums;
  for (const auto& [name, s] : series) sums.emplace_back(name, summarize(s));
  std::stable_sort(sums.begin(), sums.end(), [](const auto& x, const auto& y) { return x.second.total > y.second.total; });
  std::vector<std::vector<std::string>> rows;
  for (const auto& [name, s] : sums) {
    rows.push_back({grouped_fixed(grand > 0 ? s.total * 100.0 / grand : 0.0, 1),
                    grouped(static_cast<int64_t>(s.total)), grouped(static_cast<int64_t>(series.at(name).count())),
                    grouped_fixed(s.avg, 1), grouped_fixed(s.med, 1), grouped(static_cast<int64_t>(s.min)),
                    grouped(static_cast<int64_t>(s.max)), grouped_fixed(s.stddev, 1), name});
  }
  out << title << ":\n\n";
  print_table(out, {"Time (%)", "Total Time (ns)", "Instances", "Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)",
                    "StdDev (ns)", name_header},
              rows);
}

void size_report(std::ostream& out, const std::map<std::string, Series>& series) {
  if (series.empty()) return;
  std::vector<std::pair<std::string, Summary>> sums;
  for (const auto& [name, s] : series) sums.emplace_back(name, summarize(s));
  std::stable_sort(sums.begin(), sums.end(), [](const auto& x, const auto& y) { return x.second.total > y.second.total; });
  auto mb = [](double bytes) { return grouped_fixed(bytes / 1e6, 3); };
  std::vector<std::vector<std::string>> rows;
  for (const auto& [name, s] : sums) {
    rows.push_back({mb(s.total), grouped(static_cast<int64_t>(series.at(name).count())), mb(s.avg), mb(s.med),
                    mb(s.min), mb(s.max), mb(s.stddev), name});
  }
  out << "CUDA GPU MemOps Summary (by Size) (cuda_gpu_mem_size_sum):\n\n";
  print_table(out, {"Total (MB)", "Count", "Avg (MB)", "Med (MB)", "Min (MB)", "Max (MB)", "StdDev (MB)", "Operation"},
              rows);
}

// nsys's operation names for copies and memsets.
std::string mem_operation(const GpuRecord& g) {
  if (g.kind == GpuKind::kMemset) return "[CUDA memset]";
  switch (g.copy_kind) {
    case 1: return "[CUDA memcpy Host-to-Device]";  // CUPTI_ACTIVITY_MEMCPY_KIND_HTOD
    case 2: return "[CUDA memcpy Device-to-Host]";
    case 8: return "[CUDA memcpy Device-to-Device]";
    case 9: return "[CUDA memcpy Host-to-Host]";
    case 10: return "[CUDA memcpy Peer-to-Peer]";
    default: return "[CUDA memcpy " + g.name.substr(std::min<size_t>(7, g.name.size())) + "]";
  }
}

}  // namespace

void render_stats(const Run& run, std::ostream& out) {
  std::map<std::string, Series> kernels, mem_time, mem_size;
  for (const Process& p : run.processes) {
    for (const GpuRecord& g : p.gpu_records) {
      if (g.kind == GpuKind::kSync || !recorded(p, g.step)) continue;
      const auto dur = static_cast<double>(g.dur_ns());
      if (g.kind == GpuKind::kKernel) {
        kernels[g.name].add(dur);
        continue;
      }
      mem_time[mem_operation(g)].add(dur);
      mem_size[mem_operation(g)].add(static_cast<double>(g.bytes));
    }
  }
  time_report(out, "NVTX Range Summary (nvtx_sum)", run.stats.ranges, "Range");
  time_report(out, "CUDA API Summary (cuda_api_sum)", run.stats.api, "Name");
  time_report(out, "CUDA GPU Kernel Summary (cuda_gpu_kern_sum)", kernels, "Name");
  time_report(out, "CUDA GPU MemOps Summary (by Time) (cuda_gpu_mem_time_sum)", mem_time, "Operation");
  size_report(out, mem_size);
  if (!run.has_gpu) out << "No CUDA data was recorded.\n";
}

}  // namespace torchprof
