#include "collector/stream_table.h"

#include <zstd.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <regex>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "collector/capture_reader.h"
#include "collector/capture_scan.h"
#include "collector/decode.h"
#include "collector/frame_decode.h"
#include "collector/op_message.h"
#include "formats/outputs.h"
#include "formats/wire/wire.h"

namespace torchprof {

namespace {

// Thrown inside a pass when the capture needs the full analysis.
struct Refusal {
  std::string why;
};

// String ids are small and dense (one per distinct name of a process).
constexpr uint32_t kMaxStringId = 1u << 20;
// Step-marker candidates held by the first pass (a marker regex that matches every
// range would make it hold the run).
constexpr size_t kMaxCandidates = size_t{1} << 22;

std::string stand_in_text(uint32_t id) { return "<string " + std::to_string(id) + ">"; }

// Where a row was first added to: decode orders a process's events by (thread, start),
// which on one thread's stack is the order of the pushes.
struct FirstUse {
  size_t process = std::numeric_limits<size_t>::max();
  uint32_t tid = 0;
  uint64_t seq = 0;
  auto key() const { return std::tie(process, tid, seq); }
};

// What a string id names and the ranges named by it.
struct NameState {
  std::string text;
  bool defined = false;
  bool used_undefined = false;  // named an event (or thread) before its definition
  int8_t marker = -1;           // regex match of the text: -1 not evaluated yet
  uint64_t calls = 0;
  int64_t self_ns = 0;
  int64_t total_ns = 0;
  FirstUse first;
};

// A range or mark whose name matches (or may match) the step marker: first pass only.
struct Candidate {
  uint32_t tid = 0;
  uint64_t seq = 0;
  int64_t start = 0;
  int64_t end = 0;
  uint32_t id = 0;
  bool mark = false;
};

struct Open {
  int64_t start = 0;
  int64_t children = 0;  // durations of the direct children so far
  uint64_t seq = 0;
  uint32_t id = 0;
  int32_t step = -1;
  int32_t candidate = -1;
  uint16_t domain = 0;
};

struct Thread {
  std::vector<Open> stack;
  int64_t last_ts = std::numeric_limits<int64_t>::min();        // as decode's: closes unterminated ranges
  int64_t last_event_ts = std::numeric_limits<int64_t>::min();  // last push, pop or mark
  int64_t last_close_ts = std::numeric_limits<int64_t>::min();
  uint64_t seq = 0;
  uint64_t dropped = 0;
  uint32_t next_seq = 0;
  std::ptrdiff_t cursor = 0;  // StepLocator's, for this thread's pushes
  bool nvtx_named = false;
};

// One pass over one connection's frames. The first pass (`steps` null) counts every
// range in one step and collects step-marker candidates; the second counts the ranges
// of recorded steps.
class ConnPass {
 public:
  ConnPass(const ConnInput& conn, size_t process, const std::regex& marker, const std::vector<Step>* steps)
      : conn_(conn), process_(process), marker_(marker), steps_(steps) {
    if (steps_ != nullptr) locator_ = std::make_unique<StepLocator>(*steps_);
  }

  void bad_frame() { ++bad_frames_; }

  void frame(const wire::FrameHeader& fh, const std::vector<uint8_t>& raw) {
    Thread& thread = threads_[fh.tid];
    if (fh.seq > thread.next_seq) lost_frames_ += fh.seq - thread.next_seq;
    thread.next_seq = fh.seq + 1;
    last_event_ = false;  // a kPayload refers to the record before it in the same frame
    const bool whole = for_each_record(raw, [&](const wire::Record& r, const uint8_t* extra, size_t extra_bytes) {
      record(r, extra, extra_bytes, fh.tid, thread);
    });
    if (!whole) ++cut_records_;
  }

  // Ranges never closed end at their thread's last timestamp, as decode closes them.
  void finish() {
    for (auto& [tid, thread] : threads_) {
      while (!thread.stack.empty()) {
        close_top(thread, tid, std::max(thread.stack.back().start, thread.last_ts));
        ++unterminated_;
      }
    }
  }

  // Warnings and the dropped count, as decode gives them (first pass only).
  void report(Process& proc) const {
    uint64_t thread_dropped = 0;
    for (const auto& [tid, thread] : threads_) thread_dropped += thread.dropped;
    proc.dropped += std::max<uint64_t>(conn_.bye ? conn_.bye->dropped : 0, thread_dropped);
    uint64_t unknown = 0;
    for (const NameState& n : names_) unknown += n.used_undefined && !n.defined ? 1 : 0;
    add_decode_warnings(conn_, {bad_frames_, cut_records_, lost_frames_, unmatched_pops_, 0, unterminated_, unknown},
                        proc);
  }

  // The text an event of string `id` is named by once every frame has been read.
  std::string final_text(uint32_t id) const {
    if (id == 0) return {};
    if (id < names_.size() && names_[id].defined) return names_[id].text;
    return stand_in_text(id);
  }

  // The step markers among the candidates, as events in find_markers' order.
  std::vector<Event> markers() const {
    std::vector<const Candidate*> found;
    for (const Candidate& c : candidates_) {
      if (std::regex_search(final_text(c.id), marker_)) found.push_back(&c);
    }
    std::sort(found.begin(), found.end(),
              [](const Candidate* x, const Candidate* y) { return std::tie(x->tid, x->seq) < std::tie(y->tid, y->seq); });
    std::stable_sort(found.begin(), found.end(),
                     [](const Candidate* x, const Candidate* y) { return x->start < y->start; });
    std::vector<Event> events;
    for (const Candidate* c : found) {
      Event& e = events.emplace_back();
      e.name = final_text(c->id);
      e.kind = c->mark ? EventKind::kMark : EventKind::kRange;
      e.tid = e.end_tid = c->tid;
      e.start_ns = c->start;
      e.end_ns = c->end;
    }
    return events;
  }

  const std::vector<NameState>& names() const { return names_; }
  uint64_t events() const { return events_; }

 private:
  void record(const wire::Record& r, const uint8_t* extra, size_t extra_bytes, uint32_t tid, Thread& thread) {
    switch (static_cast<wire::Kind>(r.kind)) {
      case wire::Kind::kPush:
        push(r, tid, thread);
        last_event_ = true;
        return;
      case wire::Kind::kPop:
        pop(r, tid, thread);
        break;
      case wire::Kind::kMark:
        mark(r, tid, thread);
        last_event_ = true;
        return;
      case wire::Kind::kPayload:
        // decode names the category of the event just before (its attribute moves).
        if (last_event_) use_attr(last_domain_, r.a);
        break;
      case wire::Kind::kString:
        define(r, extra, extra_bytes);
        break;
      case wire::Kind::kDomain:
        domains_[r.domain] = r.name;
        break;
      case wire::Kind::kCategory:
        categories_[(uint64_t{r.domain} << 32) | static_cast<uint32_t>(r.a)] = r.name;
        break;
      case wire::Kind::kThreadName: {
        const uint32_t named = r.a != 0 ? static_cast<uint32_t>(r.a) : tid;
        const bool from_os = r.b == static_cast<uint64_t>(ThreadNameSource::kOs);
        Thread& target = threads_[named];
        if (from_os && target.nvtx_named) break;
        if (!from_os) target.nvtx_named = true;
        use_name(r.name);
        break;
      }
      case wire::Kind::kThreadStart:
        touch(thread, record_epoch_ns(conn_.hello, r.ts));
        break;
      case wire::Kind::kDropped:
        thread.dropped = std::max(thread.dropped, r.a);
        break;
      case wire::Kind::kStart:
      case wire::Kind::kEnd:
        throw Refusal{"it holds start/end ranges"};
      default:
        if (r.kind >= static_cast<uint8_t>(wire::Kind::kCudaRuntime)) throw Refusal{"it holds CUDA or GPU records"};
        break;  // kPad, kinds newer than this reader: decode ignores them too
    }
    last_event_ = false;
  }

  void define(const wire::Record& r, const uint8_t* extra, size_t extra_bytes) {
    const size_t len = std::min<uint64_t>(r.a, extra_bytes);
    std::string text(reinterpret_cast<const char*>(extra), len);
    if (text.find(" = ") != std::string::npos || text == kPytorchOpsDomain) {
      throw Refusal{"it may hold PyTorch op ranges"};
    }
    NameState& n = name(r.name);
    if (n.defined && n.text != text) throw Refusal{"a string id is defined twice"};
    n.text = std::move(text);
    n.defined = true;
  }

  NameState& name(uint32_t id) {
    if (id < names_.size()) [[likely]]
      return names_[id];
    return grow_names(id);
  }

  [[gnu::noinline]] NameState& grow_names(uint32_t id) {
    if (id >= kMaxStringId) throw Refusal{"a string id is out of range"};
    names_.resize(std::max<size_t>(id + 1, names_.size() * 2));
    return names_[id];
  }

  // decode looks a name up when an event (or thread) uses it: one not defined yet
  // gets a stand-in, and counts as unknown if it never is.
  NameState& use_name(uint32_t id) {
    NameState& n = name(id);
    if (id != 0 && !n.defined) n.used_undefined = true;
    return n;
  }

  // decode names an event's domain and category by their strings when they are defined.
  void use_attr(uint16_t domain, uint64_t attr) {
    const uint32_t category = wire::attr_category(attr);
    if (category == 0) return;
    auto it = categories_.find((uint64_t{domain} << 32) | category);
    if (it != categories_.end()) use_name(it->second);
  }

  void use_domain(uint16_t domain) {
    if (domain == 0) return;
    auto it = domains_.find(domain);
    if (it != domains_.end()) use_name(it->second);
  }

  bool maybe_marker(uint32_t id, NameState& n) {
    if (id != 0 && !n.defined) return true;  // decided once its text is known
    if (n.marker < 0) [[unlikely]]
      n.marker = matches_marker(id) ? 1 : 0;
    return n.marker == 1;
  }

  [[gnu::noinline]] bool matches_marker(uint32_t id) const { return std::regex_search(final_text(id), marker_); }

  static void touch(Thread& t, int64_t ts) { t.last_ts = std::max(t.last_ts, ts); }

  // A thread's pushes, pops and marks in time order nest on its stack exactly as
  // decode's interval nesting does; anything else is left to it.
  static int64_t in_order(Thread& t, int64_t ts) {
    if (ts < t.last_event_ts) throw Refusal{"a thread's records go back in time"};
    t.last_event_ts = ts;
    return ts;
  }

  int32_t candidate(uint32_t tid, uint64_t seq, int64_t ts, uint32_t id, bool mark) {
    if (candidates_.size() >= kMaxCandidates) throw Refusal{"too many names match the step marker"};
    candidates_.push_back({tid, seq, ts, ts, id, mark});
    return static_cast<int32_t>(candidates_.size() - 1);
  }

  int32_t step_of(Thread& t, int64_t start) {
    if (locator_ == nullptr) return 0;
    return locator_->step_of(start, t.cursor, /*restart=*/t.cursor == 0);
  }

  // What a push and a mark share: the thread's clock moves on, and the domain,
  // category and name the event uses are looked up as decode does. Returns the name's
  // state, taken last since the other lookups may grow names_.
  NameState& begin_event(const wire::Record& r, Thread& thread, int64_t ts) {
    touch(thread, ts);
    use_domain(r.domain);
    use_attr(r.domain, r.a);
    last_domain_ = r.domain;
    return use_name(r.name);
  }

  void push(const wire::Record& r, uint32_t tid, Thread& thread) {
    const int64_t ts = in_order(thread, record_epoch_ns(conn_.hello, r.ts));
    // A range starting at the very nanosecond another ended: interval nesting may
    // order the two either way.
    if (ts == thread.last_close_ts) throw Refusal{"a range starts at the nanosecond another ended"};
    NameState& n = begin_event(r, thread, ts);
    const uint64_t seq = thread.seq++;
    const int32_t step = step_of(thread, ts);
    const int32_t cand = steps_ == nullptr && maybe_marker(r.name, n) ? candidate(tid, seq, ts, r.name, false) : -1;
    // Filled in place, field by field, as close_top() reads it.
    Open& o = thread.stack.emplace_back();
    o.start = ts;
    o.seq = seq;
    o.id = r.name;
    o.step = step;
    o.candidate = cand;
    o.domain = r.domain;
    ++events_;
  }

  void pop(const wire::Record& r, uint32_t tid, Thread& thread) {
    const int64_t ts = in_order(thread, record_epoch_ns(conn_.hello, r.ts));
    touch(thread, ts);
    auto& stack = thread.stack;
    if (stack.empty() || stack.back().domain != r.domain) {
      for (const Open& o : stack) {
        if (o.domain == r.domain) throw Refusal{"ranges of two NVTX domains overlap on a thread"};
      }
      ++unmatched_pops_;
      return;
    }
    close_top(thread, tid, ts);
    thread.last_close_ts = ts;
  }

  void mark(const wire::Record& r, uint32_t tid, Thread& thread) {
    const int64_t ts = in_order(thread, record_epoch_ns(conn_.hello, r.ts));
    NameState& n = begin_event(r, thread, ts);
    const uint64_t seq = thread.seq++;
    if (steps_ == nullptr && maybe_marker(r.name, n)) candidate(tid, seq, ts, r.name, true);
    ++events_;
  }

  // Ends the range on top of the stack at `end`: its self time is final and its parent
  // (the one below) holds it. The range is read in place, one field at a time: a
  // copy of the whole would load at once what push() has just stored field by field.
  void close_top(Thread& thread, uint32_t tid, int64_t end) {
    auto& stack = thread.stack;
    const Open& o = stack.back();
    const int64_t dur = end - o.start;
    const int64_t self = std::max<int64_t>(0, dur - o.children);
    const uint32_t id = o.id;
    const uint64_t seq = o.seq;
    const int32_t step = o.step;
    if (o.candidate >= 0) candidates_[o.candidate].end = end;
    stack.pop_back();
    if (!stack.empty()) stack.back().children += dur;
    if (steps_ != nullptr && (step < 0 || !recorded((*steps_)[step].action))) return;
    NameState& n = names_[id];
    ++n.calls;
    n.total_ns += dur;
    n.self_ns += self;
    const FirstUse here{process_, tid, seq};
    if (n.calls == 1 || here.key() < n.first.key()) n.first = here;
  }

  const ConnInput& conn_;
  const size_t process_;
  const std::regex& marker_;
  const std::vector<Step>* steps_;
  std::unique_ptr<StepLocator> locator_;
  std::vector<NameState> names_;
  std::unordered_map<uint32_t, Thread> threads_;
  std::unordered_map<uint16_t, uint32_t> domains_;
  std::unordered_map<uint64_t, uint32_t> categories_;
  std::vector<Candidate> candidates_;
  uint16_t last_domain_ = 0;
  bool last_event_ = false;
  uint64_t events_ = 0;
  uint64_t bad_frames_ = 0;
  uint64_t cut_records_ = 0;
  uint64_t lost_frames_ = 0;
  uint64_t unmatched_pops_ = 0;
  uint64_t unterminated_ = 0;
};

class FrameSource {
 public:
  explicit FrameSource(CaptureReader& reader) : reader_(reader), dctx_(ZSTD_createDCtx(), ZSTD_freeDCtx) {}

  void read(const ConnInput& conn, ConnPass& pass) {
    wire::FrameHeader fh{};
    for (const FrameRef& ref : conn.frames) {
      if (!reader_.read_body_at(ref.offset, ref.size, body_) ||
          !decode_frame(body_.data(), body_.size(), dctx_.get(), scratch_, fh, raw_)) {
        pass.bad_frame();
        continue;
      }
      pass.frame(fh, raw_);
    }
    pass.finish();
  }

 private:
  CaptureReader& reader_;
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx_;
  FrameScratch scratch_;
  std::vector<uint8_t> body_;
  std::vector<uint8_t> raw_;
};

struct Row {
  OpStats stats;
  FirstUse first;
};

// Adds a pass's counted names to the rows, by the name analysis gives their row.
void add_rows(const ConnPass& pass, std::unordered_map<std::string, size_t>& index, std::vector<Row>& rows) {
  const std::vector<NameState>& names = pass.names();
  for (uint32_t id = 0; id < names.size(); ++id) {
    const NameState& n = names[id];
    if (n.calls == 0) continue;
    std::string row_name = pass.final_text(id);
    if (row_name.starts_with(kStepNamePrefix)) row_name = kStepRowName;
    auto [it, fresh] = index.try_emplace(row_name, rows.size());
    if (fresh) {
      Row& row = rows.emplace_back();
      row.stats.name = row_name;
      row.stats.kind = "nvtx";
      row.first = n.first;
    }
    Row& row = rows[it->second];
    row.stats.calls += n.calls;
    row.stats.self_cpu_ns += n.self_ns;
    row.stats.cpu_total_ns += n.total_ns;
    if (n.first.key() < row.first.key()) row.first = n.first;
  }
}

}  // namespace

std::optional<StreamedTable> stream_table(const std::string& capture_path, const AnalysisOptions& options,
                                          std::string* why) {
  const std::regex marker = step_marker_regex(options.step_marker);
  CaptureReader reader(capture_path);
  StreamedTable out;
  Run& run = out.run;
  const ScanResult scanned = scan_capture(reader, run);
  run.truncated = reader.truncated();
  run.truncated_at = reader.truncated_at();
  auto refuse = [&](std::string reason) -> std::optional<StreamedTable> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  if (options.capture_range.kind != CaptureRange::Kind::kNone) return refuse("a capture range is set");
  std::unordered_set<int> pids;
  for (const auto& conn : scanned.conns) {
    if (!pids.insert(conn->hello.pid).second) return refuse("a process has two images (fork, then exec)");
  }

  FrameSource source(reader);
  std::unordered_map<std::string, size_t> index;
  std::vector<Row> rows;
  out.passes = 1;
  try {
    for (size_t p = 0; p < scanned.conns.size(); ++p) {
      const ConnInput& conn = *scanned.conns[p];
      Process& proc = run.processes.emplace_back();
      apply_identity(conn, proc);
      ConnPass first(conn, p, marker, nullptr);
      source.read(conn, first);
      first.report(proc);
      if (conn.bye) apply_bye(*conn.bye, proc);
      out.events += first.events();
      if (first.events() == 0) continue;
      Process markers;
      markers.events_list = first.markers();
      if (markers.events_list.empty()) {
        // The whole process is one step, holding every event.
        const bool counted = !options.schedule || recorded(schedule_action(*options.schedule, 0));
        if (counted) add_rows(first, index, rows);
        continue;
      }
      for (const Event& e : markers.events_list) {
        if (e.kind == EventKind::kMark) return refuse("a step marker is a mark");
      }
      std::vector<int32_t> order(markers.events_list.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
      const std::vector<Step> steps = steps_of_markers(markers, order, options.schedule);
      ConnPass second(conn, p, marker, &steps);
      source.read(conn, second);
      add_rows(second, index, rows);
      out.passes = 2;
    }
  } catch (const Refusal& r) {
    return refuse(r.why);
  }
  apply_launcher_view(run, scanned);
  for (const Process& proc : run.processes) run.dropped_events += proc.dropped;
  std::stable_sort(rows.begin(), rows.end(), [](const Row& x, const Row& y) { return x.first.key() < y.first.key(); });
  for (Row& row : rows) run.ops.push_back(std::move(row.stats));
  return out;
}

}  // namespace torchprof
