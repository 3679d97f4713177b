#include "inject/cupti/activity.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "common/wire/wire.h"
#include "inject/buffer_budget.h"
#include "inject/clock.h"
#include "inject/cupti/api.h"
#include "inject/cupti/cbids.h"
#include "inject/cupti/share.h"
#include "inject/process_state.h"
#include "inject/recorder.h"
#include "inject/threads.h"

namespace torchprof::inject {
namespace {

using wire::Kind;
using wire::Record;

// 4 MiB holds some 20k kernel records: with CUPTI's periodic flushes a buffer rarely
// fills, and few are in flight. Under pressure CUPTI asks for more and gets them while the
// process's buffers stay within TORCHPROF_BUFFER_LIMIT (buffer_budget.h, shared with the
// threads' segments); past it we hand CUPTI nothing, and it drops records and counts
// them, which we report. Buffers read beyond kKeepSpare are unmapped: memory goes back.
constexpr size_t kBufferBytes = 4u << 20;
constexpr int kKeepSpare = 2;
// Our bookkeeping, in the mapping just before the bytes CUPTI gets (8-byte aligned).
constexpr size_t kHeaderBytes = 64;
// Room one converted record may need: head, 2 extra slots, a name definition.
constexpr uint64_t kWorstUnitSlots = 3 + 1 + wire::slots_for_bytes(wire::kMaxStringBytes);

struct BufferHeader {
  BufferHeader* next;       // in the spare list or the completed queue
  size_t valid;             // bytes CUPTI filled (completed queue)
  uint64_t reference;       // g_correlation_reference when CUPTI handed the buffer back
  BufferHeader* held_prev;  // in the list of buffers CUPTI holds now
  BufferHeader* held_next;
};
static_assert(sizeof(BufferHeader) <= kHeaderBytes);

uint8_t* data_of(BufferHeader* h) { return reinterpret_cast<uint8_t*>(h) + kHeaderBytes; }
BufferHeader* header_of(uint8_t* data) { return reinterpret_cast<BufferHeader*>(data - kHeaderBytes); }

// The spares, the completed queue (oldest first) and the buffers CUPTI holds, under one
// mutex held for a few stores.
struct BufferPool {
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  BufferHeader* spare = nullptr;
  int spare_count = 0;
  BufferHeader* queue_head = nullptr;
  BufferHeader* queue_tail = nullptr;
  BufferHeader* held = nullptr;  // handed to CUPTI, not yet back
  int held_count = 0;
};

BufferPool g_pool;
std::atomic<bool> g_enabled{false};
std::atomic<bool> g_forked{false};
std::atomic<int64_t> g_clock_offset{0};
std::atomic<uint64_t> g_dropped_total{0};
std::atomic<uint32_t> g_completed{0};     // buffers queued for conversion so far
std::atomic<uint32_t> g_converted{0};     // of those, converted (a futex word: exit waits on it)
bool g_api_calls = false;                 // TORCHPROF_CUDA_API=activity: RUNTIME/DRIVER records are ours
uint64_t g_api_since = 0;                 // calls that began before those kinds were enabled are not
bool g_sync_return_value = true;          // the loaded CUPTI's sync records carry returnValue (12.8+)

// Flusher-only state: the buffer being walked and the last record done.
struct Cursor {
  uint8_t* data = nullptr;
  size_t valid = 0;
  CUpti_Activity* last = nullptr;
  uint64_t reference = 0;
};
Cursor g_cursor;
uint64_t g_dropped_written = 0;
// Buffers cut short by a record CUPTI could not step over, and the bytes left unread.
uint64_t g_unreadable_buffers = 0;
uint64_t g_unreadable_bytes = 0;
uint64_t g_unreadable_written = 0;
CUptiResult g_unreadable_result = CUPTI_SUCCESS;

class PoolLock {
 public:
  PoolLock() { pthread_mutex_lock(&g_pool.mu); }
  ~PoolLock() { pthread_mutex_unlock(&g_pool.mu); }
};

// A new buffer within the cap (nullptr past it, or when the system has no memory).
BufferHeader* map_cupti_buffer(bool note_refusal) {
  if (!buffer_budget().take(kBufferBytes)) {
    if (note_refusal) buffer_budget().note_loss(wire::BufferRefusal::kCap, now_ns());
    return nullptr;
  }
  void* mem = map_buffer_memory(kBufferBytes, /*huge=*/false);
  if (mem == nullptr) {
    buffer_budget().give(kBufferBytes);
    if (note_refusal) buffer_budget().note_loss(wire::BufferRefusal::kSystem, now_ns());
    return nullptr;
  }
  return new (mem) BufferHeader{};
}

void unmap_cupti_buffer(BufferHeader* h) {
  unmap_buffer_memory(h, kBufferBytes);
  buffer_budget().give(kBufferBytes);
}

void give_back(uint8_t* data) {
  BufferHeader* h = header_of(data);
  {
    PoolLock lock;
    if (g_pool.spare_count < kKeepSpare) {
      h->next = g_pool.spare;
      g_pool.spare = h;
      ++g_pool.spare_count;
      return;
    }
  }
  unmap_cupti_buffer(h);
}

void note_held(BufferHeader* h) {
  PoolLock lock;
  h->held_prev = nullptr;
  h->held_next = g_pool.held;
  if (g_pool.held != nullptr) g_pool.held->held_prev = h;
  g_pool.held = h;
  ++g_pool.held_count;
}

// False for a buffer CUPTI got from another client's bufferRequested before ours
// were registered: it is not ours to reuse (and no header of ours precedes it). The
// list is searched by address, never by reading memory before `data`.
bool take_held(uint8_t* data) {
  PoolLock lock;
  for (BufferHeader* h = g_pool.held; h != nullptr; h = h->held_next) {
    if (data_of(h) != data) continue;
    if (h->held_prev != nullptr) h->held_prev->held_next = h->held_next;
    else g_pool.held = h->held_next;
    if (h->held_next != nullptr) h->held_next->held_prev = h->held_prev;
    --g_pool.held_count;
    return true;
  }
  return false;
}

bool pop_completed(Cursor* out) {
  PoolLock lock;
  BufferHeader* h = g_pool.queue_head;
  if (h == nullptr) return false;
  // With API calls from activity records no callback moves the reference: the records
  // converted so far did, which a buffer completed before their conversion never saw.
  // (With callbacks the reference at completion stays: calls made since may be 2^32 on.)
  const uint64_t reference =
      g_api_calls ? std::max(h->reference, g_correlation_reference.load(std::memory_order_relaxed)) : h->reference;
  *out = Cursor{data_of(h), h->valid, nullptr, reference};
  g_pool.queue_head = h->next;
  if (g_pool.queue_head == nullptr) g_pool.queue_tail = nullptr;
  return true;
}

uint64_t to_ours(uint64_t cupti_ts) {
  if (cupti_ts == 0) return 0;  // CUPTI_TIMESTAMP_UNKNOWN stays unknown
  return cupti_ts - static_cast<uint64_t>(g_clock_offset.load(std::memory_order_relaxed));
}

uint8_t k(Kind kind) { return static_cast<uint8_t>(kind); }
uint16_t dev(uint32_t device) { return static_cast<uint16_t>(device); }
// A record's correlation id widened against the reference of its buffer.
uint64_t corr(uint32_t raw) { return widen_correlation(raw, g_cursor.reference); }

template <typename Extra>
void put(ThreadBuffer* tb, const NameRef& name, const Record& head, const Extra& extra) {
  static_assert(sizeof(Extra) % wire::kSlotSize == 0);
  record_with_extra(tb, name, head, &extra, sizeof(Extra) / wire::kSlotSize);
}

void write_kernel(ThreadBuffer* tb, const CUpti_ActivityKernel10& r) {
  wire::GpuKernelExtra x{};
  x.stream = r.streamId;
  x.context = r.contextId;
  x.grid[0] = static_cast<uint32_t>(r.gridX);
  x.grid[1] = static_cast<uint32_t>(r.gridY);
  x.grid[2] = static_cast<uint32_t>(r.gridZ);
  x.block[0] = static_cast<uint32_t>(r.blockX);
  x.block[1] = static_cast<uint32_t>(r.blockY);
  x.block[2] = static_cast<uint32_t>(r.blockZ);
  x.registers_per_thread = r.registersPerThread;
  x.static_shared_memory = static_cast<uint32_t>(r.staticSharedMemory);
  x.dynamic_shared_memory = static_cast<uint32_t>(r.dynamicSharedMemory);
  x.graph_id = r.graphId;
  x.graph_node_id = r.graphNodeId;
  x.queued = to_ours(r.queued);
  Record head{k(Kind::kKernel), 0, dev(r.deviceId), 0, to_ours(r.start), to_ours(r.end), corr(r.correlationId)};
  put(tb, ascii_name(r.name), head, x);
}

// A kMemcpy: device-to-host and the like from MEMCPY records on their device; peer-to-peer
// copies come only as MEMCPY2 records, written on the source device (copy kind PTOP).
template <typename CopyRecord>
void write_copy(ThreadBuffer* tb, const CopyRecord& r, uint32_t device) {
  wire::GpuCopyExtra x{};
  x.bytes = r.bytes;
  x.stream = r.streamId;
  x.context = r.contextId;
  x.copy_kind = r.copyKind;
  x.src_kind = r.srcKind;
  x.dst_kind = r.dstKind;
  x.flags = r.flags;
  x.graph_id = r.graphId;
  Record head{k(Kind::kMemcpy), 0, dev(device), 0, to_ours(r.start), to_ours(r.end), corr(r.correlationId)};
  put(tb, NameRef{}, head, x);
}

void write_memset(ThreadBuffer* tb, const CUpti_ActivityMemset4& r) {
  wire::GpuCopyExtra x{};
  x.bytes = r.bytes;
  x.stream = r.streamId;
  x.context = r.contextId;
  x.copy_kind = static_cast<uint8_t>(r.value & 0xff);
  x.dst_kind = static_cast<uint8_t>(r.memoryKind);
  x.flags = static_cast<uint8_t>(r.flags);
  x.graph_id = r.graphId;
  Record head{k(Kind::kMemset), 0, dev(r.deviceId), 0, to_ours(r.start), to_ours(r.end), corr(r.correlationId)};
  put(tb, NameRef{}, head, x);
}

void write_memory(ThreadBuffer* tb, const CUpti_ActivityMemory4& r) {
  wire::GpuMemoryExtra x{};
  x.operation = static_cast<uint8_t>(r.memoryOperationType);
  x.memory_kind = static_cast<uint8_t>(r.memoryKind);
  x.stream = r.streamId;
  x.context = r.contextId;
  x.correlation = corr(r.correlationId);
  x.pc = r.PC;
  Record head{k(Kind::kMemory), 0, dev(r.deviceId), 0, to_ours(r.timestamp), r.address, r.bytes};
  put(tb, NameRef{}, head, x);
}

// The stream each CUDA event was last recorded on (CUDA_EVENT records), for the
// stream waits naming it: a fixed open-addressed table, used by the flusher alone.
struct EventStream {
  uint64_t key;  // context << 32 | event id, + 1 (0: empty)
  uint32_t stream;
};
constexpr size_t kEventSlots = 4096;
EventStream g_event_streams[kEventSlots];

size_t event_slot(uint64_t key) {
  size_t at = static_cast<size_t>((key * 0x9e3779b97f4a7c15ull) >> 52) % kEventSlots;
  for (size_t probes = 0; probes < 16; ++probes, at = (at + 1) % kEventSlots) {
    if (g_event_streams[at].key == key || g_event_streams[at].key == 0) return at;
  }
  return at;  // full around here: the oldest neighbour is overwritten
}

void note_event(const CUpti_ActivityCudaEvent2& r) {
  const uint64_t key = ((uint64_t{r.contextId} << 32) | r.eventId) + 1;
  g_event_streams[event_slot(key)] = EventStream{key, r.streamId};
}

uint32_t event_stream1(uint32_t context, uint32_t event) {
  const uint64_t key = ((uint64_t{context} << 32) | event) + 1;
  const EventStream& e = g_event_streams[event_slot(key)];
  return e.key == key ? e.stream + 1 : 0;
}

void write_sync(ThreadBuffer* tb, const CUpti_ActivitySynchronization2& r) {
  // CUDA 13's CUPTI writes a record for every cudaEventQuery / cudaStreamQuery, those
  // that found the work unfinished included (returnValue CUDA_ERROR_NOT_READY): they
  // waited for nothing, and polling would turn into thousands of "Event Sync" rows.
  // Kept: the synchronisations that returned success, as CUPTI gives them by default
  // before 13.0 and as Kineto shows them.
  if (g_sync_return_value && r.returnValue != 0) return;
  wire::GpuSyncExtra x{};
  x.type = static_cast<uint32_t>(r.type);
  x.stream = r.streamId;
  x.context = r.contextId;
  x.event = r.cudaEventId;
  if (r.type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT) x.event_stream1 = event_stream1(r.contextId, r.cudaEventId);
  // The record names a context, not a device; the analysis maps contexts to devices.
  Record head{k(Kind::kSync), 0, 0, 0, to_ours(r.start), to_ours(r.end), corr(r.correlationId)};
  put(tb, NameRef{}, head, x);
}

// An API call from a RUNTIME or DRIVER record (TORCHPROF_CUDA_API=activity): the calls
// the callbacks would record (cupti/cbids.h), named as the header names them. With no
// callbacks to move the correlation reference, these records move it.
void write_api(ThreadBuffer* tb, const CUpti_ActivityAPI& r, bool driver) {
  const CbidClass* entry = api_entry(driver, r.cbid);
  if (entry == nullptr || (entry->bits & kApiRecorded) == 0) return;
  // The call in flight when tracing started (the cudaFree(0) or cuInit that starts CUDA):
  // as with callbacks, whose ENTER it never had, it is not recorded. Its start was taken
  // on CUPTI's own clock (Unix-epoch ns) before our timestamp callback replaced it, its
  // end on ours: it may look later than the start of tracing, but it ends before it began.
  if (r.start > r.end || to_ours(r.start) < g_api_since) return;
  const uint64_t id = corr(r.correlationId);
  if (correlation_reference_due(id, g_cursor.reference)) {
    g_cursor.reference = id;
    g_correlation_reference.store(id, std::memory_order_relaxed);
  }
  NameRef name = ascii_name(entry->name);
  if (!driver) name.len = api_name_length(name.text, name.len);
  wire::GpuApiExtra x{};
  x.tid = r.threadId;
  x.return_value = r.returnValue;
  x.driver = driver ? 1 : 0;
  Record head{k(Kind::kCudaApiActivity), 0, static_cast<uint16_t>(r.cbid), 0, to_ours(r.start), to_ours(r.end), id};
  put(tb, name, head, x);
}

// deviceProperties as Kineto names them; the per-block opt-in shared memory is
// not in CUPTI's record (left 0).
void write_device(ThreadBuffer* tb, const CUpti_ActivityDevice5& r) {
  wire::GpuDeviceExtra x{};
  x.total_global_mem = r.globalMemorySize;
  x.compute_major = r.computeCapabilityMajor;
  x.compute_minor = r.computeCapabilityMinor;
  x.max_threads_per_block = r.maxThreadsPerBlock;
  x.max_threads_per_multiprocessor = r.maxWarpsPerMultiprocessor * r.numThreadsPerWarp;
  x.regs_per_block = r.maxRegistersPerBlock;
  x.warp_size = r.numThreadsPerWarp;
  x.shared_mem_per_block = r.maxSharedMemoryPerBlock;
  x.num_sms = r.numMultiprocessors;
  x.regs_per_multiprocessor = r.maxRegistersPerMultiprocessor;
  x.shared_mem_per_multiprocessor = r.maxSharedMemoryPerMultiprocessor;
  Record head{k(Kind::kDevice), 0, dev(r.id), 0, now_ns(), 0, 0};
  put(tb, ascii_name(r.name), head, x);
}

void convert_record(ThreadBuffer* tb, const CUpti_Activity* a) {
  switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      write_kernel(tb, *reinterpret_cast<const CUpti_ActivityKernel10*>(a));
      break;
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto& copy = *reinterpret_cast<const CUpti_ActivityMemcpy6*>(a);
      write_copy(tb, copy, copy.deviceId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
      const auto& copy = *reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(a);
      write_copy(tb, copy, copy.srcDeviceId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: write_memset(tb, *reinterpret_cast<const CUpti_ActivityMemset4*>(a)); break;
    case CUPTI_ACTIVITY_KIND_MEMORY2: write_memory(tb, *reinterpret_cast<const CUpti_ActivityMemory4*>(a)); break;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      write_sync(tb, *reinterpret_cast<const CUpti_ActivitySynchronization2*>(a));
      break;
    case CUPTI_ACTIVITY_KIND_CUDA_EVENT: note_event(*reinterpret_cast<const CUpti_ActivityCudaEvent2*>(a)); break;
    // Only when ours: a second client (Kineto) enabling these kinds gets them, we do not.
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
      if (g_api_calls) {
        write_api(tb, *reinterpret_cast<const CUpti_ActivityAPI*>(a), a->kind == CUPTI_ACTIVITY_KIND_DRIVER);
      }
      break;
    case CUPTI_ACTIVITY_KIND_DEVICE:
      write_device(tb, *reinterpret_cast<const CUpti_ActivityDevice5*>(a));
      break;
    default: break;  // kinds we did not enable (or CUPTI adds on its own): skipped
  }
}

void buffer_done(uint8_t* data) {
  give_back(data);
  g_converted.fetch_add(1, std::memory_order_release);
  wake_count_waiters(&g_converted);
}

// A record CUPTI cannot step over ends the walk of its buffer: what is left is
// counted (kGpuUnreadable), not dropped in silence.
void buffer_cut_short(CUptiResult result) {
  const size_t read = g_cursor.last != nullptr ? static_cast<size_t>(reinterpret_cast<uint8_t*>(g_cursor.last) -
                                                                     g_cursor.data)
                                               : 0;
  ++g_unreadable_buffers;
  g_unreadable_bytes += g_cursor.valid > read ? g_cursor.valid - read : 0;
  g_unreadable_result = result;
}

// kGpuDropped / kGpuUnreadable when their counts moved; true when one was written.
bool write_counts(ThreadBuffer* tb) {
  const uint64_t dropped = g_dropped_total.load(std::memory_order_relaxed);
  if (dropped != g_dropped_written) {
    record_with_extra(tb, NameRef{}, Record{k(Kind::kGpuDropped), 0, 0, 0, now_ns(), dropped, 0}, nullptr, 0);
    g_dropped_written = dropped;
    return true;
  }
  if (g_unreadable_buffers != g_unreadable_written) {
    Record r{k(Kind::kGpuUnreadable), 0, static_cast<uint16_t>(g_unreadable_result), 0, now_ns(),
             g_unreadable_buffers, g_unreadable_bytes};
    record_with_extra(tb, NameRef{}, r, nullptr, 0);
    g_unreadable_written = g_unreadable_buffers;
    return true;
  }
  return false;
}

}  // namespace

void CUPTIAPI cupti_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = nullptr;
  *size = 0;
  *max_records = 0;  // as many as fit
  BufferHeader* h = nullptr;
  {
    PoolLock lock;
    h = g_pool.spare;
    if (h != nullptr) {
      g_pool.spare = h->next;
      --g_pool.spare_count;
    }
  }
  // None ready (the flusher keeps one): mapped here, outside the lock.
  if (h == nullptr) h = map_cupti_buffer(/*note_refusal=*/true);
  if (h == nullptr) return;
  note_held(h);
  *buffer = data_of(h);
  *size = kBufferBytes - kHeaderBytes;
}

void CUPTIAPI cupti_buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t size,
                                     size_t valid_size) {
  // CUPTI's own count of records it could not store, asked outside our lock.
  size_t dropped = 0;
  const CuptiApi* api = cupti();
  if (api != nullptr && !g_forked.load(std::memory_order_relaxed) &&
      api->get_num_dropped(context, stream_id, &dropped) == CUPTI_SUCCESS && dropped != 0) {
    g_dropped_total.fetch_add(dropped, std::memory_order_relaxed);
  }
  if (buffer == nullptr) return;
  if (!take_held(buffer)) {  // not ours to reuse
    return_to_second_client(buffer, size, valid_size);
    return;
  }
  if (valid_size == 0 || g_forked.load(std::memory_order_relaxed)) {
    give_back(buffer);
    return;
  }
  // A second CUPTI client gets its copies now, before the buffer can be reused:
  // its flush returns only after this callback (cupti/share.cpp).
  share_with_second_client(buffer, valid_size);
  BufferHeader* h = header_of(buffer);
  h->next = nullptr;
  h->valid = valid_size;
  h->reference = g_correlation_reference.load(std::memory_order_relaxed);
  {
    PoolLock lock;
    if (g_pool.queue_tail != nullptr) {
      g_pool.queue_tail->next = h;
    } else {
      g_pool.queue_head = h;
    }
    g_pool.queue_tail = h;
  }
  g_completed.fetch_add(1, std::memory_order_release);
  if (ProcessState* ps = process_state()) sem_post(&ps->wake);
}

void gpu_buffers_make_ready() {
  if (!gpu_activity_enabled()) return;
  {
    PoolLock lock;
    if (g_pool.spare_count > 0) return;
  }
  BufferHeader* h = map_cupti_buffer(/*note_refusal=*/false);
  if (h == nullptr) return;
  // Faulted in here, not on the thread CUPTI writes it from (the header's page already was).
  prefault(reinterpret_cast<uint8_t*>(h) + 4096, kBufferBytes - 4096);
  PoolLock lock;
  h->next = g_pool.spare;
  g_pool.spare = h;
  ++g_pool.spare_count;
}

void set_gpu_clock_offset(int64_t offset_ns) { g_clock_offset.store(offset_ns, std::memory_order_relaxed); }
int64_t gpu_clock_offset() { return g_clock_offset.load(std::memory_order_relaxed); }

std::atomic<uint64_t> g_correlation_reference{0};

void gpu_activity_enable(uint32_t cupti_version, bool api_calls, uint64_t api_since) {
  g_api_calls = api_calls;
  g_api_since = api_since;
  g_sync_return_value = sync_record_has_return_value(cupti_version);
  g_enabled.store(true, std::memory_order_release);
}

int gpu_buffers_outstanding() {
  PoolLock lock;
  return g_pool.held_count;
}

bool gpu_activity_wait_converted(uint64_t deadline_ns) {
  const uint32_t target = g_completed.load(std::memory_order_acquire);
  if (ProcessState* ps = process_state()) sem_post(&ps->wake);
  return wait_for_count(&g_converted, target, deadline_ns);
}

bool gpu_activity_enabled() {
  return g_enabled.load(std::memory_order_acquire) && !g_forked.load(std::memory_order_relaxed);
}

ConvertStatus convert_gpu_activity(ThreadBuffer* tb) {
  const CuptiApi* api = cupti();
  if (api == nullptr || !gpu_activity_enabled()) return ConvertStatus::kDone;
  for (;;) {
    if (!tb->stream.has_room(kWorstUnitSlots)) return ConvertStatus::kNeedRoom;
    if (write_counts(tb)) continue;
    if (g_cursor.data == nullptr && !pop_completed(&g_cursor)) return ConvertStatus::kDone;
    CUpti_Activity* record = g_cursor.last;
    const CUptiResult rc = api->get_next_record(g_cursor.data, g_cursor.valid, &record);
    if (rc != CUPTI_SUCCESS) {
      if (rc != CUPTI_ERROR_MAX_LIMIT_REACHED) buffer_cut_short(rc);
      buffer_done(g_cursor.data);
      g_cursor = Cursor{};
      continue;
    }
    convert_record(tb, record);
    g_cursor.last = record;
  }
}

void gpu_activity_forget_after_fork() {
  g_forked.store(true, std::memory_order_relaxed);
  g_cursor = Cursor{};
  pthread_mutex_init(&g_pool.mu, nullptr);
  // The parent's buffers are left as they are (never unmapped here: not counted here).
  g_pool.spare = nullptr;
  g_pool.spare_count = 0;
  g_pool.queue_head = g_pool.queue_tail = nullptr;
  g_pool.held = nullptr;
  g_pool.held_count = 0;
}

}  // namespace torchprof::inject
