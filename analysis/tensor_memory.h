// torch's tensor allocations and frees (--profile-memory: wire kTensorAlloc/kTensorFree)
// over one process, as the engine's pass reads them: a free is paired with its
// allocation by address (in any thread's frames, whichever was read first only the
// pairing waits); each step's allocated bytes at its start and end, its peak and the op
// at the peak; the allocations made in the steps that outlive them, by the op that made
// them; and from those the leak finding (leak_finding()).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/model.h"
#include "analysis/name.h"

namespace torchprof {

class TensorMemory {
 public:
  // `steps`: the process's steps when they are known before the pass (two passes), else
  // null: then the steps' start and end bytes are the totals as read.
  explicit TensorMemory(const std::vector<Step>* steps);

  // An allocation of `bytes` at `address` on device type `device` (0 CPU, else CUDA), at
  // `ts` in `step` (-1 none), with `op` the innermost range open on its thread and `top` the
  // outermost op around it; `counted`: made in a step the table counts. Returns the bytes
  // it adds.
  int64_t alloc(uint8_t device, uint64_t address, uint64_t bytes, int64_t ts, int32_t step, Name op, Name top,
                bool counted);
  // A free; returns the bytes it takes away (0 for a free whose allocation was never read),
  // and in `counted` whether the allocation was counted (torch's profiler knows the size of
  // a block freed only when it saw it allocated: the table counts such frees alone).
  int64_t free(uint8_t device, uint64_t address, int64_t ts, bool* counted);
  // The caching allocator's totals that came with a CUDA tensor's record.
  void cuda_totals(uint64_t allocated, uint64_t reserved);
  // torch.cuda.memory_stats()'s num_alloc_retries and num_ooms of one device (summed over
  // the devices).
  void allocator_stats(uint64_t alloc_retries, uint64_t ooms) {
    alloc_retries_ = (alloc_retries_ < 0 ? 0 : alloc_retries_) + static_cast<int64_t>(alloc_retries);
    ooms_ = (ooms_ < 0 ? 0 : ooms_) + static_cast<int64_t>(ooms);
  }
  // The bytes allocated now (as read) on `device`.
  int64_t allocated(uint8_t device) const { return now_[index(device)]; }
  bool any() const { return allocations_ > 0 || frees_ > 0 || alloc_retries_ >= 0; }

  // What the process's tensor memory says, given its steps as they ended up.
  TensorMemorySummary finish(const std::vector<Step>& steps);

 private:
  struct Live {
    uint64_t bytes = 0;
    int64_t ts = 0;
    int32_t step = -1;
    bool counted = false;
    Name op;
    Name top;
  };
  struct StepState {
    int64_t peak = 0;
    bool seen = false;
    uint64_t allocated = 0;
    Name peak_op;
    int64_t first_read = 0;  // single pass: the total when the step's first event was read
    int64_t last_read = 0;
  };
  struct Survivors {
    uint64_t bytes = 0;
    uint64_t allocations = 0;
    std::set<int32_t> steps;
  };

  static size_t index(uint8_t device) { return device == 0 ? 0 : 1; }
  static uint64_t key(uint8_t device, uint64_t address) { return address ^ (uint64_t{device} << 56); }
  void bucket(size_t dev, int64_t ts, int64_t delta);
  void survived(const Live& l);
  StepState& step_state(size_t dev, int32_t step);

  std::vector<int64_t> bounds_;                 // sorted step starts and ends (two passes)
  std::array<std::vector<int64_t>, 2> buckets_; // [i]: bytes added at times in [bounds_[i-1], bounds_[i])
  std::unordered_map<uint64_t, Live> live_;
  std::array<int64_t, 2> now_{};
  std::array<int64_t, 2> peak_{};
  std::array<std::vector<StepState>, 2> per_step_;
  int64_t steps_end_ = 0;                       // the last step's end (two passes)
  std::map<std::pair<std::string, std::string>, Survivors> survivors_;
  uint64_t allocations_ = 0;
  uint64_t frees_ = 0;
  uint64_t allocated_bytes_ = 0;
  uint64_t unpaired_ = 0;
  int64_t cuda_allocated_at_peak_ = -1;
  int64_t cuda_reserved_at_peak_ = -1;
  int64_t cuda_reserved_peak_ = -1;
  int64_t alloc_retries_ = -1;
  int64_t ooms_ = -1;
};

// The leak finding of a process's tensor memory: over at least 8 steps, the bytes
// allocated at step boundaries rise at 80% of them or more. bytes_per_step is the median
// rise from one boundary to the next; ops are the allocations that outlived the steps,
// made in at least half of them.
struct LeakFinding {
  int device = 0;             // 0 CPU, 1 CUDA
  int64_t bytes_per_step = 0;
  int steps = 0;              // steps looked at
  int rises = 0;              // boundaries at which the bytes rose
  std::vector<SurvivingAllocations> ops;
};
std::optional<LeakFinding> leak_finding(const TensorMemorySummary& m);

// The fragmentation finding of a process's CUDA tensors: the caching allocator retried
// cudaMalloc after freeing its cache (num_alloc_retries > 0) or ran out of memory, or at
// the most allocated it held at least 30% more than that, and 512 MiB or more, unused.
struct FragmentationFinding {
  int64_t allocated_at_peak = -1;  // -1: no reports
  int64_t reserved_at_peak = -1;
  int64_t alloc_retries = -1;      // -1: not read
  int64_t ooms = -1;
  int64_t unused() const { return allocated_at_peak < 0 ? 0 : reserved_at_peak - allocated_at_peak; }
};
std::optional<FragmentationFinding> fragmentation_finding(const TensorMemorySummary& m);

}  // namespace torchprof
