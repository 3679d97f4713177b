// The engine's pass over one connection (conn_pass.h): nn.Module calls (--with-modules),
// the pushes and pops of the Python bootstrap's "torchprof.modules" domain, kept on a
// stack of their own beside the ranges' so that no op's times change.
#include <algorithm>

#include "analysis/conn_pass.h"

namespace torchprof::engine {

bool ConnPass::is_modules_domain(uint16_t domain) {
  if (modules_domain_ >= 0) return domain == modules_domain_;
  // Until the modules domain is seen, the last other domain asked about (the ops domain,
  // pushed for every op on the dispatch-mode path) is answered without a lookup.
  if (domain == other_domain_) return false;
  if (domain_name(domain).str() != kModulesDomain) {
    other_domain_ = domain;
    return false;
  }
  modules_domain_ = domain;
  return true;
}

void ConnPass::module_push(const wire::Record& r, uint32_t tid, ThreadState& t) {
  const int64_t ts = epoch(r.ts);
  touch(t, ts);
  if (ts >= t.boundary) settle(t, tid, ts, /*inclusive=*/true);
  ++t.events;
  ModuleOpen m;
  m.start = ts;
  m.name = use(r.name).name;
  m.step = step_of(t, ts);
  m.kept = st_.kept(ts);
  m.counted = m.kept && st_.counted(m.step);
  m.id = ++st_.next_module_id;
  if (!t.modules.empty()) m.parent = t.modules.back().id;
  if (m.kept) ++st_.proc.cpu_events;
  if (st_.trace != nullptr && m.kept) {
    if (const int cycle = st_.cycle(m.step); cycle >= 0) {
      m.external_id = st_.external_id(cycle);
      if (!t.modules.empty() && st_.cycle(t.modules.back().step) == cycle) {
        m.parent_external = t.modules.back().external_id;
      }
    }
  }
  t.modules.push_back(m);
}

void ConnPass::module_pop(const wire::Record& r, uint32_t tid, ThreadState& t) {
  const int64_t ts = epoch(r.ts);
  touch(t, ts);
  if (ts >= t.boundary) settle(t, tid, ts, /*inclusive=*/false);
  if (t.modules.empty()) {
    ++losses_.unmatched_pops;
    return;
  }
  close_module(t, tid, ts, /*unterminated=*/false);
}

void ConnPass::close_module(ThreadState& t, uint32_t tid, int64_t end, bool unterminated) {
  const ModuleOpen m = t.modules.back();
  t.modules.pop_back();
  if (unterminated) ++(at_gap_ ? losses_.gap_closed : losses_.unterminated);
  if (!m.kept) return;
  const int64_t dur = end - m.start;
  const int64_t self = std::max<int64_t>(0, dur - m.children);
  if (!t.modules.empty()) t.modules.back().children += dur;
  if (m.counted) {
    st_.proc.module_calls.push_back({m.name, m.start, end, self, tid, m.step, m.id, m.parent, m.ops});
  } else {
    st_.left_out(m.step);
  }
  if (st_.wants.timeline != 0) timeline(tid, TimelineTrack::kCpu, 0, m.name, m.start, end);
  if (st_.trace == nullptr || m.external_id == 0) return;
  Event e;
  e.name = m.name;
  e.start_ns = m.start;
  e.end_ns = end;
  e.self_ns = self;
  e.tid = tid;
  e.step = m.step;
  e.kind = EventKind::kRange;
  e.unterminated = unterminated;
  EventTags tags;
  tags.domain = domain_name(static_cast<uint16_t>(modules_domain_));
  e.tags = EventTags::intern(tags);
  // enclosing_id: the Python id of the module call around it (trace_sink.h).
  st_.trace->event(e, {st_.cycle(m.step), m.external_id, m.parent_external});
}

// What is left open (a gap in the frames, the end) closes at the thread's last time.
void ConnPass::close_modules(ThreadState& t, uint32_t tid) {
  while (!t.modules.empty()) close_module(t, tid, std::max(t.modules.back().start, t.last_ts), /*unterminated=*/true);
}

}  // namespace torchprof::engine
