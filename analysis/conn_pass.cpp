#include "analysis/conn_pass.h"

#include <algorithm>
#include <cstring>
#include <tuple>
#include <utility>

#include "analysis/capture_range.h"
#include "reading/frame_decode.h"

namespace torchprof::engine {

namespace {

// Start/end ranges opened by settle() sort after every record of their thread that has
// the same start, end and thread (FirstUse's last tie-break).
constexpr uint64_t kStartEndSeq = uint64_t{1} << 62;

}  // namespace

bool ProcessState::kept(int64_t t) const { return windows == nullptr || inside_windows(*windows, t); }

void LongestSlices::prune() {
  if (kept_.size() <= limit_) return;
  auto longer = [](const TimelineSlice& a, const TimelineSlice& b) {
    return std::make_tuple(b.dur_ns, a.start_ns, a.pid, a.track, a.id, a.stream, a.category) <
               std::make_tuple(a.dur_ns, b.start_ns, b.pid, b.track, b.id, b.stream, b.category) ||
           (std::make_tuple(b.dur_ns, a.start_ns, a.pid, a.track, a.id, a.stream, a.category) ==
                std::make_tuple(a.dur_ns, b.start_ns, b.pid, b.track, b.id, b.stream, b.category) &&
            a.name.str() < b.name.str());
  };
  std::nth_element(kept_.begin(), kept_.begin() + static_cast<std::ptrdiff_t>(limit_), kept_.end(), longer);
  kept_.resize(limit_);
  // The shortest kept (the latest of the shortest): a slice below it cannot get in.
  floor_ = kept_.front().dur_ns;
  floor_start_ = kept_.front().start_ns;
  for (const TimelineSlice& s : kept_) {
    if (s.dur_ns < floor_ || (s.dur_ns == floor_ && s.start_ns > floor_start_)) {
      floor_ = s.dur_ns;
      floor_start_ = s.start_ns;
    }
  }
}

ConnPass::ConnPass(const ConnInput& conn, ProcessState& state, const ConnScan* scan)
    : conn_(conn),
      st_(state),
      scan_(scan),
      gpu_decoder_(scratch_, static_cast<int64_t>(conn.hello.real_ns - conn.hello.mono_ns)) {
  if (scan_ == nullptr) return;
  context_device_ = scan_->context_device;
  for (uint32_t i = 0; i < scan_->start_ends.size(); ++i) {
    const StartEndRange& se = scan_->start_ends[i];
    if (se.on_thread()) threads_[se.tid].start_ends.push_back(i);
  }
  for (const auto& [tid, calls] : scan_->activity_calls) threads_[tid].activity = &calls;
  for (auto& [tid, t] : threads_) {
    // Interval nesting's order: by start, the longer first, then as read.
    std::stable_sort(t.start_ends.begin(), t.start_ends.end(), [&](uint32_t x, uint32_t y) {
      const StartEndRange& a = scan_->start_ends[x];
      const StartEndRange& b = scan_->start_ends[y];
      return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
    });
    update_boundary(t);
  }
}

// ---- records ----------------------------------------------------------------------

void ConnPass::frame(const wire::FrameHeader& fh, const std::vector<uint8_t>& raw) {
  ThreadState& t = fh.tid == last_tid_ && last_thread_ != nullptr ? *last_thread_ : threads_[fh.tid];
  last_thread_ = &t;
  last_tid_ = fh.tid;
  if (fh.seq > t.next_frame) [[unlikely]] {
    losses_.lost_frames += fh.seq - t.next_frame;
    close_across_gap(t, fh.tid);
  }
  t.next_frame = fh.seq + 1;
  last_open_ = nullptr;  // a kPayload belongs to the record before it in the same frame
  const bool whole = for_each_record(raw, [&](const wire::Record& r, const uint8_t* extra, size_t extra_bytes) {
    record(r, extra, extra_bytes, fh.tid, t);
  });
  flush_mark();
  last_open_ = nullptr;
  if (!whole) ++losses_.cut_records;
}

// Frames of this thread are missing before the one read now: the pops of the ranges it
// has open may have been in them, and a pop after the gap would close the wrong range.
// They close at the thread's last time before the gap, counted apart from ranges never
// ended; a pop after the gap whose push was lost is counted as unmatched.
void ConnPass::close_across_gap(ThreadState& t, uint32_t tid) {
  at_gap_ = true;
  for (size_t pos = t.stack.size(); pos-- > 0;) {
    if (t.stack[pos].start_end != kNone) continue;  // paired by the first pass, over all frames
    close(t, tid, pos, std::max(t.stack[pos].start, t.last_ts), /*unterminated=*/true);
  }
  close_modules(t, tid);
  at_gap_ = false;
  t.calls.clear();
}

[[gnu::always_inline]] inline void ConnPass::record(const wire::Record& r, const uint8_t* extra, size_t extra_bytes, uint32_t tid,
                      ThreadState& t) {
  const auto kind = static_cast<wire::Kind>(r.kind);
  if (kind == wire::Kind::kPayload) {
    if (mark_pending_) {
      pending_mark_.attr = r.a;
      pending_mark_.payload = r.b;
    } else if (last_open_ != nullptr) {
      last_open_->attr = r.a;
      last_open_->payload = r.b;
    }
    flush_mark();
    last_open_ = nullptr;
    return;
  }
  flush_mark();
  last_open_ = nullptr;
  switch (kind) {
    case wire::Kind::kPush:
      if (r.domain != 0 && is_modules_domain(r.domain)) [[unlikely]] {
        module_push(r, tid, t);
        return;
      }
      push(r, tid, t);
      return;
    case wire::Kind::kPop:
      if (r.domain != 0 && is_modules_domain(r.domain)) [[unlikely]] {
        module_pop(r, tid, t);
        return;
      }
      pop(r, tid, t);
      return;
    case wire::Kind::kOpEnd: pop(r, tid, t); return;
    case wire::Kind::kOpBegin:
      push(r, tid, t);
      t.stack.back().op_call = true;  // attr: the op word, payload: the RecordFunction handle
      return;
    case wire::Kind::kMark: mark(r, tid, t); return;
    case wire::Kind::kCudaRuntime:
    case wire::Kind::kCudaDriver: {
      const int64_t start = epoch(r.ts);
      api_call(ApiCall{start, std::max(start, epoch(r.a)), r.b, r.name, r.domain, kind == wire::Kind::kCudaDriver},
               /*own_seq=*/true, tid, t);
      return;
    }
    case wire::Kind::kCudaApiActivity:
      // Taken on the calling thread, among its records by time (take_activity_calls).
      if (scan_ == nullptr) throw NeedsScan{"API calls from activity records go where the first pass placed them"};
      return;
    case wire::Kind::kString:
    case wire::Kind::kDomain:
    case wire::Kind::kCategory: define(r, extra, extra_bytes); return;
    case wire::Kind::kStart: start_record(r, tid, t); return;
    case wire::Kind::kEnd: touch(t, epoch(r.ts)); return;
    case wire::Kind::kTensorAlloc:
    case wire::Kind::kTensorFree: tensor_memory(r, extra, extra_bytes, tid, t); return;
    case wire::Kind::kAllocatorStats: allocator_stats(r); return;
    case wire::Kind::kRecovered:
      scratch_.recovered = true;
      scratch_.recovered_events += r.a;
      scratch_.unrecovered_slots += r.b;
      return;
    default: break;
  }
  if (r.kind >= static_cast<uint8_t>(wire::Kind::kKernel)) {
    gpu_record(r, extra, extra_bytes, tid);
    return;
  }
  thread_record(r, tid, t);
}

void ConnPass::thread_record(const wire::Record& r, uint32_t tid, ThreadState& t) {
  switch (static_cast<wire::Kind>(r.kind)) {
    case wire::Kind::kThreadName: {
      const uint32_t named = r.a != 0 ? static_cast<uint32_t>(r.a) : tid;
      const bool from_os = r.b == 1;  // ThreadNameSource: NVTX names win over the OS's
      ThreadState& target = named == tid ? t : threads_[named];
      if (from_os && target.nvtx_named) break;
      if (!from_os) target.nvtx_named = true;
      const std::string text = use(r.name).text;
      thread_info(named).name = text;
      break;
    }
    case wire::Kind::kThreadStart:
      touch(t, epoch(r.ts));
      thread_info(tid).is_main = r.a == 1;
      break;
    case wire::Kind::kDropped: t.dropped = std::max(t.dropped, r.a); break;
    case wire::Kind::kBufferUsage:
    case wire::Kind::kBufferRefused: buffers_.take(r, conn_.hello); break;
    case wire::Kind::kCaptureWindow:
      if (scan_ == nullptr) throw NeedsScan{"on-demand capture windows decide the steps"};
      break;  // the first pass read it
    default: break;  // kPad, kinds newer than this reader
  }
}

[[gnu::always_inline]] inline void ConnPass::push(const wire::Record& r, uint32_t tid, ThreadState& t) {
  const int64_t ts = epoch(r.ts);
  touch(t, ts);
  if (ts >= t.boundary) [[unlikely]]
    settle(t, tid, ts, /*inclusive=*/true);
  t.calls.clear();
  use(r.name);
  RangeKind& kind = range_kind(r.name, r.domain);
  ++t.events;
  Open& o = t.stack.emplace_back();
  o.start = ts;
  o.seq = t.seq++;
  o.attr = r.a;
  o.payload = r.b;
  o.kind = &kind;
  o.slot = r.name;
  o.step = step_of(t, ts);
  o.domain = r.domain;
  o.kept = st_.kept(ts);
  o.counted = o.kept && st_.counted(o.step);
  if (o.kept) ++st_.proc.cpu_events;
  if (st_.trace != nullptr && o.kept) {
    if (const int cycle = st_.cycle(o.step); cycle >= 0) o.external_id = st_.external_id(cycle);
  }
  last_open_ = &o;
}

[[gnu::always_inline]] inline void ConnPass::pop(const wire::Record& r, uint32_t tid, ThreadState& t) {
  const int64_t ts = epoch(r.ts);
  touch(t, ts);
  if (ts >= t.boundary) [[unlikely]]
    settle(t, tid, ts, /*inclusive=*/false);
  auto& stack = t.stack;
  size_t pos = stack.size();
  while (pos > 0 && (stack[pos - 1].start_end != kNone || stack[pos - 1].domain != r.domain)) --pos;
  if (pos == 0) {
    ++losses_.unmatched_pops;
    return;
  }
  --pos;
  // Start/end ranges above it that end now lie inside it: they close first.
  for (size_t i = stack.size(); i-- > pos + 1;) {
    if (stack[i].start_end != kNone && scan_->start_ends[stack[i].start_end].end_ns <= ts) {
      const StartEndRange& se = scan_->start_ends[stack[i].start_end];
      close(t, tid, i, se.end_ns, !se.ended);
    }
  }
  close(t, tid, pos, ts);
  t.calls.clear();
  if (t.start_ends.size() > 0) update_boundary(t);
}

void ConnPass::mark(const wire::Record& r, uint32_t tid, ThreadState& t) {
  const int64_t ts = epoch(r.ts);
  touch(t, ts);
  if (ts >= t.boundary) [[unlikely]]
    settle(t, tid, ts, /*inclusive=*/false);
  if (st_.marker.matches(use(r.name).text) && scan_ == nullptr) throw NeedsScan{"a mark is a step marker"};
  ++t.events;
  Open& m = pending_mark_;
  m = Open{};
  m.start = ts;
  m.seq = t.seq++;
  m.attr = r.a;
  m.payload = r.b;
  m.slot = r.name;
  m.domain = r.domain;
  m.step = step_of(t, ts);
  m.kept = st_.kept(ts);
  m.counted = m.kept && st_.counted(m.step);
  if (m.kept) ++st_.proc.cpu_events;
  if (st_.trace != nullptr && m.kept) {
    if (const int cycle = st_.cycle(m.step); cycle >= 0) m.external_id = st_.external_id(cycle);
  }
  pending_mark_tid_ = tid;
  mark_pending_ = true;
}

[[gnu::always_inline]] inline void ConnPass::flush_mark() {
  if (!mark_pending_) return;
  mark_pending_ = false;
  const Open& m = pending_mark_;
  if (!m.kept) return;
  const Name name = slot(m.slot).name;
  if (st_.wants.timeline != 0) timeline(pending_mark_tid_, TimelineTrack::kCpu, 1, name, m.start, m.start);
  if (st_.trace == nullptr || m.external_id == 0) return;
  Event e;
  e.name = name;
  e.start_ns = e.end_ns = m.start;
  e.payload = m.payload;
  e.tid = pending_mark_tid_;
  e.step = m.step;
  e.kind = EventKind::kMark;
  e.payload_type = static_cast<uint8_t>(wire::attr_payload_type(m.attr));
  EventTags tags;
  tags.domain = domain_name(m.domain);
  tags.category = wire::attr_category(m.attr);
  if (tags.category != 0) tags.category_name = category_name(m.domain, tags.category);
  e.tags = EventTags::intern(tags);
  st_.trace->event(e, {st_.cycle(m.step), m.external_id, 0});
}

void ConnPass::start_record(const wire::Record& r, uint32_t tid, ThreadState& t) {
  if (scan_ == nullptr) throw NeedsScan{"start/end ranges nest by what the first pass paired"};
  const int64_t ts = epoch(r.ts);
  touch(t, ts);
  if (ts >= t.boundary) settle(t, tid, ts, /*inclusive=*/true);
  ++t.events;
  ++t.seq;
  if (start_ends_read_ >= scan_->start_ends.size()) return;  // not as the first pass read it
  const StartEndRange& se = scan_->start_ends[start_ends_read_++];
  if (!se.on_thread()) start_end_off_thread(se);
}

// ---- ranges --------------------------------------------------------------------------

// A PyTorch op range (the op observer's, or an op message's).
inline bool is_op(const Open& o) { return o.op_call || o.kind->op != nullptr; }

[[gnu::always_inline]] inline void ConnPass::close(ThreadState& t, uint32_t tid, size_t pos, int64_t end,
                                                   bool unterminated) {
  if (pos + 1 == t.stack.size()) [[likely]] {
    closed(t, tid, t.stack.back(), pos, end, unterminated);
    t.stack.pop_back();
    return;
  }
  const Open o = t.stack[pos];
  t.stack.erase(t.stack.begin() + static_cast<std::ptrdiff_t>(pos));
  // The ranges that were above it now sit on a shorter path: their stack nodes change.
  for (size_t i = pos; i < t.stack.size(); ++i) t.stack[i].node = -1;
  closed(t, tid, o, pos, end, unterminated);
}

[[gnu::always_inline]] inline void ConnPass::closed(ThreadState& t, uint32_t tid, const Open& o, size_t pos,
                                                    int64_t end, bool unterminated) {
  if (unterminated) [[unlikely]]
    ++(at_gap_ ? losses_.gap_closed : losses_.unterminated);
  if (!o.kept) return;
  const int64_t dur = end - o.start;
  const int64_t self = std::max<int64_t>(0, dur - o.children);
  Open* parent = parent_of(t, pos);
  if (!t.modules.empty() && o.counted && is_op(o)) [[unlikely]] {
    // An op directly inside the innermost module call: no op around it began in the call.
    ModuleOpen& m = t.modules.back();
    if (o.start >= m.start && (parent == nullptr || parent->start < m.start)) {
      ++m.ops;
      m.children += dur;
    }
  }
  if (parent != nullptr) {
    parent->children += dur;
    parent->mem_total[0] += o.mem_total[0];
    parent->mem_total[1] += o.mem_total[1];
    ++parent->child_count;
    parent->child_same = o.counted && is_op(o) && is_op(*parent) &&
                         (parent->kind == o.kind || parent->kind->shown == o.kind->shown);
    if (parent->child_same) [[unlikely]] {
      parent->child_kind = o.kind;
      parent->child_dur = dur;
      parent->child_self = self;
      for (int d = 0; d < 2; ++d) {
        parent->child_mem_self[d] = o.mem_self[d];
        parent->child_mem[d] = o.mem_total[d];
      }
    }
  }
  if (o.counted) {
    RowStats& s = o.kind->stats;
    s.add_use({st_.process_index, 0, tid, o.start, -end, o.seq});
    ++s.calls;
    s.total_ns += dur;
    s.self_ns += self;
    for (int d = 0; d < 2; ++d) {
      s.mem_self[d] += o.mem_self[d];
      s.mem_total[d] += o.mem_total[d];
    }
    if (o.child_same && o.child_count == 1) [[unlikely]] {
      // Its only child is the same op again (aten::div calling aten::div): torch's table
      // shows one call, with the child's self time and memory as its own.
      RowStats& c = o.child_kind->stats;
      --c.calls;
      c.total_ns -= o.child_dur;
      c.self_ns -= o.child_self;
      s.self_ns += o.child_self;
      for (int d = 0; d < 2; ++d) {
        c.mem_total[d] -= o.child_mem[d];
        c.mem_self[d] -= o.child_mem_self[d];
        s.mem_self[d] += o.child_mem_self[d];
      }
    }
  } else {
    st_.left_out(o.step);
  }
  emit_range(o, tid, end, self, unterminated, tid);
}

void ConnPass::update_boundary(ThreadState& t) {
  int64_t next = t.next_start_end < t.start_ends.size() ? scan_->start_ends[t.start_ends[t.next_start_end]].start_ns
                                                         : kNever;
  if (t.activity != nullptr && t.next_activity < t.activity->size()) {
    next = std::min(next, (*t.activity)[t.next_activity].end_ns);
  }
  for (const Open& o : t.stack) {
    if (o.start_end != kNone) next = std::min(next, scan_->start_ends[o.start_end].end_ns);
  }
  t.boundary = next;
}

void ConnPass::settle(ThreadState& t, uint32_t tid, int64_t ts, bool inclusive) {
  settle(t, tid, ts, ts, inclusive);
}

void ConnPass::settle(ThreadState& t, uint32_t tid, int64_t open_until, int64_t close_until, bool inclusive) {
  if (scan_ == nullptr) return;
  if (t.activity != nullptr && !t.draining) take_activity_calls(t, tid, open_until);
  const int64_t ts = open_until;
  while (true) {
    // The open start/end range that ends first (the innermost on ties).
    size_t close_pos = t.stack.size();
    int64_t close_at = kNever;
    for (size_t i = t.stack.size(); i-- > 0;) {
      const Open& o = t.stack[i];
      if (o.start_end == kNone) continue;
      const int64_t end = scan_->start_ends[o.start_end].end_ns;
      if (end < close_at) {
        close_at = end;
        close_pos = i;
      }
    }
    const int64_t open_at = t.next_start_end < t.start_ends.size()
                                ? scan_->start_ends[t.start_ends[t.next_start_end]].start_ns
                                : kNever;
    const bool due = inclusive ? close_at <= close_until : close_at < close_until;
    if (close_pos < t.stack.size() && due && close_at <= open_at) {
      const StartEndRange& se = scan_->start_ends[t.stack[close_pos].start_end];
      close(t, tid, close_pos, se.end_ns, !se.ended);
      continue;
    }
    if (open_at > ts || open_at == kNever) break;
    const uint32_t index = t.start_ends[t.next_start_end++];
    const StartEndRange& se = scan_->start_ends[index];
    use(se.name);
    RangeKind& kind = range_kind(se.name, se.domain);
    Open& o = t.stack.emplace_back();
    o.start = se.start_ns;
    o.seq = kStartEndSeq + index;
    o.attr = se.attr;
    o.payload = se.payload;
    o.kind = &kind;
    o.slot = se.name;
    o.step = step_of(t, se.start_ns);
    o.start_end = index;
    o.domain = se.domain;
    o.kept = st_.kept(se.start_ns);
    o.counted = o.kept && st_.counted(o.step);
    if (o.kept) ++st_.proc.cpu_events;
    if (st_.trace != nullptr && o.kept) {
      if (const int cycle = st_.cycle(o.step); cycle >= 0) o.external_id = st_.external_id(cycle);
    }
  }
  update_boundary(t);
}

// A start/end range ended by another thread is no interval of its thread: it neither
// holds nor is held by the thread's ranges.
void ConnPass::start_end_off_thread(const StartEndRange& se) {
  ThreadState& t = threads_[se.tid];
  Open o;
  o.start = se.start_ns;
  o.seq = kStartEndSeq + start_ends_read_;
  o.attr = se.attr;
  o.payload = se.payload;
  use(se.name);
  o.kind = &range_kind(se.name, se.domain);
  o.slot = se.name;
  o.step = step_of(t, se.start_ns);
  o.start_end = start_ends_read_ - 1;
  o.domain = se.domain;
  o.kept = st_.kept(se.start_ns);
  o.counted = o.kept && st_.counted(o.step);
  if (!o.kept) return;
  ++st_.proc.cpu_events;
  if (st_.trace != nullptr) {
    if (const int cycle = st_.cycle(o.step); cycle >= 0) o.external_id = st_.external_id(cycle);
  }
  const int64_t dur = se.end_ns - se.start_ns;
  if (o.counted) {
    RowStats& s = o.kind->stats;
    s.add_use({st_.process_index, 0, se.tid, o.start, -se.end_ns, o.seq});
    ++s.calls;
    s.total_ns += dur;
    s.self_ns += dur;
  } else {
    st_.left_out(o.step);
  }
  if (!se.ended) ++losses_.unterminated;
  emit_range(o, se.tid, se.end_ns, dur, !se.ended, se.end_tid);
}

int32_t ConnPass::stack_node(ThreadState& t) {
  int32_t parent = -1;
  for (Open& o : t.stack) {
    if (!o.kept) continue;
    if (o.node < 0) {
      const StackNode node{parent, o.kind, o.counted};
      auto [it, fresh] = node_index_.try_emplace(node, static_cast<int32_t>(nodes_.size()));
      if (fresh) nodes_.push_back(node);
      o.node = it->second;
    }
    parent = o.node;
  }
  return parent;
}

// ---- outputs -------------------------------------------------------------------------

void ConnPass::timeline(uint32_t tid, TimelineTrack track, uint8_t category, Name name, int64_t start, int64_t end) {
  TimelineSlice s;
  s.pid = st_.proc.pid;
  s.track = static_cast<uint8_t>(track);
  s.category = category;
  s.id = tid;
  s.name = name;
  s.start_ns = start;
  s.dur_ns = std::max<int64_t>(0, end - start);
  st_.slices.offer(s);
}

[[gnu::always_inline]] inline void ConnPass::emit_range(const Open& o, uint32_t tid, int64_t end, int64_t self, bool unterminated,
                          uint32_t end_tid) {
  const RangeKind& k = *o.kind;
  if (o.counted) {
    // The overview's step time breakdown: what the steps hold.
    if (st_.wants.records && k.role <= kRoleCpuExec && o.step >= 0) st_.roles[k.role].add(o.start, end);
    if (st_.wants.stats) {
      RangeKind& mutable_kind = *o.kind;
      if (mutable_kind.series < 0) {
        mutable_kind.series = static_cast<int32_t>(range_series_.size());
        range_series_.emplace_back(k.shown, Series());
      }
      range_series_[static_cast<size_t>(mutable_kind.series)].second.add(static_cast<double>(end - o.start));
    }
    if (st_.wants.folded && k.op != nullptr && !k.op->stack.empty()) o.kind->folded_ns += self;
    if (k.collective >= 0) {
      st_.proc.collectives.push_back(
          {k.shown, o.start, end, k.coll_in_elems, static_cast<CollectiveSource>(k.collective)});
    }
  }
  if (st_.wants.timeline != 0) timeline(tid, TimelineTrack::kCpu, 0, k.shown, o.start, end);
  if (st_.trace != nullptr && o.external_id != 0) {
    st_.trace->event(event_of(o, tid, end, self, unterminated, end_tid), {st_.cycle(o.step), o.external_id, 0});
  }
}

Event ConnPass::event_of(const Open& o, uint32_t tid, int64_t end, int64_t self, bool unterminated,
                         uint32_t end_tid) {
  Event e;
  e.name = o.kind->shown;
  e.start_ns = o.start;
  e.end_ns = end;
  e.self_ns = self;
  e.payload = o.payload;
  e.tid = tid;
  e.step = o.step;
  e.kind = EventKind::kRange;
  if (o.op_call) {
    e.op_call = true;
    e.op_word = o.attr;
  } else {
    e.payload_type = static_cast<uint8_t>(wire::attr_payload_type(o.attr));
  }
  e.push_pop = o.start_end == kNone;
  e.unterminated = unterminated;
  EventTags tags;
  tags.domain = domain_name(o.domain);
  tags.category = o.op_call ? 0 : wire::attr_category(o.attr);
  if (tags.category != 0) tags.category_name = category_name(o.domain, tags.category);
  tags.op = o.kind->op;
  tags.end_tid = end_tid == tid ? EventTags::kSameThread : end_tid;
  e.tags = EventTags::intern(tags);
  return e;
}

ThreadInfo& ConnPass::thread_info(uint32_t tid) {
  for (ThreadInfo& t : st_.proc.threads) {
    if (t.tid == tid) return t;
  }
  ThreadInfo& t = st_.proc.threads.emplace_back();
  t.tid = tid;
  return t;
}

int64_t ConnPass::image_end() const {
  int64_t end = last_ts_;
  if (conn_.bye && conn_.bye->mono_ns != 0) end = std::max(end, epoch(conn_.bye->mono_ns));
  return end;
}

// ---- the end -------------------------------------------------------------------------

// What is left open at the end closes in the order of its ends, the innermost first on
// ties: ranges never ended at their thread's last time, start/end ranges at their ends
// (never ended: the image's end); start/end ranges not opened yet open in their turn.
void ConnPass::close_all(ThreadState& t, uint32_t tid) {
  auto end_of = [&](const Open& o) {
    return o.start_end != kNone ? scan_->start_ends[o.start_end].end_ns : std::max(o.start, t.last_ts);
  };
  while (true) {
    size_t pos = t.stack.size();
    int64_t first_end = kNever;
    for (size_t i = t.stack.size(); i-- > 0;) {
      if (const int64_t end = end_of(t.stack[i]); end < first_end) {
        first_end = end;
        pos = i;
      }
    }
    const int64_t next_open = t.next_start_end < t.start_ends.size()
                                  ? scan_->start_ends[t.start_ends[t.next_start_end]].start_ns
                                  : kNever;
    if (pos < t.stack.size() && first_end <= next_open) {
      const Open& o = t.stack[pos];
      const bool unended = o.start_end == kNone || !scan_->start_ends[o.start_end].ended;
      close(t, tid, pos, first_end, unended);
      continue;
    }
    if (next_open == kNever) break;
    settle(t, tid, next_open, kLongAgo, /*inclusive=*/false);  // opens the next one only
  }
}

void ConnPass::finish() {
  flush_mark();
  for (auto& [tid, t] : threads_) {
    if (t.activity != nullptr) take_activity_calls(t, tid, kNever);
    close_all(t, tid);
    close_modules(t, tid);
  }
  for (auto& [correlation, records] : waiting_) {
    for (Waiting& w : records) {
      if (w.is_memory) {
        memory_located(w.memory, nullptr);
      } else {
        unmatched(w.gpu, w.name);
      }
    }
  }
  waiting_.clear();
  gpu_decoder_.finish();
  Process& proc = st_.proc;
  // What the GPU decoder put aside: devices, notices, drops, tracing state, warnings.
  for (const GpuDevice& d : scratch_.devices) {
    auto found = std::find_if(proc.devices.begin(), proc.devices.end(), [&](const GpuDevice& x) { return x.id == d.id; });
    if (found == proc.devices.end()) {
      proc.devices.push_back(d);
    } else {
      *found = d;
    }
  }
  std::sort(proc.devices.begin(), proc.devices.end(), [](const GpuDevice& x, const GpuDevice& y) { return x.id < y.id; });
  for (const std::string& n : scratch_.gpu_notices) {
    if (std::find(proc.gpu_notices.begin(), proc.gpu_notices.end(), n) == proc.gpu_notices.end()) {
      proc.gpu_notices.push_back(n);
    }
  }
  for (const Process::CuptiClient& c : scratch_.cupti_clients) {
    auto same = std::find_if(proc.cupti_clients.begin(), proc.cupti_clients.end(),
                             [&](const Process::CuptiClient& x) { return x.library == c.library && x.path == c.path; });
    if (same == proc.cupti_clients.end()) {
      proc.cupti_clients.push_back(c);
    } else {
      same->subscribes = std::max(same->subscribes, c.subscribes);
    }
  }
  proc.cupti_dropped = std::max(proc.cupti_dropped, scratch_.cupti_dropped);
  proc.gpu_incomplete += scratch_.gpu_incomplete;
  proc.gpu_unreadable_buffers = std::max(proc.gpu_unreadable_buffers, scratch_.gpu_unreadable_buffers);
  proc.gpu_unreadable_bytes = std::max(proc.gpu_unreadable_bytes, scratch_.gpu_unreadable_bytes);
  proc.recovered = proc.recovered || scratch_.recovered;
  proc.recovered_events += scratch_.recovered_events;
  proc.unrecovered_slots += scratch_.unrecovered_slots;
  if (!scratch_.gpu_tracing.empty()) proc.gpu_tracing = scratch_.gpu_tracing;
  if (scan_ == nullptr) {
    proc.profiler_toggles.insert(proc.profiler_toggles.end(), scratch_.profiler_toggles.begin(),
                                 scratch_.profiler_toggles.end());
  }
  proc.warnings.insert(proc.warnings.end(), scratch_.warnings.begin(), scratch_.warnings.end());
  uint64_t thread_dropped = 0;
  for (auto& [tid, t] : threads_) {
    thread_dropped += t.dropped;
    if (t.events == 0 && t.dropped == 0) continue;
    ThreadInfo& info = thread_info(tid);
    info.events += t.events;
    info.dropped += t.dropped;
  }
  proc.dropped += std::max<uint64_t>(conn_.bye ? conn_.bye->dropped : 0, thread_dropped);
  buffers_.apply(proc);
  int64_t first = first_ts_;
  int64_t last = image_end();
  if (gpu_decoder_.any()) {
    first = std::min(first, gpu_decoder_.first_ns());
    last = std::max(last, gpu_decoder_.last_ns());
  }
  if (first != kNever) proc.start_ns = proc.start_ns == 0 ? first : std::min(proc.start_ns, first);
  if (last_ts_ != kLongAgo || conn_.bye) proc.end_ns = std::max(proc.end_ns, last);
  losses_.pending_ends = scan_ != nullptr ? scan_->waiting_ends : 0;
  add_decode_warnings(conn_, losses_, proc);
  add_rows();
}

void ConnPass::add_rows() {
  Rows& rows = st_.rows;
  const bool shapes = st_.options.group_by_input_shape;
  auto add_range = [&](const RangeKind& k) {
    if (k.op != nullptr) {
      OpStats row = op_row(*k.op, shapes, st_.options.group_by_stack_n);
      row.name = k.row_name.str();
      row.flops = k.op->flops * k.stats.calls;
      rows.add(std::move(row), k.stats);
    } else {
      rows.add("nvtx", k.row_name.str(), k.stats);
    }
  };
  auto add_slot = [&](const NameSlot& s) {
    if (!s.used) return;
    if (s.range != nullptr) add_range(*s.range);
    if (s.api >= 0) rows.add("cuda_api", step_row_name(s.name).str(), side_rows_[static_cast<size_t>(s.api)]);
    if (s.kernel >= 0) rows.add("kernel", demangle(s.text), side_rows_[static_cast<size_t>(s.kernel)], s.text);
  };
  for (const NameSlot& s : slots_) add_slot(s);
  for (const NameSlot& s : extra_slots_) add_slot(s);
  for (const auto& [key, kind] : domain_kinds_) add_range(*kind);
  for (const CopyRow& row : copy_rows_) rows.add(row.kind, row.name.str(), row.stats);
  // --stats and stacks.folded, by name.
  for (auto& [name, series] : range_series_) st_.stats.ranges[name.str()].merge(series);
  auto api_series = [&](const NameSlot& s) {
    if (s.used && s.api >= 0 && static_cast<size_t>(s.api) < api_series_.size()) {
      st_.stats.api[s.text].merge(api_series_[static_cast<size_t>(s.api)]);
    }
  };
  for (const NameSlot& s : slots_) api_series(s);
  for (const NameSlot& s : extra_slots_) api_series(s);
  for (const RangeKind& k : kinds_) {
    if (k.folded_ns == 0 || k.op == nullptr) continue;
    std::string key;
    for (auto frame = k.op->stack.rbegin(); frame != k.op->stack.rend(); ++frame) {
      key += *frame;
      key += ';';
    }
    key += k.shown.str();
    st_.folded[key] += k.folded_ns;
  }
}

}  // namespace torchprof::engine
