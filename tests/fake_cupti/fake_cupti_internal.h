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

// Size of the record struct CUPTI uses for `kind` in this header version, 0 when
// the fake never writes that kind.
size_t record_size(uint32_t kind);

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

// Activity buffers: records are copied into client buffers, 8-byte aligned and
// packed back to back; full buffers go to a worker thread that hands them to
// bufferCompleted, like CUPTI's own thread.
class ActivityBuffers {
 public:
  ~ActivityBuffers();
  CUptiResult register_callbacks(CUpti_BuffersCallbackRequestFunc requested,
                                 CUpti_BuffersCallbackCompleteFunc completed);
  CUptiResult set_enabled(uint32_t kind, bool on);
  bool enabled(uint32_t kind) const;
  bool any_enabled() const;
  void append(const void* record, size_t size);
  // Hands every non-empty buffer (and spare empty ones) to bufferCompleted on
  // the calling thread.
  void flush_all();
  void set_flush_period_ms(uint32_t ms);
  size_t take_dropped();
  void add_dropped(uint64_t n);
  // Stops the worker without delivering (process exit, cuptiFinalize).
  void stop_worker();
  void forget_worker_after_fork();

 private:
  struct Buffer {
    uint8_t* data = nullptr;
    size_t size = 0;
    size_t used = 0;
    size_t records = 0;
    size_t max_records = 0;
  };
  bool fits(const Buffer& buffer, size_t size) const;
  bool request_buffer(Buffer* out);
  void deliver(std::deque<Buffer>* buffers);
  void worker_loop();
  void take_all_locked(std::deque<Buffer>* out);

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
  uint32_t flush_period_ms_ = 100;
  std::atomic<uint64_t> dropped_{0};
};

// The fake CUDA side: GPU timelines per stream, live allocations, ids.
struct RuntimeState {
  std::mutex mutex;
  std::map<uint32_t, uint64_t> stream_end;
  std::map<uint64_t, uint64_t> live_allocations;
  // Kernel names handed out in records stay valid for the life of the process.
  std::set<std::string> names;
  uint64_t next_address = 0x7f0000000000ull;
  int64_t next_grid_id = 1;
  bool static_records_done = false;
  std::atomic<bool> initialized{false};
  std::atomic<uint32_t> next_correlation{1};
};

struct State {
  CallbackRegistry callbacks;
  ActivityBuffers activity;
  RuntimeState runtime;
  std::atomic<CUpti_TimestampCallbackFunc> timestamp_callback{nullptr};
  std::atomic<uint32_t> thread_id_type{CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT};
};

// Process-wide state; never destroyed, replaced by a fresh one in a forked child.
State& state();

uint64_t now_ns();
uint32_t current_thread_id();
CUcontext fake_context();

// EXTERNAL_CORRELATION records for the ids pushed on this thread.
void emit_external_correlations(uint32_t correlation_id);

// Device and context records, written once before the first other record or
// at the first flush, for the kinds enabled at that moment.
void emit_static_records_once();

}  // namespace fake_cupti
