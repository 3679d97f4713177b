// One streamed pass over one connection's frames (ConnPass), what the streamed table
// (analysis/stream_table.h) is made of: each thread's ranges and CUDA API calls nest on
// its stack and are added to their rows as they end; GPU records find the ranges
// around the API call that launched them. stream_pass.cpp holds the pass and its
// ranges and marks, stream_pass_gpu.cpp its API calls and GPU records,
// stream_pass_start_end.cpp its start/end ranges.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/process_info.h"
#include "reading/capture_scan.h"
#include "analysis/gpu_decode.h"
#include "analysis/launch_table.h"
#include "analysis/model.h"
#include "analysis/range_pairing.h"
#include "analysis/stream_rows.h"
#include "common/wire/wire.h"

namespace torchprof::stream {

// Thrown inside a pass when the capture needs the full analysis.
struct Refusal {
  std::string why;
};

// Thrown by a pass that follows a scan (see ConnPass) when the scan finds what
// changes something it already counted (a step beginning before records it read), and
// by the scan when it cannot tell a step marker yet: the connection then takes two
// passes.
struct Overtaken {
  const char* why;
};

// String ids are small and dense (one per distinct name of a process).
inline constexpr uint32_t kMaxStringId = 1u << 20;
// Step-marker candidates held by the first pass (a marker regex that matches every
// range would make it hold the run).
inline constexpr size_t kMaxCandidates = size_t{1} << 22;
// GPU records read before their API call; nodes of the stack tree. Past these (and
// past the Launches table's ceiling) the capture goes to the full analysis.
inline constexpr size_t kMaxWaitingGpu = size_t{1} << 20;
inline constexpr size_t kMaxStackNodes = size_t{1} << 20;
// Closed API calls a thread keeps as possible children of a later one.
inline constexpr size_t kMaxClosedCalls = 64;
// Start/end ranges the first pass collects for the second.
inline constexpr size_t kMaxStartEnds = size_t{1} << 20;
inline constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
inline constexpr const char* kStartEndOverlap = "a start/end range and a range or API call of its thread overlap";

// How decode names a string never defined.
inline std::string stand_in_text(uint32_t id) { return "<string " + std::to_string(id) + ">"; }

// What a string id names and the rows named by it.
// A run may name many things (a step name per step): the rows of API calls and kernels,
// which few names have, are held apart.
struct NameState {
  std::string text;
  bool defined = false;
  bool used_undefined = false;  // named an event (or thread) before its definition
  int8_t marker = -1;           // regex match of the text: -1 not evaluated yet
  int32_t api = -1;             // CUDA API calls: index in ConnPass::side_stats_, -1 none
  int32_t kernel = -1;          // kernels recorded under this (mangled) name: likewise
  int32_t domain_range = -1;    // its ranges in the first domain other than the default one
                                // it was counted in: index in ConnPass::domain_slots_
  Stats range;                  // NVTX ranges of this name
};

// A node of the tree of range stacks seen at API calls: one per distinct path, so a
// launch names its enclosing ranges with one index however deep they are.
struct StackNode {
  int32_t parent = -1;
  uint32_t id = 0;       // the range's name
  uint16_t domain = 0;
  bool counted = false;  // the range is in a counted step
  bool operator==(const StackNode&) const = default;
};

struct StackNodeHash {
  size_t operator()(const StackNode& n) const noexcept {
    return std::hash<uint64_t>()((uint64_t{static_cast<uint32_t>(n.parent)} << 32) ^ (uint64_t{n.id} << 17) ^
                                 (uint64_t{n.domain} << 1) ^ (n.counted ? 1 : 0));
  }
};

// A GPU record waiting for its API call (read before it) or for the end of the pass.
struct GpuUse {
  GpuKind kind = GpuKind::kKernel;
  uint32_t name = 0;   // kernels: string id
  int32_t copy = -1;   // memcpy/memset: index in copy_rows_
  int64_t start = 0;
  int64_t dur = 0;
  uint64_t seq = 0;
};

// An API call already closed that a later one may turn out to hold (a driver call
// inside a runtime call is written first).
struct ClosedCall {
  int64_t start = 0;
  int64_t end = 0;
};

// A range or mark whose name matches (or may match) the step marker: first pass only.
struct Candidate {
  uint32_t tid = 0;
  uint64_t seq = 0;
  int64_t start = 0;
  int64_t end = 0;
  uint32_t id = 0;
  uint16_t domain = 0;
  bool mark = false;
};

// A start/end range (nvtxRangeStart/End, or one written whole once it ended, as the
// Python bootstrap writes its steps) as decode pairs it: the first pass collects them,
// the second nests those that end on their own thread among that thread's ranges.
struct StartEnd {
  int64_t start = 0;
  int64_t end = 0;
  uint64_t seq = 0;  // its start's place among its thread's events
  uint32_t tid = 0;
  uint32_t end_tid = 0;
  uint32_t id = 0;
  uint16_t domain = 0;
  bool taken = false;  // its step-marker candidate was made when it ended (reading ahead)
};

struct Open {
  int64_t start = 0;
  int64_t children = 0;  // durations of the direct children so far
  int64_t child_end = std::numeric_limits<int64_t>::min();  // latest end of an API call inside
  uint64_t seq = 0;
  uint32_t id = 0;
  int32_t step = -1;
  int32_t candidate = -1;
  int32_t node = -1;     // StackNode, made when an API call first needs it
  uint16_t domain = 0;
  bool start_end = false;
  bool at_close = false;  // pushed at the nanosecond another range ended: it may not be empty
};

struct Thread {
  std::vector<Open> stack;
  int64_t last_ts = std::numeric_limits<int64_t>::min();        // as decode's: closes unterminated ranges
  int64_t last_event_ts = std::numeric_limits<int64_t>::min();  // last push, pop or mark
  int64_t last_close_ts = std::numeric_limits<int64_t>::min();  // last pop or API call's end
  bool empty_closed = false;  // a range of no duration ended at last_close_ts
  int64_t last_call_end = std::numeric_limits<int64_t>::min();
  std::vector<ClosedCall> calls;  // since the last push or pop, in the order read
  int64_t forgotten_call_start = std::numeric_limits<int64_t>::min();  // latest start dropped from `calls`
  uint64_t seq = 0;
  uint64_t dropped = 0;
  uint32_t next_seq = 0;
  std::ptrdiff_t cursor = 0;  // StepLocator's, for this thread's pushes
  bool nvtx_named = false;
  // Second pass: the thread's own start/end ranges, in interval-nesting order (start,
  // longer first, as read), the next one to open, and those open (innermost last).
  std::vector<uint32_t> start_ends;
  size_t next_start_end = 0;
  std::vector<uint32_t> open_start_ends;
  int64_t start_end_passed = std::numeric_limits<int64_t>::min();  // latest boundary passed
  int64_t settle_at = std::numeric_limits<int64_t>::min();  // the next boundary, as settle() left it
};

// One pass over one connection's frames. The first pass (`steps` null) counts every
// range in one step and collects step-marker candidates and start/end ranges; the
// second counts the ranges of recorded steps, with the first pass's start/end ranges.
// A first pass that met start/end ranges counts nothing that can be used: it could not
// nest them, since a range's start may be written after what it holds.
//
// One read can do both (analysis/stream_table.cpp). A first pass reading ahead
// (read_ahead()) tells step markers as they end. Once it found one, it turns into a
// scan (become_scan()) that only finds the step markers and start/end ranges; a second
// pass follows it (the constructor that takes the scan), reading the same frames from
// the start, each once the steps it falls in are known, and is handed the steps and
// start/end ranges as the scan finds them.
class ConnPass {
 public:
  ConnPass(const ConnInput& conn, size_t process, const StepMarker& marker, const std::vector<Step>* steps,
           const std::vector<StartEnd>* start_ends = nullptr);

  // A second pass that follows `scan`.
  ConnPass(const ConnInput& conn, size_t process, const StepMarker& marker, const ConnPass& scan);

  void bad_frame() { ++bad_frames_; }

  void frame(const wire::FrameHeader& fh, const std::vector<uint8_t>& raw);

  // ---- reading ahead: the first pass, then the scan ----

  // A first pass tells step markers as they end (scanned_steps()), until it meets one
  // it cannot tell yet (reading_ahead() turns false) or stop_reading_ahead().
  void read_ahead() { ahead_ = true; }
  bool reading_ahead() const { return ahead_; }
  void stop_reading_ahead() { ahead_ = false; }
  // From now on frames go to scan(), not frame(): what the first pass counted is let go.
  void become_scan() { scan_ = true; }
  // Reads a frame for step markers and start/end ranges only.
  void scan(const wire::FrameHeader& fh, const std::vector<uint8_t>& raw);
  // The step markers told so far, as steps (start and duration), in the order they ended.
  const std::vector<Step>& scanned_steps() const { return scanned_steps_; }
  // Start/end ranges read whose end is not yet.
  size_t open_start_ends() const { return pairing_.open().size(); }
  // The latest time of a thread's records read so far (the minimum when none).
  int64_t latest(uint32_t tid) const {
    auto it = threads_.find(tid);
    return it == threads_.end() ? std::numeric_limits<int64_t>::min() : it->second.last_ts;
  }

  // ---- following a scan ----

  // A step the scan found, in the order of their starts: the frames read so far hold
  // nothing at or after its start.
  void add_step(const Step& s);
  // Each thread gets its own start/end ranges in interval-nesting order (a second pass,
  // from its constructor). Following a scan: those the scan read since the last call,
  // every one of them ended (the scan's open_start_ends() is 0).
  void deal_start_ends();

  // Ranges never closed end at their thread's last timestamp, as decode closes them.
  // GPU records still waiting for an API call have none: they count in the step
  // their start falls in, and in no range.
  void finish();

  // Warnings, dropped counts and GPU notes, as decode and attribute_gpu() give them
  // (first pass, or a pass that followed `scan`: the start/end ranges are the scan's).
  void report(Process& proc, const ConnPass* scan = nullptr) const;

  // The process's span as decode and compute_nesting() bound it: its records' earliest
  // and latest times, GPU records' included, and the time of its goodbye; a start of 0
  // counts as unknown, and the first event's is taken.
  Step process_span() const;

  // The latest time of the threads' records, or the goodbye's when later (decode's
  // image_end()).
  int64_t image_end() const;

  // Whether the image holds GPU records or device memory events (the table's CUDA columns).
  bool has_gpu() const { return has_gpu_; }
  // memcpy and memset rows: (kind, name) and what they add up.
  const std::vector<std::tuple<const char*, std::string, Stats>>& copy_rows() const { return copy_rows_; }

  // A domain's name once every frame has been read ("" for the default domain and for
  // one never defined, as decode names them).
  std::string final_domain_name(uint16_t domain) const;

  // The text an event of string `id` is named by once every frame has been read.
  std::string final_text(uint32_t id) const;

  // The step markers among the candidates, as events in find_markers' order, unnamed:
  // the steps made of them need their kind and times only.
  std::vector<Event> markers() const;

  // A second pass over the same frames meets as many string ids: its names are sized
  // for them at once.
  void expect_names(size_t count) { names_.resize(std::min(count, size_t{kMaxStringId})); }

  // What the full analysis makes of a range of string `id` in `domain`: a PyTorch op
  // when the message parses as one (any message in the ops domain), else nothing.
  std::optional<OpInfo> op_of(uint32_t id, uint16_t domain) const;

  std::string range_name(uint32_t id, uint16_t domain) const;

  // Ranges in domains other than the default one: a name's first such domain
  // (NameState::domain_range), then any other by (string id << 16 | domain).
  struct DomainRange {
    uint32_t id = 0;
    uint16_t domain = 0;
    Stats stats;
  };
  const std::vector<DomainRange>& domain_slots() const { return domain_slots_; }
  const std::unordered_map<uint64_t, Stats>& domain_ranges() const { return domain_ranges_; }
  const std::vector<NameState>& names() const { return names_; }
  // A name's API call or kernel row (NameState::api, ::kernel): none when `index` is -1.
  const Stats& side_stats(int32_t index) const;
  // The start/end ranges read, in the order their starts were (first pass).
  const std::vector<StartEnd>& start_ends() const { return start_ends_; }
  std::vector<StartEnd> take_start_ends() { return std::move(start_ends_); }
  uint64_t events() const { return events_; }
  uint64_t gpu_records() const { return gpu_seq_ + syncs_; }

 private:
  // record() and the pushes, pops and marks it hands on are inlined into frame(), the
  // per-record path; they are defined in stream_pass.cpp, the only place they are called.
  inline void record(const wire::Record& r, const uint8_t* extra, size_t extra_bytes, uint32_t tid, Thread& thread);

  // ---- CUDA API calls ----

  // An API call arrives when it returns, as the interval [enter, exit]. It is a child of
  // the range on top of the stack, and of any API call read later that holds it (a
  // runtime call around the driver call it makes): the calls it holds were read before
  // it. What the full analysis's interval nesting would settle otherwise is refused.
  void api_call(const wire::Record& r, uint32_t tid, Thread& thread);

  bool counted(int32_t step) const {
    return step >= 0 && (steps_ == nullptr || recorded((*steps_)[static_cast<size_t>(step)].action));
  }

  // The StackNode of the thread's top range, making those of the stack that lack one.
  int32_t stack_node(Thread& thread);

  // Holds the call for the GPU records that name it, and hands it those read before it.
  void launch(uint64_t correlation, const Launch& call);

  // ---- GPU records ----

  void gpu_record(const wire::Record& r, const uint8_t* extra, size_t extra_bytes);

  void gpu_use(uint64_t correlation, const GpuUse& use);

  // A GPU record with its API call: its row counts in the call's step, and its time in
  // the ranges around the call (Self CUDA for the innermost).
  void matched(const GpuUse& use, const Launch& call);

  void unmatched(const GpuUse& use, const StepLocator& locate);

  void count_gpu_row(const GpuUse& use, int32_t step);

  int32_t copy_row(const char* kind, const Name& row_name);

  // A string's text as decode would name it now: its definition, or a stand-in.
  Name current_text(uint32_t id);

  void define(const wire::Record& r, const uint8_t* extra, size_t extra_bytes);

  // A name's API call or kernel row, made on first use.
  Stats& side_stats(int32_t& index);

  // The default domain's ranges are counted by name; others by name and domain (the
  // domain decides whether a range is a PyTorch op).
  Stats& range_stats(uint32_t id, uint16_t domain);
  Stats& domain_stats(uint32_t id, uint16_t domain);

  NameState& name(uint32_t id) {
    if (id < names_.size()) [[likely]]
      return names_[id];
    return grow_names(id);
  }

  [[gnu::noinline]] NameState& grow_names(uint32_t id);

  // decode looks a name up when an event (or thread) uses it: one not defined yet
  // gets a stand-in, and counts as unknown if it never is.
  NameState& use_name(uint32_t id);

  // decode names an event's domain and category by their strings when they are defined.
  void use_attr(uint16_t domain, uint64_t attr);

  void use_domain(uint16_t domain);

  bool maybe_marker(uint32_t id, NameState& n) {
    if (id != 0 && !n.defined) return true;  // decided once its text is known
    if (n.marker < 0) [[unlikely]]
      n.marker = matches_marker(id) ? 1 : 0;
    return n.marker == 1;
  }

  // Whether the name may match once known: as it is, or as an op's name (markers()
  // decides with the domain's name).
  [[gnu::noinline]] bool matches_marker(uint32_t id) const;

  void touch(Thread& t, int64_t ts) {
    t.last_ts = std::max(t.last_ts, ts);
    first_ts_ = std::min(first_ts_, ts);
    last_ts_ = std::max(last_ts_, ts);
  }

  // A thread's pushes, pops and marks in time order nest on its stack exactly as
  // decode's interval nesting does; anything else is left to it.
  static int64_t in_order(Thread& t, int64_t ts) {
    if (ts < t.last_event_ts) throw Refusal{"a thread's records go back in time"};
    t.last_event_ts = ts;
    return ts;
  }

  int32_t candidate(uint32_t tid, uint64_t seq, int64_t ts, uint32_t id, uint16_t domain, bool mark);

  int32_t step_of(Thread& t, int64_t start) {
    if (locator_ == nullptr) return 0;
    return locator_->step_of(start, t.cursor, /*restart=*/t.cursor == 0);
  }

  // What a push, a mark and a range's start share: the thread's clock moves on, and the
  // domain, category (of the attribute `attr`) and name the event uses are looked up as
  // decode does. Returns the name's state, taken last since the other lookups may grow
  // names_.
  NameState& begin_event(const wire::Record& r, Thread& thread, int64_t ts, uint64_t attr);

  inline void push(const wire::Record& r, uint32_t tid, Thread& thread);

  inline void pop(const wire::Record& r, uint32_t tid, Thread& thread);

  inline void mark(const wire::Record& r, uint32_t tid, Thread& thread);

  // Ends the range on top of the stack at `end`: its self time is final and its parent
  // (the one below) holds it. The range is read in place, one field at a time: a
  // copy of the whole would load at once what push() has just stored field by field.
  void close_top(Thread& thread, uint32_t tid, int64_t end);

  // ---- start/end ranges ----

  // Paired as decode pairs them (RangePairing); a start whose id is taken again is left
  // as it is, ended where it started.
  void range_start(const wire::Record& r, uint32_t tid, Thread& thread);

  void range_end(const wire::Record& r, uint32_t tid, Thread& thread);

  // First pass: ranges never ended end at the image's last timestamp, as decode ends
  // them; those named like a step marker are candidates.
  void finish_start_ends();

  // A range that ends on another thread is not an interval of either: it holds nothing
  // and nothing holds it.
  void count_start_end(const StartEnd& se, int32_t step);

  // Opens and closes the thread's start/end ranges whose boundaries come before `ts`,
  // the time of its next push or pop, or an API call's start: they nest with its other
  // ranges as pushes and pops at those times would. A boundary at `ts` itself, or one
  // passed already, would leave the order to interval nesting's ties: refused.
  void settle(Thread& t, uint32_t tid, int64_t ts);

  // settle() for a push or pop: most come between two boundaries, where it has nothing to do.
  void settle_if_due(Thread& t, uint32_t tid, int64_t ts) {
    if (ts <= t.start_end_passed || ts >= t.settle_at) settle(t, tid, ts);
  }

  // An API call: no start/end range may begin or end inside it.
  void settle_call(Thread& t, uint32_t tid, int64_t start, int64_t end);

  void close_start_end(Thread& t, uint32_t tid);

  // ---- reading ahead ----

  // A step-marker candidate whose end is known: a step when its name, now defined,
  // matches (markers()' test). One that cannot be told yet stops a first pass reading
  // ahead, and throws Overtaken in a scan.
  void decide(int32_t candidate);

  // A start/end range whose end is now known: its candidate is made now.
  void complete_start_end(uint32_t index);

  // The step-marker candidate of a start/end range whose end is known, when its name
  // may match: its index, else -1.
  int32_t start_end_candidate(const StartEnd& se);

  void finish_scan();

  void open_start_end(Thread& t, uint32_t tid);

  const ConnInput& conn_;
  const size_t process_;
  const StepMarker& marker_;
  bool ahead_ = false;
  bool scan_ = false;
  const bool follow_ = false;
  std::vector<Step> own_steps_;  // following a scan: the steps handed on so far
  const std::vector<Step>* steps_;
  const std::vector<StartEnd>* known_start_ends_;  // second pass: the first pass's
  size_t read_start_ends_ = 0;
  size_t dealt_start_ends_ = 0;  // those of known_start_ends_ given to their threads
  std::vector<Step> scanned_steps_;  // reading ahead
  std::vector<StartEnd> start_ends_;                // first pass
  RangePairing pairing_;                            // first pass
  BufferReport buffers_;                            // what the flusher said of its buffers
  std::unique_ptr<StepLocator> locator_;
  std::vector<NameState> names_;
  std::vector<Stats> side_stats_;
  std::unordered_map<uint32_t, Thread> threads_;
  std::unordered_map<uint16_t, uint32_t> domains_;
  std::unordered_map<uint64_t, uint32_t> categories_;
  std::vector<Candidate> candidates_;
  // GPU side: records are decoded one at a time into gpu_scratch_ and taken out of it.
  Process gpu_scratch_;
  GpuDecoder gpu_decoder_;
  std::vector<StackNode> nodes_;
  std::unordered_map<StackNode, int32_t, StackNodeHash> node_index_;
  std::vector<DomainRange> domain_slots_;
  std::unordered_map<uint64_t, Stats> domain_ranges_;
  Launches launches_;
  std::unordered_map<uint64_t, std::vector<GpuUse>> waiting_gpu_;
  size_t waiting_gpu_count_ = 0;
  std::vector<GpuUse> no_correlation_;
  std::vector<std::tuple<const char*, std::string, Stats>> copy_rows_;
  std::unordered_map<const void*, int32_t> copy_index_;  // by the row name's identity
  std::vector<std::pair<std::string, uint32_t>> notices_;  // as first read, and their string id
  int64_t first_ts_ = std::numeric_limits<int64_t>::max();  // over every thread's records
  int64_t first_event_ts_ = std::numeric_limits<int64_t>::max();  // ranges, marks and API calls
  int64_t last_ts_ = std::numeric_limits<int64_t>::min();
  uint64_t gpu_seq_ = 0;  // GPU records with a row, as read
  uint64_t syncs_ = 0;
  uint64_t unmatched_gpu_ = 0;
  bool has_gpu_ = false;
  uint16_t last_domain_ = 0;
  bool last_event_ = false;
  uint64_t events_ = 0;
  uint64_t bad_frames_ = 0;
  uint64_t cut_records_ = 0;
  uint64_t lost_frames_ = 0;
  uint64_t unmatched_pops_ = 0;
  uint64_t unterminated_ = 0;
};

}  // namespace torchprof::stream
