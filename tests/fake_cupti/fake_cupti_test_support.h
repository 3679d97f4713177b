// A minimal CUPTI subscriber for the fake's self-tests: it subscribes, registers
// buffers, walks delivered buffers with cuptiActivityGetNextRecord and keeps a
// copy of every record and of every API callback it saw.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace fake_cupti_test {

struct Record {
  uint32_t kind = 0;
  std::vector<uint64_t> storage;  // 8-byte aligned copy of the record
  std::thread::id delivered_on;

  template <typename T>
  const T& as() const {
    return *reinterpret_cast<const T*>(storage.data());
  }
};

struct ApiEvent {
  CUpti_CallbackDomain domain = CUPTI_CB_DOMAIN_INVALID;
  CUpti_CallbackId cbid = 0;
  CUpti_ApiCallbackSite site = CUPTI_API_ENTER;
  std::string function;
  std::string symbol;
  uint32_t correlation = 0;
  const uint64_t* correlation_data = nullptr;
  uint64_t correlation_value = 0;  // *correlation_data as the callback found it
  std::vector<std::string> ranges;  // the calling thread's range stack at the callback
  uint64_t timestamp = 0;
  std::thread::id thread;
};

struct OtherEvent {
  CUpti_CallbackDomain domain = CUPTI_CB_DOMAIN_INVALID;
  CUpti_CallbackId cbid = 0;
};

class TestSubscriber {
 public:
  // Subscribes, enables every domain and the given activity kinds.
  explicit TestSubscriber(std::initializer_list<CUpti_ActivityKind> kinds);
  ~TestSubscriber();
  TestSubscriber(const TestSubscriber&) = delete;
  TestSubscriber& operator=(const TestSubscriber&) = delete;

  bool ok() const { return status_ == CUPTI_SUCCESS; }
  CUptiResult status() const { return status_; }
  // Waits until the fake GPU is idle, forced flush, then everything delivered so
  // far (and clears it).
  std::vector<Record> flush();
  // Everything delivered so far, without flushing.
  std::vector<Record> delivered();
  size_t buffers_delivered() const;
  std::vector<ApiEvent> api_events() const;
  std::vector<OtherEvent> other_events() const;

  // The range stack the callback copies into ApiEvent::ranges.
  static std::vector<std::string>& range_stack();
  // Size of the buffers handed to CUPTI; 0 makes bufferRequested refuse.
  static void set_buffer_size(size_t size);

 private:
  static void CUPTIAPI on_callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                   const void* data);
  static void CUPTIAPI on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records);
  static void CUPTIAPI on_buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size,
                                           size_t valid);

  CUptiResult status_ = CUPTI_SUCCESS;
  CUpti_SubscriberHandle handle_ = nullptr;
  std::vector<CUpti_ActivityKind> kinds_;
};

// All records of one kind (kernel records: CONCURRENT_KERNEL).
std::vector<Record> of_kind(const std::vector<Record>& records, uint32_t kind);

// Runs body in a forked child (fresh fake state there); true if it returned true.
bool in_child(const std::function<bool()>& body);

}  // namespace fake_cupti_test
