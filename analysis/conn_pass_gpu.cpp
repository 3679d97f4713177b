// The engine's GPU side: the CUDA API calls (from callbacks' records on their threads, or
// activity records placed among them by time), and the kernels, copies, memsets, syncs
// and device memory events each matched to the call that caused it by its correlation id.
#include <algorithm>

#include "analysis/conn_pass.h"

namespace torchprof::engine {

namespace {

// Closed API calls a thread keeps as possible children of a later one.
constexpr size_t kMaxClosedCalls = 64;

// GPU records read before their API call that a connection holds at most; past it, a
// record counts as one whose call was never recorded.
constexpr size_t kMaxWaiting = size_t{1} << 18;

}  // namespace

void ConnPass::api_call(const ApiCall& c, bool own_seq, uint32_t tid, ThreadState& t) {
  const int64_t start = c.start_ns;
  const int64_t end = c.end_ns;
  touch(t, start);
  touch(t, end);
  // Start/end ranges that end before the call returns do not hold it: they close first.
  if (end >= t.boundary) [[unlikely]]
    settle(t, tid, start, end, /*inclusive=*/false);
  NameSlot& s = use(c.name);
  const Name name = s.name;
  int32_t& api_row = s.api;
  ++t.events;
  const uint64_t seq = own_seq ? t.seq++ : t.seq;
  if (st_.proc.cuda_api.empty()) [[unlikely]]
    st_.proc.cuda_api = own_seq ? "callbacks" : "activity";
  const int32_t step = step_of(t, start);
  const bool kept = st_.kept(start);
  const bool counted = kept && st_.counted(step);
  const bool runtime = !c.driver;
  const int64_t dur = end - start;
  // The calls it holds were read before it (a driver call inside a runtime call).
  int64_t held = 0;
  while (!t.calls.empty() && t.calls.back().start >= start && t.calls.back().end <= end) {
    held += t.calls.back().end - t.calls.back().start;
    t.calls.pop_back();
  }
  if (t.calls.size() == kMaxClosedCalls) t.calls.erase(t.calls.begin());
  t.calls.push_back({start, end});
  Open* parent = parent_of(t, t.stack.size());
  if (parent != nullptr && kept) {
    parent->children += dur - held;
    ++parent->child_count;
    parent->child_same = false;
  }
  if (!kept) {
    // Outside the capture range: so is the GPU work it launched, wherever that ran.
    if (c.correlation != 0) launch(c.correlation, Launch{start, end, name, -1, step, tid, 0, false, runtime});
    return;
  }
  ++st_.proc.cpu_events;
  if (counted) {
    RowStats& row = side_row(api_row);
    row.add_use({st_.process_index, 0, tid, start, -end, seq});
    ++row.calls;
    row.total_ns += dur;
    row.self_ns += std::max<int64_t>(0, dur - held);
    if (st_.wants.records && runtime && step >= 0) st_.roles[kRoleRuntime].add(start, end);
    if (st_.wants.stats) {
      const auto index = static_cast<size_t>(api_row);
      if (api_series_.size() <= index) api_series_.resize(index + 1);
      api_series_[index].add(static_cast<double>(dur));
    }
  } else {
    st_.left_out(step);
  }
  if (st_.wants.timeline != 0) timeline(tid, TimelineTrack::kCudaApi, 2, name, start, end);
  const int cycle = st_.cycle(step);
  const uint32_t enclosing = parent != nullptr && st_.cycle(parent->step) == cycle ? parent->external_id : 0;
  if (st_.trace != nullptr && cycle >= 0) {
    Event e;
    e.name = name;
    e.start_ns = start;
    e.end_ns = end;
    e.self_ns = std::max<int64_t>(0, dur - held);
    e.correlation = c.correlation;
    e.tid = tid;
    e.step = step;
    e.kind = runtime ? EventKind::kCudaRuntime : EventKind::kCudaDriver;
    e.set_cbid(c.cbid);
    st_.trace->event(e, {cycle, 0, enclosing});
  }
  if (c.correlation != 0) launch(c.correlation, Launch{start, end, name, stack_node(t), step, tid, enclosing, kept, runtime});
}

void ConnPass::take_activity_calls(ThreadState& t, uint32_t tid, int64_t until) {
  t.draining = true;
  const std::vector<ApiCall>& calls = *t.activity;
  while (t.next_activity < calls.size() && calls[t.next_activity].end_ns <= until) {
    api_call(calls[t.next_activity++], /*own_seq=*/false, tid, t);
  }
  t.draining = false;
  update_boundary(t);
}

void ConnPass::gpu_record(const wire::Record& r, const uint8_t* extra, size_t extra_bytes, uint32_t tid) {
  const auto kind = static_cast<wire::Kind>(r.kind);
  Name text;
  if (r.name != 0 && (kind == wire::Kind::kKernel || kind == wire::Kind::kDevice || kind == wire::Kind::kGpuNotice ||
                      kind == wire::Kind::kCuptiClient)) {
    text = use(r.name).name;
  }
  if (!gpu_decoder_.decode(r, extra, extra_bytes, tid, text)) return;
  for (GpuEvent& g : gpu_decoder_.gpu_events()) gpu_event(g, r.name);
  gpu_decoder_.gpu_events().clear();
  for (MemoryEvent& m : gpu_decoder_.memory_events()) memory_event(m);
  gpu_decoder_.memory_events().clear();
}

void ConnPass::gpu_event(GpuEvent& g, uint32_t name_id) {
  st_.any_gpu = true;
  ++st_.gpu_events;
  if (g.kind == GpuKind::kSync) {
    // The writer knows only the context: kernels tell its device.
    if (auto it = context_device_.find(g.context); it != context_device_.end()) g.device = it->second;
  } else {
    context_device_.emplace(g.context, g.device);
  }
  if (g.correlation != 0) {
    if (Launch* call = launches_.find(g.correlation)) {
      matched(g, name_id, *call);
      return;
    }
    if (!launches_.maybe_forgotten(g.correlation) && waiting_count_ < kMaxWaiting) {
      Waiting& w = waiting_[g.correlation].emplace_back();
      w.gpu = g;
      w.name = name_id;
      ++waiting_count_;
      return;
    }
  }
  unmatched(g, name_id);
}

void ConnPass::memory_event(MemoryEvent& m) {
  st_.any_gpu = true;
  ++st_.gpu_events;
  if (m.correlation != 0) {
    if (Launch* call = launches_.find(m.correlation)) {
      memory_located(m, call);
      return;
    }
    if (!launches_.maybe_forgotten(m.correlation) && waiting_count_ < kMaxWaiting) {
      Waiting& w = waiting_[m.correlation].emplace_back();
      w.memory = m;
      w.is_memory = true;
      ++waiting_count_;
      return;
    }
  }
  memory_located(m, nullptr);
}

void ConnPass::memory_located(MemoryEvent& m, const Launch* call) {
  bool kept = true;
  if (call != nullptr) {
    m.step = call->step;
    m.tid = call->tid;
    kept = call->kept;
  } else {
    m.step = st_.steps.empty() ? -1 : st_.locator == nullptr ? 0 : [&] {
      ptrdiff_t cursor = 0;
      return st_.locator->step_of(m.ts_ns, cursor, /*restart=*/true);
    }();
    kept = st_.kept(m.ts_ns);
  }
  if (kept && st_.wants.records) st_.memory_events.push_back(m);
}

void ConnPass::launch(uint64_t correlation, const Launch& added) {
  if (!launches_.add(correlation, added)) return;  // the first call of an id is the one records name
  auto waiting = waiting_.find(correlation);
  if (waiting == waiting_.end()) return;
  Launch& call = *launches_.find(correlation);
  for (Waiting& w : waiting->second) {
    if (w.is_memory) {
      memory_located(w.memory, &call);
    } else {
      matched(w.gpu, w.name, call);
    }
  }
  waiting_count_ -= waiting->second.size();
  waiting_.erase(waiting);
}

void ConnPass::matched(GpuEvent& g, uint32_t name_id, Launch& call) {
  g.step = call.step;
  if (!call.kept) return;  // outside the capture range with the call that launched it
  count_gpu_row(g, name_id, call.step);
  if (g.kind != GpuKind::kSync && call.node >= 0) {
    // Self CUDA for the innermost range around the call, CUDA total for every one.
    const int64_t dur = g.dur_ns();
    const StackNode& innermost = nodes_[static_cast<size_t>(call.node)];
    if (innermost.counted) innermost.kind->stats.self_cuda_ns += dur;
    for (int32_t n = call.node; n >= 0; n = nodes_[static_cast<size_t>(n)].parent) {
      const StackNode& node = nodes_[static_cast<size_t>(n)];
      if (node.counted) node.kind->stats.cuda_total_ns += dur;
    }
  }
  emit_gpu(g, name_id, &call);
}

void ConnPass::unmatched(GpuEvent& g, uint32_t name_id) {
  if (!st_.kept(g.start_ns)) return;
  if (g.kind != GpuKind::kSync) ++st_.unmatched_gpu;
  if (st_.steps.empty()) {
    g.step = -1;
  } else if (st_.locator == nullptr) {
    g.step = 0;
  } else {
    ptrdiff_t cursor = 0;
    g.step = st_.locator->step_of(g.start_ns, cursor, /*restart=*/true);
  }
  count_gpu_row(g, name_id, g.step);
  emit_gpu(g, name_id, nullptr);
}

void ConnPass::count_gpu_row(const GpuEvent& g, uint32_t name_id, int32_t step) {
  if (g.kind == GpuKind::kSync) return;
  if (!st_.counted(step)) {
    st_.left_out(step);
    return;
  }
  RowStats* row = nullptr;
  if (g.kind == GpuKind::kKernel) {
    row = &side_row(slot(name_id).kernel);
  } else {
    auto [it, fresh] = copy_index_.try_emplace(g.name.id(), static_cast<int32_t>(copy_rows_.size()));
    if (fresh) copy_rows_.push_back({g.kind == GpuKind::kMemcpy ? "memcpy" : "memset", g.name, RowStats{}});
    row = &copy_rows_[static_cast<size_t>(it->second)].stats;
  }
  row->add_use({st_.process_index, 1, 0, g.start_ns, 0, gpu_seq_++});
  ++row->calls;
  row->self_cuda_ns += g.dur_ns();
  row->cuda_total_ns += g.dur_ns();
}

void ConnPass::emit_gpu(GpuEvent& g, uint32_t /*name_id*/, Launch* call) {
  if (st_.wants.records) {
    GpuRecord& rec = st_.gpu_records.emplace_back();
    rec.start_ns = g.start_ns;
    rec.end_ns = g.end_ns;
    rec.bytes = g.bytes;
    rec.name = g.name;
    rec.device = g.device;
    rec.stream = g.stream;
    rec.step = g.step;
    rec.sync_type = g.sync_type;
    rec.kind = g.kind;
    rec.copy_kind = g.copy_kind;
    rec.src_kind = g.src_kind;
    rec.dst_kind = g.dst_kind;
    if (call != nullptr) {
      rec.api_known = true;
      rec.api_start_ns = call->start_ns;
      rec.api_end_ns = call->end_ns;
      rec.api_name = call->name;
      rec.api_runtime = call->runtime;
      rec.api_tid = call->tid;
    }
  }
  if (st_.wants.timeline != 0) {
    TimelineSlice s;
    s.pid = st_.proc.pid;
    s.track = static_cast<uint8_t>(TimelineTrack::kGpu);
    s.category = static_cast<uint8_t>(3 + static_cast<int>(g.kind));
    s.id = g.device;
    s.stream = g.stream;
    s.name = g.name;
    s.start_ns = g.start_ns;
    s.dur_ns = std::max<int64_t>(0, g.end_ns - g.start_ns);
    st_.slices.offer(s);
  }
  if (st_.trace == nullptr) return;
  const int cycle = st_.cycle(g.step);
  if (cycle < 0) return;
  LaunchIds ids;
  if (call != nullptr) {
    ids = {true, !call->flowed && g.kind != GpuKind::kSync, call->tid, call->start_ns, call->enclosing_id};
    if (g.kind != GpuKind::kSync) call->flowed = true;
  }
  const GpuDevice* device = nullptr;
  for (const GpuDevice& d : scratch_.devices) {
    if (d.id == g.device) device = &d;
  }
  st_.trace->gpu(g, cycle, ids, device);
}

}  // namespace torchprof::engine
