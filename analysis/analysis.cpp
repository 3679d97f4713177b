#include "analysis/analysis.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <regex>
#include <unordered_map>
#include <utility>

#include "analysis/capture_windows.h"
#include "analysis/gpu_analysis.h"
#include "analysis/permutation.h"
#include "common/errors.h"

namespace torchprof {

namespace {

bool contains(const Event& outer, const Event& inner) {
  return outer.start_ns <= inner.start_ns && inner.end_ns <= outer.end_ns;
}

struct Span {
  int64_t first = std::numeric_limits<int64_t>::max();
  int64_t last = std::numeric_limits<int64_t>::min();
};

// Interval nesting of one thread's events [begin, end), sorted by (start asc, end desc):
// a range's parent is the innermost range of the thread that fully contains it.
// While an event is open, self_ns holds the sum of its direct children's durations;
// it becomes the self time once the event leaves the stack (no child can follow).
// Also widens `span` to the thread's earliest start and latest end.
bool in_order(const Event& x, const Event& y) {
  if (x.tid != y.tid) return x.tid < y.tid;
  if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
  return x.end_ns >= y.end_ns;
}

// Returns the end of the thread's events; when an event is out of order (or of
// another thread) before that, stops there and returns its index with `sorted` false.
size_t nest_thread(std::vector<Event>& events, size_t begin, Span& span, bool& sorted) {
  std::vector<int32_t> stack;
  auto close = [&](int32_t i) {
    Event& e = events[i];
    e.self_ns = std::max<int64_t>(0, e.dur_ns() - e.self_ns);
  };
  const uint32_t tid = events[begin].tid;
  size_t i = begin;
  for (; i < events.size(); ++i) {
    Event& e = events[i];
    if (i > begin && !in_order(events[i - 1], e)) {
      sorted = false;
      return i;
    }
    if (e.tid != tid) break;
    span.first = std::min(span.first, e.start_ns);
    span.last = std::max(span.last, e.end_ns);
    while (!stack.empty() && events[stack.back()].end_ns <= e.start_ns &&
           events[stack.back()].end_ns < e.end_ns) {
      close(stack.back());
      stack.pop_back();
    }
    e.parent = -1;
    e.self_ns = 0;
    // A start/end range that ends on another thread is not an interval of this
    // thread: it neither holds nor is held by the thread's ranges.
    if (e.kind == EventKind::kRange && !e.push_pop && e.end_tid() != e.tid) {
      close(static_cast<int32_t>(i));
      continue;
    }
    // Partially overlapping ranges (start/end ranges) are skipped, not parents.
    for (auto it = stack.rbegin(); it != stack.rend(); ++it) {
      if (contains(events[*it], e)) {
        e.parent = *it;
        break;
      }
    }
    // Marks are instants; ranges and API calls are intervals that may hold others
    // (an API call is a CPU child of its range, subtracted from the range's self time).
    if (e.kind == EventKind::kMark) continue;
    if (e.parent >= 0) events[e.parent].self_ns += e.dur_ns();
    stack.push_back(static_cast<int32_t>(i));
  }
  for (int32_t open : stack) close(open);
  return i;
}

// Step markers of a process in order of appearance (start time, then position).
std::vector<int32_t> find_markers(const Process& proc, const StepMarker& marker) {
  // The regex runs once per name; a small direct-mapped table in front of the map
  // answers most events without hashing.
  std::unordered_map<Name, bool> matches;
  struct Cached {
    const void* id = nullptr;
    bool match = false;
  };
  std::array<Cached, 256> cache{};
  std::vector<int32_t> markers;
  for (size_t i = 0; i < proc.events_list.size(); ++i) {
    if (is_cuda_api(proc.events_list[i].kind)) continue;  // markers are NVTX ranges and marks
    const Name name = proc.events_list[i].name;
    Cached& c = cache[(reinterpret_cast<uintptr_t>(name.id()) >> 4) & 255];
    if (c.id != name.id() || c.id == nullptr) {
      auto [it, fresh] = matches.try_emplace(name, false);
      if (fresh) it->second = marker.matches(name.str());
      c = {name.id(), it->second};
    }
    if (c.match) markers.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(markers.begin(), markers.end(), [&](int32_t x, int32_t y) {
    return proc.events_list[x].start_ns < proc.events_list[y].start_ns;
  });
  return markers;
}

std::vector<Step> make_steps(const Process& proc, const std::vector<int32_t>& markers) {
  std::vector<Step> steps;
  if (markers.empty()) {
    if (proc.events_list.empty()) return steps;
    Step& s = steps.emplace_back();
    s.start_ns = proc.start_ns;
    s.dur_ns = proc.end_ns - proc.start_ns;
    return steps;
  }
  for (size_t k = 0; k < markers.size(); ++k) {
    const Event& m = proc.events_list[markers[k]];
    Step& s = steps.emplace_back();
    s.index = static_cast<int>(k);
    s.name = m.name;
    s.marker = markers[k];
    s.start_ns = m.start_ns;
    if (m.kind == EventKind::kRange) {
      s.dur_ns = m.dur_ns();
    } else {
      // A mark-only marker opens a step that lasts until the next marker.
      int64_t end = k + 1 < markers.size() ? proc.events_list[markers[k + 1]].start_ns
                                           : proc.end_ns;
      s.dur_ns = std::max<int64_t>(0, end - m.start_ns);
    }
  }
  return steps;
}

void assign_actions(std::vector<Step>& steps, const std::optional<Schedule>& schedule) {
  int cycle = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    Step& s = steps[k];
    if (schedule) {
      s.action = schedule_action(*schedule, s.index);
    } else {
      s.action = k + 1 == steps.size() ? StepAction::kRecordAndSave : StepAction::kRecord;
    }
    s.cycle = -1;
    if (s.action == StepAction::kRecord || s.action == StepAction::kRecordAndSave) {
      s.cycle = cycle;
      if (s.action == StepAction::kRecordAndSave) ++cycle;
    }
  }
}

}  // namespace

StepLocator::StepLocator(const std::vector<Step>& steps) : steps_(steps) { extend(); }

void StepLocator::extend() {
  for (size_t k = furthest_end_.size(); k < steps_.size(); ++k) {
    const int64_t end = steps_[k].start_ns + steps_[k].dur_ns;
    furthest_end_.push_back(k == 0 ? end : std::max(end, furthest_end_[k - 1]));
  }
}

int32_t StepLocator::step_of(int64_t t, ptrdiff_t& cursor, bool restart) const {
  const auto n = static_cast<ptrdiff_t>(steps_.size());
  if (restart || (cursor > 0 && steps_[cursor - 1].start_ns > t)) {
    cursor = std::upper_bound(steps_.begin(), steps_.end(), t,
                              [](int64_t x, const Step& s) { return x < s.start_ns; }) - steps_.begin();
  }
  while (cursor < n && steps_[cursor].start_ns <= t) ++cursor;
  for (auto k = cursor - 1; k >= 0 && furthest_end_[k] >= t; --k) {
    if (t <= steps_[k].start_ns + steps_[k].dur_ns) return static_cast<int32_t>(k);
  }
  return -1;
}

std::vector<Step> steps_of_markers(const Process& proc, const std::vector<int32_t>& markers,
                                   const std::optional<Schedule>& schedule) {
  std::vector<Step> steps = make_steps(proc, markers);
  assign_actions(steps, schedule);
  return steps;
}

StepMarker::StepMarker(const std::string& pattern) {
  try {
    regex_ = std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& err) {
    throw InputError("invalid step marker regex '" + pattern + "': " + err.what());
  }
  // ECMAScript's special characters; `^` (without the multiline flag) anchors at the start.
  if (pattern.starts_with('^') && pattern.find_first_of("^$\\.*+?()[]{}|", 1) == std::string::npos) {
    prefix_ = pattern.substr(1);
  }
}

bool StepMarker::matches(const std::string& name) const {
  return prefix_ ? name.starts_with(*prefix_) : std::regex_search(name, regex_);
}

void sort_events(std::vector<Event>& events) {
  auto before = [&](const Event& x, const Event& y) {
    if (x.tid != y.tid) return x.tid < y.tid;
    if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
    return x.end_ns > y.end_ns;
  };
  if (std::is_sorted(events.begin(), events.end(), before)) return;
  // The same order as a stable sort: group by thread keeping the order of arrival
  // (a thread's events mostly arrive in time order), sort the groups that need it,
  // then move the events into place without a second copy of the list.
  std::unordered_map<uint32_t, size_t> per_thread;
  for (const Event& e : events) ++per_thread[e.tid];
  std::vector<uint32_t> tids;
  for (const auto& [tid, count] : per_thread) tids.push_back(tid);
  std::sort(tids.begin(), tids.end());
  size_t offset = 0;
  for (uint32_t tid : tids) offset += std::exchange(per_thread[tid], offset);
  std::vector<uint32_t> order(events.size());
  uint32_t last_tid = 0;
  size_t* next = nullptr;
  for (uint32_t i = 0; i < order.size(); ++i) {
    if (next == nullptr || events[i].tid != last_tid) {
      last_tid = events[i].tid;
      next = &per_thread[last_tid];
    }
    order[(*next)++] = i;
  }
  auto by_time = [&](uint32_t x, uint32_t y) { return before(events[x], events[y]); };
  size_t begin = 0;
  for (uint32_t tid : tids) {
    const size_t end = per_thread[tid];
    if (!std::is_sorted(order.begin() + begin, order.begin() + end, by_time)) {
      std::stable_sort(order.begin() + begin, order.begin() + end, by_time);
    }
    begin = end;
  }
  apply_order(events, order);
}

void compute_nesting(Process& proc) {
  auto& ev = proc.events_list;
  // Decode leaves the list sorted: check the order while nesting (one pass over the
  // events), and sort (then nest again) only when a thread's events turn out of order.
  Span span;
  bool sorted = false;
  for (int attempt = 0; attempt < 2 && !sorted; ++attempt) {
    if (attempt == 1) sort_events(ev);
    span = Span{};
    sorted = true;
    for (size_t begin = 0; begin < ev.size() && sorted;) begin = nest_thread(ev, begin, span, sorted);
  }
  if (ev.empty()) return;
  proc.end_ns = std::max(proc.end_ns, span.last);
  // start_ns 0 means "not known yet" (decode sets it from the first record).
  proc.start_ns = proc.start_ns == 0 ? span.first : std::min(proc.start_ns, span.first);
}

void compute_steps(Process& proc, const AnalysisOptions& options) {
  proc.steps = steps_of_markers(proc, find_markers(proc, StepMarker(options.step_marker)),
                                options.schedule);
  assign_events_to_steps(proc);
}

namespace {

// Row kinds: OpTable compares them by address, so each is one constant.
const char* const kKernelKind = "kernel";
const char* const kMemcpyKind = "memcpy";
const char* const kMemsetKind = "memset";
const char* const kSyncKind = "sync";
const char* const kNvtxKind = "nvtx";
const char* const kCudaApiKind = "cuda_api";

const char* gpu_kind_name(GpuKind kind) {
  switch (kind) {
    case GpuKind::kKernel: return kKernelKind;
    case GpuKind::kMemcpy: return kMemcpyKind;
    case GpuKind::kMemset: return kMemsetKind;
    case GpuKind::kSync: return kSyncKind;
  }
  return kKernelKind;
}

// One row per (kind, name): an NVTX range and a kernel never share a row. Names are
// interned, so a row is found by the name's identity, not by hashing its text.
// PyTorch op rows are keyed by op_row_key (their shapes and stack may split them).
class OpTable {
 public:
  explicit OpTable(std::vector<OpStats>& ops) : ops_(ops) {}
  OpStats& row(Name name, const char* kind) {
    // A small direct-mapped table in front of the map answers most events without hashing.
    Cached& c = cache_[((reinterpret_cast<uintptr_t>(name.id()) >> 4) ^ reinterpret_cast<uintptr_t>(kind)) & 255];
    if (c.key.name == name && c.key.kind == kind) return ops_[c.index];
    auto [it, fresh] = rows_.try_emplace(Key{name, kind}, ops_.size());
    if (fresh) {
      OpStats& op = ops_.emplace_back();
      op.name = name;
      op.kind = kind;
    }
    c = {Key{name, kind}, it->second};
    return ops_[it->second];
  }
  // `key` holds the row's kind and, for cpu_op rows, its shapes and stack.
  OpStats& row(Name name, OpStats key) {
    auto [it, fresh] = op_rows_.try_emplace(op_row_key(key, name), ops_.size());
    if (fresh) {
      OpStats& op = ops_.emplace_back(std::move(key));
      op.name = name;
    }
    return ops_[it->second];
  }

 private:
  struct Key {
    Name name;
    const char* kind;  // one of a few string literals: compared by address
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const noexcept {
      return std::hash<Name>()(k.name) * 31 + std::hash<const void*>()(k.kind);
    }
  };
  struct Cached {
    Key key{Name(), nullptr};  // kind nullptr: empty
    size_t index = 0;
  };
  std::vector<OpStats>& ops_;
  std::array<Cached, 256> cache_{};
  std::unordered_map<Key, size_t, KeyHash> rows_;
  std::unordered_map<std::string, size_t> op_rows_;
};

void add_events(const Process& proc, OpTable& table, bool group_by_input_shape) {
  const Name step_row{std::string(kStepRowName)};
  Name last_name;
  Name last_row;
  for (const Event& e : proc.events_list) {
    if (e.kind == EventKind::kMark || e.step < 0 || !recorded(proc.steps[e.step].action)) continue;
    // torch renames ProfilerStep#N to ProfilerStep* before grouping; so do we.
    if (e.name != last_name || last_row.empty()) {
      last_name = e.name;
      last_row = e.name.starts_with(kStepNamePrefix) ? step_row : e.name;
    }
    const OpInfo* info = e.op();
    OpStats& op = info != nullptr ? table.row(last_row, op_row(*info, group_by_input_shape))
                                  : table.row(last_row, e.kind == EventKind::kRange ? kNvtxKind : kCudaApiKind);
    ++op.calls;
    op.self_cpu_ns += e.self_ns;
    op.cpu_total_ns += e.dur_ns();
    const CudaTime cuda = proc.cuda_time(e);
    op.self_cuda_ns += cuda.self_ns;
    op.cuda_total_ns += cuda.total_ns;
  }
}

// Kernels, copies and memsets are rows of their own: no CPU time, their durations as CUDA.
void add_gpu_records(const Process& proc, OpTable& table) {
  for (const GpuEvent& g : proc.gpu_events) {
    if (g.kind == GpuKind::kSync || g.step < 0 || !recorded(proc.steps[g.step].action)) continue;
    OpStats& op = table.row(g.name, gpu_kind_name(g.kind));
    if (op.mangled.empty()) op.mangled = g.mangled;
    ++op.calls;
    op.self_cuda_ns += g.dur_ns();
    op.cuda_total_ns += g.dur_ns();
  }
}

}  // namespace

// By name, plus its shapes when grouped by them, plus its first frames when it has a
// Python stack (as torch's group_by_stack_n).
OpStats op_row(const OpInfo& op, bool group_by_input_shape) {
  OpStats key;
  key.kind = "cpu_op";
  if (group_by_input_shape) key.input_shapes = op.input_shapes;
  const size_t frames = std::min(op.stack.size(), kOpStackFrames);
  key.stack.assign(op.stack.begin(), op.stack.begin() + static_cast<std::ptrdiff_t>(frames));
  return key;
}

void aggregate_ops(Run& run, bool group_by_input_shape) {
  run.ops.clear();
  OpTable table(run.ops);
  for (const Process& proc : run.processes) {
    add_events(proc, table, group_by_input_shape);
    add_gpu_records(proc, table);
  }
}

void analyse(Run& run, const AnalysisOptions& options) {
  const bool windows = run_has_capture_windows(run);
  for (Process& proc : run.processes) {
    apply_capture_range(proc, options.capture_range);
    compute_nesting(proc);
    compute_steps(proc, options);
    if (windows) apply_capture_windows(proc);
    attribute_gpu(proc);
    if (!proc.gpu_events.empty() || !proc.memory_events.empty()) run.has_gpu = true;
  }
  aggregate_ops(run, options.group_by_input_shape);
  for (const OpStats& op : run.ops) {
    if (op.self_cuda_ns != 0 || op.cuda_total_ns != 0) run.has_gpu = true;
  }
}

int cycle_count(const Process& proc) {
  int cycles = 0;
  for (const Step& s : proc.steps) cycles = std::max(cycles, s.cycle + 1);
  return cycles;
}

const char* step_action_name(StepAction action) {
  switch (action) {
    case StepAction::kNone:
      return "none";
    case StepAction::kWarmup:
      return "warmup";
    case StepAction::kRecord:
      return "record";
    case StepAction::kRecordAndSave:
      return "record_and_save";
  }
  return "none";
}

// Each event belongs to the step whose interval holds its start (StepLocator).
void assign_events_to_steps(Process& proc) {
  const StepLocator locate(proc.steps);
  ptrdiff_t cursor = 0;
  uint32_t tid = 0;
  for (size_t i = 0; i < proc.events_list.size(); ++i) {
    Event& e = proc.events_list[i];
    const bool restart = i == 0 || e.tid != tid;
    tid = e.tid;
    e.step = locate.step_of(e.start_ns, cursor, restart);
  }
}

}  // namespace torchprof
