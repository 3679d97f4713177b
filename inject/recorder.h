// The hot path: turns one NVTX-style event into records in the calling thread's
// stream. One fixed-size write per event (plus a string definition the first time
// a name is seen on the thread); no locks, no allocation, no syscalls. A unit that
// does not fit in the thread's segment takes the slow path (grow_thread_buffer: once
// per segment); one that cannot get a segment is dropped whole and counted.
#pragma once

#include <cstdint>

#include "common/wire/wire.h"
#include "inject/thread_buffer.h"

namespace torchprof::inject {

// A name as the caller has it: UTF-8 text to intern, or an id that is already
// defined (a registered string). Both empty = no name.
struct NameRef {
  const char* text = nullptr;
  uint32_t len = 0;
  uint32_t id = 0;
  const char* address = nullptr;  // the caller's string, remembered with its id once written
};

NameRef ascii_name(const char* s);
// ascii_name() through the thread's AddressCache: a hit is an id, already defined.
NameRef cached_ascii_name(ThreadBuffer* tb, const char* s);
NameRef wide_name(ThreadBuffer* tb, const wchar_t* s);

// Push/pop return NVTX's 0-based level (pop: -1 when nothing is open); the
// level follows the program even when records are dropped.
int record_push(ThreadBuffer* tb, uint16_t domain, const NameRef& name, uint64_t attr, uint64_t payload);
int record_pop(ThreadBuffer* tb, uint16_t domain);
uint64_t record_start(ThreadBuffer* tb, uint16_t domain, const NameRef& name, uint64_t attr, uint64_t payload);
void record_end(ThreadBuffer* tb, uint16_t domain, uint64_t range_id);
// A PyTorch op's begin and end (kOpBegin/kOpEnd, torch_observer.cpp): nested per
// thread and domain with the same levels as push/pop, so a pause keeps them paired.
int record_op_begin(ThreadBuffer* tb, uint16_t domain, const NameRef& name, uint64_t op_word, uint64_t handle);
int record_op_end(ThreadBuffer* tb, uint16_t domain, uint64_t handle);
void record_mark(ThreadBuffer* tb, uint16_t domain, const NameRef& name, uint64_t attr, uint64_t payload);
// torch's caching allocator counters for one device (wire kAllocatorStats).
void record_allocator_stats(ThreadBuffer* tb, uint16_t device, uint64_t alloc_retries, uint64_t ooms);
// A tensor allocation (kTensorAlloc, with its bytes) or free (kTensorFree, bytes 0) of
// torch's allocators; `domain`: the device type (torch's numbering, 0 CPU) | index << 8.
// With `totals` (CUDA: the caching allocator's), one continuation slot carries them.
void record_tensor_memory(ThreadBuffer* tb, wire::Kind kind, uint16_t domain, uint64_t address, uint64_t bytes,
                          const wire::TensorTotals* totals = nullptr);
// A range that already ended, with the caller's CLOCK_MONOTONIC times: kStart at
// start_ns and kEnd at end_ns under one range id, written as one unit. Its name is
// not taken as the program's own step marker.
void record_range(ThreadBuffer* tb, uint16_t domain, const NameRef& name, uint64_t start_ns, uint64_t end_ns);
// True once the program itself has named a range or mark "ProfilerStep#…" (seen
// when a name is new to a thread; registered strings are not looked at).
bool program_marks_steps();
// source: 0 = an NVTX naming call, 1 = the OS name (the decoder lets NVTX names win).
void record_thread_name(ThreadBuffer* tb, uint32_t os_tid, const NameRef& name, uint64_t source = 0);
// kThreadStart + kThreadName with the thread's current OS name.
void record_thread_start(ThreadBuffer* tb);

// CUPTI API callbacks (hot path): one kCudaRuntime / kCudaDriver record.
void record_api(ThreadBuffer* tb, wire::Kind kind, uint16_t cbid, const NameRef& name, uint64_t enter,
                uint64_t exit, uint64_t correlation);

// A record with `extra_slots` continuation slots copied from `extra` (GPU
// activity, notices), its name defined first when new: all of it or nothing.
// `head.extra` is set here. False when it was dropped (counted as one record).
constexpr uint32_t kMaxExtraSlots = 4;
bool record_with_extra(ThreadBuffer* tb, const NameRef& name, const wire::Record& head, const void* extra,
                       uint32_t extra_slots);

// Cold path (registry): kString for `id` with `text`, then `follow` when not
// null (kDomain, kCategory), written as one unit.
bool record_string_def(ThreadBuffer* tb, uint32_t id, const char* text, uint32_t len, const wire::Record* follow);

// Cold path: one record with no name to define (a nameless kDomain).
bool record_plain(ThreadBuffer* tb, const wire::Record& r);

// Process-unique ids (atomic counters shared by all threads).
uint32_t next_string_id();
uint64_t next_range_id();

}  // namespace torchprof::inject
