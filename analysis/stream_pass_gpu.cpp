#include "analysis/stream_pass.h"

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/decode.h"

namespace torchprof::stream {

void ConnPass::api_call(const wire::Record& r, uint32_t tid, Thread& thread) {
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
  if (end > thread.last_close_ts) {
    thread.last_close_ts = end;
    thread.empty_closed = false;
  }
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

int32_t ConnPass::stack_node(Thread& thread) {
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

void ConnPass::launch(uint64_t correlation, const Launch& call) {
  if (launches_.maybe_forgotten(correlation)) throw Refusal{"an API call came long after the ones around it"};
  if (!launches_.add(correlation, call)) throw Refusal{"two API calls share a correlation id"};
  auto waiting = waiting_gpu_.find(correlation);
  if (waiting == waiting_gpu_.end()) return;
  for (const GpuUse& use : waiting->second) matched(use, call);
  waiting_gpu_count_ -= waiting->second.size();
  waiting_gpu_.erase(waiting);
}

void ConnPass::gpu_record(const wire::Record& r, const uint8_t* extra, size_t extra_bytes) {
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

void ConnPass::gpu_use(uint64_t correlation, const GpuUse& use) {
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

void ConnPass::matched(const GpuUse& use, const Launch& call) {
  count_gpu_row(use, call.step);
  if (call.node < 0) return;
  const StackNode innermost = nodes_[static_cast<size_t>(call.node)];
  if (innermost.counted) range_stats(innermost.id, innermost.domain).self_cuda_ns += use.dur;
  for (int32_t n = call.node; n >= 0; n = nodes_[static_cast<size_t>(n)].parent) {
    const StackNode node = nodes_[static_cast<size_t>(n)];
    if (node.counted) range_stats(node.id, node.domain).cuda_total_ns += use.dur;
  }
}

void ConnPass::unmatched(const GpuUse& use, const StepLocator& locate) {
  ++unmatched_gpu_;
  ptrdiff_t cursor = 0;
  count_gpu_row(use, locate.step_of(use.start, cursor, /*restart=*/true));
}

void ConnPass::count_gpu_row(const GpuUse& use, int32_t step) {
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

int32_t ConnPass::copy_row(const char* kind, const Name& row_name) {
  auto [it, fresh] = copy_index_.try_emplace(row_name.id(), static_cast<int32_t>(copy_rows_.size()));
  if (fresh) copy_rows_.emplace_back(kind, row_name.str(), Stats{});
  return it->second;
}

}  // namespace torchprof::stream
