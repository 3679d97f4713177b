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

// FAKE_CUPTI_VERSION (else CUPTI_API_VERSION), as cuptiGetVersion reports it. The
// records are written in that CUPTI's layouts: each release's struct is the one before
// it with fields appended (or padding given a use), so an older CUPTI writes a prefix of
// this header's struct and a newer one this struct with more after it. The releases,
// by the API version they report (cupti_version.h's list; 13.1 to 13.3 from their headers):
constexpr uint32_t kCupti125 = 23;      // CUDA 12.5: Context3 (cigMode)
constexpr uint32_t kCupti126 = 24;      // 12.6: Memory4 (source)
constexpr uint32_t kCupti128 = 26;      // 12.8: Memcpy6, Synchronization2 (returnValue), CudaEvent2
constexpr uint32_t kCupti130 = 130000;  // 13.0: Kernel10 (isDeviceLaunched)
constexpr uint32_t kCupti131 = 130100;  // 13.1: Kernel11 (priority), Context4 (processId)
constexpr uint32_t kCupti132 = 130200;  // 13.2: Device6 (numTpcs); allowMultipleSubscribers
constexpr uint32_t kCupti133 = 130300;  // 13.3: Kernel12 (executionModel)
uint32_t reported_version();

// Size of the record struct CUPTI uses for `kind` in the reported version, 0 when
// the fake never writes that kind.
size_t record_size(uint32_t kind);
// A record kind no CUPTI writes: cuptiActivityGetNextRecord cannot step over it.
constexpr uint32_t kUnreadableKind = 0x7ffffff0u;

// Callback subscription as CUPTI does it. Up to 13.1 one subscriber at a time: another
// subscribe gets CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (cuptiSubscribe_v2 also
// names the holder in oldSubscriberName). From 13.2 the first subscriber's choice is the
// process's: cuptiSubscribe_v2 with allowMultipleSubscribers lets others in, each through
// cuptiSubscribe_v2 asking the same (a legacy cuptiSubscribe is refused then). Each
// subscriber has its own enable bits, userdata and correlationData slot per call.
constexpr int kMaxSubscribers = 4;

class CallbackRegistry {
 public:
  CallbackRegistry();
  // `params` null for the legacy cuptiSubscribe.
  CUptiResult subscribe(CUpti_SubscriberHandle* handle, CUpti_CallbackFunc callback, void* userdata,
                        const CUpti_SubscriberParams* params, bool v2);
  CUptiResult unsubscribe(CUpti_SubscriberHandle handle);
  void unsubscribe_all();
  CUptiResult enable_callback(uint32_t enable, CUpti_SubscriberHandle handle, CUpti_CallbackDomain domain,
                              CUpti_CallbackId cbid);
  CUptiResult enable_domain(uint32_t enable, CUpti_SubscriberHandle handle, CUpti_CallbackDomain domain);
  CUptiResult enable_all(uint32_t enable, CUpti_SubscriberHandle handle);
  CUptiResult get_state(uint32_t* enable, CUpti_SubscriberHandle handle, CUpti_CallbackDomain domain,
                        CUpti_CallbackId cbid);
  // Calls each subscriber that enabled the callback (without holding any lock). For an
  // API callback, data->correlationData points at kMaxSubscribers slots of the call:
  // subscriber i gets slot i.
  void fire(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data);
  int subscriber_count();

 private:
  struct Subscriber {
    bool used = false;
    CUpti_CallbackFunc callback = nullptr;
    void* userdata = nullptr;
    std::string name;
    std::array<std::vector<uint8_t>, CUPTI_CB_DOMAIN_SIZE> enabled;
  };
  Subscriber* find(CUpti_SubscriberHandle handle);

  std::mutex mutex_;
  int mode_ = 0;  // 0: nobody, 1: one subscriber only, 2: several allowed (13.2+)
  std::array<Subscriber, kMaxSubscribers> subscribers_;
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

constexpr uint32_t kApiFilterSize = 2048;

struct State {
  CallbackRegistry callbacks;
  // Process-wide, as in CUPTI: the API records turned off per cbid (cuptiActivityEnable
  // RuntimeApi/DriverApi), whether every query gets a sync record, the attributes set.
  std::array<std::array<std::atomic<bool>, kApiFilterSize>, 2> api_off{};
  std::atomic<bool> all_sync_records{true};
  std::atomic<bool> cuda_event_device_timestamps{false};
  std::mutex attribute_mutex;
  std::map<uint32_t, uint64_t> attributes;
  ActivityBuffers activity;
  RuntimeState runtime;
  TimestampSource timestamps;
  std::atomic<uint32_t> thread_id_type{CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT};
  const uint32_t version = reported_version();  // read once, at load (or fork)
};

// Process-wide state; never destroyed, replaced by a fresh one in a forked child.
State& state();

// The CPU clock records use: the registered timestamp callback, else raw_now_ns().
uint64_t now_ns();
// CUPTI's own clock, without a timestamp callback: Unix-epoch ns, as CUPTI's are (Kineto
// before its TSC callback compares them with system_clock), CLOCK_REALTIME
// [+ FAKE_CUPTI_CLOCK_OFFSET_NS]. GPU timelines run on it.
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
