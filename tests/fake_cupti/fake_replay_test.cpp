// The fake's replay entry points (fake_replay.cpp): API calls with the caller's
// callback id, name and correlation id, and GPU records with the caller's device,
// stream, times and fields, delivered as CUPTI delivers its own.
#include <doctest/doctest.h>

#include <string>

#include "fake_cuda.h"
#include "fake_cupti_test_support.h"

using fake_cupti_test::ApiEvent;
using fake_cupti_test::of_kind;
using fake_cupti_test::Record;
using fake_cupti_test::TestSubscriber;

namespace {

FakeGpuRecord kernel_record(uint64_t start, uint32_t correlation, const char* name) {
  FakeGpuRecord r{};
  r.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  r.device = 3;
  r.context = 1;
  r.stream = 21;
  r.start = start;
  r.end = start + 7000;
  r.correlation_id = correlation;
  r.name = name;
  r.grid[0] = 64;
  r.grid[1] = r.grid[2] = 1;
  r.block[0] = 128;
  r.block[1] = r.block[2] = 1;
  r.registers_per_thread = 90;
  r.static_shared_memory = 49152;
  return r;
}

std::vector<ApiEvent> with_correlation(const std::vector<ApiEvent>& events, uint32_t correlation) {
  std::vector<ApiEvent> out;
  for (const ApiEvent& e : events) {
    if (e.correlation == correlation) out.push_back(e);
  }
  return out;
}

}  // namespace

TEST_CASE("replayed API calls: the caller's cbid, name and correlation id, nested on the thread") {
  TestSubscriber subscriber({CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER});
  REQUIRE(subscriber.ok());
  const uint32_t outer = 40000001;
  REQUIRE(fakecuda_api_enter(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
                             "cudaMemcpyAsync", outer) == 1);
  REQUIRE(fakecuda_api_enter(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync, "cuMemcpyAsync",
                             outer + 1) == 1);
  CHECK(fakecuda_api_exit() == outer + 1);
  CHECK(fakecuda_api_exit() == outer);
  CHECK(fakecuda_api_exit() == 0u);  // nothing open
  CHECK(fakecuda_api_enter(CUPTI_CB_DOMAIN_RESOURCE, 1, "x", 5) == 0);
  // Ids the fake makes up afterwards stay clear of the replayed ones.
  CHECK(fakecuda_memset(8, 7, 1000) > outer + 1);

  const std::vector<ApiEvent> calls = with_correlation(subscriber.api_events(), outer);
  REQUIRE(calls.size() == 2);
  CHECK(calls[0].site == CUPTI_API_ENTER);
  CHECK(calls[1].site == CUPTI_API_EXIT);
  CHECK(calls[0].domain == CUPTI_CB_DOMAIN_RUNTIME_API);
  CHECK(calls[0].cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020);
  CHECK(calls[0].function == "cudaMemcpyAsync");
  CHECK(calls[0].correlation_data == calls[1].correlation_data);
  const std::vector<ApiEvent> inner = with_correlation(subscriber.api_events(), outer + 1);
  REQUIRE(inner.size() == 2);
  CHECK(inner[0].domain == CUPTI_CB_DOMAIN_DRIVER_API);
  CHECK(inner[0].function == "cuMemcpyAsync");

  const std::vector<Record> records = subscriber.flush();
  bool runtime_record = false;
  bool driver_record = false;
  for (const Record& r : records) {
    if (r.kind != CUPTI_ACTIVITY_KIND_RUNTIME && r.kind != CUPTI_ACTIVITY_KIND_DRIVER) continue;
    const auto& api = r.as<CUpti_ActivityAPI>();
    if (api.correlationId == outer) runtime_record = r.kind == CUPTI_ACTIVITY_KIND_RUNTIME && api.cbid == calls[0].cbid;
    if (api.correlationId == outer + 1) driver_record = r.kind == CUPTI_ACTIVITY_KIND_DRIVER;
  }
  CHECK(runtime_record);
  CHECK(driver_record);
}

TEST_CASE("replayed GPU records keep the caller's device, stream, times and fields") {
  TestSubscriber subscriber({CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                             CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION});
  REQUIRE(subscriber.ok());
  const uint64_t start = fakecuda_now() + 1000000;
  {
    std::string name = "void cutlass::Kernel<cutlass_80_tensorop>(Params)";
    const FakeGpuRecord kernel = kernel_record(start, 901, name.c_str());
    CHECK(fakecuda_queue_record(&kernel) == 1);
    name.assign(name.size(), 'x');  // the record keeps its own copy
  }
  FakeGpuRecord copy{};
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.device = 3;
  copy.stream = 22;
  copy.start = start + 10;
  copy.end = start + 13010;
  copy.correlation_id = 902;
  copy.copy_kind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  copy.src_kind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  copy.dst_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  copy.bytes = 12881920;
  CHECK(fakecuda_queue_record(&copy) == 1);
  FakeGpuRecord set = copy;
  set.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  set.correlation_id = 903;
  set.dst_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  CHECK(fakecuda_queue_record(&set) == 1);
  FakeGpuRecord sync{};
  sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  sync.context = 1;
  sync.stream = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  sync.start = start;
  sync.end = start + 8000;
  sync.correlation_id = 904;
  sync.sync_type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
  sync.cuda_event_id = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  CHECK(fakecuda_queue_record(&sync) == 1);
  FakeGpuRecord unknown = sync;
  unknown.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  CHECK(fakecuda_queue_record(&unknown) == 0);

  const std::vector<Record> records = subscriber.flush();
  const std::vector<Record> kernels = of_kind(records, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  REQUIRE(kernels.size() == 1);
  const auto& k = kernels[0].as<CUpti_ActivityKernel10>();
  CHECK(std::string(k.name) == "void cutlass::Kernel<cutlass_80_tensorop>(Params)");
  CHECK(k.deviceId == 3u);
  CHECK(k.streamId == 21u);
  CHECK(k.start == start);
  CHECK(k.end == start + 7000);
  CHECK(k.correlationId == 901u);
  CHECK(k.gridX == 64);
  CHECK(k.blockX == 128);
  CHECK(k.registersPerThread == 90);
  CHECK(k.staticSharedMemory + k.dynamicSharedMemory == 49152);
  const std::vector<Record> copies = of_kind(records, CUPTI_ACTIVITY_KIND_MEMCPY);
  REQUIRE(copies.size() == 1);
  const auto& c = copies[0].as<CUpti_ActivityMemcpy6>();
  CHECK(c.copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
  CHECK(c.srcKind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED);
  CHECK(c.dstKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  CHECK(c.bytes == 12881920u);
  CHECK(c.end - c.start == 13000u);
  CHECK(c.streamId == 22u);
  const std::vector<Record> sets = of_kind(records, CUPTI_ACTIVITY_KIND_MEMSET);
  REQUIRE(sets.size() == 1);
  CHECK(sets[0].as<CUpti_ActivityMemset4>().memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  CHECK(sets[0].as<CUpti_ActivityMemset4>().correlationId == 903u);
  const std::vector<Record> syncs = of_kind(records, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  REQUIRE(syncs.size() == 1);
  const auto& s = syncs[0].as<CUpti_ActivitySynchronization2>();
  CHECK(s.type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE);
  CHECK(s.streamId == CUPTI_SYNCHRONIZATION_INVALID_VALUE);
  CHECK(s.end - s.start == 8000u);
}

TEST_CASE("a replayed record of a kind the subscriber did not enable is not written") {
  TestSubscriber subscriber({CUPTI_ACTIVITY_KIND_MEMSET});
  REQUIRE(subscriber.ok());
  const FakeGpuRecord kernel = kernel_record(fakecuda_now(), 905, "k");
  CHECK(fakecuda_queue_record(&kernel) == 0);
  CHECK(of_kind(subscriber.flush(), CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).empty());
}
