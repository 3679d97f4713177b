#include "analysis/stream_pass.h"

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/decode.h"

namespace torchprof::stream {

void ConnPass::range_start(const wire::Record& r, uint32_t tid, Thread& thread) {
  const int64_t ts = record_epoch_ns(conn_.hello, r.ts);
  begin_event(r, thread, ts, r.b);  // a start carries its range id in a, its attribute in b
  const uint64_t seq = thread.seq++;
  ++events_;
  if (known_start_ends_ != nullptr) {
    if (read_start_ends_ >= dealt_start_ends_) {
      if (follow_) throw Overtaken{"a start/end range is read before the scan saw its end"};
      throw Refusal{"the capture changed between passes"};
    }
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
    if (ahead_) complete_start_end(index);
  }
}

void ConnPass::range_end(const wire::Record& r, uint32_t tid, Thread& thread) {
  const int64_t ts = record_epoch_ns(conn_.hello, r.ts);
  touch(thread, ts);
  if (known_start_ends_ != nullptr) return;
  if (std::optional<uint32_t> open = pairing_.end(r.a, ts, tid)) {
    start_ends_[*open].end = ts;
    start_ends_[*open].end_tid = tid;
    if (ahead_) complete_start_end(*open);
  }
}

void ConnPass::complete_start_end(uint32_t index) {
  StartEnd& se = start_ends_[index];
  if (se.end < se.start) throw Refusal{"a start/end range ends before it starts"};
  se.taken = true;
  if (const int32_t c = start_end_candidate(se); c >= 0) decide(c);
}

int32_t ConnPass::start_end_candidate(const StartEnd& se) {
  if (!maybe_marker(se.id, name(se.id))) return -1;
  const int32_t c = candidate(se.tid, se.seq, se.start, se.id, se.domain, false);
  candidates_[static_cast<size_t>(c)].end = se.end;
  return c;
}

void ConnPass::finish_start_ends() {
  for (const auto& [id, index] : pairing_.open()) {
    StartEnd& se = start_ends_[index];
    se.end = std::max(se.start, image_end());
    ++unterminated_;
    if (ahead_) complete_start_end(index);
  }
  pairing_.clear_open();
  for (const StartEnd& se : start_ends_) {
    if (se.end < se.start) throw Refusal{"a start/end range ends before it starts"};
    if (!se.taken) start_end_candidate(se);  // else it was made when the range ended
  }
}

void ConnPass::deal_start_ends() {
  const auto& all = *known_start_ends_;
  auto before = [&all](uint32_t x, uint32_t y) {
    return all[x].start != all[y].start ? all[x].start < all[y].start : all[x].end > all[y].end;
  };
  if (!follow_) {
    for (uint32_t i = 0; i < all.size(); ++i) {
      if (all[i].end_tid == all[i].tid) threads_[all[i].tid].start_ends.push_back(i);
    }
    for (auto& [tid, thread] : threads_) std::stable_sort(thread.start_ends.begin(), thread.start_ends.end(), before);
    dealt_start_ends_ = all.size();
    return;
  }
  // Following a scan: each range joins those of its thread not yet opened, in order.
  // Its thread must not have read past its start.
  for (; dealt_start_ends_ < all.size(); ++dealt_start_ends_) {
    const auto i = static_cast<uint32_t>(dealt_start_ends_);
    const StartEnd& se = all[i];
    if (se.end_tid != se.tid) continue;
    Thread& t = threads_[se.tid];
    if (se.start <= t.last_ts) throw Overtaken{"a start/end range begins before records already counted"};
    auto at = t.start_ends.end();
    const auto first_unopened = t.start_ends.begin() + static_cast<std::ptrdiff_t>(t.next_start_end);
    while (at != first_unopened && before(i, *(at - 1))) --at;
    t.start_ends.insert(at, i);
    t.settle_at = std::min(t.settle_at, se.start);
  }
}

void ConnPass::count_start_end(const StartEnd& se, int32_t step) {
  if (!counted(step)) return;
  Stats& st = range_stats(se.id, se.domain);
  st.add_use({process_, 0, se.tid, se.start, -se.end, se.seq});
  ++st.calls;
  st.total_ns += se.end - se.start;
  st.self_ns += se.end - se.start;
}

void ConnPass::settle(Thread& t, uint32_t tid, int64_t ts) {
  if (ts <= t.start_end_passed) throw Refusal{kStartEndOverlap};
  const auto& all = *known_start_ends_;
  for (;;) {
    const StartEnd* next = t.next_start_end < t.start_ends.size() ? &all[t.start_ends[t.next_start_end]] : nullptr;
    const StartEnd* top = t.open_start_ends.empty() ? nullptr : &all[t.open_start_ends.back()];
    const int64_t open_at = next != nullptr ? next->start : kNever;
    const int64_t close_at = top != nullptr ? top->end : kNever;
    const int64_t at = std::min(open_at, close_at);
    if (at > ts || at == kNever) {
      t.settle_at = at;
      return;
    }
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

void ConnPass::settle_call(Thread& t, uint32_t tid, int64_t start, int64_t end) {
  settle(t, tid, start);
  const auto& all = *known_start_ends_;
  if (t.next_start_end < t.start_ends.size() && all[t.start_ends[t.next_start_end]].start <= end) {
    throw Refusal{kStartEndOverlap};
  }
  if (!t.open_start_ends.empty() && all[t.open_start_ends.back()].end <= end) throw Refusal{kStartEndOverlap};
}

void ConnPass::close_start_end(Thread& t, uint32_t tid) {
  if (t.stack.empty() || !t.stack.back().start_end) throw Refusal{kStartEndOverlap};
  close_top(t, tid, (*known_start_ends_)[t.open_start_ends.back()].end);
  t.open_start_ends.pop_back();
  t.calls.clear();
}

void ConnPass::open_start_end(Thread& t, uint32_t tid) {
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

}  // namespace torchprof::stream
