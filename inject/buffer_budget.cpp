#include "inject/buffer_budget.h"

#include <sys/mman.h>
#include <unistd.h>

namespace torchprof::inject {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kPage = 4096;

BufferBudget g_budget;

}  // namespace

BufferBudget& buffer_budget() { return g_budget; }

bool BufferBudget::take(uint64_t bytes) {
  const uint64_t cap = cap_.load(std::memory_order_relaxed);
  uint64_t held = held_.load(std::memory_order_relaxed);
  do {
    if (held > cap || cap - held < bytes) return false;
  } while (!held_.compare_exchange_weak(held, held + bytes, std::memory_order_relaxed));
  raise_peak(held + bytes);
  return true;
}

void BufferBudget::take_anyway(uint64_t bytes) {
  raise_peak(held_.fetch_add(bytes, std::memory_order_relaxed) + bytes);
}

void BufferBudget::raise_peak(uint64_t held) {
  uint64_t peak = peak_.load(std::memory_order_relaxed);
  while (held > peak && !peak_.compare_exchange_weak(peak, held, std::memory_order_relaxed)) {
  }
}

void BufferBudget::note_loss(wire::BufferRefusal why, uint64_t now_ns) {
  if (loss_ts_.load(std::memory_order_relaxed) != 0) return;
  // Several threads may be refused at once: the one that sets the time wins, and its
  // fields were stored before it.
  uint64_t expected = 0;
  const uint64_t held = held_.load(std::memory_order_relaxed);
  if (loss_ts_.compare_exchange_strong(expected, ~uint64_t{0}, std::memory_order_acq_rel)) {
    loss_why_.store(static_cast<uint16_t>(why), std::memory_order_relaxed);
    loss_held_.store(held, std::memory_order_relaxed);
    loss_ts_.store(now_ns != 0 && now_ns != ~uint64_t{0} ? now_ns : 1, std::memory_order_release);
  }
}

BufferBudget::Refusal BufferBudget::first_loss() const {
  Refusal r;
  const uint64_t ts = loss_ts_.load(std::memory_order_acquire);
  if (ts == 0 || ts == ~uint64_t{0}) return r;  // none, or being written
  r.ts = ts;
  r.why = static_cast<wire::BufferRefusal>(loss_why_.load(std::memory_order_relaxed));
  r.held = loss_held_.load(std::memory_order_relaxed);
  return r;
}

void BufferBudget::reset_after_fork() {
  held_.store(0, std::memory_order_relaxed);
  peak_.store(0, std::memory_order_relaxed);
  loss_ts_.store(0, std::memory_order_relaxed);
  loss_why_.store(0, std::memory_order_relaxed);
  loss_held_.store(0, std::memory_order_relaxed);
  producer_maps_.store(0, std::memory_order_relaxed);
}

void* map_buffer_memory(size_t bytes, bool huge) {
  constexpr int kProt = PROT_READ | PROT_WRITE;
  constexpr int kFlags = MAP_PRIVATE | MAP_ANONYMOUS;
  if (!huge) {
    void* p = mmap(nullptr, bytes, kProt, kFlags, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  // 2 MiB-aligned: map a huge page more, then give back what lies outside.
  void* raw = mmap(nullptr, bytes + kHugePage, kProt, kFlags, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) & ~(uintptr_t{kHugePage} - 1);
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t tail = start + bytes + kHugePage - (aligned + bytes);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + bytes), tail);
  void* p = reinterpret_cast<void*>(aligned);
  // A large buffer is first written page by page as the program records: on 2 MiB pages
  // (where the kernel gives them on request) that is a fault per 2 MiB, not per 4 KiB.
  madvise(p, bytes, MADV_HUGEPAGE);  // a hint: its failure changes nothing
  return p;
}

void unmap_buffer_memory(void* p, size_t bytes) {
  if (p != nullptr) munmap(p, bytes);
}

void prefault(void* p, size_t bytes) {
  auto* c = static_cast<volatile char*>(p);
  for (size_t off = 0; off < bytes; off += kPage) c[off] = 0;
}

}  // namespace torchprof::inject
