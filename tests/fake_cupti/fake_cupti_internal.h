// Internal state of libfake_cupti, shared by the exported CUPTI functions
// (fake_cupti_api.cpp), the activity buffer machinery (fake_activity_buffers.cpp)
// and the fake CUDA calls (fake_cuda_runtime.cpp, fake_cupti_records.cpp).
#pragma once

#include <cupti.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace fake_cupti {

// FAKE_CUPTI_FAIL=unknown: every call fails like CUPTI without a driver.
bool fail_unknown();
// FAKE_CUPTI_FAIL=subscriber: the subscriber slot is taken by "another tool".
bool fail_subscriber();
// FAKE_CUPTI_FLUSH_DELAY_MS: cuptiActivityFlushAll takes this long before it
// delivers (CUPTI waiting on the device or on its worker), 0 by default.
uint32_t flush_delay_ms();

// The runtime or driver callback of that name ("cudaGetDevice", "cuCtxGetCurrent").
bool find_callback_by_name(const char* name, CUpti_CallbackDomain* domain, CUpti_CallbackId* cbid);

// FAKE_CUPTI_VERSION (else CUPTI_API_VERSION), as cuptiGetVersion reports it.
uint32_t reported_version();
// True when the reported version is one whose CUPTI writes kernel, device and
// context records in a newer struct than this header's (13.2 brought
// CUpti_ActivityKernel11, Device6, Context4). The fake stands for those with the
// header's structs rearranged (see fake_cupti_records.cpp), so a reader of the old
// layout gets wrong values, as it would from the real newer CUPTI.
bool newer_record_layouts();
// As newer_record_layouts, for kernel records: from 13.1 on.
bool newer_kernel_layout();

// Size of the record struct CUPTI uses for `kind` in the reported version, 0 when
// the fake never writes that kind.
size_t record_size(uint32_t kind);
// A record kind no CUPTI writes: cuptiActivityGetNextRecord cannot step over it.
constexpr uint32_t kUnreadableKind = 0x7ffffff0u;

// Callback subscription: one subscriber, per-domain per-cbid enable bits.
class CallbackRegistry {
 public:
  CallbackRegistry();
  CUptiResult subscribe(CUpti_SubscriberHandle* handle, CUpti_CallbackFunc callback, void* userdata);
  CUptiResult unsubscribe(CUpti_SubscriberHandle handle);
  CUptiResult enable_callback(uint32_t enable, CUpti_SubscriberHandle handle, CUpti_CallbackDomain domain,
                              CUpti_CallbackId cbid);
  CUptiResult enable_domain(uint32_t enable, CUpti_SubscriberHandle handle, CUpti_CallbackDomain domain);
  CUptiResult enable_all(uint32_t enable, CUpti_SubscriberHandle handle);
  CUptiResult get_state(uint32_t* enable, CUpti_SubscriberHandle handle, CUpti_CallbackDomain domain,
                        CUpti_CallbackId cbid);
  // Calls the subscriber (without holding any lock) if the callback is on.
  void fire(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data);

 private:
  bool valid_handle(CUpti_SubscriberHandle handle) const;

  std::mutex mutex_;
  bool subscribed_ = false;
  CUpti_CallbackFunc callback_ = nullptr;
  void* userdata_ = nullptr;
  std::array<std::vector<uint8_t>, CUPTI_CB_DOMAIN_SIZE> enabled_;
};

// Activity buffers, as CUPTI hands them out: records are copied into client
// buffers, 8-byte aligned and packed back to back. A record of GPU work keeps its
// raw GPU times until its buffer is delivered; only then are they converted to the
// registered timestamp callback's clock (on the delivering thread, as CUPTI's
// post-processing does), and a record whose work had not ended by a forced flush
// is delivered with start = end = 0 ("not collected"). CUPTI's worker thread
// delivers only full buffers whose records are all complete; a default flush
// (cuptiActivityFlushAll(0)) also the partly filled ones that are complete; a
// forced flush every buffer.
class ActivityBuffers {
 public:
  ~ActivityBuffers();
  CUptiResult register_callbacks(CUpti_BuffersCallbackRequestFunc requested,
                                 CUpti_BuffersCallbackCompleteFunc completed);
  CUptiResult set_enabled(uint32_t kind, bool on);
  bool enabled(uint32_t kind) const;
  bool any_enabled() const;
  // `gpu_end` is the raw GPU end of a record of GPU work (kernel, copy, set), 0 for
  // a record whose times are taken on the CPU and are final when written.
  void append(const void* record, size_t size, uint64_t gpu_end = 0);
  // cuptiActivityFlushAll on the calling thread: forced, every buffer (spare empty
  // ones too); otherwise the buffers whose records are all complete.
  void flush_all(bool forced);
  void set_flush_period_ms(uint32_t ms);
  size_t take_dropped();
  void add_dropped(uint64_t n);
  // Stops the worker without delivering (process exit, cuptiFinalize).
  void stop_worker();
  void forget_worker_after_fork();

 private:
  struct GpuRecord {
    size_t offset = 0;    // of the record in the buffer
    uint64_t end = 0;     // raw GPU end
  };
  struct Buffer {
    uint8_t* data = nullptr;
    size_t size = 0;
    size_t used = 0;
    size_t records = 0;
    size_t max_records = 0;
    uint64_t last_gpu_end = 0;          // its records are complete once the GPU clock passed this
    std::vector<GpuRecord> gpu_records;  // times still raw
  };
  bool fits(const Buffer& buffer, size_t size) const;
  bool request_buffer(Buffer* out);
  // Converts the GPU times of `buffers` (zeroing what had not ended by `now`
  // when forced) and hands them to bufferCompleted.
  void deliver(std::deque<Buffer>* buffers, bool forced, uint64_t now);
  void worker_loop();

  mutable std::mutex mutex_;
  std::mutex delivery_mutex_;
  std::condition_variable wake_;
  CUpti_BuffersCallbackRequestFunc requested_ = nullptr;
  CUpti_BuffersCallbackCompleteFunc completed_ = nullptr;
  std::array<std::atomic<bool>, CUPTI_ACTIVITY_KIND_COUNT> kinds_{};
  Buffer current_;
  std::deque<Buffer> full_;
  std::deque<Buffer> spare_;
  std::thread* worker_ = nullptr;
  bool stopping_ = false;
  bool full_added_ = false;  // a buffer filled since the worker last looked
  uint32_t flush_period_ms_ = 100;
  std::atomic<uint64_t> dropped_{0};
};

// The fake CUDA side: GPU timelines per stream, live allocations, ids.
struct RuntimeState {
  std::mutex mutex;
  std::map<uint32_t, uint64_t> stream_end;
  std::map<uint64_t, uint64_t> live_allocations;
  // Kernel names handed out in records stay valid until CUDA is torn down at exit
  // (the runtime's exit handler, registered before CUDA calls InitializeInjection):
  // then they are wiped, as the driver frees them with the context.
  std::set<std::string> names;
  bool torn_down = false;
  uint64_t next_address = 0x7f0000000000ull;
  int64_t next_grid_id = 1;
  bool static_records_done = false;
  std::atomic<bool> initialized{false};
  std::atomic<uint32_t> next_correlation{1};
};

// The registered timestamp callback and where its clock stood against the raw
// clock when it was registered: GPU times are mapped onto it linearly.
struct TimestampSource {
  std::atomic<CUpti_TimestampCallbackFunc> callback{nullptr};
  std::mutex mutex;
  uint64_t raw0 = 0;
  uint64_t theirs0 = 0;
};

struct State {
  CallbackRegistry callbacks;
  ActivityBuffers activity;
  RuntimeState runtime;
  TimestampSource timestamps;
  std::atomic<uint32_t> thread_id_type{CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT};
  const bool newer_layouts = newer_record_layouts();  // read once, at load (or fork)
  const bool newer_kernels = newer_kernel_layout();
};

// Process-wide state; never destroyed, replaced by a fresh one in a forked child.
State& state();

// The CPU clock records use: the registered timestamp callback, else raw_now_ns().
uint64_t now_ns();
// The GPU's clock: CLOCK_MONOTONIC [+ FAKE_CUPTI_CLOCK_OFFSET_NS]. GPU timelines run on it.
uint64_t raw_now_ns();
// Raw GPU times onto the clock now_ns() reads, through the timestamp callback
// registered at this moment (late, like CUPTI's post-processing): one pair of
// readings per delivery, so differences of times in it stay exact.
struct GpuClockMap {
  bool active = false;  // no callback: raw times are the record times
  double rate = 1.0;
  uint64_t raw1 = 0;
  uint64_t theirs1 = 0;
  uint64_t map(uint64_t raw) const;
};
GpuClockMap gpu_clock_map();
void register_timestamp_callback(CUpti_TimestampCallbackFunc callback);
uint32_t current_thread_id();
uint32_t current_process_id();  // getpid(), read once per process
CUcontext fake_context();

// EXTERNAL_CORRELATION records for the ids pushed on this thread.
void emit_external_correlations(uint32_t correlation_id);

// Device and context records, written once before the first other record or
// at the first flush, for the kinds enabled at that moment.
void emit_static_records_once();

}  // namespace fake_cupti
