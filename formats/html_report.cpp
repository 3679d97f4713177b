#include "formats/html_report.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "analysis/analysis.h"
#include "analysis/gpu_analysis.h"
#include "analysis/module_view.h"
#include "formats/json_writer.h"
#include "formats/overview_json.h"

namespace torchprof {

namespace {

using Json = nlohmann::ordered_json;

#include "formats/html_assets.inc"  // kReportCss, kReportJs (generated from formats/html/)

constexpr uint32_t kMaxLanes = 24;  // deeper nesting is drawn on the last lane

enum class TrackKind : uint8_t { kCpu, kCudaApi, kGpu };
const char* track_kind_name(TrackKind k) {
  return k == TrackKind::kCpu ? "cpu" : k == TrackKind::kCudaApi ? "cuda_api" : "gpu";
}

struct Track {
  std::string name;
  TrackKind kind = TrackKind::kCpu;
  int pid = 0;
  uint32_t lanes = 1;
};

struct Slice {
  uint32_t track = 0;
  uint32_t name = 0;
  uint32_t lane = 0;
  uint8_t category = 0;  // 0 range, 1 mark, 2 API call, 3 kernel, 4 memcpy, 5 memset, 6 sync
  int64_t start_ns = 0;
  int64_t dur_ns = 0;
};

// Tracks, names and slices of the timeline; tracks are keyed so that each process
// lists its CPU threads, then its CUDA API rows, then its GPU streams.
class Timeline {
 public:
  // Keyed by input too: the runs of a merged report may reuse pids (one container per node).
  uint32_t track(const Process& p, TrackKind kind, uint64_t id, const std::function<std::string()>& name) {
    auto key = std::make_tuple(p.input, p.pid, kind, id);
    auto [it, fresh] = index_.try_emplace(key, static_cast<uint32_t>(tracks_.size()));
    if (fresh) tracks_.push_back({name(), kind, p.pid, 1});
    return it->second;
  }
  uint32_t name(const std::string& text) {
    auto [it, fresh] = names_index_.try_emplace(text, static_cast<uint32_t>(names_.size()));
    if (fresh) names_.push_back(text);
    return it->second;
  }
  // Interned names (Event/GpuEvent::name): looked up by identity, then by text.
  uint32_t name(const Name& n) {
    auto [it, fresh] = by_identity_.try_emplace(n.id(), 0);
    if (fresh) it->second = name(n.str());
    return it->second;
  }
  // Keeps the `limit` longest slices: at most 2 * limit + 1 are held while they are added.
  explicit Timeline(size_t limit) : limit_(limit) {}

  void reserve(size_t slices) { slices_.reserve(std::min(slices, 2 * limit_ + 1)); }
  void add(const Slice& s) {
    ++added_;
    slices_.push_back(s);
    if (slices_.size() > 2 * limit_) keep_longest();
  }

  // Drops all but the longest slices, then stacks overlapping ones into lanes; returns
  // how many were dropped.
  size_t finish() {
    keep_longest();
    const size_t dropped = added_ - slices_.size();
    std::sort(slices_.begin(), slices_.end(), [](const Slice& a, const Slice& b) {
      return std::tie(a.track, a.start_ns, b.dur_ns) < std::tie(b.track, b.start_ns, a.dur_ns);
    });
    std::vector<int64_t> lane_end;
    for (size_t i = 0; i < slices_.size(); ++i) {
      Slice& s = slices_[i];
      if (i == 0 || slices_[i - 1].track != s.track) lane_end.clear();
      uint32_t lane = 0;
      while (lane < lane_end.size() && lane_end[lane] > s.start_ns) ++lane;
      lane = std::min(lane, kMaxLanes - 1);
      if (lane >= lane_end.size()) lane_end.resize(lane + 1);
      lane_end[lane] = std::max(lane_end[lane], s.start_ns + s.dur_ns);
      s.lane = lane;
      tracks_[s.track].lanes = std::max(tracks_[s.track].lanes, lane + 1);
    }
    return dropped;
  }

  const std::vector<Track>& tracks() const { return tracks_; }
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<Slice>& slices() const { return slices_; }

 private:
  // The `limit_` longest; among equally long ones the earliest (then by track, name and
  // category), so the choice does not depend on the order slices were added in.
  void keep_longest() {
    if (slices_.size() <= limit_) return;
    std::nth_element(slices_.begin(), slices_.begin() + static_cast<std::ptrdiff_t>(limit_), slices_.end(),
                     [](const Slice& a, const Slice& b) {
                       return std::tie(b.dur_ns, a.start_ns, a.track, a.name, a.category) <
                              std::tie(a.dur_ns, b.start_ns, b.track, b.name, b.category);
                     });
    slices_.resize(limit_);
  }

  size_t limit_;
  size_t added_ = 0;
  std::map<std::tuple<int, int, TrackKind, uint64_t>, uint32_t> index_;  // (input, pid, kind, id)
  std::vector<Track> tracks_;
  std::unordered_map<std::string, uint32_t> names_index_;
  std::unordered_map<const void*, uint32_t> by_identity_;
  std::vector<std::string> names_;
  std::vector<Slice> slices_;
};

std::string thread_label(const Process& p, uint32_t tid) {
  for (const ThreadInfo& t : p.threads) {
    if (t.tid != tid) continue;
    std::string label = t.name.empty() ? "thread" : t.name;
    return label + " (" + std::to_string(tid) + ")";
  }
  return "thread " + std::to_string(tid);
}

// "pid N"; in a merged report, processes of later inputs also name their input.
std::string process_label(const Process& p) {
  const std::string pid = "pid " + std::to_string(p.pid);
  return p.input > 0 ? pid + " (input " + std::to_string(p.input) + ")" : pid;
}

uint64_t main_first(const Process& p, uint32_t tid) {
  for (const ThreadInfo& t : p.threads) {
    if (t.tid == tid && t.is_main) return tid;
  }
  return (uint64_t{1} << 32) | tid;
}

// The engine's longest slices as tracks: each process's threads (its CPU rows and their
// CUDA API rows, a thread's in the order its first slices come), the processes in the
// run's order, then their GPU streams; tracks and names are numbered in the order of the
// slices by time within each, whatever the order the capture was read in.
void add_slices(const Run& run, Timeline& tl) {
  std::unordered_map<uint64_t, size_t> process_index;  // (input << 32 | pid) -> place in the run
  for (size_t i = 0; i < run.processes.size(); ++i) {
    const Process& p = run.processes[i];
    process_index.emplace((uint64_t{static_cast<uint32_t>(p.input)} << 32) | static_cast<uint32_t>(p.pid), i);
  }
  struct Keyed {
    std::tuple<int, size_t, uint32_t, int64_t, int64_t> key;  // GPU section, process, thread, start, -dur
    const TimelineSlice* slice;
  };
  std::vector<Keyed> keyed;
  keyed.reserve(run.timeline.size());
  for (const TimelineSlice& s : run.timeline) {
    auto it = process_index.find((uint64_t{static_cast<uint32_t>(s.input)} << 32) | static_cast<uint32_t>(s.pid));
    if (it == process_index.end()) continue;
    const bool gpu = static_cast<TrackKind>(s.track) == TrackKind::kGpu;
    keyed.push_back({{gpu ? 1 : 0, it->second, gpu ? 0 : s.id, s.start_ns, -s.dur_ns}, &s});
  }
  std::sort(keyed.begin(), keyed.end(), [](const Keyed& a, const Keyed& b) {
    if (a.key != b.key) return a.key < b.key;
    return std::tie(a.slice->track, a.slice->name.str()) < std::tie(b.slice->track, b.slice->name.str());
  });
  for (const Keyed& k : keyed) {
    const TimelineSlice& s = *k.slice;
    const Process& p = run.processes[std::get<1>(k.key)];
    const auto kind = static_cast<TrackKind>(s.track);
    const uint64_t id = kind == TrackKind::kGpu ? (uint64_t{s.id} << 32) | s.stream : main_first(p, s.id);
    const uint32_t track = tl.track(p, kind, id, [&] {
      if (kind == TrackKind::kGpu) {
        const std::string where = process_label(p) + " GPU " + std::to_string(s.id);
        return s.stream == ~0u ? where + " device syncs" : where + " stream " + std::to_string(s.stream);
      }
      return process_label(p) + " " + thread_label(p, s.id) + (kind == TrackKind::kCudaApi ? " CUDA API" : "");
    });
    tl.add({track, tl.name(s.name), 0, s.category, s.start_ns, s.dur_ns});
  }
}

int64_t time_base(const Run& run) {
  int64_t base = run.start_ns > 0 ? run.start_ns : std::numeric_limits<int64_t>::max();
  for (const Process& p : run.processes) {
    if (p.start_ns != 0) base = std::min(base, p.start_ns);
    if (!p.gpu_records.empty()) base = std::min(base, p.gpu_records.front().start_ns);
    if (!p.memory_events.empty()) base = std::min(base, p.memory_events.front().ts_ns);
    for (const Step& s : p.steps) base = std::min(base, s.start_ns);
  }
  return base == std::numeric_limits<int64_t>::max() ? 0 : base;
}

void append_timeline(std::string& out, const Timeline& tl, int64_t base, size_t omitted) {
  out += "\"tracks\":[";
  for (size_t i = 0; i < tl.tracks().size(); ++i) {
    const Track& t = tl.tracks()[i];
    if (i > 0) out += ',';
    out += "{\"name\":";
    json::append_string(out, t.name);
    out += ",\"kind\":\"";
    out += track_kind_name(t.kind);
    out += "\",\"pid\":";
    json::append_int(out, t.pid);
    out += ",\"lanes\":";
    json::append_uint(out, t.lanes);
    out += '}';
  }
  out += "],\"names\":[";
  for (size_t i = 0; i < tl.names().size(); ++i) {
    if (i > 0) out += ',';
    json::append_string(out, tl.names()[i]);
  }
  // Six numbers per slice: track, lane, name, category, start (ns from the base), duration.
  out += "],\"slices\":[";
  bool first = true;
  for (const Slice& s : tl.slices()) {
    if (!first) out += ',';
    first = false;
    json::append_uint(out, s.track);
    out += ',';
    json::append_uint(out, s.lane);
    out += ',';
    json::append_uint(out, s.name);
    out += ',';
    json::append_uint(out, s.category);
    out += ',';
    json::append_int(out, s.start_ns - base);
    out += ',';
    json::append_int(out, s.dur_ns);
  }
  out += "],\"omitted_slices\":";
  json::append_uint(out, omitted);
}

Json steps_json(const Run& run, int64_t base) {
  Json steps = Json::array();
  for (const Process& p : run.processes) {
    for (const Step& s : p.steps) {
      steps.push_back({{"pid", p.pid}, {"index", s.index}, {"name", s.name},
                       {"start", s.start_ns - base}, {"dur", s.dur_ns},
                       {"action", step_action_name(s.action)}, {"recorded", s.cycle >= 0}});
    }
  }
  return steps;
}

// On-demand capture windows (analysis/capture_windows.h), on the timeline's clock.
Json capture_windows_json(const Run& run, int64_t base) {
  Json out = Json::array();
  for (const Process& p : run.processes) {
    for (const CaptureWindow& w : p.capture_windows) {
      out.push_back({{"pid", p.pid}, {"id", w.id}, {"start", w.start_ns - base},
                     {"dur", std::max<int64_t>(0, w.end_ns - w.start_ns)}, {"source", w.source}, {"steps", w.steps}});
    }
  }
  return out;
}

// Per step and device: busy = merged kernel intervals (as summary.json), idle = the
// step's window (its CPU span widened to the GPU work it launched) minus busy.
Json gpu_steps_json(const Run& run) {
  Json out = Json::array();
  for (const Process& p : run.processes) {
    if (p.gpu_records.empty()) continue;
    const std::vector<std::vector<const GpuRecord*>> by_step = gpu_records_per_step(p);
    for (size_t k = 0; k < p.steps.size(); ++k) {
      const Step& s = p.steps[k];
      std::map<uint32_t, std::vector<std::pair<int64_t, int64_t>>> kernels;
      std::map<uint32_t, std::pair<int64_t, int64_t>> window;
      for (const GpuRecord* record : by_step[k]) {
        const GpuRecord& g = *record;
        if (g.kind == GpuKind::kSync) continue;
        auto [it, fresh] = window.try_emplace(g.device, s.start_ns, s.start_ns + s.dur_ns);
        it->second.first = std::min(it->second.first, g.start_ns);
        it->second.second = std::max(it->second.second, g.end_ns);
        if (g.kind == GpuKind::kKernel) kernels[g.device].emplace_back(g.start_ns, g.end_ns);
      }
      for (const auto& [device, w] : window) {
        const int64_t busy = merged_length(kernels[device]);
        out.push_back({{"pid", p.pid}, {"step", s.name}, {"device", device}, {"busy", busy},
                       {"idle", std::max<int64_t>(0, w.second - w.first - busy)}});
      }
    }
  }
  return out;
}

// [time, bytes] pairs of running totals, at most `limit` (the highest value of each
// bucket, so that peaks survive).
Json memory_points(const std::vector<const MemoryEvent*>& events, int64_t base, size_t limit) {
  const size_t bucket = std::max<size_t>(1, (events.size() + limit - 1) / std::max<size_t>(1, limit));
  Json points = Json::array();
  for (size_t i = 0; i < events.size(); i += bucket) {
    const MemoryEvent* best = events[i];
    for (size_t j = i; j < std::min(events.size(), i + bucket); ++j) {
      if (events[j]->live_bytes > best->live_bytes) best = events[j];
    }
    points.push_back(Json::array({best->ts_ns - base, best->live_bytes}));
  }
  return points;
}

// Running device memory per process and device, and --profile-memory's CPU tensors.
Json memory_json(const Run& run, int64_t base, size_t limit) {
  Json out = Json::array();
  for (const Process& p : run.processes) {
    std::map<uint32_t, std::vector<const MemoryEvent*>> by_device;
    for (const MemoryEvent& m : p.memory_events) by_device[m.device].push_back(&m);
    for (const auto& [device, events] : by_device) {
      out.push_back({{"pid", p.pid}, {"device", device}, {"points", memory_points(events, base, limit)}});
    }
    if (!p.tensor_memory.empty()) {
      std::vector<const MemoryEvent*> tensors;
      for (const MemoryEvent& m : p.tensor_memory) tensors.push_back(&m);
      out.push_back({{"pid", p.pid}, {"device", -1}, {"label", "CPU tensors"},
                     {"points", memory_points(tensors, base, limit)}});
    }
  }
  return out;
}

bool is_device_kind(const std::string& kind) {
  return kind == "kernel" || kind == "memcpy" || kind == "memset";
}

// The longest rows by `key` (a table sort key): device rows (kernels, copies, sets) or the others.
Json top_json(const Run& run, const std::string& key, bool device, size_t n) {
  const TableRows sorted = make_table_rows(run.ops, run.has_gpu, {key, 0});
  Json out = Json::array();
  for (const OpStats& o : sorted.rows) {
    if (out.size() >= n) break;
    if (is_device_kind(o.kind) != device) continue;
    const int64_t value = device ? o.self_cuda_ns : o.self_cpu_ns;
    if (value <= 0) continue;
    out.push_back({{"name", o.name}, {"kind", o.kind}, {"value", value}, {"calls", o.calls}});
  }
  return out;
}

double us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

std::string avg(int64_t ns, uint64_t calls) {
  return format_time_us(calls == 0 ? 0.0 : us(ns) / static_cast<double>(calls));
}

// The cells of table.txt's columns, with the raw numbers the page sorts by.
Json table_json(const TableRows& t) {
  const double cpu_total = us(t.self_cpu_total_ns);
  const double cuda_total = us(t.self_cuda_total_ns);
  Json columns = {"Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"};
  if (t.has_gpu) {
    for (const char* c : {"Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg"}) columns.push_back(c);
  }
  columns.push_back("# of Calls");
  Json rows = Json::array();
  for (const OpStats& o : t.rows) {
    Json cells = {o.name, format_share(us(o.self_cpu_ns), cpu_total), format_time_us(us(o.self_cpu_ns)),
                  format_share(us(o.cpu_total_ns), cpu_total), format_time_us(us(o.cpu_total_ns)),
                  avg(o.cpu_total_ns, o.calls)};
    const uint64_t cpu_avg = o.calls ? static_cast<uint64_t>(o.cpu_total_ns) / o.calls : 0;
    Json raw = {o.name, o.self_cpu_ns, o.self_cpu_ns, o.cpu_total_ns, o.cpu_total_ns, cpu_avg};
    if (t.has_gpu) {
      for (const std::string& c : {format_time_us(us(o.self_cuda_ns)), format_share(us(o.self_cuda_ns), cuda_total),
                                   format_time_us(us(o.cuda_total_ns)), avg(o.cuda_total_ns, o.calls)}) {
        cells.push_back(c);
      }
      const uint64_t cuda_avg = o.calls ? static_cast<uint64_t>(o.cuda_total_ns) / o.calls : 0;
      for (uint64_t v : {static_cast<uint64_t>(o.self_cuda_ns), static_cast<uint64_t>(o.self_cuda_ns),
                         static_cast<uint64_t>(o.cuda_total_ns), cuda_avg}) {
        raw.push_back(v);
      }
    }
    cells.push_back(std::to_string(o.calls));
    raw.push_back(o.calls);
    rows.push_back({{"kind", o.kind}, {"cells", std::move(cells)}, {"raw", std::move(raw)}});
  }
  Json trailer = {"Self CPU time total: " + format_time_us(cpu_total)};
  if (t.has_gpu) trailer.push_back("Self CUDA time total: " + format_time_us(cuda_total));
  return {{"sort_by", t.sort_key}, {"columns", std::move(columns)}, {"rows", std::move(rows)},
          {"trailer", std::move(trailer)}};
}

// What was lost or is doubtful, for the banner at the top of the page.
Json warnings_json(const Run& run, size_t omitted) {
  Json out = Json::array();
  if (run.truncated) {
    out.push_back("The capture was truncated at byte " + std::to_string(run.truncated_at) +
                  "; this report covers what was written before it.");
  }
  if (run.corrupted) out.push_back(corruption_text(run) + ".");
  if (run.dropped_events > 0) out.push_back(std::to_string(run.dropped_events) + " events were lost (dropped).");
  if (run.cupti_dropped > 0) {
    out.push_back(std::to_string(run.cupti_dropped) + " GPU activity records were dropped by CUPTI.");
  }
  if (run.processes_without_events > 0) {
    out.push_back(std::to_string(run.processes_without_events) + " process(es) recorded no events.");
  }
  for (const std::string& n : run.gpu_notices) out.push_back("GPU: " + n);
  for (const std::string& w : run.warnings) out.push_back(w);
  for (const Process& p : run.processes) {
    for (const std::string& w : p.warnings) out.push_back("pid " + std::to_string(p.pid) + ": " + w);
  }
  if (omitted > 0) {
    out.push_back(std::to_string(omitted) + " more events not shown in the timeline (only the longest are kept).");
  }
  return out;
}

template <typename T>
Json or_null(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

// A process for the page's process tree: who started it, what it ran (and exec'd from),
// how it ended.
Json process_json(const Process& p, int64_t base) {
  Json earlier = Json::array();
  for (const std::vector<std::string>& argv : p.earlier_images) earlier.push_back(argv);
  return {{"pid", p.pid}, {"ppid", p.ppid}, {"exe", p.exe}, {"cmdline", p.cmdline}, {"exec_from", std::move(earlier)},
          {"worker", p.worker}, {"input", p.input}, {"exit_code", or_null(p.exit_code)},
          {"exit_signal", or_null(p.exit_signal)}, {"start", p.start_ns > 0 ? p.start_ns - base : 0},
          {"dur", std::max<int64_t>(0, p.end_ns - p.start_ns)}, {"events", p.cpu_events},
          {"dropped", p.dropped}, {"threads", p.threads.size()}, {"gpu_events", p.gpu_records.size()},
          {"steps", p.steps.size()}};
}

// What the page does not show, and why: steps outside the schedule or the capture windows,
// the timeline's shortest events (the loss warnings have a banner of their own).
Json left_out_json(const Run& run, size_t omitted) {
  size_t steps = 0, waited = 0, warmup = 0;
  for (const Process& p : run.processes) {
    for (const Step& s : p.steps) {
      if (!s.marker) continue;
      ++steps;
      if (s.action == StepAction::kNone) ++waited;
      if (s.action == StepAction::kWarmup) ++warmup;
    }
  }
  Json out = Json::array();
  if (waited + warmup > 0) {
    out.push_back(std::to_string(waited + warmup) + " of " + std::to_string(steps) +
                  " steps are not in the table, top ops or traces: " + std::to_string(waited) +
                  " outside the schedule or the capture windows, " + std::to_string(warmup) +
                  " warm-up (the timeline shows them, shaded grey).");
  }
  if (omitted > 0) {
    out.push_back(std::to_string(omitted) + " of the shortest events are not drawn on the timeline (it keeps the " +
                  "longest); the table and the traces have them all.");
  }
  if (run.processes_without_events > 0) {
    out.push_back(std::to_string(run.processes_without_events) + " processes connected but recorded nothing.");
  }
  return out;
}

Json meta_json(const Run& run, int64_t base) {
  uint64_t events = 0, gpu = 0;
  Json processes = Json::array();
  for (const Process& p : run.processes) {
    events += p.cpu_events;
    gpu += p.gpu_records.size();
    processes.push_back(process_json(p, base));
  }
  const int64_t end = run.end_ns > base ? run.end_ns - base : 0;
  return {{"command", run.command}, {"exit_code", run.exit_code}, {"host", run.host},
          {"start_unix_ns", base}, {"duration_ns", end}, {"has_gpu", run.has_gpu},
          {"events", events}, {"gpu_events", gpu}, {"processes", std::move(processes)}};
}

void append_member(std::string& out, const char* key, const Json& value) {
  out += ",\"";
  out += key;
  out += "\":";
  out += value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string escape_html(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

std::string render_html_report_data(const Run& run, const TableRows& rows, const HtmlReportOptions& options) {
  const int64_t base = time_base(run);
  Timeline tl(options.max_events);
  tl.reserve(run.timeline.size());
  add_slices(run, tl);
  // The engine kept only the longest slices: those it left out are omitted too.
  const size_t omitted = tl.finish() + static_cast<size_t>(run.timeline_slices - std::min<uint64_t>(run.timeline_slices, run.timeline.size()));

  std::string out = "{\"schema\":\"torchprof.report/1\"";
  append_member(out, "meta", meta_json(run, base));
  append_member(out, "warnings", warnings_json(run, omitted));
  append_member(out, "overview", overview_json(options.overview != nullptr ? *options.overview : compute_overview(run)));
  out += ',';
  append_timeline(out, tl, base, omitted);
  append_member(out, "steps", steps_json(run, base));
  append_member(out, "capture_windows", capture_windows_json(run, base));
  append_member(out, "top_ops", top_json(run, "self_cpu_time_total", false, options.top_n));
  append_member(out, "top_kernels", top_json(run, "self_cuda_time_total", true, options.top_n));
  append_member(out, "gpu_steps", gpu_steps_json(run));
  append_member(out, "memory", memory_json(run, base, options.max_memory_points));
  append_member(out, "table", table_json(rows));
  // --with-modules: the module view (analysis/module_view.h), only when there is one.
  if (const std::vector<ModuleRow> modules = module_view(run); !modules.empty()) {
    append_member(out, "modules", module_view_json(modules));
  }
  append_member(out, "left_out", left_out_json(run, omitted));
  append_member(out, "empty_result", options.empty_result);
  append_member(out, "traces", options.traces);
  append_member(out, "dropped_events", run.dropped_events);
  out += "}";
  // '<' only occurs inside JSON strings, where \u003c means the same; so no "</script>".
  std::string escaped;
  escaped.reserve(out.size());
  for (char c : out) {
    if (c == '<') {
      escaped += "\\u003c";
    } else {
      escaped += c;
    }
  }
  return escaped;
}

std::string render_html_report(const Run& run, const TableRows& rows, const HtmlReportOptions& options) {
  std::string title = "torchprof";
  if (!run.command.empty()) title += ": " + run.command.front();
  std::string page;
  page += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  page += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  page += "<title>" + escape_html(title) + "</title>\n<style>\n";
  page += kReportCss;
  page += "</style>\n</head>\n<body>\n";
  page += "<div id=\"tp-status\" data-status=\"loading\" hidden></div>\n";
  page += "<main id=\"tp-root\"><noscript>This report needs JavaScript.</noscript></main>\n";
  page += "<script type=\"application/json\" id=\"tp-data\">";
  page += render_html_report_data(run, rows, options);
  page += "</script>\n<script>\n";
  page += kReportJs;
  page += "</script>\n</body>\n</html>\n";
  return page;
}

}  // namespace torchprof
