#include "analysis/stream_pass.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/decode.h"
#include "reading/frame_decode.h"
#include "analysis/op_message.h"

namespace torchprof::stream {

ConnPass::ConnPass(const ConnInput& conn, size_t process, const StepMarker& marker, const std::vector<Step>* steps,
                   const std::vector<StartEnd>* start_ends)
    : conn_(conn),
      process_(process),
      marker_(marker),
      steps_(steps),
      known_start_ends_(start_ends),
      gpu_decoder_(gpu_scratch_, static_cast<int64_t>(conn.hello.real_ns - conn.hello.mono_ns)) {
  if (steps_ != nullptr) locator_ = std::make_unique<StepLocator>(*steps_);
  if (known_start_ends_ != nullptr) deal_start_ends();
}

ConnPass::ConnPass(const ConnInput& conn, size_t process, const StepMarker& marker, const ConnPass& scan)
    : conn_(conn),
      process_(process),
      marker_(marker),
      follow_(true),
      steps_(&own_steps_),
      known_start_ends_(&scan.start_ends_),
      gpu_decoder_(gpu_scratch_, static_cast<int64_t>(conn.hello.real_ns - conn.hello.mono_ns)) {
  locator_ = std::make_unique<StepLocator>(own_steps_);
}

void ConnPass::frame(const wire::FrameHeader& fh, const std::vector<uint8_t>& raw) {
  Thread& thread = threads_[fh.tid];
  if (fh.seq > thread.next_seq) lost_frames_ += fh.seq - thread.next_seq;
  thread.next_seq = fh.seq + 1;
  last_event_ = false;  // a kPayload refers to the record before it in the same frame
  const bool whole = for_each_record(raw, [&](const wire::Record& r, const uint8_t* extra, size_t extra_bytes) {
    record(r, extra, extra_bytes, fh.tid, thread);
  });
  if (!whole) ++cut_records_;
}

void ConnPass::finish() {
  if (scan_) {
    finish_scan();
    return;
  }
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

void ConnPass::report(Process& proc, const ConnPass* scan) const {
  uint64_t thread_dropped = 0;
  for (const auto& [tid, thread] : threads_) thread_dropped += thread.dropped;
  proc.dropped += std::max<uint64_t>(conn_.bye ? conn_.bye->dropped : 0, thread_dropped);
  buffers_.apply(proc);
  uint64_t unknown = 0;
  for (const NameState& n : names_) unknown += n.used_undefined && !n.defined ? 1 : 0;
  proc.warnings.insert(proc.warnings.end(), gpu_scratch_.warnings.begin(), gpu_scratch_.warnings.end());
  // A scan counted the start/end ranges that never ended; this pass, the ranges.
  const size_t waiting_ends = (scan != nullptr ? scan->pairing_ : pairing_).waiting_ends();
  const uint64_t unterminated = unterminated_ + (scan != nullptr ? scan->unterminated_ : 0);
  add_decode_warnings(conn_,
                      {bad_frames_, cut_records_, lost_frames_, unmatched_pops_, waiting_ends, unterminated, unknown},
                      proc);
  if (unmatched_gpu_ > 0) {
    proc.warnings.push_back(std::to_string(unmatched_gpu_) +
                            " GPU records have no recorded launching API call; they count in no range");
  }
  proc.cupti_dropped = gpu_scratch_.cupti_dropped;
  proc.gpu_incomplete = gpu_scratch_.gpu_incomplete;
  proc.gpu_unreadable_buffers = gpu_scratch_.gpu_unreadable_buffers;
  proc.gpu_unreadable_bytes = gpu_scratch_.gpu_unreadable_bytes;
  proc.gpu_tracing = gpu_scratch_.gpu_tracing;
  for (const auto& [text, id] : notices_) {
    proc.gpu_notices.push_back(id != 0 && text == stand_in_text(id) ? final_text(id) : text);
  }
}

Step ConnPass::process_span() const {
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

int64_t ConnPass::image_end() const {
  if (conn_.bye && conn_.bye->mono_ns != 0) return std::max(last_ts_, record_epoch_ns(conn_.hello, conn_.bye->mono_ns));
  return last_ts_;
}

std::string ConnPass::final_domain_name(uint16_t domain) const {
  if (domain == 0) return {};
  auto it = domains_.find(domain);
  return it == domains_.end() ? std::string() : final_text(it->second);
}

std::string ConnPass::final_text(uint32_t id) const {
  if (id == 0) return {};
  if (id < names_.size() && names_[id].defined) return names_[id].text;
  return stand_in_text(id);
}

std::vector<Event> ConnPass::markers() const {
  std::vector<const Candidate*> found;
  std::vector<std::string> names;  // as the full analysis names them (an op range by its op)
  for (const Candidate& c : candidates_) names.push_back(c.mark ? final_text(c.id) : range_name(c.id, c.domain));
  for (size_t i = 0; i < candidates_.size(); ++i) {
    if (marker_.matches(names[i])) found.push_back(&candidates_[i]);
  }
  std::sort(found.begin(), found.end(),
            [](const Candidate* x, const Candidate* y) { return std::tie(x->tid, x->seq) < std::tie(y->tid, y->seq); });
  std::stable_sort(found.begin(), found.end(),
                   [](const Candidate* x, const Candidate* y) { return x->start < y->start; });
  std::vector<Event> events;
  for (const Candidate* c : found) {
    Event& e = events.emplace_back();
    e.kind = c->mark ? EventKind::kMark : EventKind::kRange;
    e.tid = c->tid;
    e.start_ns = c->start;
    e.end_ns = c->end;
  }
  return events;
}

std::optional<OpInfo> ConnPass::op_of(uint32_t id, uint16_t domain) const {
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

std::string ConnPass::range_name(uint32_t id, uint16_t domain) const {
  std::optional<OpInfo> op = op_of(id, domain);
  return op ? op->name : final_text(id);
}

const Stats& ConnPass::side_stats(int32_t index) const {
  static const Stats kNone;
  return index < 0 ? kNone : side_stats_[static_cast<size_t>(index)];
}

[[gnu::always_inline]] inline void ConnPass::record(const wire::Record& r, const uint8_t* extra, size_t extra_bytes,
                                                    uint32_t tid, Thread& thread) {
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
    case wire::Kind::kBufferUsage:
    case wire::Kind::kBufferRefused:
      buffers_.take(r, conn_.hello);
      break;
    case wire::Kind::kCaptureWindow:  // the windows decide steps and cycles: the full analysis's job
      throw Refusal{"the capture has on-demand capture windows"};
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

Name ConnPass::current_text(uint32_t id) {
  if (id == 0) return {};
  const NameState& n = name(id);
  return n.defined ? Name(n.text) : Name(stand_in_text(id));
}

void ConnPass::define(const wire::Record& r, const uint8_t* extra, size_t extra_bytes) {
  const size_t len = std::min<uint64_t>(r.a, extra_bytes);
  std::string text(reinterpret_cast<const char*>(extra), len);
  NameState& n = name(r.name);
  if (n.defined && n.text != text) throw Refusal{"a string id is defined twice"};
  n.text = std::move(text);
  n.defined = true;
}

Stats& ConnPass::side_stats(int32_t& index) {
  if (index < 0) {
    index = static_cast<int32_t>(side_stats_.size());
    side_stats_.emplace_back();
  }
  return side_stats_[static_cast<size_t>(index)];
}

Stats& ConnPass::range_stats(uint32_t id, uint16_t domain) {
  if (domain == 0) [[likely]]
    return names_[id].range;
  return domain_stats(id, domain);
}

Stats& ConnPass::domain_stats(uint32_t id, uint16_t domain) {
  // A name's first other domain has a slot (the bootstrap's steps and ops, a step name
  // each, are in one); the rare name used in two other domains falls back on the map.
  int32_t& slot = names_[id].domain_range;
  if (slot < 0) {
    slot = static_cast<int32_t>(domain_slots_.size());
    domain_slots_.push_back({id, domain, {}});
  }
  DomainRange& d = domain_slots_[static_cast<size_t>(slot)];
  if (d.domain == domain) return d.stats;
  return domain_ranges_[(uint64_t{id} << 16) | domain];
}

[[gnu::noinline]] NameState& ConnPass::grow_names(uint32_t id) {
  if (id >= kMaxStringId) throw Refusal{"a string id is out of range"};
  names_.resize(std::max<size_t>(id + 1, names_.size() * 2));
  return names_[id];
}

NameState& ConnPass::use_name(uint32_t id) {
  NameState& n = name(id);
  if (id != 0 && !n.defined) n.used_undefined = true;
  return n;
}

void ConnPass::use_attr(uint16_t domain, uint64_t attr) {
  const uint32_t category = wire::attr_category(attr);
  if (category == 0) return;
  auto it = categories_.find((uint64_t{domain} << 32) | category);
  if (it != categories_.end()) use_name(it->second);
}

void ConnPass::use_domain(uint16_t domain) {
  if (domain == 0) return;
  auto it = domains_.find(domain);
  if (it != domains_.end()) use_name(it->second);
}

[[gnu::noinline]] bool ConnPass::matches_marker(uint32_t id) const {
  const std::string text = final_text(id);
  if (marker_.matches(text)) return true;
  std::optional<OpInfo> op = parse_op_message(text, /*require_fields=*/false);
  return op && marker_.matches(op->name);
}

int32_t ConnPass::candidate(uint32_t tid, uint64_t seq, int64_t ts, uint32_t id, uint16_t domain, bool mark) {
  if (candidates_.size() >= kMaxCandidates) throw Refusal{"too many names match the step marker"};
  candidates_.push_back({tid, seq, ts, ts, id, domain, mark});
  return static_cast<int32_t>(candidates_.size() - 1);
}

NameState& ConnPass::begin_event(const wire::Record& r, Thread& thread, int64_t ts, uint64_t attr) {
  touch(thread, ts);
  first_event_ts_ = std::min(first_event_ts_, ts);
  use_domain(r.domain);
  use_attr(r.domain, attr);
  last_domain_ = r.domain;
  return use_name(r.name);
}

[[gnu::always_inline]] inline void ConnPass::push(const wire::Record& r, uint32_t tid, Thread& thread) {
  const int64_t ts = in_order(thread, record_epoch_ns(conn_.hello, r.ts));
  // A range starting at the very nanosecond another ended follows it, as interval
  // nesting has it, unless one of the two is empty: an empty range ending there sorts
  // after the new one (longer first) and goes inside it; an empty new one goes inside
  // the one that ended (close_top() refuses it).
  const bool at_close = ts == thread.last_close_ts;
  if (at_close && thread.empty_closed) throw Refusal{"a range starts at the nanosecond an empty one ended"};
  if (ts <= thread.last_call_end) throw Refusal{"a range starts inside an API call or as one ends"};
  if (!thread.start_ends.empty()) [[unlikely]]
    settle_if_due(thread, tid, ts);
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
  o.at_close = at_close;
  ++events_;
}

[[gnu::always_inline]] inline void ConnPass::pop(const wire::Record& r, uint32_t tid, Thread& thread) {
  const int64_t ts = in_order(thread, record_epoch_ns(conn_.hello, r.ts));
  touch(thread, ts);
  if (!thread.start_ends.empty()) [[unlikely]]
    settle_if_due(thread, tid, ts);
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
  const bool empty = stack.back().start == ts;
  close_top(thread, tid, ts);
  thread.empty_closed = empty || (thread.empty_closed && thread.last_close_ts == ts);
  thread.last_close_ts = ts;
  thread.calls.clear();
}

[[gnu::always_inline]] inline void ConnPass::mark(const wire::Record& r, uint32_t tid, Thread& thread) {
  const int64_t ts = in_order(thread, record_epoch_ns(conn_.hello, r.ts));
  NameState& n = begin_event(r, thread, ts, r.a);
  const uint64_t seq = thread.seq++;
  if (steps_ == nullptr && maybe_marker(r.name, n)) {
    const int32_t c = candidate(tid, seq, ts, r.name, r.domain, true);
    if (ahead_) decide(c);
  }
  ++events_;
}

void ConnPass::close_top(Thread& thread, uint32_t tid, int64_t end) {
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
  if (o.at_close && end == start) throw Refusal{"an empty range starts at the nanosecond another ended"};
  if (o.candidate >= 0) [[unlikely]] {
    candidates_[o.candidate].end = end;
    if (ahead_) decide(o.candidate);
  }
  stack.pop_back();
  if (!stack.empty()) stack.back().children += dur;
  if (!counted(step)) return;
  Stats& st = range_stats(id, domain);
  st.add_use({process_, 0, tid, start, -end, seq});
  ++st.calls;
  st.total_ns += dur;
  st.self_ns += self;
}

void ConnPass::scan(const wire::FrameHeader& fh, const std::vector<uint8_t>& raw) {
  const uint32_t tid = fh.tid;
  Thread& thread = threads_[tid];
  // Only what finds the markers and start/end ranges: a range stack of candidates, the
  // names and domains, the pairing and the threads' latest times (image_end()). What
  // the following pass checks and counts is left to it.
  for_each_record(raw, [&](const wire::Record& r, const uint8_t* extra, size_t extra_bytes) {
    switch (static_cast<wire::Kind>(r.kind)) {
      case wire::Kind::kPush: {
        const int64_t ts = record_epoch_ns(conn_.hello, r.ts);
        touch(thread, ts);
        const uint64_t seq = thread.seq++;
        const int32_t cand = maybe_marker(r.name, name(r.name)) ? candidate(tid, seq, ts, r.name, r.domain, false) : -1;
        Open& o = thread.stack.emplace_back();
        o.start = ts;
        o.candidate = cand;
        o.domain = r.domain;
        break;
      }
      case wire::Kind::kPop: {
        const int64_t ts = record_epoch_ns(conn_.hello, r.ts);
        touch(thread, ts);
        auto& stack = thread.stack;
        if (stack.empty() || stack.back().domain != r.domain) break;  // unmatched, or refused by the other pass
        const int32_t cand = stack.back().candidate;
        stack.pop_back();
        if (cand >= 0) {
          candidates_[static_cast<size_t>(cand)].end = ts;
          decide(cand);
        }
        break;
      }
      case wire::Kind::kMark: {
        const int64_t ts = record_epoch_ns(conn_.hello, r.ts);
        touch(thread, ts);
        const uint64_t seq = thread.seq++;
        if (maybe_marker(r.name, name(r.name))) decide(candidate(tid, seq, ts, r.name, r.domain, true));
        break;
      }
      case wire::Kind::kString:
      case wire::Kind::kDomain:
      case wire::Kind::kThreadStart:
      case wire::Kind::kStart:
      case wire::Kind::kEnd:
        record(r, extra, extra_bytes, tid, thread);  // as a first pass reads them
        break;
      case wire::Kind::kCudaRuntime:
      case wire::Kind::kCudaDriver: {
        const int64_t start = record_epoch_ns(conn_.hello, r.ts);
        const int64_t end = std::max(start, record_epoch_ns(conn_.hello, r.a));
        touch(thread, start);
        touch(thread, end);
        break;
      }
      default:
        break;
    }
  });
}

void ConnPass::decide(int32_t index) {
  if (!ahead_) return;
  auto cannot = [this](const char* why) {
    if (scan_) throw Overtaken{why};
    ahead_ = false;  // the first pass goes on as one
  };
  const Candidate& c = candidates_[static_cast<size_t>(index)];
  // markers() names a candidate once every frame has been read: its name and its
  // domain's, written before the events that use them, must be known by now.
  if (c.id != 0 && !name(c.id).defined) return cannot("a step marker candidate is named later");
  if (c.domain != 0) {
    auto it = domains_.find(c.domain);
    if (it == domains_.end() || (it->second != 0 && !name(it->second).defined)) {
      return cannot("a step marker candidate's domain is named later");
    }
  }
  if (!marker_.matches(c.mark ? final_text(c.id) : range_name(c.id, c.domain))) return;
  if (c.mark) return cannot("a step marker is a mark");
  Step& s = scanned_steps_.emplace_back();
  s.start_ns = c.start;
  s.dur_ns = c.end - c.start;
}

void ConnPass::finish_scan() {
  // Ranges never ended end as finish() ends them.
  for (auto& [tid, thread] : threads_) {
    while (!thread.stack.empty()) {
      const Open o = thread.stack.back();
      thread.stack.pop_back();
      if (o.candidate >= 0) {
        candidates_[static_cast<size_t>(o.candidate)].end = std::max(o.start, thread.last_ts);
        decide(o.candidate);
      }
    }
  }
  finish_start_ends();
}

void ConnPass::add_step(const Step& s) {
  if (s.start_ns <= last_ts_) throw Overtaken{"a step begins before records already counted"};
  if (!own_steps_.empty() && s.start_ns <= own_steps_.back().start_ns) throw Overtaken{"steps end out of order"};
  own_steps_.push_back(s);
  locator_->extend();
}

}  // namespace torchprof::stream
