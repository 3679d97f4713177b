#include "analysis/capture_range.h"

#include <algorithm>
#include <limits>

namespace torchprof {

namespace {

using Window = std::pair<int64_t, int64_t>;

constexpr int64_t kOpenEnd = std::numeric_limits<int64_t>::max();

std::vector<Window> profiler_windows(const std::vector<ProfilerToggle>& toggles) {
  std::vector<Window> windows;
  bool open = false;
  for (const ProfilerToggle& t : toggles) {
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

bool inside_windows(const std::vector<Window>& windows, int64_t t) {
  auto after = std::upper_bound(windows.begin(), windows.end(), t,
                                [](int64_t x, const Window& w) { return x < w.first; });
  return after != windows.begin() && t <= std::prev(after)->second;
}

std::vector<Window> capture_windows(const CaptureRange& range, const std::vector<ProfilerToggle>& toggles,
                                    std::vector<Window> nvtx_ranges) {
  switch (range.kind) {
    case CaptureRange::Kind::kNone:
    case CaptureRange::Kind::kSignal: return {{std::numeric_limits<int64_t>::min(), kOpenEnd}};
    case CaptureRange::Kind::kCudaProfilerApi: return merged(profiler_windows(toggles));
    case CaptureRange::Kind::kNvtx: return merged(std::move(nvtx_ranges));
  }
  return {};
}

std::string no_window_warning(const CaptureRange& range) {
  return "--capture-range " + describe(range) + ": no capture window in this process; nothing of it is reported";
}

}  // namespace torchprof
