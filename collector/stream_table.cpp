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
#include "collector/gpu_decode.h"
#include "collector/launch_table.h"
#include "collector/op_message.h"
#include "collector/range_pairing.h"
#include "collector/stream_rows.h"
#include "formats/outputs.h"
#include "formats/wire/wire.h"

namespace torchprof {

namespace {

using stream::FirstUse;
using stream::Rows;
using stream::Stats;

// Thrown inside a pass when the capture needs the full analysis.
struct Refusal {
  std::string why;
};

// String ids are small and dense (one per distinct name of a process).
constexpr uint32_t kMaxStringId = 1u << 20;
// Step-marker candidates held by the first pass (a marker regex that matches every
// range would make it hold the run).
constexpr size_t kMaxCandidates = size_t{1} << 22;
// GPU records read before their API call; nodes of the stack tree. Past these (and
// past the Launches table's ceiling) the capture goes to the full analysis.
constexpr size_t kMaxWaitingGpu = size_t{1} << 20;
constexpr size_t kMaxStackNodes = size_t{1} << 20;
// Closed API calls a thread keeps as possible children of a later one.
constexpr size_t kMaxClosedCalls = 64;
// Start/end ranges the first pass collects for the second.
constexpr size_t kMaxStartEnds = size_t{1} << 20;
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
constexpr const char* kStartEndOverlap = "a start/end range and a range or API call of its thread overlap";

std::string stand_in_text(uint32_t id) { return "<string " + std::to_string(id) + ">"; }

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
};

struct Thread {
  std::vector<Open> stack;
  int64_t last_ts = std::numeric_limits<int64_t>::min();        // as decode's: closes unterminated ranges
  int64_t last_event_ts = std::numeric_limits<int64_t>::min();  // last push, pop or mark
  int64_t last_close_ts = std::numeric_limits<int64_t>::min();  // last pop or API call's end
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
};

// One pass over one connection's frames. The first pass (`steps` null) counts every
// range in one step and collects step-marker candidates and start/end ranges; the
// second counts the ranges of recorded steps, with the first pass's start/end ranges.
// A first pass that met start/end ranges counts nothing that can be used: it could not
// nest them, since a range's start may be written after what it holds.
class ConnPass {
 public:
  ConnPass(const ConnInput& conn, size_t process, const std::regex& marker, const std::vector<Step>* steps,
           const std::vector<StartEnd>* start_ends = nullptr)
      : conn_(conn),
        process_(process),
        marker_(marker),
        steps_(steps),
        known_start_ends_(start_ends),
        gpu_decoder_(gpu_scratch_, static_cast<int64_t>(conn.hello.real_ns - conn.hello.mono_ns)) {
    if (steps_ != nullptr) locator_ = std::make_unique<StepLocator>(*steps_);
    if (known_start_ends_ != nullptr) deal_start_ends();
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
  // GPU records still waiting for an API call have none: they count in the step
  // their start falls in, and in no range.
  void finish() {
    if (known_start_ends_ == nullptr) finish_start_ends();
    for (auto& [tid, thread] : threads_) {
      if (thread.next_start_end < thread.start_ends.size() || !thread.open_start_ends.empty()) {
        for (const Open& o : thread.stack) {
          if (!o.start_end) throw Refusal{"a start/end range outlives a range never ended"};
        }
        settle(thread, tid, kNever);
      }
      while (!thread.stack.empty()) {
        close_top(thread, tid, std::max(thread.stack.back().start, thread.last_ts));
        ++unterminated_;
      }
    }
    // Without markers the one step spans the process.
    std::vector<Step> whole;
    std::unique_ptr<StepLocator> whole_locator;
    const StepLocator* locate = locator_.get();
    if (locate == nullptr && (!waiting_gpu_.empty() || !no_correlation_.empty())) {
      whole.push_back(process_span());
      whole_locator = std::make_unique<StepLocator>(whole);
      locate = whole_locator.get();
    }
    for (const auto& [correlation, uses] : waiting_gpu_) {
      for (const GpuUse& use : uses) unmatched(use, *locate);
    }
    waiting_gpu_.clear();
    for (const GpuUse& use : no_correlation_) unmatched(use, *locate);
    no_correlation_.clear();
    gpu_decoder_.finish();
  }

  // Warnings, dropped counts and GPU notes, as decode and attribute_gpu() give them
  // (first pass only).
  void report(Process& proc) const {
    uint64_t thread_dropped = 0;
    for (const auto& [tid, thread] : threads_) thread_dropped += thread.dropped;
    proc.dropped += std::max<uint64_t>(conn_.bye ? conn_.bye->dropped : 0, thread_dropped);
    uint64_t unknown = 0;
    for (const NameState& n : names_) unknown += n.used_undefined && !n.defined ? 1 : 0;
    proc.warnings.insert(proc.warnings.end(), gpu_scratch_.warnings.begin(), gpu_scratch_.warnings.end());
    add_decode_warnings(conn_,
                        {bad_frames_, cut_records_, lost_frames_, unmatched_pops_, pairing_.waiting_ends(), unterminated_,
                         unknown},
                        proc);
    if (unmatched_gpu_ > 0) {
      proc.warnings.push_back(std::to_string(unmatched_gpu_) +
                              " GPU records have no recorded launching API call; they count in no range");
    }
    proc.cupti_dropped = gpu_scratch_.cupti_dropped;
    for (const auto& [text, id] : notices_) {
      proc.gpu_notices.push_back(id != 0 && text == stand_in_text(id) ? final_text(id) : text);
    }
  }

  // The process's span as decode and compute_nesting() bound it: its records' earliest
  // and latest times, GPU records' included, and the time of its goodbye; a start of 0
  // counts as unknown, and the first event's is taken.
  Step process_span() const {
    int64_t first = first_ts_;
    int64_t last = image_end();
    if (gpu_decoder_.any()) {
      first = std::min(first, gpu_decoder_.first_ns());
      last = std::max(last, gpu_decoder_.last_ns());
    }
    if (first == 0) first = first_event_ts_;
    Step s;
    s.start_ns = first;
    s.dur_ns = last - first;
    return s;
  }

  // The latest time of the threads' records, or the goodbye's when later (decode's
  // image_end()).
  int64_t image_end() const {
    if (conn_.bye && conn_.bye->mono_ns != 0) return std::max(last_ts_, record_epoch_ns(conn_.hello, conn_.bye->mono_ns));
    return last_ts_;
  }

  // Whether the image holds GPU records or device memory events (the table's CUDA columns).
  bool has_gpu() const { return has_gpu_; }
  // memcpy and memset rows: (kind, name) and what they add up.
  const std::vector<std::tuple<const char*, std::string, Stats>>& copy_rows() const { return copy_rows_; }

  // A domain's name once every frame has been read ("" for the default domain and for
  // one never defined, as decode names them).
  std::string final_domain_name(uint16_t domain) const {
    if (domain == 0) return {};
    auto it = domains_.find(domain);
    return it == domains_.end() ? std::string() : final_text(it->second);
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
    std::vector<std::string> names;  // as the full analysis names them (an op range by its op)
    for (const Candidate& c : candidates_) names.push_back(c.mark ? final_text(c.id) : range_name(c.id, c.domain));
    for (size_t i = 0; i < candidates_.size(); ++i) {
      if (std::regex_search(names[i], marker_)) found.push_back(&candidates_[i]);
    }
    std::sort(found.begin(), found.end(),
              [](const Candidate* x, const Candidate* y) { return std::tie(x->tid, x->seq) < std::tie(y->tid, y->seq); });
    std::stable_sort(found.begin(), found.end(),
                     [](const Candidate* x, const Candidate* y) { return x->start < y->start; });
    std::vector<Event> events;
    for (const Candidate* c : found) {
      Event& e = events.emplace_back();
      e.name = names[static_cast<size_t>(c - candidates_.data())];
      e.kind = c->mark ? EventKind::kMark : EventKind::kRange;
      e.tid = e.end_tid = c->tid;
      e.start_ns = c->start;
      e.end_ns = c->end;
    }
    return events;
  }

  // What the full analysis makes of a range of string `id` in `domain`: a PyTorch op
  // when the message parses as one (any message in the ops domain), else nothing.
  std::optional<OpInfo> op_of(uint32_t id, uint16_t domain) const {
    const std::string domain_name = final_domain_name(domain);
    const bool ops_domain = domain_name == kPytorchOpsDomain;
    if (!ops_domain && !domain_name.empty()) return std::nullopt;  // ops use the default domain
    const std::string text = final_text(id);
    std::optional<OpInfo> op = parse_op_message(text, /*require_fields=*/!ops_domain);
    if (!op && ops_domain) {
      op.emplace();
      op->name = text;  // malformed but certainly an op: its message is its name
    }
    return op;
  }

  std::string range_name(uint32_t id, uint16_t domain) const {
    std::optional<OpInfo> op = op_of(id, domain);
    return op ? op->name : final_text(id);
  }

  // Ranges in domains other than the default one, by (string id << 16 | domain).
  const std::unordered_map<uint64_t, Stats>& domain_ranges() const { return domain_ranges_; }
  const std::vector<NameState>& names() const { return names_; }
  // A name's API call or kernel row (NameState::api, ::kernel): none when `index` is -1.
  const Stats& side_stats(int32_t index) const {
    static const Stats kNone;
    return index < 0 ? kNone : side_stats_[static_cast<size_t>(index)];
  }
  // The start/end ranges read, in the order their starts were (first pass).
  const std::vector<StartEnd>& start_ends() const { return start_ends_; }
  std::vector<StartEnd> take_start_ends() { return std::move(start_ends_); }
  uint64_t events() const { return events_; }
  uint64_t gpu_records() const { return gpu_seq_ + syncs_; }

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
        range_start(r, tid, thread);
        last_event_ = true;
        return;
      case wire::Kind::kEnd:
        range_end(r, tid, thread);
        break;
      case wire::Kind::kCudaRuntime:
      case wire::Kind::kCudaDriver:
        api_call(r, tid, thread);
        break;
      default:
        if (r.kind >= static_cast<uint8_t>(wire::Kind::kKernel)) gpu_record(r, extra, extra_bytes);
        break;  // kPad, kinds newer than this reader: decode ignores them too
    }
    last_event_ = false;
  }

  // ---- CUDA API calls ----

  // An API call arrives when it returns, as the interval [enter, exit]. It is a child of
  // the range on top of the stack, and of any API call read later that holds it (a
  // runtime call around the driver call it makes): the calls it holds were read before
  // it. What the full analysis's interval nesting would settle otherwise is refused.
  void api_call(const wire::Record& r, uint32_t tid, Thread& thread) {
    const int64_t start = record_epoch_ns(conn_.hello, r.ts);
    const int64_t end = std::max(start, record_epoch_ns(conn_.hello, r.a));
    if (start < thread.last_event_ts) throw Refusal{"a thread's records go back in time"};
    if (start <= thread.forgotten_call_start) throw Refusal{"an API call holds too many others"};
    if (!thread.start_ends.empty()) [[unlikely]]
      settle_call(thread, tid, start, end);
    const int64_t dur = end - start;
    int64_t held = 0;  // durations of the calls it holds, already counted in the range's children
    auto& calls = thread.calls;
    while (!calls.empty() && calls.back().start >= start) {
      const ClosedCall& c = calls.back();
      if (c.end > end) throw Refusal{"API calls overlap on a thread"};
      if (c.start == start && c.end == end) throw Refusal{"two API calls span the same nanoseconds"};
      held += c.end - c.start;
      calls.pop_back();
    }
    if (!calls.empty() && (calls.back().end > start || (calls.back().end == start && dur == 0))) {
      throw Refusal{"API calls overlap on a thread"};
    }
    if (dur == 0 && start == thread.last_close_ts) throw Refusal{"an API call starts at the nanosecond a range ended"};
    touch(thread, start);
    touch(thread, end);
    first_event_ts_ = std::min(first_event_ts_, start);
    use_name(r.name);
    const uint64_t seq = thread.seq++;
    const int32_t step = step_of(thread, start);
    int32_t node = -1;
    if (!thread.stack.empty()) {
      Open& parent = thread.stack.back();
      parent.children += dur - held;
      parent.child_end = std::max(parent.child_end, end);
      node = stack_node(thread);
    }
    if (calls.size() == kMaxClosedCalls) {
      thread.forgotten_call_start = calls.front().start;
      calls.erase(calls.begin());
    }
    calls.push_back({start, end});
    thread.last_call_end = std::max(thread.last_call_end, end);
    thread.last_close_ts = std::max(thread.last_close_ts, end);
    ++events_;
    if (counted(step)) {
      Stats& st = side_stats(name(r.name).api);
      st.add_use({process_, 0, tid, start, -end, seq});
      ++st.calls;
      st.total_ns += dur;
      st.self_ns += std::max<int64_t>(0, dur - held);
    }
    if (r.b == 0) return;  // correlation 0: no GPU record can name it
    launch(r.b, Launch{node, step});
  }

  bool counted(int32_t step) const {
    return step >= 0 && (steps_ == nullptr || recorded((*steps_)[static_cast<size_t>(step)].action));
  }

  // The StackNode of the thread's top range, making those of the stack that lack one.
  int32_t stack_node(Thread& thread) {
    int32_t parent = -1;
    for (Open& o : thread.stack) {
      if (o.node < 0) {
        const StackNode node{parent, o.id, o.domain, counted(o.step)};
        auto [it, fresh] = node_index_.try_emplace(node, static_cast<int32_t>(nodes_.size()));
        if (fresh) {
          if (nodes_.size() >= kMaxStackNodes) throw Refusal{"too many distinct range stacks around API calls"};
          nodes_.push_back(node);
        }
        o.node = it->second;
      }
      parent = o.node;
    }
    return parent;
  }

  // Holds the call for the GPU records that name it, and hands it those read before it.
  void launch(uint64_t correlation, const Launch& call) {
    if (launches_.maybe_forgotten(correlation)) throw Refusal{"an API call came long after the ones around it"};
    if (!launches_.add(correlation, call)) throw Refusal{"two API calls share a correlation id"};
    auto waiting = waiting_gpu_.find(correlation);
    if (waiting == waiting_gpu_.end()) return;
    for (const GpuUse& use : waiting->second) matched(use, call);
    waiting_gpu_count_ -= waiting->second.size();
    waiting_gpu_.erase(waiting);
  }

  // ---- GPU records ----

  void gpu_record(const wire::Record& r, const uint8_t* extra, size_t extra_bytes) {
    use_name(r.name);
    const auto kind = static_cast<wire::Kind>(r.kind);
    // Device and notice names are kept; kernels are counted by their name's string id.
    Name text;
    if (kind == wire::Kind::kDevice || kind == wire::Kind::kGpuNotice) text = current_text(r.name);
    if (!gpu_decoder_.decode(r, extra, extra_bytes, 0, text)) return;
    if (kind == wire::Kind::kGpuNotice && !text.empty()) {
      auto seen = std::find_if(notices_.begin(), notices_.end(), [&](const auto& n) { return n.first == text.str(); });
      if (seen == notices_.end()) notices_.emplace_back(text.str(), r.name);
    }
    if (!gpu_scratch_.memory_events.empty()) has_gpu_ = true;
    for (const GpuEvent& g : gpu_scratch_.gpu_events) {
      has_gpu_ = true;
      if (g.kind == GpuKind::kSync) {
        ++syncs_;
        continue;  // no row, and never unmatched
      }
      GpuUse use;
      use.kind = g.kind;
      use.start = g.start_ns;
      use.dur = g.dur_ns();
      use.seq = gpu_seq_++;
      if (g.kind == GpuKind::kKernel) {
        use.name = r.name;
      } else {
        use.copy = copy_row(g.kind == GpuKind::kMemcpy ? "memcpy" : "memset", g.name);
      }
      gpu_use(g.correlation, use);
    }
    gpu_scratch_.gpu_events.clear();
    gpu_scratch_.memory_events.clear();
    gpu_scratch_.profiler_toggles.clear();
  }

  void gpu_use(uint64_t correlation, const GpuUse& use) {
    if (correlation == 0) {
      no_correlation_.push_back(use);  // unmatched; counted at the end with the steps known
      if (no_correlation_.size() > kMaxWaitingGpu) throw Refusal{"too many GPU records without a correlation id"};
      return;
    }
    if (const Launch* call = launches_.find(correlation)) {
      matched(use, *call);
      return;
    }
    if (launches_.maybe_forgotten(correlation)) throw Refusal{"a GPU record came long after its API call"};
    waiting_gpu_[correlation].push_back(use);
    if (++waiting_gpu_count_ > kMaxWaitingGpu) throw Refusal{"too many GPU records came before their API calls"};
  }

  // A GPU record with its API call: its row counts in the call's step, and its time in
  // the ranges around the call (Self CUDA for the innermost).
  void matched(const GpuUse& use, const Launch& call) {
    count_gpu_row(use, call.step);
    if (call.node < 0) return;
    const StackNode innermost = nodes_[static_cast<size_t>(call.node)];
    if (innermost.counted) range_stats(innermost.id, innermost.domain).self_cuda_ns += use.dur;
    for (int32_t n = call.node; n >= 0; n = nodes_[static_cast<size_t>(n)].parent) {
      const StackNode node = nodes_[static_cast<size_t>(n)];
      if (node.counted) range_stats(node.id, node.domain).cuda_total_ns += use.dur;
    }
  }

  void unmatched(const GpuUse& use, const StepLocator& locate) {
    ++unmatched_gpu_;
    ptrdiff_t cursor = 0;
    count_gpu_row(use, locate.step_of(use.start, cursor, /*restart=*/true));
  }

  void count_gpu_row(const GpuUse& use, int32_t step) {
    if (!counted(step)) return;
    Stats& st = use.kind == GpuKind::kKernel ? side_stats(name(use.name).kernel)
                                             : std::get<2>(copy_rows_[static_cast<size_t>(use.copy)]);
    const FirstUse here{process_, 1, 0, use.start, 0, use.seq};
    if (st.calls == 0 || here.key() < st.first.key()) st.mangled = use.name;
    st.add_use(here);
    ++st.calls;
    st.self_cuda_ns += use.dur;
    st.cuda_total_ns += use.dur;
  }

  int32_t copy_row(const char* kind, const Name& row_name) {
    auto [it, fresh] = copy_index_.try_emplace(row_name.id(), static_cast<int32_t>(copy_rows_.size()));
    if (fresh) copy_rows_.emplace_back(kind, row_name.str(), Stats{});
    return it->second;
  }

  // A string's text as decode would name it now: its definition, or a stand-in.
  Name current_text(uint32_t id) {
    if (id == 0) return {};
    const NameState& n = name(id);
    return n.defined ? Name(n.text) : Name(stand_in_text(id));
  }

  void define(const wire::Record& r, const uint8_t* extra, size_t extra_bytes) {
    const size_t len = std::min<uint64_t>(r.a, extra_bytes);
    std::string text(reinterpret_cast<const char*>(extra), len);
    NameState& n = name(r.name);
    if (n.defined && n.text != text) throw Refusal{"a string id is defined twice"};
    n.text = std::move(text);
    n.defined = true;
  }

  // A name's API call or kernel row, made on first use.
  Stats& side_stats(int32_t& index) {
    if (index < 0) {
      index = static_cast<int32_t>(side_stats_.size());
      side_stats_.emplace_back();
    }
    return side_stats_[static_cast<size_t>(index)];
  }

  // The default domain's ranges are counted by name; others by name and domain (the
  // domain decides whether a range is a PyTorch op).
  Stats& range_stats(uint32_t id, uint16_t domain) {
    if (domain == 0) [[likely]]
      return names_[id].range;
    return domain_ranges_[(uint64_t{id} << 16) | domain];
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

  // Whether the name may match once known: as it is, or as an op's name (markers()
  // decides with the domain's name).
  [[gnu::noinline]] bool matches_marker(uint32_t id) const {
    const std::string text = final_text(id);
    if (std::regex_search(text, marker_)) return true;
    std::optional<OpInfo> op = parse_op_message(text, /*require_fields=*/false);
    return op && std::regex_search(op->name, marker_);
  }

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

  int32_t candidate(uint32_t tid, uint64_t seq, int64_t ts, uint32_t id, uint16_t domain, bool mark) {
    if (candidates_.size() >= kMaxCandidates) throw Refusal{"too many names match the step marker"};
    candidates_.push_back({tid, seq, ts, ts, id, domain, mark});
    return static_cast<int32_t>(candidates_.size() - 1);
  }

  int32_t step_of(Thread& t, int64_t start) {
    if (locator_ == nullptr) return 0;
    return locator_->step_of(start, t.cursor, /*restart=*/t.cursor == 0);
  }

  // What a push, a mark and a range's start share: the thread's clock moves on, and the
  // domain, category (of the attribute `attr`) and name the event uses are looked up as
  // decode does. Returns the name's state, taken last since the other lookups may grow
  // names_.
  NameState& begin_event(const wire::Record& r, Thread& thread, int64_t ts, uint64_t attr) {
    touch(thread, ts);
    first_event_ts_ = std::min(first_event_ts_, ts);
    use_domain(r.domain);
    use_attr(r.domain, attr);
    last_domain_ = r.domain;
    return use_name(r.name);
  }

  void push(const wire::Record& r, uint32_t tid, Thread& thread) {
    const int64_t ts = in_order(thread, record_epoch_ns(conn_.hello, r.ts));
    // A range starting at the very nanosecond another ended: interval nesting may
    // order the two either way.
    if (ts == thread.last_close_ts) throw Refusal{"a range starts at the nanosecond another ended"};
    if (ts <= thread.last_call_end) throw Refusal{"a range starts inside an API call or as one ends"};
    if (!thread.start_ends.empty()) [[unlikely]]
      settle(thread, tid, ts);
    thread.calls.clear();
    NameState& n = begin_event(r, thread, ts, r.a);
    const uint64_t seq = thread.seq++;
    const int32_t step = step_of(thread, ts);
    const int32_t cand = steps_ == nullptr && maybe_marker(r.name, n) ? candidate(tid, seq, ts, r.name, r.domain, false) : -1;
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
    if (!thread.start_ends.empty()) [[unlikely]]
      settle(thread, tid, ts);
    auto& stack = thread.stack;
    if (stack.empty() || stack.back().domain != r.domain || stack.back().start_end) {
      for (const Open& o : stack) {
        if (o.domain == r.domain && !o.start_end) {
          throw Refusal{stack.back().start_end ? kStartEndOverlap : "ranges of two NVTX domains overlap on a thread"};
        }
      }
      ++unmatched_pops_;
      return;
    }
    close_top(thread, tid, ts);
    thread.last_close_ts = ts;
    thread.calls.clear();
  }

  void mark(const wire::Record& r, uint32_t tid, Thread& thread) {
    const int64_t ts = in_order(thread, record_epoch_ns(conn_.hello, r.ts));
    NameState& n = begin_event(r, thread, ts, r.a);
    const uint64_t seq = thread.seq++;
    if (steps_ == nullptr && maybe_marker(r.name, n)) candidate(tid, seq, ts, r.name, r.domain, true);
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
    const int64_t start = o.start;
    const uint16_t domain = o.domain;
    if (end < o.child_end) throw Refusal{"an API call ends after the range around it"};
    if (o.candidate >= 0) candidates_[o.candidate].end = end;
    stack.pop_back();
    if (!stack.empty()) stack.back().children += dur;
    if (!counted(step)) return;
    Stats& st = range_stats(id, domain);
    st.add_use({process_, 0, tid, start, -end, seq});
    ++st.calls;
    st.total_ns += dur;
    st.self_ns += self;
  }

  // ---- start/end ranges ----

  // Paired as decode pairs them (RangePairing); a start whose id is taken again is left
  // as it is, ended where it started.
  void range_start(const wire::Record& r, uint32_t tid, Thread& thread) {
    const int64_t ts = record_epoch_ns(conn_.hello, r.ts);
    begin_event(r, thread, ts, r.b);  // a start carries its range id in a, its attribute in b
    const uint64_t seq = thread.seq++;
    ++events_;
    if (known_start_ends_ != nullptr) {
      if (read_start_ends_ >= known_start_ends_->size()) throw Refusal{"the capture changed between passes"};
      const StartEnd& se = (*known_start_ends_)[read_start_ends_++];
      if (se.end_tid != se.tid) count_start_end(se, step_of(thread, se.start));
      return;
    }
    if (start_ends_.size() >= kMaxStartEnds) throw Refusal{"it holds too many start/end ranges"};
    const auto index = static_cast<uint32_t>(start_ends_.size());
    StartEnd& se = start_ends_.emplace_back();
    se.start = se.end = ts;
    se.seq = seq;
    se.tid = se.end_tid = tid;
    se.id = r.name;
    se.domain = r.domain;
    if (std::optional<RangePairing::End> end = pairing_.start(r.a, index)) {
      se.end = end->ts;
      se.end_tid = end->tid;
    }
  }

  void range_end(const wire::Record& r, uint32_t tid, Thread& thread) {
    const int64_t ts = record_epoch_ns(conn_.hello, r.ts);
    touch(thread, ts);
    if (known_start_ends_ != nullptr) return;
    if (std::optional<uint32_t> open = pairing_.end(r.a, ts, tid)) {
      start_ends_[*open].end = ts;
      start_ends_[*open].end_tid = tid;
    }
  }

  // First pass: ranges never ended end at the image's last timestamp, as decode ends
  // them; those named like a step marker are candidates.
  void finish_start_ends() {
    for (const auto& [id, index] : pairing_.open()) {
      StartEnd& se = start_ends_[index];
      se.end = std::max(se.start, image_end());
      ++unterminated_;
    }
    pairing_.clear_open();
    for (const StartEnd& se : start_ends_) {
      if (se.end < se.start) throw Refusal{"a start/end range ends before it starts"};
      if (maybe_marker(se.id, name(se.id))) {
        candidates_[candidate(se.tid, se.seq, se.start, se.id, se.domain, false)].end = se.end;
      }
    }
  }

  // Second pass: each thread gets its own start/end ranges in interval-nesting order.
  void deal_start_ends() {
    const auto& all = *known_start_ends_;
    for (uint32_t i = 0; i < all.size(); ++i) {
      if (all[i].end_tid == all[i].tid) threads_[all[i].tid].start_ends.push_back(i);
    }
    for (auto& [tid, thread] : threads_) {
      std::stable_sort(thread.start_ends.begin(), thread.start_ends.end(), [&all](uint32_t x, uint32_t y) {
        return all[x].start != all[y].start ? all[x].start < all[y].start : all[x].end > all[y].end;
      });
    }
  }

  // A range that ends on another thread is not an interval of either: it holds nothing
  // and nothing holds it.
  void count_start_end(const StartEnd& se, int32_t step) {
    if (!counted(step)) return;
    Stats& st = range_stats(se.id, se.domain);
    st.add_use({process_, 0, se.tid, se.start, -se.end, se.seq});
    ++st.calls;
    st.total_ns += se.end - se.start;
    st.self_ns += se.end - se.start;
  }

  // Opens and closes the thread's start/end ranges whose boundaries come before `ts`,
  // the time of its next push or pop, or an API call's start: they nest with its other
  // ranges as pushes and pops at those times would. A boundary at `ts` itself, or one
  // passed already, would leave the order to interval nesting's ties: refused.
  void settle(Thread& t, uint32_t tid, int64_t ts) {
    if (ts <= t.start_end_passed) throw Refusal{kStartEndOverlap};
    const auto& all = *known_start_ends_;
    for (;;) {
      const StartEnd* next = t.next_start_end < t.start_ends.size() ? &all[t.start_ends[t.next_start_end]] : nullptr;
      const StartEnd* top = t.open_start_ends.empty() ? nullptr : &all[t.open_start_ends.back()];
      if (next == nullptr && top == nullptr) return;
      const int64_t open_at = next != nullptr ? next->start : kNever;
      const int64_t close_at = top != nullptr ? top->end : kNever;
      const int64_t at = std::min(open_at, close_at);
      if (at > ts || at == kNever) return;
      if (at == ts) throw Refusal{"a start/end range begins or ends at the nanosecond of another record of its thread"};
      // At one nanosecond, a range ends before the next begins. (Interval nesting holds
      // one that lasts no time in the one ending: the same figures, since it holds
      // nothing and adds nothing to its parent.)
      if (close_at <= open_at) {
        close_start_end(t, tid);
      } else {
        open_start_end(t, tid);
      }
      t.start_end_passed = std::max(t.start_end_passed, at);
    }
  }

  // An API call: no start/end range may begin or end inside it.
  void settle_call(Thread& t, uint32_t tid, int64_t start, int64_t end) {
    settle(t, tid, start);
    const auto& all = *known_start_ends_;
    if (t.next_start_end < t.start_ends.size() && all[t.start_ends[t.next_start_end]].start <= end) {
      throw Refusal{kStartEndOverlap};
    }
    if (!t.open_start_ends.empty() && all[t.open_start_ends.back()].end <= end) throw Refusal{kStartEndOverlap};
  }

  void close_start_end(Thread& t, uint32_t tid) {
    if (t.stack.empty() || !t.stack.back().start_end) throw Refusal{kStartEndOverlap};
    close_top(t, tid, (*known_start_ends_)[t.open_start_ends.back()].end);
    t.open_start_ends.pop_back();
    t.calls.clear();
  }

  void open_start_end(Thread& t, uint32_t tid) {
    const auto& all = *known_start_ends_;
    const uint32_t index = t.start_ends[t.next_start_end++];
    const StartEnd& se = all[index];
    // An open one that ends inside this one (consecutive steps whose times differ by a
    // few nanoseconds): interval nesting leaves it open, but from now on it holds
    // nothing, since what it could hold lies inside this one too, the innermost. So it
    // closes here, and this one gets the parent below it.
    while (!t.open_start_ends.empty() && all[t.open_start_ends.back()].end < se.end) close_start_end(t, tid);
    name(se.id);  // its row's slot: its start, written once it ended, may not be read yet
    Open& o = t.stack.emplace_back();
    o.start = se.start;
    o.seq = se.seq;
    o.id = se.id;
    o.step = step_of(t, se.start);
    o.domain = se.domain;
    o.start_end = true;
    t.open_start_ends.push_back(index);
    t.calls.clear();
  }

  const ConnInput& conn_;
  const size_t process_;
  const std::regex& marker_;
  const std::vector<Step>* steps_;
  const std::vector<StartEnd>* known_start_ends_;  // second pass: the first pass's
  size_t read_start_ends_ = 0;
  std::vector<StartEnd> start_ends_;                // first pass
  RangePairing pairing_;                            // first pass
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

// torch renames ProfilerStep#N to ProfilerStep* before grouping; so does analysis.
std::string event_row_name(const std::string& name) {
  return name.starts_with(kStepNamePrefix) ? std::string(kStepRowName) : name;
}

// A range's row: a cpu_op row when it is a PyTorch op, else an nvtx row.
void add_range_row(const ConnPass& pass, uint32_t id, uint16_t domain, const Stats& st, bool group_by_input_shape,
                   Rows& rows) {
  if (st.calls == 0) return;
  if (std::optional<OpInfo> op = pass.op_of(id, domain)) {
    OpStats row = op_row(*op, group_by_input_shape);
    row.name = event_row_name(op->name);
    rows.add(std::move(row), st);
  } else {
    rows.add("nvtx", event_row_name(pass.final_text(id)), st);
  }
}

// Adds a pass's counted names to the rows, by the name analysis gives their row.
void add_rows(const ConnPass& pass, bool group_by_input_shape, Rows& rows) {
  const std::vector<NameState>& names = pass.names();
  for (uint32_t id = 0; id < names.size(); ++id) {
    const NameState& n = names[id];
    if (n.range.calls == 0 && n.api < 0 && n.kernel < 0) continue;
    add_range_row(pass, id, 0, n.range, group_by_input_shape, rows);
    const Stats& api = pass.side_stats(n.api);
    const Stats& kernel = pass.side_stats(n.kernel);
    const std::string text = pass.final_text(id);
    rows.add("cuda_api", event_row_name(text), api);
    if (kernel.calls != 0) rows.add("kernel", demangle(text), kernel, pass.final_text(kernel.mangled));
  }
  for (const auto& [key, st] : pass.domain_ranges()) {
    add_range_row(pass, static_cast<uint32_t>(key >> 16), static_cast<uint16_t>(key & 0xffff), st,
                  group_by_input_shape, rows);
  }
  for (const auto& [kind, name, st] : pass.copy_rows()) rows.add(kind, name, st);
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
  Rows rows;
  out.passes = 1;
  try {
    for (size_t p = 0; p < scanned.conns.size(); ++p) {
      const ConnInput& conn = *scanned.conns[p];
      Process& proc = run.processes.emplace_back();
      apply_identity(conn, proc);
      Process markers;
      std::vector<Step> steps;
      std::vector<StartEnd> start_ends;
      {  // the first pass's names and rows are let go before the second
        ConnPass first(conn, p, marker, nullptr);
        source.read(conn, first);
        first.report(proc);
        if (conn.bye) apply_bye(*conn.bye, proc);
        run.has_gpu = run.has_gpu || first.has_gpu();
        out.events += first.events();
        out.gpu_records += first.gpu_records();
        if (first.events() == 0) continue;
        markers.events_list = first.markers();
        if (markers.events_list.empty()) {
          // The whole process is one step, holding every event.
          const bool counted = !options.schedule || recorded(schedule_action(*options.schedule, 0));
          if (!counted) continue;
          if (first.start_ends().empty()) {
            add_rows(first, options.group_by_input_shape, rows);
            continue;
          }
          steps.push_back(first.process_span());
          steps.back().action = StepAction::kRecordAndSave;
        }
        start_ends = first.take_start_ends();
      }
      if (!markers.events_list.empty()) {
        for (const Event& e : markers.events_list) {
          if (e.kind == EventKind::kMark) return refuse("a step marker is a mark");
        }
        std::vector<int32_t> order(markers.events_list.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
        steps = steps_of_markers(markers, order, options.schedule);
      }
      ConnPass second(conn, p, marker, &steps, &start_ends);
      source.read(conn, second);
      add_rows(second, options.group_by_input_shape, rows);
      out.passes = 2;
    }
  } catch (const Refusal& r) {
    return refuse(r.why);
  }
  apply_launcher_view(run, scanned);
  for (const Process& proc : run.processes) {
    run.dropped_events += proc.dropped;
    run.cupti_dropped += proc.cupti_dropped;
    for (const std::string& n : proc.gpu_notices) run.gpu_notices.push_back("pid " + std::to_string(proc.pid) + ": " + n);
  }
  run.ops = rows.take();
  for (const OpStats& op : run.ops) {
    if (op.self_cuda_ns != 0 || op.cuda_total_ns != 0) run.has_gpu = true;
  }
  return out;
}

}  // namespace torchprof
