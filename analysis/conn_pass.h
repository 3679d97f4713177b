// The engine's pass over one connection's records (analysis/engine.h). Each thread's
// ranges nest on a stack of its own: a push opens a range, a pop closes the last open
// range of its NVTX domain, a CUDA API call (read when it returned) is a child of the
// range open around it, and the thread's start/end ranges (known from the first pass)
// open and close among them by their times. A range that ends while ranges opened
// inside it are still open leaves them to the range around it: what is not inside a
// range is not its child. Each event, once complete, is counted in its row and handed
// to the outputs that want it; GPU records find the API call that launched it by its
// correlation id (waiting for it when they are read first) and add their time to the
// ranges that were open around it. Nothing is kept per event.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/gpu_decode.h"
#include "analysis/interval_set.h"
#include "analysis/launch_table.h"
#include "analysis/memory_history.h"
#include "analysis/model.h"
#include "analysis/process_info.h"
#include "analysis/process_scan.h"
#include "analysis/rows.h"
#include "analysis/tensor_memory.h"
#include "analysis/trace_sink.h"
#include "reading/capture_scan.h"

namespace torchprof::engine {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
constexpr int64_t kLongAgo = std::numeric_limits<int64_t>::min();
constexpr uint32_t kNone = ~0u;

// Thrown by a pass that assumed the process is one step (it read no step marker yet)
// when it meets what needs the first pass: a step marker, a start/end range, a capture
// window, a name used before it is defined. The engine starts over with two passes.
struct NeedsScan {
  const char* why;
};

// What the outputs beside the table want (EngineOutputs, analysis/engine.h).
struct OutputWants {
  bool records = true;
  size_t timeline = 0;
  bool stats = false;
  bool folded = false;
  bool memory_snapshot = false;        // ProcessState::history (--memory-snapshot)
  size_t memory_snapshot_entries = 0;  // the most entries it keeps
};

// The longest slices of a process's timeline, in memory bounded by twice the limit.
class LongestSlices {
 public:
  explicit LongestSlices(size_t limit) : limit_(limit) {}
  void offer(const TimelineSlice& s) {
    ++seen_;
    if (limit_ == 0 || s.dur_ns < floor_ || (s.dur_ns == floor_ && s.start_ns > floor_start_)) return;
    kept_.push_back(s);
    if (kept_.size() >= 2 * limit_) prune();
  }
  // Keeps the `limit` longest of `kept_` (longer first, then earlier, then by place and name).
  void prune();
  std::vector<TimelineSlice>& kept() { return kept_; }
  uint64_t seen() const { return seen_; }

 private:
  size_t limit_;
  uint64_t seen_ = 0;
  int64_t floor_ = std::numeric_limits<int64_t>::min();
  int64_t floor_start_ = std::numeric_limits<int64_t>::max();
  std::vector<TimelineSlice> kept_;
};

// What the passes over one process's connections share, and what it ends with.
struct ProcessState {
  ProcessState(Process& p, const AnalysisOptions& o, const StepMarker& m, const OutputWants& w, size_t index)
      : proc(p), options(o), marker(m), wants(w), process_index(index), slices(w.timeline) {}

  Process& proc;
  const AnalysisOptions& options;
  const StepMarker& marker;
  OutputWants wants;
  size_t process_index;            // in the run (rows come in order of first use)
  const ProcessScan* scan = nullptr;  // null: one pass, the process one implicit step
  std::vector<Step> steps;         // what events are located in (one implicit step without a scan)
  std::unique_ptr<StepLocator> locator;
  const std::vector<std::pair<int64_t, int64_t>>* windows = nullptr;  // capture range; null: everything
  ProcessTraceSink* trace = nullptr;
  std::vector<uint32_t> next_external_id;  // per cycle
  uint32_t next_module_id = 0;             // the last nn.Module call's id (--with-modules)
  Rows rows;
  // Outputs that stay per process until the run is assembled.
  std::array<IntervalSet, 3> roles;         // runtime, DataLoader, CPU exec (overview.h's order)
  std::vector<GpuRecord> gpu_records;
  std::vector<MemoryEvent> memory_events;
  std::unique_ptr<TensorMemory> tensors;    // made at the first tensor record
  std::vector<MemoryEvent> tensor_events;   // for the traces
  std::unique_ptr<MemoryHistoryBuilder> history;  // --memory-snapshot: CUDA tensors
  LongestSlices slices;
  RunStats stats;
  std::map<std::string, int64_t> folded;
  std::vector<std::shared_ptr<const OpInfo>> op_infos;
  uint64_t unmatched_gpu = 0;
  uint64_t gpu_events = 0;
  bool any_gpu = false;
  std::vector<std::string> late_warnings;   // after the run's own (launcher view, losses)

  // Without a schedule (and without on-demand capture windows) what lies outside every
  // step counts too, in the one cycle, as torch.profiler without a schedule records the
  // whole run; with one it is left out and counted as such.
  bool outside_counts = false;
  uint64_t left_out_in_steps = 0;   // ranges, API calls and GPU records of steps not recorded
  uint64_t left_out_outside = 0;    // those outside every step

  bool counted(int32_t step) const {
    if (step < 0) return outside_counts && !steps.empty();
    return static_cast<size_t>(step) < steps.size() && recorded(steps[static_cast<size_t>(step)].action);
  }
  int cycle(int32_t step) const {
    if (step < 0) return outside_counts && !steps.empty() ? 0 : -1;
    return static_cast<size_t>(step) < steps.size() ? steps[static_cast<size_t>(step)].cycle : -1;
  }
  // A kept event of `step` that is not counted.
  void left_out(int32_t step) { ++(step < 0 ? left_out_outside : left_out_in_steps); }
  uint32_t external_id(int cycle) {
    if (static_cast<size_t>(cycle) >= next_external_id.size()) next_external_id.resize(static_cast<size_t>(cycle) + 1, 0);
    return ++next_external_id[static_cast<size_t>(cycle)];
  }
  bool kept(int64_t t) const;
  // Whether a tensor allocation at `t` in `step` is one torch's profiler would have seen:
  // in a recorded step, or between two recorded steps one after the other (its profiler
  // stays on from the first active step to the last).
  bool memory_counted(int64_t t, int32_t step);
  std::vector<std::pair<int64_t, int64_t>> recorded_spans;  // made at the first call
  bool spans_made = false;
};

// The overview's CPU roles, in the order of Process::cpu_roles.
enum Role : int8_t { kRoleRuntime = 0, kRoleDataLoader = 1, kRoleCpuExec = 2, kRoleNone = 3, kRoleMarker = 4 };

// What the ranges of one (name, domain) share.
struct RangeKind {
  RowStats stats;
  const OpInfo* op = nullptr;  // PyTorch op ranges
  Name shown;                  // the op's name, or the range's text
  Name row_name;               // its row's name (ProfilerStep#N folded into ProfilerStep*)
  int8_t role = kRoleNone;     // for the overview; kRoleMarker: a step marker
  bool resolved = false;
  int32_t series = -1;         // index into the stats series of ranges
  int64_t folded_ns = 0;       // self time of its recorded ranges, for stacks.folded
  int8_t collective = -1;      // a CollectiveSource when the range is a collective's
  int64_t coll_in_elems = -1;  // its input tensors' elements, from the op's shapes
};

// A string id's state in the pass.
struct NameSlot {
  std::string text;
  Name name;
  bool defined = false;   // its text is known (read, or from the first pass)
  bool used = false;
  bool stand_in = false;  // never defined: named "<lost #N>"
  RangeKind* range = nullptr;  // its ranges in the default domain (ConnPass::kinds_)
  int32_t api = -1;       // its CUDA API calls' row (side_rows_)
  int32_t kernel = -1;    // its kernels' row
};

// An open range on a thread's stack.
struct Open {
  int64_t start = 0;
  int64_t children = 0;   // direct children's durations so far
  uint64_t seq = 0;       // its start's place among its thread's events
  uint64_t attr = 0;
  uint64_t payload = 0;
  RangeKind* kind = nullptr;
  uint32_t slot = 0;
  int32_t step = -1;
  int32_t node = -1;      // stack node, made when an API call first needs it
  uint32_t external_id = 0;
  uint32_t start_end = kNone;  // index into the connection's start/end ranges
  uint16_t domain = 0;
  bool counted = false;
  bool kept = true;
  bool op_call = false;   // a kOpBegin: attr is its op word, payload its RecordFunction handle
  int64_t mem_self[2] = {0, 0};   // tensor memory (CPU, CUDA) with nothing open inside it
  int64_t mem_total[2] = {0, 0};  // and with the ranges inside it
  // Its direct children so far (ranges and API calls), and whether the last was a
  // counted op of its own name: an only child of that name is left out of the rows, as
  // torch's table leaves it out (EventList._remove_dup_nodes).
  uint32_t child_count = 0;
  bool child_same = false;
  RangeKind* child_kind = nullptr;  // that child's row, duration, self time and memory
  int64_t child_dur = 0;
  int64_t child_self = 0;
  int64_t child_mem_self[2] = {0, 0};
  int64_t child_mem[2] = {0, 0};
};

// An API call already closed that a later one may turn out to hold (a driver call inside
// a runtime call is written first).
struct ClosedCall {
  int64_t start = 0;
  int64_t end = 0;
};

// An open nn.Module call (--with-modules): on a stack of its own, beside the ranges'.
struct ModuleOpen {
  int64_t start = 0;
  int64_t children = 0;       // its direct child ops' and module calls' durations
  Name name;
  int32_t step = -1;
  uint32_t id = 0;
  uint32_t parent = 0;
  uint32_t external_id = 0;   // its Python id in its trace; 0 not traced
  uint32_t parent_external = 0;
  uint32_t ops = 0;
  bool kept = true;
  bool counted = false;
};

struct ThreadState {
  std::vector<Open> stack;
  std::vector<ModuleOpen> modules;
  std::vector<ClosedCall> calls;  // closed since the last push or pop, in the order read
  int64_t last_ts = kLongAgo;     // its latest record time: closes ranges never ended
  int64_t boundary = kNever;      // the next start or end of one of its start/end ranges
  uint64_t seq = 0;
  uint64_t dropped = 0;
  uint64_t events = 0;
  uint32_t next_frame = 0;
  ptrdiff_t cursor = 0;
  bool located = false;
  bool nvtx_named = false;
  std::vector<uint32_t> start_ends;  // its start/end ranges that end on it, by start
  size_t next_start_end = 0;
  // Its API calls from activity records (the first pass's), in the order they are taken.
  const std::vector<ApiCall>* activity = nullptr;
  size_t next_activity = 0;
  bool draining = false;  // taking them now: the settle() an API call makes takes none
};

// A node of the tree of range stacks seen at API calls: one per distinct path, so a
// launch names its enclosing ranges with one index however deep they are.
struct StackNode {
  int32_t parent = -1;
  RangeKind* kind = nullptr;
  bool counted = false;
  bool operator==(const StackNode&) const = default;
};

struct StackNodeHash {
  size_t operator()(const StackNode& n) const noexcept {
    return std::hash<const void*>()(n.kind) ^ (static_cast<size_t>(static_cast<uint32_t>(n.parent)) << 1) ^
           (n.counted ? 0x9E3779B97F4A7C15ull : 0);
  }
};

class ConnPass {
 public:
  // `scan`: what the first pass learnt of this connection; null in a single pass.
  ConnPass(const ConnInput& conn, ProcessState& state, const ConnScan* scan);

  void frame(const wire::FrameHeader& fh, const std::vector<uint8_t>& raw);
  void bad_frame() { ++losses_.bad_frames; }
  // Closes what was left open, counts the GPU records still waiting for their API call,
  // and leaves the rows, threads and warnings on the process.
  void finish();

  int64_t first_ts() const { return first_ts_; }
  int64_t image_end() const;

 private:
  // ---- records ----
  void record(const wire::Record& r, const uint8_t* extra, size_t extra_bytes, uint32_t tid, ThreadState& t);
  void thread_record(const wire::Record& r, uint32_t tid, ThreadState& t);
  void push(const wire::Record& r, uint32_t tid, ThreadState& t);
  void pop(const wire::Record& r, uint32_t tid, ThreadState& t);
  void mark(const wire::Record& r, uint32_t tid, ThreadState& t);
  void flush_mark();
  void start_record(const wire::Record& r, uint32_t tid, ThreadState& t);
  // `own_seq`: the call takes a sequence number on its thread (the first pass counted it
  // there: a callback's record).
  void api_call(const ApiCall& c, bool own_seq, uint32_t tid, ThreadState& t);
  // The thread's API calls from activity records that end by `until`.
  void take_activity_calls(ThreadState& t, uint32_t tid, int64_t until);
  void tensor_memory(const wire::Record& r, const uint8_t* extra, size_t extra_bytes, uint32_t tid, ThreadState& t);
  // torch.cuda.memory_stats()'s counters of one device, from the bootstrap at exit.
  void allocator_stats(const wire::Record& r);
  TensorMemory& tensor_state();  // made at the first tensor record
  // --memory-snapshot: a CUDA tensor's allocation or free, with the ranges open on its thread.
  void memory_history(bool alloc, uint32_t device, uint64_t address, uint64_t bytes, int64_t ts,
                      const ThreadState& t);

  // ---- ranges ----
  // Closes the range at stack[pos] at `end`: counts it, hands it on, and adds its time to
  // the range it was inside.
  void close(ThreadState& t, uint32_t tid, size_t pos, int64_t end, bool unterminated = false);
  void close_across_gap(ThreadState& t, uint32_t tid);
  // close()'s work on the range `o` that was at stack[pos] (still there, or erased).
  void closed(ThreadState& t, uint32_t tid, const Open& o, size_t pos, int64_t end, bool unterminated);
  // Opens and closes the thread's start/end ranges whose times come before a record at
  // `ts` (`inclusive`: also those ending at ts, which a range starting then follows).
  void settle(ThreadState& t, uint32_t tid, int64_t ts, bool inclusive);
  // The same with the starts taken up to `open_until` and the ends up to `close_until`
  // (an API call: those that start by its start, those that end before its end).
  void settle(ThreadState& t, uint32_t tid, int64_t open_until, int64_t close_until, bool inclusive);
  void update_boundary(ThreadState& t);
  void close_all(ThreadState& t, uint32_t tid);
  void start_end_off_thread(const StartEndRange& se);
  int32_t step_of(ThreadState& t, int64_t start);
  int32_t stack_node(ThreadState& t);
  // The nearest kept range at or below stack[pos - 1], or none.
  Open* parent_of(ThreadState& t, size_t pos);
  // nn.Module calls (--with-modules): pushes and pops of the modules domain.
  bool is_modules_domain(uint16_t domain);
  void module_push(const wire::Record& r, uint32_t tid, ThreadState& t);
  void module_pop(const wire::Record& r, uint32_t tid, ThreadState& t);
  void close_module(ThreadState& t, uint32_t tid, int64_t end, bool unterminated);
  void close_modules(ThreadState& t, uint32_t tid);

  // ---- what an event is ----
  // A slot reference lasts until the next slot() or use() (slots_ may grow).
  NameSlot& slot(uint32_t id) {
    if (remap_.empty() && id < slots_.size()) [[likely]]
      return slots_[id];
    return slot_slow(id);
  }
  // A record names it.
  NameSlot& use(uint32_t id) {
    NameSlot& s = slot(id);
    if (s.used) [[likely]]
      return s;
    return first_use(s, id);
  }
  // What the ranges of (name, domain) share; the name is used already.
  RangeKind& range_kind(uint32_t id, uint16_t domain) {
    if (domain == 0) [[likely]] {
      RangeKind* k = slot(id).range;
      if (k != nullptr && k->resolved) [[likely]]
        return *k;
    }
    return range_kind_slow(id, domain);
  }
  [[gnu::noinline]] NameSlot& slot_slow(uint32_t id);
  [[gnu::noinline]] NameSlot& first_use(NameSlot& s, uint32_t id);
  [[gnu::noinline]] RangeKind& range_kind_slow(uint32_t id, uint16_t domain);
  void resolve(RangeKind& k, std::string text, Name name, uint16_t domain);
  Name domain_name(uint16_t domain);
  Name category_name(uint16_t domain, uint32_t category);
  void define(const wire::Record& r, const uint8_t* extra, size_t extra_bytes);
  RowStats& side_row(int32_t& index);

  // ---- outputs ----
  void emit_range(const Open& o, uint32_t tid, int64_t end, int64_t self, bool unterminated, uint32_t end_tid);
  Event event_of(const Open& o, uint32_t tid, int64_t end, int64_t self, bool unterminated, uint32_t end_tid);
  void timeline(uint32_t tid, TimelineTrack track, uint8_t category, Name name, int64_t start, int64_t end);

  // ---- GPU (conn_pass_gpu.cpp) ----
  void gpu_record(const wire::Record& r, const uint8_t* extra, size_t extra_bytes, uint32_t tid);
  void gpu_event(GpuEvent& g, uint32_t name_id);
  void memory_event(MemoryEvent& m);
  void launch(uint64_t correlation, const Launch& call);
  void matched(GpuEvent& g, uint32_t name_id, Launch& call);
  void unmatched(GpuEvent& g, uint32_t name_id);
  void memory_located(MemoryEvent& m, const Launch* call);
  void emit_gpu(GpuEvent& g, uint32_t name_id, Launch* call);
  void count_gpu_row(const GpuEvent& g, uint32_t name_id, int32_t step);

  int64_t epoch(uint64_t ts) const { return record_epoch_ns(conn_.hello, ts); }
  void touch(ThreadState& t, int64_t ts) {
    t.last_ts = std::max(t.last_ts, ts);
    first_ts_ = std::min(first_ts_, ts);
    last_ts_ = std::max(last_ts_, ts);
  }
  ThreadInfo& thread_info(uint32_t tid);
  void add_rows();

  const ConnInput& conn_;
  ProcessState& st_;
  const ConnScan* scan_;
  Process scratch_;  // what GpuDecoder writes besides records (devices, notices, drops, toggles)
  GpuDecoder gpu_decoder_;
  std::unordered_map<uint32_t, ThreadState> threads_;
  ThreadState* last_thread_ = nullptr;
  uint32_t last_tid_ = 0;
  bool at_gap_ = false;  // close_across_gap() is closing ranges
  std::vector<NameSlot> slots_;                   // by string id while ids are dense
  std::deque<NameSlot> extra_slots_;              // large ids, and ids defined again after use
  std::unordered_map<uint32_t, NameSlot*> remap_;  // the ids whose slot is in extra_slots_
  std::deque<RangeKind> kinds_;                   // stable addresses: Open and StackNode hold them
  std::unordered_map<uint64_t, RangeKind*> domain_kinds_;  // ranges in other domains: slot << 16 | domain
  std::unordered_map<uint16_t, uint32_t> domains_;             // as read: domain -> its name's string id
  std::unordered_map<uint16_t, Name> domain_names_;
  int32_t modules_domain_ = -1;  // this connection's id of the modules domain, once seen
  uint16_t other_domain_ = 0;    // the last domain found not to be it
  std::unordered_map<uint64_t, uint32_t> categories_;
  std::unordered_map<uint64_t, Name> category_names_;
  std::vector<RowStats> side_rows_;  // API calls and kernels
  struct CopyRow {
    const char* kind;  // "memcpy" | "memset"
    Name name;
    RowStats stats;
  };
  std::vector<CopyRow> copy_rows_;
  std::unordered_map<const void*, int32_t> copy_index_;  // by row name
  std::vector<Series> api_series_;   // --stats, by side row
  std::vector<std::pair<Name, Series>> range_series_;
  std::vector<StackNode> nodes_;
  std::unordered_map<StackNode, int32_t, StackNodeHash> node_index_;
  // GPU records waiting for their API call, by correlation id.
  struct Waiting {
    GpuEvent gpu;
    MemoryEvent memory;
    bool is_memory = false;
    uint32_t name = 0;
  };
  std::unordered_map<uint64_t, std::vector<Waiting>> waiting_;
  size_t waiting_count_ = 0;
  uint64_t gave_up_waiting_ = 0;
  Launches launches_;
  size_t start_ends_read_ = 0;
  // A mark waits for a kPayload that may follow it in its frame.
  bool mark_pending_ = false;
  Open pending_mark_;
  uint32_t pending_mark_tid_ = 0;
  Open* last_open_ = nullptr;  // the push a kPayload would belong to
  BufferReport buffers_;
  DecodeLosses losses_;
  uint64_t gpu_seq_ = 0;
  int64_t first_ts_ = kNever;
  int64_t last_ts_ = kLongAgo;
  std::unordered_map<uint32_t, uint32_t> context_device_;  // sync records' devices, as kernels show them
};

// Inline here: the pass's files (conn_pass*.cpp) all use them.

// The row a range's name counts in: ProfilerStep#N all in ProfilerStep*.
inline Name step_row_name(const Name& shown) {
  static const Name step_row{std::string(kStepRowName)};
  return shown.starts_with(kStepNamePrefix) ? step_row : shown;
}

[[gnu::always_inline]] inline int32_t ConnPass::step_of(ThreadState& t, int64_t start) {
  if (st_.steps.empty()) return -1;
  if (st_.locator == nullptr) return 0;  // one pass: the process is its one step
  const bool restart = !t.located;
  t.located = true;
  return st_.locator->step_of(start, t.cursor, restart);
}

[[gnu::always_inline]] inline Open* ConnPass::parent_of(ThreadState& t, size_t pos) {
  for (size_t i = pos; i-- > 0;) {
    if (t.stack[i].kept) return &t.stack[i];
  }
  return nullptr;
}

}  // namespace torchprof::engine
