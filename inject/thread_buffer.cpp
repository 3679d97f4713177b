#include "inject/thread_buffer.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

namespace torchprof::inject {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kHugeRingBytes = size_t{8} << 20;
}  // namespace

ThreadBuffer* create_thread_buffer(uint32_t buffer_kb, uint32_t tid, bool is_main, sem_t* wake, bool huge_pages) {
  uint64_t want = (uint64_t{buffer_kb} << 10) / wire::kSlotSize;
  uint64_t slots = 512;  // room for the longest string record and then some
  while (slots * 2 <= want) slots *= 2;
  void* mem = aligned_alloc(64, (sizeof(ThreadBuffer) + 63) & ~size_t{63});
  const size_t bytes = slots * wire::kSlotSize;
  // A large ring is first written page by page as the program records: on 2 MiB pages
  // (where the kernel gives them on request) that is a fault per 2 MiB, not per 4 KiB.
  const bool huge = huge_pages && bytes >= kHugeRingBytes;
  void* storage = aligned_alloc(huge ? kHugePage : 64, bytes);
  if (huge && storage != nullptr) madvise(storage, bytes, MADV_HUGEPAGE);  // a hint: its failure changes nothing
  if (mem == nullptr || storage == nullptr) {
    free(mem);
    free(storage);
    return nullptr;
  }
  auto* tb = new (mem) ThreadBuffer();
  tb->ring.init(static_cast<wire::Record*>(storage), slots);
  tb->intern.init();
  tb->next_wake = slots / 2;
  tb->wake = wake;
  tb->tid = tid;
  tb->is_main = is_main;
  return tb;
}

void destroy_thread_buffer(ThreadBuffer* tb) {
  if (tb == nullptr) return;
  free(tb->ring.storage());
  tb->intern.release();
  tb->~ThreadBuffer();
  free(tb);
}

}  // namespace torchprof::inject
