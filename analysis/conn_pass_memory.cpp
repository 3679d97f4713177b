// The engine's pass over one connection (conn_pass.h): torch's tensor allocations and
// frees (--profile-memory), counted for the ranges open on their thread.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "analysis/conn_pass.h"

namespace torchprof::engine {

bool ProcessState::memory_counted(int64_t t, int32_t step) {
  if (!kept(t)) return false;
  if (step >= 0 || outside_counts) return counted(step);
  if (!spans_made) {
    spans_made = true;
    for (size_t k = 0; k < steps.size(); ++k) {
      if (!recorded(steps[k].action)) continue;
      const int64_t end = steps[k].start_ns + steps[k].dur_ns;
      if (k > 0 && recorded(steps[k - 1].action) && !recorded_spans.empty()) {
        recorded_spans.back().second = std::max(recorded_spans.back().second, end);
      } else {
        recorded_spans.emplace_back(steps[k].start_ns, end);
      }
    }
  }
  for (const auto& [start, end] : recorded_spans) {
    if (start <= t && t < end) return true;
  }
  return false;
}

// A tensor allocation or free: its bytes count for the innermost range open on its thread
// (Self) and, once they close, for the ranges around it (total), as torch counts them; a
// free counts only when its allocation did (the profiler saw it made).
void ConnPass::tensor_memory(const wire::Record& r, const uint8_t* extra, size_t extra_bytes, uint32_t tid,
                             ThreadState& t) {
  const int64_t ts = epoch(r.ts);
  touch(t, ts);
  if (ts >= t.boundary) [[unlikely]]
    settle(t, tid, ts, /*inclusive=*/false);
  TensorMemory& tensors = tensor_state();
  const bool alloc = r.kind == static_cast<uint8_t>(wire::Kind::kTensorAlloc);
  const uint8_t device_type = static_cast<uint8_t>(r.domain & 0xFF);
  const uint8_t device = device_type == 0 ? 0 : 1;
  wire::TensorTotals totals{};
  const bool reported = extra_bytes >= sizeof totals;
  if (reported) {
    std::memcpy(&totals, extra, sizeof totals);
    if (device == 1) tensors.cuda_totals(totals.allocated, totals.reserved);
  }
  Open* inner = parent_of(t, t.stack.size());
  const int32_t step = step_of(t, ts);
  bool counted = st_.memory_counted(ts, step);
  int64_t delta = 0;
  if (alloc) {
    Name top;
    for (const Open& o : t.stack) {
      if (o.kept && o.kind->role != kRoleMarker) {
        top = o.kind->shown;
        break;
      }
    }
    delta = tensors.alloc(device, r.a, r.b, ts, step, inner != nullptr ? inner->kind->shown : Name(), top,
                               counted);
  } else {
    delta = -tensors.free(device, r.a, ts, &counted);
  }
  if (delta == 0) return;
  if (st_.wants.memory_snapshot && device == 1 && st_.kept(ts)) {
    memory_history(alloc, static_cast<uint32_t>(r.domain >> 8), r.a, static_cast<uint64_t>(delta < 0 ? -delta : delta),
                   ts, t);
  }
  if (inner != nullptr && counted) {
    inner->mem_self[device] += delta;
    inner->mem_total[device] += delta;
  }
  // Kept for the traces and report.html's curve: those of the traced steps only.
  if (!st_.wants.records || !st_.kept(ts) || st_.cycle(step) < 0) return;
  MemoryEvent m;
  m.alloc = alloc;
  m.device_type = device_type;
  m.device = static_cast<uint32_t>(r.domain >> 8);
  if (reported) {
    m.total_allocated = static_cast<int64_t>(totals.allocated);
    m.total_reserved = static_cast<int64_t>(totals.reserved);
  }
  m.ts_ns = ts;
  m.live_bytes = tensors.allocated(device);  // the running total as read
  m.address = r.a;
  m.bytes = static_cast<uint64_t>(delta < 0 ? -delta : delta);
  m.step = step;
  m.tid = tid;
  st_.tensor_events.push_back(m);
}

void ConnPass::allocator_stats(const wire::Record& r) { tensor_state().allocator_stats(r.a, r.b); }

TensorMemory& ConnPass::tensor_state() {
  if (st_.tensors == nullptr) st_.tensors = std::make_unique<TensorMemory>(scan_ != nullptr ? &st_.steps : nullptr);
  return *st_.tensors;
}

namespace {

// A Python frame as torch prints it, "file(line): function", in memory_viz's fields.
MemoryFrame python_frame(const std::string& frame) {
  MemoryFrame f;
  const size_t close = frame.rfind("): ");
  const size_t open = close == std::string::npos ? std::string::npos : frame.rfind('(', close);
  if (open == std::string::npos) {
    f.name = frame;
    return f;
  }
  f.filename = frame.substr(0, open);
  f.line = std::atoi(frame.substr(open + 1, close - open - 1).c_str());
  f.name = frame.substr(close + 3);
  return f;
}

}  // namespace

void ConnPass::memory_history(bool alloc, uint32_t device, uint64_t address, uint64_t bytes, int64_t ts,
                              const ThreadState& t) {
  if (st_.history == nullptr) st_.history = std::make_unique<MemoryHistoryBuilder>(st_.wants.memory_snapshot_entries);
  // The stack's key: its ranges' names and the op whose Python frames end it.
  const OpInfo* frames_of = nullptr;
  std::string key;
  for (auto o = t.stack.rbegin(); o != t.stack.rend(); ++o) {
    if (!o->kept) continue;
    key += o->kind->shown.str();
    key += '\n';
    if (frames_of == nullptr && o->kind->op != nullptr && !o->kind->op->stack.empty()) frames_of = o->kind->op;
  }
  key += std::to_string(reinterpret_cast<uintptr_t>(frames_of));
  MemoryHistoryEntry e;
  e.stack = st_.history->stack(key, [&] {
    std::vector<MemoryFrame> frames;
    for (auto o = t.stack.rbegin(); o != t.stack.rend(); ++o) {
      if (o->kept) frames.push_back({o->kind->op != nullptr ? "<torch op>" : "<range>", 0, o->kind->shown.str()});
    }
    if (frames_of != nullptr) {
      for (const std::string& f : frames_of->stack) frames.push_back(python_frame(f));
    }
    return frames;
  });
  e.alloc = alloc;
  e.device = device;
  e.address = address;
  e.bytes = bytes;
  e.ts_ns = ts;
  st_.history->add(e);
}

}  // namespace torchprof::engine
