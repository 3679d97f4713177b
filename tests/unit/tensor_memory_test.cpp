// TensorMemory and its leak finding (analysis/tensor_memory.h), and --memory-snapshot's
// history and pickle (analysis/memory_history.h, formats/memory_snapshot.h), on tensor
// events whose sums are known.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "analysis/memory_history.h"
#include "analysis/tensor_memory.h"
#include "formats/memory_snapshot.h"

namespace torchprof {
namespace {

constexpr int64_t kStepNs = 1000;

std::vector<Step> steps_of(int n) {
  std::vector<Step> steps;
  for (int k = 0; k < n; ++k) {
    Step s;
    s.index = k;
    s.name = "ProfilerStep#" + std::to_string(k);
    s.start_ns = k * kStepNs;
    s.dur_ns = kStepNs;
    steps.push_back(s);
  }
  return steps;
}

// `n` steps on the CPU; each allocates `transient` bytes freed inside it (op "aten::mul")
// and `kept` bytes that outlive the steps (op "aten::add" under "train").
TensorMemorySummary loop(int n, uint64_t transient, uint64_t kept, bool free_kept_after = false) {
  const std::vector<Step> steps = steps_of(n);
  TensorMemory m(&steps);
  uint64_t next = 0x1000;
  std::vector<uint64_t> survivors;
  bool counted = false;
  for (int k = 0; k < n; ++k) {
    const int64_t t = k * kStepNs;
    const uint64_t a = next++;
    CHECK(m.alloc(0, a, transient, t + 10, k, "aten::mul", "train", true) == static_cast<int64_t>(transient));
    if (kept > 0) {
      survivors.push_back(next);
      m.alloc(0, next++, kept, t + 20, k, "aten::add", "train", true);
    }
    CHECK(m.free(0, a, t + 30, &counted) == static_cast<int64_t>(transient));
    CHECK(counted);
  }
  if (free_kept_after) {
    for (uint64_t a : survivors) m.free(0, a, n * kStepNs + 5, &counted);
  }
  return m.finish(steps);
}

}  // namespace

TEST_CASE("tensor memory: steps' start, peak and end bytes, and the op at the peak") {
  const TensorMemorySummary m = loop(3, 100, 10);
  REQUIRE(m.steps[0].size() == 3);
  CHECK(m.allocations == 6);
  CHECK(m.frees == 3);
  CHECK(m.allocated_bytes == 330);
  for (int k = 0; k < 3; ++k) {
    CAPTURE(k);
    const StepMemory& s = m.steps[0][static_cast<size_t>(k)];
    CHECK(s.start_bytes == 10 * k);
    CHECK(s.end_bytes == 10 * (k + 1));
    CHECK(s.peak_bytes == 10 * k + 110);
    CHECK(s.peak_op == "aten::add");
    CHECK(s.allocated == 110);
  }
  CHECK(m.peak_bytes[0] == 130);
  CHECK(m.steps[1].empty());
  REQUIRE(m.surviving.size() == 1);
  CHECK(m.surviving[0].op == "aten::add");
  CHECK(m.surviving[0].top == "train");
  CHECK(m.surviving[0].bytes == 30);
  CHECK(m.surviving[0].steps == 3);
}

TEST_CASE("tensor memory: a free whose allocation was never read takes nothing away") {
  const std::vector<Step> steps = steps_of(1);
  TensorMemory m(&steps);
  bool counted = true;
  CHECK(m.free(0, 0xdead, 5, &counted) == 0);
  CHECK_FALSE(counted);
  CHECK(m.finish(steps).unpaired_frees == 1);
}

TEST_CASE("leak finding: bytes kept every step are a leak, with the op that keeps them") {
  const auto leak = leak_finding(loop(10, 4096, 4000));
  REQUIRE(leak.has_value());
  CHECK(leak->device == 0);
  CHECK(leak->bytes_per_step == 4000);
  CHECK(leak->steps == 10);
  CHECK(leak->rises == 10);
  REQUIRE(leak->ops.size() == 1);
  CHECK(leak->ops[0].op == "aten::add");
  CHECK(leak->ops[0].bytes == 40000);
}

TEST_CASE("leak finding: none for a steady loop, for fewer than 8 steps, or for a cache that stops growing") {
  CHECK_FALSE(leak_finding(loop(12, 4096, 0)).has_value());
  CHECK_FALSE(leak_finding(loop(7, 4096, 4000)).has_value());
  // A cache: the first 3 of 12 steps keep bytes, then it holds.
  const std::vector<Step> steps = steps_of(12);
  TensorMemory m(&steps);
  for (int k = 0; k < 3; ++k) m.alloc(0, 0x100 + k, 1 << 20, k * kStepNs + 1, k, "cache", "train", true);
  CHECK_FALSE(leak_finding(m.finish(steps)).has_value());
}

TEST_CASE("leak finding: CUDA tensors are their own device") {
  const std::vector<Step> steps = steps_of(9);
  TensorMemory m(&steps);
  for (int k = 0; k < 9; ++k) m.alloc(1, 0x7f0000000000 + k * 4096, 512, k * kStepNs + 1, k, "forward", "", true);
  const auto leak = leak_finding(m.finish(steps));
  REQUIRE(leak.has_value());
  CHECK(leak->device == 1);
  CHECK(leak->bytes_per_step == 512);
}

TEST_CASE("fragmentation finding: retries, out-of-memory errors, or much reserved unused at the peak") {
  TensorMemorySummary m;
  CHECK_FALSE(fragmentation_finding(m).has_value());  // nothing known
  m.cuda_allocated_at_peak = int64_t{2} << 30;
  m.cuda_reserved_at_peak = (int64_t{2} << 30) + (int64_t{511} << 20);
  CHECK_FALSE(fragmentation_finding(m).has_value());  // under 512 MiB unused
  m.cuda_reserved_at_peak = int64_t{8} << 30;
  m.cuda_allocated_at_peak = (int64_t{8} << 30) - (int64_t{1} << 30);
  CHECK_FALSE(fragmentation_finding(m).has_value());  // 1 GiB unused, but 12.5%
  m.cuda_allocated_at_peak = int64_t{5} << 30;
  const auto f = fragmentation_finding(m);
  REQUIRE(f.has_value());
  CHECK(f->unused() == int64_t{3} << 30);
  m.cuda_allocated_at_peak = m.cuda_reserved_at_peak;
  m.cuda_alloc_retries = 0;
  CHECK_FALSE(fragmentation_finding(m).has_value());
  m.cuda_alloc_retries = 2;
  REQUIRE(fragmentation_finding(m).has_value());
  CHECK(fragmentation_finding(m)->alloc_retries == 2);
  TensorMemorySummary oom;
  oom.cuda_ooms = 1;
  CHECK(fragmentation_finding(oom).has_value());
}

TEST_CASE("memory history: the last entries, and before them the allocations still live") {
  MemoryHistoryBuilder b(3);
  const uint32_t s = b.stack("k", [] { return std::vector<MemoryFrame>{{"<torch op>", 0, "aten::empty"}}; });
  bool made_again = false;
  const uint32_t again = b.stack("k", [&] {
    made_again = true;
    return std::vector<MemoryFrame>{{"other", 0, "x"}};
  });
  CHECK_FALSE(made_again);  // kept once, by its key
  CHECK(again == s);
  auto entry = [&](bool alloc, uint64_t addr, int64_t ts) {
    MemoryHistoryEntry e;
    e.alloc = alloc;
    e.address = addr;
    e.bytes = 512;
    e.ts_ns = ts;
    e.stack = s;
    b.add(e);
  };
  entry(true, 0xa, 1);   // lives to the end, left out of the ring: restored
  entry(true, 0xb, 2);   // freed at 4: gone
  entry(true, 0xc, 3);
  entry(false, 0xb, 4);
  entry(false, 0xc, 5);
  entry(true, 0xd, 6);
  const MemoryHistory h = b.finish();
  CHECK(h.dropped == 3);
  CHECK(h.max_entries == 3);
  REQUIRE(h.entries.size() == 4);
  CHECK(h.entries[0].before);
  CHECK(h.entries[0].address == 0xa);
  CHECK(h.entries[1].address == 0xb);
  CHECK_FALSE(h.entries[1].alloc);
  CHECK(h.entries[3].address == 0xd);
  CHECK_FALSE(h.entries[3].before);
  REQUIRE(h.stacks.size() == 1);
  CHECK(h.stacks[0][0].name == "aten::empty");
}

TEST_CASE("memory snapshot: pickle protocol 2, an address past 32 bits as LONG1, strings written once") {
  MemoryHistory h;
  h.stacks = {{{"<range>", 0, "forward"}}};
  for (int k = 0; k < 2; ++k) {
    MemoryHistoryEntry e;
    e.address = 0x7f0000001000;
    e.bytes = 1 << 20;
    e.ts_ns = 1'700'000'000'000'000'000 + k;
    e.alloc = k == 0;
    h.entries.push_back(e);
  }
  const std::string p = render_memory_snapshot(h);
  REQUIRE(p.size() > 4);
  CHECK(p.substr(0, 2) == std::string("\x80\x02", 2));
  CHECK(p.back() == '.');
  // LONG1, 6 bytes, little-endian.
  CHECK(p.find(std::string("\x8a\x06\x00\x10\x00\x00\x00\x7f", 8)) != std::string::npos);
  // 1 MiB fits BININT: 'J' 00 00 10 00.
  CHECK(p.find(std::string("J\x00\x00\x10\x00", 5)) != std::string::npos);
  size_t forwards = 0;
  for (size_t at = p.find("forward"); at != std::string::npos; at = p.find("forward", at + 1)) ++forwards;
  CHECK(forwards == 1);
  CHECK(p.find("free_completed") != std::string::npos);
}

}  // namespace torchprof
