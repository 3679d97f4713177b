#include "analysis/capture_range.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

namespace torchprof {

namespace {

using Window = std::pair<int64_t, int64_t>;

constexpr int64_t kOpenEnd = std::numeric_limits<int64_t>::max();

std::vector<Window> profiler_windows(const Process& proc) {
  std::vector<Window> windows;
  bool open = false;
  for (const ProfilerToggle& t : proc.profiler_toggles) {
    if (t.start && !open) {
      windows.emplace_back(t.ts_ns, kOpenEnd);
      open = true;
    } else if (!t.start && open) {
      windows.back().second = t.ts_ns;
      open = false;
    }
  }
  return windows;
}

std::vector<Window> nvtx_windows(const Process& proc, const CaptureRange& range) {
  std::vector<Window> windows;
  for (const Event& e : proc.events_list) {
    if (e.kind != EventKind::kRange || e.name != range.nvtx_name) continue;
    if (!range.nvtx_domain.empty() && e.domain() != range.nvtx_domain) continue;
    windows.emplace_back(e.start_ns, e.end_ns);
  }
  return windows;
}

// Sorted and merged, so that one binary search answers "inside any window?".
std::vector<Window> merged(std::vector<Window> windows) {
  std::sort(windows.begin(), windows.end());
  std::vector<Window> out;
  for (const Window& w : windows) {
    if (!out.empty() && w.first <= out.back().second) {
      out.back().second = std::max(out.back().second, w.second);
    } else {
      out.push_back(w);
    }
  }
  return out;
}

bool inside(const std::vector<Window>& windows, int64_t t) {
  auto after = std::upper_bound(windows.begin(), windows.end(), t,
                                [](int64_t x, const Window& w) { return x < w.first; });
  return after != windows.begin() && t <= std::prev(after)->second;
}

// Whether a GPU or memory record caused by the call with `correlation` stays: the
// call's fate when it is known, else the record's own time.
template <typename T>
void keep_caused(std::vector<T>& records, const std::unordered_set<uint64_t>& all_calls,
                 const std::unordered_set<uint64_t>& kept_calls, const std::vector<Window>& windows,
                 int64_t T::*time) {
  std::erase_if(records, [&](const T& r) {
    if (r.correlation != 0 && all_calls.count(r.correlation)) return kept_calls.count(r.correlation) == 0;
    return !inside(windows, r.*time);
  });
}

std::string describe(const CaptureRange& range) {
  if (range.kind == CaptureRange::Kind::kCudaProfilerApi) return "cudaProfilerApi";
  return "nvtx:" + range.nvtx_name + (range.nvtx_domain.empty() ? "" : "@" + range.nvtx_domain);
}

}  // namespace

std::optional<CaptureRange> parse_capture_range(const std::string& text, std::string* error) {
  CaptureRange range;
  if (text.empty() || text == "none") return range;
  if (text == "cudaProfilerApi") {
    range.kind = CaptureRange::Kind::kCudaProfilerApi;
    return range;
  }
  if (text == "signal") {
    range.kind = CaptureRange::Kind::kSignal;
    return range;
  }
  if (text.starts_with("nvtx:")) {
    std::string spec = text.substr(5);
    const size_t at = spec.rfind('@');
    if (at != std::string::npos) {
      range.nvtx_domain = spec.substr(at + 1);
      spec.resize(at);
    }
    if (!spec.empty()) {
      range.kind = CaptureRange::Kind::kNvtx;
      range.nvtx_name = spec;
      return range;
    }
    if (error) *error = "nvtx: needs a range name (nvtx:NAME or nvtx:NAME@DOMAIN)";
    return std::nullopt;
  }
  if (error) *error = "unknown capture range '" + text + "' (valid: none, cudaProfilerApi, nvtx:NAME, signal)";
  return std::nullopt;
}

std::vector<Window> capture_windows(const Process& proc, const CaptureRange& range) {
  switch (range.kind) {
    case CaptureRange::Kind::kNone:
    case CaptureRange::Kind::kSignal: return {{std::numeric_limits<int64_t>::min(), kOpenEnd}};
    case CaptureRange::Kind::kCudaProfilerApi: return merged(profiler_windows(proc));
    case CaptureRange::Kind::kNvtx: return merged(nvtx_windows(proc, range));
  }
  return {};
}

void apply_capture_range(Process& proc, const CaptureRange& range) {
  if (range.kind == CaptureRange::Kind::kNone || range.kind == CaptureRange::Kind::kSignal) return;
  const std::vector<Window> windows = capture_windows(proc, range);
  const bool had_any = !proc.events_list.empty() || !proc.gpu_events.empty();
  std::unordered_set<uint64_t> all_calls;
  std::unordered_set<uint64_t> kept_calls;
  std::erase_if(proc.events_list, [&](const Event& e) {
    const bool keep = inside(windows, e.start_ns);
    if (is_cuda_api(e.kind) && e.correlation != 0) {
      all_calls.insert(e.correlation);
      if (keep) kept_calls.insert(e.correlation);
    }
    return !keep;
  });
  keep_caused(proc.gpu_events, all_calls, kept_calls, windows, &GpuEvent::start_ns);
  keep_caused(proc.memory_events, all_calls, kept_calls, windows, &MemoryEvent::ts_ns);
  if (windows.empty() && had_any) {
    proc.warnings.push_back("--capture-range " + describe(range) + ": no capture window in this process; "
                            "nothing of it is reported");
  }
}

}  // namespace torchprof
