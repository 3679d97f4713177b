// Drives libfake_cupti the way a CUPTI subscriber does and checks that what it
// hands back is what real CUPTI would: record kinds and layouts, names,
// durations, streams, correlation ids matching the API callbacks, buffer
// delivery, timestamps, drop counts and the FAKE_CUPTI_* failure modes.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "fake_cuda.h"
#include "fake_cupti_test_support.h"

using fake_cupti_test::ApiEvent;
using fake_cupti_test::of_kind;
using fake_cupti_test::Record;
using fake_cupti_test::TestSubscriber;

namespace {

std::atomic<int> g_injection_calls{0};

const Record* find_by_correlation(const std::vector<Record>& records, uint32_t kind, uint32_t correlation) {
  for (const Record& record : records) {
    if (record.kind != kind) continue;
    uint32_t id = 0;
    switch (kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: id = record.as<CUpti_ActivityKernel10>().correlationId; break;
      case CUPTI_ACTIVITY_KIND_MEMCPY: id = record.as<CUpti_ActivityMemcpy6>().correlationId; break;
      case CUPTI_ACTIVITY_KIND_MEMSET: id = record.as<CUpti_ActivityMemset4>().correlationId; break;
      case CUPTI_ACTIVITY_KIND_MEMORY2: id = record.as<CUpti_ActivityMemory4>().correlationId; break;
      case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: id = record.as<CUpti_ActivitySynchronization2>().correlationId; break;
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: id = record.as<CUpti_ActivityAPI>().correlationId; break;
      default: break;
    }
    if (id == correlation) return &record;
  }
  return nullptr;
}

std::vector<ApiEvent> events_for(const std::vector<ApiEvent>& events, uint32_t correlation) {
  std::vector<ApiEvent> out;
  for (const ApiEvent& event : events) {
    if (event.correlation == correlation) out.push_back(event);
  }
  return out;
}

uint64_t plain_clock() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t shifted_clock() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return 1000000000000000ull + static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

// Found by fakecuda_init through dlsym(RTLD_DEFAULT), like a preloaded tool's.
extern "C" void fake_selftest_subscribe_in_init();  // fake_cupti_realism_test.cpp

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  g_injection_calls.fetch_add(1);
  fake_selftest_subscribe_in_init();
  return 1;
}

TEST_CASE("version, result strings and callback names come from this header version") {
  uint32_t version = 0;
  REQUIRE(cuptiGetVersion(&version) == CUPTI_SUCCESS);
  CHECK(version == CUPTI_API_VERSION);
  setenv("FAKE_CUPTI_VERSION", "120000", 1);
  REQUIRE(cuptiGetVersion(&version) == CUPTI_SUCCESS);
  CHECK(version == 120000u);
  unsetenv("FAKE_CUPTI_VERSION");

  const char* text = nullptr;
  REQUIRE(cuptiGetResultString(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, &text) == CUPTI_SUCCESS);
  CHECK(std::string(text) == "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED");
  REQUIRE(cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &text) ==
          CUPTI_SUCCESS);
  CHECK(std::string(text) == "cudaLaunchKernel_v7000");
  REQUIRE(cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &text) ==
          CUPTI_SUCCESS);
  CHECK(std::string(text) == "cuLaunchKernel");
  CHECK(cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, 999999, &text) == CUPTI_ERROR_INVALID_PARAMETER);
}

TEST_CASE("fakecuda_init calls InitializeInjection exactly once") {
  fakecuda_init();
  fakecuda_init();
  CHECK(g_injection_calls.load() == 1);
}

TEST_CASE("only one subscriber at a time") {
  CUpti_SubscriberHandle first = nullptr;
  CUpti_SubscriberHandle second = nullptr;
  REQUIRE(cuptiSubscribe(&first, nullptr, nullptr) == CUPTI_SUCCESS);
  CHECK(cuptiSubscribe(&second, nullptr, nullptr) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  CHECK(cuptiUnsubscribe(first) == CUPTI_SUCCESS);
  CHECK(cuptiUnsubscribe(first) == CUPTI_ERROR_INVALID_PARAMETER);
  REQUIRE(cuptiSubscribe(&second, nullptr, nullptr) == CUPTI_SUCCESS);
  CHECK(cuptiUnsubscribe(second) == CUPTI_SUCCESS);
}

TEST_CASE("FAKE_CUPTI_FAIL=unknown fails every call like CUPTI without a driver") {
  setenv("FAKE_CUPTI_FAIL", "unknown", 1);
  CUpti_SubscriberHandle handle = nullptr;
  uint64_t timestamp = 0;
  size_t dropped = 0;
  CHECK(cuptiSubscribe(&handle, nullptr, nullptr) == CUPTI_ERROR_UNKNOWN);
  CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_ERROR_UNKNOWN);
  CHECK(cuptiActivityFlushAll(0) == CUPTI_ERROR_UNKNOWN);
  CHECK(cuptiGetTimestamp(&timestamp) == CUPTI_ERROR_UNKNOWN);
  CHECK(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_ERROR_UNKNOWN);
  CHECK(cuptiFinalize() == CUPTI_ERROR_UNKNOWN);
  uint32_t version = 0;
  CHECK(cuptiGetVersion(&version) == CUPTI_SUCCESS);
  // The "CUDA" side keeps working: only the profiler is locked out.
  CHECK(fakecuda_launch_kernel("_Z1kv", 1000, 7, nullptr) != 0u);
  unsetenv("FAKE_CUPTI_FAIL");
  REQUIRE(cuptiSubscribe(&handle, nullptr, nullptr) == CUPTI_SUCCESS);
  CHECK(cuptiUnsubscribe(handle) == CUPTI_SUCCESS);
}

TEST_CASE("FAKE_CUPTI_FAIL=subscriber: the slot is taken, everything else works") {
  setenv("FAKE_CUPTI_FAIL", "subscriber", 1);
  CUpti_SubscriberHandle handle = nullptr;
  CHECK(cuptiSubscribe(&handle, nullptr, nullptr) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  char old_name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = {};
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.oldSubscriberName = old_name;
  params.oldSubscriberSize = sizeof(old_name);
  CHECK(cuptiSubscribe_v2(&handle, nullptr, nullptr, &params) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  CHECK(std::string(old_name).find("CUPTI") == 0);
  uint64_t timestamp = 0;
  CHECK(cuptiGetTimestamp(&timestamp) == CUPTI_SUCCESS);
  CHECK(timestamp > 0u);
  unsetenv("FAKE_CUPTI_FAIL");
}

TEST_CASE("kernel launches: records, callbacks and API records share the correlation id") {
  TestSubscriber subscriber({CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_RUNTIME});
  REQUIRE(subscriber.ok());
  FakeKernelConfig config{{4, 2, 1}, {256, 1, 1}, 1024, 2048, 40};
  // Long GPU durations cost nothing here (nothing waits for them) and keep the
  // second launch inside the first kernel even on a loaded machine.
  const uint32_t first = fakecuda_launch_kernel("_Z6matmulPfS_S_i", 300000000, 113, &config);
  const uint32_t second = fakecuda_launch_kernel("_Z4reluPfi", 200000, 113, nullptr);
  REQUIRE(first != second);
  const std::vector<Record> records = subscriber.flush();

  const Record* a = find_by_correlation(records, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, first);
  const Record* b = find_by_correlation(records, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, second);
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  const auto& k1 = a->as<CUpti_ActivityKernel10>();
  const auto& k2 = b->as<CUpti_ActivityKernel10>();
  CHECK(std::string(k1.name) == "_Z6matmulPfS_S_i");
  CHECK(std::string(k2.name) == "_Z4reluPfi");
  CHECK(k1.end - k1.start == 300000000u);
  CHECK(k2.end - k2.start == 200000u);
  CHECK(k1.streamId == 113u);
  CHECK(k1.deviceId == 0u);
  CHECK(k1.contextId == 1u);
  CHECK(k1.gridX == 4);
  CHECK(k1.blockX == 256);
  CHECK(k1.registersPerThread == 40);
  CHECK(k1.dynamicSharedMemory == 2048);
  CHECK(k2.blockX == 128);
  CHECK(k1.start >= k1.queued + kFakeLaunchLatencyNs);
  CHECK(k2.start == k1.end);  // same stream, launched while the first still runs
  CHECK(k1.completed == k1.end);

  const std::vector<ApiEvent> calls = events_for(subscriber.api_events(), first);
  REQUIRE(calls.size() == 2);
  CHECK(calls[0].site == CUPTI_API_ENTER);
  CHECK(calls[1].site == CUPTI_API_EXIT);
  CHECK(calls[0].function == "cudaLaunchKernel");
  CHECK(calls[0].symbol == "_Z6matmulPfS_S_i");
  CHECK(calls[0].cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
  CHECK(calls[0].correlation_data == calls[1].correlation_data);

  const Record* api = find_by_correlation(records, CUPTI_ACTIVITY_KIND_RUNTIME, first);
  REQUIRE(api != nullptr);
  const auto& api_record = api->as<CUpti_ActivityAPI>();
  CHECK(api_record.cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
  CHECK(api_record.start <= k1.queued);
  CHECK(k1.queued <= api_record.end);
  CHECK(calls[0].timestamp <= api_record.start);
  CHECK(api_record.end <= calls[1].timestamp);
  CHECK(api_record.processId == static_cast<uint32_t>(getpid()));
}

TEST_CASE("driver launches report in the driver domain") {
  TestSubscriber subscriber({CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_DRIVER});
  REQUIRE(subscriber.ok());
  const uint32_t id = fakecuda_driver_launch_kernel("triton_poi_fused_add_0", 50000, 7, nullptr);
  const std::vector<Record> records = subscriber.flush();
  REQUIRE(find_by_correlation(records, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, id) != nullptr);
  const Record* api = find_by_correlation(records, CUPTI_ACTIVITY_KIND_DRIVER, id);
  REQUIRE(api != nullptr);
  CHECK(api->as<CUpti_ActivityAPI>().cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
  const std::vector<ApiEvent> calls = events_for(subscriber.api_events(), id);
  REQUIRE(calls.size() == 2);
  CHECK(calls[0].domain == CUPTI_CB_DOMAIN_DRIVER_API);
  CHECK(calls[0].function == "cuLaunchKernel");
}

TEST_CASE("memcpy, memset, memory and synchronization records") {
  TestSubscriber subscriber({CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_MEMORY2,
                             CUPTI_ACTIVITY_KIND_SYNCHRONIZATION});
  REQUIRE(subscriber.ok());
  const uint32_t copy = fakecuda_memcpy(1048576, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 121, 40000000, 0);
  const uint32_t set = fakecuda_memset(4096, 121, 10000);
  const uint64_t address = fakecuda_malloc(1000);
  CHECK(address % 512 == 0u);
  CHECK(fakecuda_free(address) == 1);
  CHECK(fakecuda_free(address) == 0);
  const uint64_t stream_end = fakecuda_stream_end(121);
  const uint32_t sync = fakecuda_synchronize(121);
  CHECK(fakecuda_now() >= stream_end);
  const std::vector<Record> records = subscriber.flush();

  const Record* c = find_by_correlation(records, CUPTI_ACTIVITY_KIND_MEMCPY, copy);
  REQUIRE(c != nullptr);
  const auto& memcpy_record = c->as<CUpti_ActivityMemcpy6>();
  CHECK(memcpy_record.bytes == 1048576u);
  CHECK(memcpy_record.copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
  CHECK(memcpy_record.srcKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE);
  CHECK(memcpy_record.dstKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  CHECK(memcpy_record.end - memcpy_record.start == 40000000u);
  CHECK(memcpy_record.streamId == 121u);

  const Record* s = find_by_correlation(records, CUPTI_ACTIVITY_KIND_MEMSET, set);
  REQUIRE(s != nullptr);
  CHECK(s->as<CUpti_ActivityMemset4>().bytes == 4096u);
  CHECK(s->as<CUpti_ActivityMemset4>().start == memcpy_record.end);

  const std::vector<Record> memory = of_kind(records, CUPTI_ACTIVITY_KIND_MEMORY2);
  REQUIRE(memory.size() == 2);
  CHECK(memory[0].as<CUpti_ActivityMemory4>().memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION);
  CHECK(memory[1].as<CUpti_ActivityMemory4>().memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE);
  CHECK(memory[0].as<CUpti_ActivityMemory4>().bytes == 1000u);
  CHECK(memory[1].as<CUpti_ActivityMemory4>().bytes == 1000u);
  CHECK(memory[1].as<CUpti_ActivityMemory4>().address == address);

  const Record* w = find_by_correlation(records, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, sync);
  REQUIRE(w != nullptr);
  const auto& sync_record = w->as<CUpti_ActivitySynchronization2>();
  CHECK(sync_record.type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE);
  CHECK(sync_record.streamId == 121u);
  CHECK(sync_record.end >= stream_end);
  bool saw_sync_callback = false;
  for (const auto& event : subscriber.other_events()) {
    saw_sync_callback |= event.domain == CUPTI_CB_DOMAIN_SYNCHRONIZE &&
                         event.cbid == CUPTI_CBID_SYNCHRONIZE_STREAM_SYNCHRONIZED;
  }
  CHECK(saw_sync_callback);
}

TEST_CASE("graph launches: kernels carry the graph ids and the cudaGraphLaunch correlation id") {
  TestSubscriber subscriber({CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL});
  REQUIRE(subscriber.ok());
  const char* names[] = {"_Z5nodeAPf", "_Z5nodeBPf"};
  const uint64_t durations[] = {100000, 200000};
  const uint32_t id = fakecuda_graph_launch(3, 2, names, durations, 7);
  const std::vector<Record> kernels = of_kind(subscriber.flush(), CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  REQUIRE(kernels.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    const auto& kernel = kernels[i].as<CUpti_ActivityKernel10>();
    CHECK(kernel.correlationId == id);
    CHECK(kernel.graphId == 3u);
    CHECK(kernel.graphNodeId == ((3ull << 32) | (i + 1)));
    CHECK(std::string(kernel.name) == names[i]);
    CHECK(kernel.end - kernel.start == durations[i]);
  }
  const std::vector<ApiEvent> calls = events_for(subscriber.api_events(), id);
  REQUIRE(calls.size() == 2);
  CHECK(calls[0].function == "cudaGraphLaunch");
}

TEST_CASE("a registered timestamp callback drives every timestamp") {
  TestSubscriber subscriber({CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL});
  REQUIRE(subscriber.ok());
  REQUIRE(cuptiActivityRegisterTimestampCallback(&shifted_clock) == CUPTI_SUCCESS);
  uint64_t timestamp = 0;
  REQUIRE(cuptiGetTimestamp(&timestamp) == CUPTI_SUCCESS);
  CHECK(timestamp >= 1000000000000000ull);
  fakecuda_launch_kernel("_Z4tinyv", 1000, 99, nullptr);
  const std::vector<Record> kernels = of_kind(subscriber.flush(), CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  REQUIRE(kernels.size() == 1);
  CHECK(kernels[0].as<CUpti_ActivityKernel10>().start >= 1000000000000000ull);
  // There is no going back to CUPTI's own clock (nullptr is refused): a plain one takes over.
  CHECK(cuptiActivityRegisterTimestampCallback(nullptr) == CUPTI_ERROR_INVALID_PARAMETER);
  REQUIRE(cuptiActivityRegisterTimestampCallback(&plain_clock) == CUPTI_SUCCESS);
  REQUIRE(cuptiGetTimestamp(&timestamp) == CUPTI_SUCCESS);
  CHECK(timestamp < 1000000000000000ull);
}

TEST_CASE("dropped record counts: set by the workload, reset when read") {
  TestSubscriber subscriber({CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL});
  REQUIRE(subscriber.ok());
  fakecuda_set_dropped(5);
  size_t dropped = 0;
  REQUIRE(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS);
  CHECK(dropped == 5u);
  REQUIRE(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS);
  CHECK(dropped == 0u);
  // A client that refuses buffers loses records, and CUPTI counts them.
  subscriber.flush();
  TestSubscriber::set_buffer_size(0);
  fakecuda_launch_kernel("_Z4lostv", 1000, 7, nullptr);
  fakecuda_launch_kernel("_Z4lostv", 1000, 7, nullptr);
  TestSubscriber::set_buffer_size(64 * 1024);
  REQUIRE(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS);
  CHECK(dropped == 2u);
  CHECK(of_kind(subscriber.flush(), CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).empty());
}

TEST_CASE("full buffers and the flush period deliver on CUPTI's own thread") {
  TestSubscriber::set_buffer_size(4 * sizeof(CUpti_ActivityKernel10));
  TestSubscriber subscriber({CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL});
  REQUIRE(subscriber.ok());
  for (int i = 0; i < 10; ++i) fakecuda_launch_kernel("_Z4fillv", 1000, 5, nullptr);
  std::vector<Record> records;
  for (int wait = 0; wait < 200 && records.size() < 8; ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    for (Record& record : subscriber.delivered()) records.push_back(std::move(record));
  }
  REQUIRE(records.size() == 8);  // two full buffers of four, without any flush
  CHECK(records[0].delivered_on != std::this_thread::get_id());
  const std::vector<Record> rest = subscriber.flush();
  CHECK(rest.size() == 2);
  CHECK(rest[0].delivered_on == std::this_thread::get_id());
  TestSubscriber::set_buffer_size(64 * 1024);

  // A full buffer with a kernel still running waits until the kernel is done.
  TestSubscriber::set_buffer_size(2 * sizeof(CUpti_ActivityKernel10));
  fakecuda_launch_kernel("_Z6periodv", 100000000, 6, nullptr);
  fakecuda_launch_kernel("_Z6periodv", 1000, 6, nullptr);
  fakecuda_launch_kernel("_Z6periodv", 1000, 6, nullptr);  // the first buffer is full now
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(subscriber.delivered().empty());
  size_t seen = 0;
  for (int wait = 0; wait < 400 && seen == 0; ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    seen = subscriber.delivered().size();
  }
  CHECK(seen == 2u);
  TestSubscriber::set_buffer_size(64 * 1024);
  subscriber.flush();
}

TEST_CASE("cuptiActivityGetNextRecord stops at the end and on unknown kinds") {
  alignas(8) uint8_t buffer[2 * sizeof(CUpti_ActivityAPI)] = {};
  CUpti_ActivityAPI api{};
  api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  std::memcpy(buffer, &api, sizeof(api));
  CUpti_Activity* record = nullptr;
  REQUIRE(cuptiActivityGetNextRecord(buffer, sizeof(api), &record) == CUPTI_SUCCESS);
  CHECK(reinterpret_cast<uint8_t*>(record) == buffer);
  CHECK(cuptiActivityGetNextRecord(buffer, sizeof(api), &record) == CUPTI_ERROR_MAX_LIMIT_REACHED);
  record = nullptr;
  CHECK(cuptiActivityGetNextRecord(buffer, 0, &record) == CUPTI_ERROR_MAX_LIMIT_REACHED);
  reinterpret_cast<CUpti_ActivityAPI*>(buffer + sizeof(api))->kind = static_cast<CUpti_ActivityKind>(999);
  record = nullptr;
  REQUIRE(cuptiActivityGetNextRecord(buffer, sizeof(buffer), &record) == CUPTI_SUCCESS);
  CHECK(cuptiActivityGetNextRecord(buffer, sizeof(buffer), &record) == CUPTI_ERROR_INVALID_KIND);
}

TEST_CASE("a fresh process: init callbacks, device and context records first") {
  const bool ok = fake_cupti_test::in_child([] {
    TestSubscriber subscriber({CUPTI_ACTIVITY_KIND_DEVICE, CUPTI_ACTIVITY_KIND_CONTEXT,
                               CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL});
    if (!subscriber.ok()) return false;
    const int before = g_injection_calls.load();
    if (fakecuda_init() != 1 || g_injection_calls.load() != before + 1) return false;
    bool context_created = false;
    for (const auto& event : subscriber.other_events()) {
      context_created |= event.domain == CUPTI_CB_DOMAIN_RESOURCE && event.cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED;
    }
    fakecuda_launch_kernel("_Z1kv", 1000, 7, nullptr);
    const std::vector<Record> records = subscriber.flush();
    if (!context_created || records.size() != 3) return false;
    const auto& device = records[0].as<CUpti_ActivityDevice5>();
    const auto& context = records[1].as<CUpti_ActivityContext3>();
    return records[0].kind == CUPTI_ACTIVITY_KIND_DEVICE && std::string(device.name) == "Fake H200" &&
           device.computeCapabilityMajor == 9 && device.numMultiprocessors == 132 &&
           records[1].kind == CUPTI_ACTIVITY_KIND_CONTEXT && context.contextId == 1 && context.deviceId == 0 &&
           records[2].kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  });
  CHECK(ok);
}

TEST_CASE("external correlation ids are reported for each API call") {
  TestSubscriber subscriber({CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL});
  REQUIRE(subscriber.ok());
  REQUIRE(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 42) == CUPTI_SUCCESS);
  const uint32_t id = fakecuda_launch_kernel("_Z1kv", 1000, 7, nullptr);
  uint64_t last = 0;
  REQUIRE(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last) == CUPTI_SUCCESS);
  CHECK(last == 42u);
  // One per API call: the launch and the two driver calls inside it.
  const std::vector<Record> external = of_kind(subscriber.flush(), CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  REQUIRE(external.size() == 3);
  for (const Record& record : external) CHECK(record.as<CUpti_ActivityExternalCorrelation>().externalId == 42u);
  CHECK(external[0].as<CUpti_ActivityExternalCorrelation>().correlationId == id);
  CHECK(external[2].as<CUpti_ActivityExternalCorrelation>().correlationId == id + 2);
}
