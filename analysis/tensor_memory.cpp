#include "analysis/tensor_memory.h"

#include <algorithm>

namespace torchprof {

TensorMemory::TensorMemory(const std::vector<Step>* steps) {
  if (steps == nullptr || steps->empty()) return;
  for (const Step& s : *steps) {
    bounds_.push_back(s.start_ns);
    bounds_.push_back(s.start_ns + s.dur_ns);
    steps_end_ = std::max(steps_end_, s.start_ns + s.dur_ns);
  }
  std::sort(bounds_.begin(), bounds_.end());
  bounds_.erase(std::unique(bounds_.begin(), bounds_.end()), bounds_.end());
  for (auto& b : buckets_) b.assign(bounds_.size() + 1, 0);
}

void TensorMemory::bucket(size_t dev, int64_t ts, int64_t delta) {
  if (bounds_.empty()) return;
  const size_t i = static_cast<size_t>(std::upper_bound(bounds_.begin(), bounds_.end(), ts) - bounds_.begin());
  buckets_[dev][i] += delta;
}

TensorMemory::StepState& TensorMemory::step_state(size_t dev, int32_t step) {
  auto& v = per_step_[dev];
  if (static_cast<size_t>(step) >= v.size()) v.resize(static_cast<size_t>(step) + 1);
  return v[static_cast<size_t>(step)];
}

int64_t TensorMemory::alloc(uint8_t device, uint64_t address, uint64_t bytes, int64_t ts, int32_t step, Name op,
                            Name top, bool counted) {
  const size_t dev = index(device);
  auto [it, fresh] = live_.try_emplace(key(device, address));
  if (!fresh) {
    // Freed on a thread whose frames were not read yet: this pass never saw its free.
    ++unpaired_;
    now_[dev] -= static_cast<int64_t>(it->second.bytes);
  }
  it->second = Live{bytes, ts, step, counted, op, top};
  ++allocations_;
  allocated_bytes_ += bytes;
  const int64_t delta = static_cast<int64_t>(bytes);
  now_[dev] += delta;
  peak_[dev] = std::max(peak_[dev], now_[dev]);
  bucket(dev, ts, delta);
  if (step >= 0) {
    StepState& s = step_state(dev, step);
    if (!s.seen) s.first_read = now_[dev] - delta;
    s.seen = true;
    s.allocated += bytes;
    s.last_read = now_[dev];
    if (now_[dev] > s.peak) {
      s.peak = now_[dev];
      s.peak_op = op;
    }
  }
  return delta;
}

void TensorMemory::cuda_totals(uint64_t allocated, uint64_t reserved) {
  const auto a = static_cast<int64_t>(allocated);
  const auto r = static_cast<int64_t>(reserved);
  if (a > cuda_allocated_at_peak_) {
    cuda_allocated_at_peak_ = a;
    cuda_reserved_at_peak_ = r;
  }
  cuda_reserved_peak_ = std::max(cuda_reserved_peak_, r);
}

void TensorMemory::survived(const Live& l) {
  if (l.step < 0) return;
  Survivors& s = survivors_[{l.op.str(), l.top.str()}];
  s.bytes += l.bytes;
  ++s.allocations;
  s.steps.insert(l.step);
}

int64_t TensorMemory::free(uint8_t device, uint64_t address, int64_t ts, bool* counted) {
  const size_t dev = index(device);
  auto it = live_.find(key(device, address));
  ++frees_;
  *counted = false;
  if (it == live_.end()) {
    ++unpaired_;
    return 0;
  }
  const Live l = it->second;
  *counted = l.counted;
  live_.erase(it);
  // Made in a step and freed after the last one ended: it outlived the steps.
  if (!bounds_.empty() && l.step >= 0 && ts >= steps_end_) survived(l);
  const int64_t delta = -static_cast<int64_t>(l.bytes);
  now_[dev] += delta;
  bucket(dev, ts, delta);
  if (l.step >= 0 && static_cast<size_t>(l.step) < per_step_[dev].size()) {
    StepState& s = per_step_[dev][static_cast<size_t>(l.step)];
    s.last_read = now_[dev];
  }
  return -delta;
}

TensorMemorySummary TensorMemory::finish(const std::vector<Step>& steps) {
  TensorMemorySummary m;
  m.allocations = allocations_;
  m.frees = frees_;
  m.allocated_bytes = allocated_bytes_;
  m.unpaired_frees = unpaired_;
  m.peak_bytes = peak_;
  m.cuda_allocated_at_peak = cuda_allocated_at_peak_;
  m.cuda_reserved_at_peak = cuda_reserved_at_peak_;
  m.cuda_reserved_peak = cuda_reserved_peak_;
  m.cuda_alloc_retries = alloc_retries_;
  m.cuda_ooms = ooms_;
  if (!bounds_.empty()) {
    for (const auto& [k, l] : live_) survived(l);
  }
  for (size_t dev = 0; dev < 2; ++dev) {
    if (per_step_[dev].empty() && (dev == 1 || buckets_[dev].empty())) continue;
    if (dev == 1 && now_[1] == 0 && peak_[1] == 0) continue;
    // Allocated at each bound: what was added before it.
    std::vector<int64_t> at(bounds_.size(), 0);
    int64_t sum = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
      sum += buckets_[dev][i];
      at[i] = sum;
    }
    auto at_time = [&](int64_t t) {
      const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), t);
      return it == bounds_.end() || *it != t ? int64_t{0} : at[static_cast<size_t>(it - bounds_.begin())];
    };
    for (size_t k = 0; k < steps.size(); ++k) {
      StepMemory sm;
      sm.step = static_cast<int>(k);
      const StepState* s = k < per_step_[dev].size() ? &per_step_[dev][k] : nullptr;
      if (!bounds_.empty()) {
        sm.start_bytes = at_time(steps[k].start_ns);
        sm.end_bytes = at_time(steps[k].start_ns + steps[k].dur_ns);
      } else if (s != nullptr && s->seen) {
        sm.start_bytes = s->first_read;
        sm.end_bytes = s->last_read;
      }
      sm.peak_bytes = std::max(sm.start_bytes, sm.end_bytes);
      if (s != nullptr && s->seen) {
        sm.allocated = s->allocated;
        if (s->peak >= sm.peak_bytes) {
          sm.peak_bytes = s->peak;
          sm.peak_op = s->peak_op.str();
        }
      }
      m.steps[dev].push_back(std::move(sm));
    }
  }
  for (auto& [names, s] : survivors_) {
    m.surviving.push_back({names.first, names.second, s.bytes, s.allocations, static_cast<int>(s.steps.size())});
  }
  std::stable_sort(m.surviving.begin(), m.surviving.end(),
                   [](const SurvivingAllocations& a, const SurvivingAllocations& b) { return a.bytes > b.bytes; });
  return m;
}

std::optional<LeakFinding> leak_finding(const TensorMemorySummary& m) {
  constexpr size_t kMinSteps = 8;
  for (int dev = 0; dev < 2; ++dev) {
    const std::vector<StepMemory>& steps = m.steps[dev];
    if (steps.size() < kMinSteps) continue;
    // The boundaries: each step's start, then the last one's end.
    std::vector<int64_t> at;
    for (const StepMemory& s : steps) at.push_back(s.start_bytes);
    at.push_back(steps.back().end_bytes);
    std::vector<int64_t> rise;
    int rises = 0;
    for (size_t i = 1; i < at.size(); ++i) {
      rise.push_back(at[i] - at[i - 1]);
      rises += at[i] > at[i - 1] ? 1 : 0;
    }
    if (rises * 10 < static_cast<int>(rise.size()) * 8) continue;
    std::vector<int64_t> sorted = rise;
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2), sorted.end());
    LeakFinding f;
    f.device = dev;
    f.bytes_per_step = sorted[sorted.size() / 2];
    if (f.bytes_per_step <= 0) continue;
    f.steps = static_cast<int>(steps.size());
    f.rises = rises;
    for (const SurvivingAllocations& s : m.surviving) {
      if (static_cast<size_t>(s.steps) * 2 >= steps.size()) f.ops.push_back(s);
    }
    return f;
  }
  return std::nullopt;
}

std::optional<FragmentationFinding> fragmentation_finding(const TensorMemorySummary& m) {
  constexpr int64_t kMinUnused = int64_t{512} << 20;
  FragmentationFinding f;
  f.allocated_at_peak = m.cuda_allocated_at_peak;
  f.reserved_at_peak = m.cuda_reserved_at_peak;
  f.alloc_retries = m.cuda_alloc_retries;
  f.ooms = m.cuda_ooms;
  const bool retried = f.alloc_retries > 0 || f.ooms > 0;
  const bool unused = f.allocated_at_peak >= 0 && f.unused() >= kMinUnused && f.unused() * 10 >= f.reserved_at_peak * 3;
  if (!retried && !unused) return std::nullopt;
  return f;
}

}  // namespace torchprof
