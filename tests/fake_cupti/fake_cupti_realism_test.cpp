// The awkward parts of real CUPTI that the fake reproduces, each checked the way
// a subscriber meets it: driver calls inside runtime calls (sparse correlation
// ids), GPU times converted when a buffer is delivered, buffers that come back
// only when full unless flushed, records without times after a forced flush of
// queued work, the EXIT-without-ENTER of the call that starts CUDA, kernel names
// gone once CUDA is torn down, peer copies as MEMCPY2, a newer CUPTI's layouts,
// unreadable records, 32-bit ids that wrap, slow flushes.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "fake_cuda.h"
#include "fake_cupti_test_support.h"

using fake_cupti_test::ApiEvent;
using fake_cupti_test::in_child;
using fake_cupti_test::of_kind;
using fake_cupti_test::Record;
using fake_cupti_test::TestSubscriber;

namespace {

uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t far_clock() { return 1000000000000000ull + monotonic_ns(); }

uint64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

TEST_CASE("runtime calls make driver calls of their own: correlation ids are sparse") {
  TestSubscriber subscriber({CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL});
  REQUIRE(subscriber.ok());
  const uint32_t id = fakecuda_launch_kernel("_Z6sparsev", 1000, 7, nullptr);
  const uint32_t next = fakecuda_launch_kernel("_Z6sparsev", 1000, 7, nullptr);
  CHECK(next == id + 3);  // cuCtxGetCurrent and cuLaunchKernel in between
  const std::vector<ApiEvent> events = subscriber.api_events();
  std::vector<std::string> order;
  for (const ApiEvent& e : events) {
    if (e.correlation >= id && e.correlation < next) {
      order.push_back(e.function + (e.site == CUPTI_API_ENTER ? "+" : "-"));
    }
  }
  CHECK(order == std::vector<std::string>{"cudaLaunchKernel+", "cuCtxGetCurrent+", "cuCtxGetCurrent-",
                                          "cuLaunchKernel+", "cuLaunchKernel-", "cudaLaunchKernel-"});
  const std::vector<Record> kernels = of_kind(subscriber.flush(), CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  REQUIRE(kernels.size() == 2);
  CHECK(kernels[0].as<CUpti_ActivityKernel10>().correlationId == id);
}

TEST_CASE("GPU times are converted when their buffer is delivered, CPU times when taken") {
  TestSubscriber subscriber({CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_RUNTIME});
  REQUIRE(subscriber.ok());
  fakecuda_launch_kernel("_Z4latev", 1000, 7, nullptr);
  // A second client's clock registered after the launch: the kernel gets it, the API record does not.
  REQUIRE(cuptiActivityRegisterTimestampCallback(&far_clock) == CUPTI_SUCCESS);
  const std::vector<Record> records = subscriber.flush();
  const std::vector<Record> kernels = of_kind(records, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  const std::vector<Record> apis = of_kind(records, CUPTI_ACTIVITY_KIND_RUNTIME);
  REQUIRE(kernels.size() == 1);
  REQUIRE(!apis.empty());
  const auto& kernel = kernels[0].as<CUpti_ActivityKernel10>();
  CHECK(kernel.start >= 1000000000000000ull);
  CHECK(kernel.start < 2000000000000000ull);
  CHECK(kernel.end - kernel.start >= 990);
  CHECK(kernel.end - kernel.start <= 1010);
  // The API record kept CUPTI's own clock: Unix-epoch ns.
  const uint64_t api_start = apis[0].as<CUpti_ActivityAPI>().start;
  CHECK(api_start > realtime_ns() - 60000000000ull);
  CHECK(api_start <= realtime_ns());
  CHECK(cuptiActivityRegisterTimestampCallback(nullptr) == CUPTI_ERROR_INVALID_PARAMETER);
  // CUPTI's own clock again, for the tests after this one.
  REQUIRE(cuptiActivityRegisterTimestampCallback(&realtime_ns) == CUPTI_SUCCESS);
}

TEST_CASE("buffers come back by themselves only when full; a default flush returns the complete ones") {
  TestSubscriber subscriber({CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL});
  REQUIRE(subscriber.ok());
  REQUIRE(cuptiActivityFlushPeriod(5) == CUPTI_SUCCESS);
  fakecuda_launch_kernel("_Z5shortv", 1000, 7, nullptr);
  fakecuda_wait_idle();
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  CHECK(subscriber.delivered().empty());  // a partly filled buffer: the period does not return it
  cuptiActivityFlushPeriod(0);
  fakecuda_launch_kernel("_Z4longv", 200000000, 8, nullptr);
  REQUIRE(cuptiActivityFlushAll(0) == CUPTI_SUCCESS);
  CHECK(subscriber.delivered().empty());  // its buffer holds a kernel still running
  fakecuda_wait_idle();
  REQUIRE(cuptiActivityFlushAll(0) == CUPTI_SUCCESS);
  CHECK(of_kind(subscriber.delivered(), CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size() == 2);
}

TEST_CASE("a forced flush while work is queued: the record comes without times") {
  TestSubscriber subscriber({CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY});
  REQUIRE(subscriber.ok());
  fakecuda_launch_kernel("_Z6queuedv", 300000000, 9, nullptr);
  fakecuda_memcpy(4096, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 9, 1000, 0);
  REQUIRE(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS);
  const std::vector<Record> records = subscriber.delivered();
  const std::vector<Record> kernels = of_kind(records, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  const std::vector<Record> copies = of_kind(records, CUPTI_ACTIVITY_KIND_MEMCPY);
  REQUIRE(kernels.size() == 1);
  REQUIRE(copies.size() == 1);
  CHECK(kernels[0].as<CUpti_ActivityKernel10>().start == 0);
  CHECK(kernels[0].as<CUpti_ActivityKernel10>().end == 0);
  CHECK(copies[0].as<CUpti_ActivityMemcpy6>().end == 0);
  fakecuda_wait_idle();
}

namespace {
TestSubscriber* g_late = nullptr;
}

// gpu_workload's InitializeInjection is the test's; this child's subscribes inside it.
TEST_CASE("the call that starts CUDA is in flight: EXIT callbacks without their ENTER") {
  CHECK(in_child([] {
    setenv("FAKE_SELFTEST_SUBSCRIBE_IN_INIT", "1", 1);
    fakecuda_init();
    const std::vector<ApiEvent> events = g_late != nullptr ? g_late->api_events() : std::vector<ApiEvent>{};
    std::vector<std::string> seen;
    for (const ApiEvent& e : events) {
      seen.push_back(e.function + (e.site == CUPTI_API_ENTER ? "+" : "-") + std::to_string(e.correlation_value));
    }
    return seen == std::vector<std::string>{"cuInit-0", "cudaFree-0"};
  }));
}

extern "C" void fake_selftest_subscribe_in_init() {
  if (std::getenv("FAKE_SELFTEST_SUBSCRIBE_IN_INIT") != nullptr) g_late = new TestSubscriber({});
}

TEST_CASE("CUDA's teardown at exit wipes the kernel names records point to") {
  CHECK(in_child([] {
    const pid_t pid = fork();
    if (pid == 0) {
      static const char* name = nullptr;
      // Registered before CUDA starts, so it runs after the runtime's exit handler.
      std::atexit([] { _exit(name != nullptr && name[0] == '\0' ? 0 : 1); });
      TestSubscriber subscriber({CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL});
      fakecuda_init();
      fakecuda_launch_kernel("_Z5namedv", 1000, 7, nullptr);
      const std::vector<Record> kernels = of_kind(subscriber.flush(), CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
      if (kernels.size() != 1 || std::strcmp(kernels[0].as<CUpti_ActivityKernel10>().name, "_Z5namedv") != 0) _exit(2);
      name = kernels[0].as<CUpti_ActivityKernel10>().name;
      std::exit(0);
    }
    int status = 0;
    return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }));
}

TEST_CASE("peer-to-peer copies come as MEMCPY2 records only") {
  TestSubscriber subscriber({CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY2});
  REQUIRE(subscriber.ok());
  const uint32_t id = fakecuda_memcpy_peer(1 << 20, 0, 1, 7, 2000);
  const std::vector<Record> records = subscriber.flush();
  CHECK(of_kind(records, CUPTI_ACTIVITY_KIND_MEMCPY).empty());
  const std::vector<Record> peer = of_kind(records, CUPTI_ACTIVITY_KIND_MEMCPY2);
  REQUIRE(peer.size() == 1);
  const auto& copy = peer[0].as<CUpti_ActivityMemcpyPtoP4>();
  CHECK(copy.copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_PTOP);
  CHECK((copy.srcDeviceId == 0 && copy.dstDeviceId == 1 && copy.bytes == (1u << 20)));
  CHECK(copy.end - copy.start == 2000);
  CHECK(copy.correlationId == id);
}

// Each release's record sizes (the API version cuptiGetVersion reports): the older
// struct is a prefix of 13.0's, a newer one 13.0's with fields after it.
struct LayoutCase {
  const char* version;
  size_t kernel, memcpy, sync, event, memory, device;
};
constexpr LayoutCase kLayouts[] = {
    {"22", 208, 88, 40, 24, 120, 184},          // 12.4: Kernel9, Memcpy5, Synchronization, CudaEvent, Memory3
    {"24", 208, 88, 40, 24, 128, 184},          // 12.6: Memory4
    {"26", 208, 96, 56, 56, 128, 184},          // 12.8: Memcpy6, Synchronization2, CudaEvent2
    {"130001", 216, 96, 56, 56, 128, 184},      // 13.0: Kernel10
    {"130100", 224, 96, 56, 56, 128, 184},      // 13.1: Kernel11
    {"130200", 224, 96, 56, 56, 128, 192},      // 13.2: Device6
    {"130300", 232, 96, 56, 56, 128, 192},      // 13.3: Kernel12
};

TEST_CASE("each CUPTI release writes its own record layouts, the fields a reader shares in place") {
  for (const LayoutCase& c : kLayouts) {
    CAPTURE(c.version);
    setenv("FAKE_CUPTI_VERSION", c.version, 1);
    const bool ok = in_child([&c] {
      TestSubscriber subscriber({CUPTI_ACTIVITY_KIND_DEVICE, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                 CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                                 CUPTI_ACTIVITY_KIND_CUDA_EVENT, CUPTI_ACTIVITY_KIND_MEMORY2});
      const uint32_t launch = fakecuda_launch_kernel("_Z6layoutv", 1000, 13, nullptr);
      fakecuda_memcpy(4096, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 7, 500, 0);
      const uint64_t address = fakecuda_malloc(1 << 20);
      fakecuda_synchronize(-1);
      const std::vector<Record> records = subscriber.flush();
      auto size_of = [&records](uint32_t kind) -> size_t {
        const std::vector<Record> of = of_kind(records, kind);
        return of.empty() ? 0 : of[0].storage.size() * 8;
      };
      bool same = size_of(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == c.kernel &&
                  size_of(CUPTI_ACTIVITY_KIND_MEMCPY) == c.memcpy &&
                  size_of(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) == c.sync &&
                  size_of(CUPTI_ACTIVITY_KIND_MEMORY2) == c.memory && size_of(CUPTI_ACTIVITY_KIND_DEVICE) == c.device;
      if (!same) {
        std::fprintf(stderr, "sizes: kernel %zu memcpy %zu sync %zu memory %zu device %zu\n",
                     size_of(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), size_of(CUPTI_ACTIVITY_KIND_MEMCPY),
                     size_of(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION), size_of(CUPTI_ACTIVITY_KIND_MEMORY2),
                     size_of(CUPTI_ACTIVITY_KIND_DEVICE));
      }
      const std::vector<Record> kernels = of_kind(records, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
      const std::vector<Record> memory = of_kind(records, CUPTI_ACTIVITY_KIND_MEMORY2);
      const std::vector<Record> devices = of_kind(records, CUPTI_ACTIVITY_KIND_DEVICE);
      if (kernels.size() != 1 || memory.size() != 1 || devices.size() != 1) return false;
      const auto& kernel = kernels[0].as<CUpti_ActivityKernel10>();
      same = same && kernel.end - kernel.start == 1000 && kernel.streamId == 13 && kernel.correlationId == launch &&
             std::strcmp(kernel.name, "_Z6layoutv") == 0;
      same = same && memory[0].as<CUpti_ActivityMemory4>().address == address &&
             devices[0].as<CUpti_ActivityDevice5>().numMultiprocessors == 132;
      return same;
    });
    unsetenv("FAKE_CUPTI_VERSION");
    CHECK(ok);
  }
}

TEST_CASE("CUPTI 13.0 has one subscriber; 13.2 lets others in when the first asks for it") {
  struct Params132 {
    size_t structSize;
    const char* subscriberName;
    char* oldSubscriberName;
    size_t oldSubscriberSize;
    uint8_t allowMultipleSubscribers;
    uint8_t padding[7];
  };
  auto noop = [](void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {};
  CHECK(in_child([&] {
    CUpti_SubscriberHandle first = nullptr;
    CUpti_SubscriberHandle second = nullptr;
    char holder[64] = {};
    CUpti_SubscriberParams params{CUpti_SubscriberParams_STRUCT_SIZE, "second", holder, sizeof holder};
    return cuptiSubscribe(&first, noop, nullptr) == CUPTI_SUCCESS &&
           cuptiSubscribe_v2(&second, noop, nullptr, &params) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED &&
           std::strncmp(holder, "CUPTI for ", 10) == 0 && cuptiUnsubscribe(first) == CUPTI_SUCCESS &&
           cuptiSubscribe(&second, noop, nullptr) == CUPTI_SUCCESS;
  }));
  setenv("FAKE_CUPTI_VERSION", "130200", 1);
  CHECK(in_child([&] {
    static uint64_t seen[2] = {};
    auto count = [](void* userdata, CUpti_CallbackDomain, CUpti_CallbackId, const void* data) {
      const auto* cb = static_cast<const CUpti_CallbackData*>(data);
      const auto i = reinterpret_cast<uintptr_t>(userdata);
      if (cb->callbackSite == CUPTI_API_ENTER) *cb->correlationData = 100 + i;
      if (cb->callbackSite == CUPTI_API_EXIT && *cb->correlationData == 100 + i) ++seen[i];
    };
    fakecuda_init();
    Params132 multi{sizeof(Params132), "a", nullptr, 0, 1, {}};
    CUpti_SubscriberHandle a = nullptr;
    CUpti_SubscriberHandle b = nullptr;
    CUpti_SubscriberHandle legacy = nullptr;
    bool ok = cuptiSubscribe_v2(&a, count, reinterpret_cast<void*>(0), reinterpret_cast<CUpti_SubscriberParams*>(&multi)) ==
              CUPTI_SUCCESS;
    multi.subscriberName = "b";
    ok = ok && cuptiSubscribe_v2(&b, count, reinterpret_cast<void*>(1), reinterpret_cast<CUpti_SubscriberParams*>(&multi)) ==
                   CUPTI_SUCCESS;
    ok = ok && cuptiSubscribe(&legacy, noop, nullptr) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    ok = ok && cuptiEnableDomain(1, a, CUPTI_CB_DOMAIN_RUNTIME_API) == CUPTI_SUCCESS &&
         cuptiEnableDomain(1, b, CUPTI_CB_DOMAIN_RUNTIME_API) == CUPTI_SUCCESS;
    fakecuda_api_call_named("cudaGetDevice");
    if (!ok || seen[0] != 1 || seen[1] != 1) {
      std::fprintf(stderr, "multi: ok %d, seen %llu %llu\n", ok ? 1 : 0, static_cast<unsigned long long>(seen[0]),
                   static_cast<unsigned long long>(seen[1]));
    }
    return ok && seen[0] == 1 && seen[1] == 1;
  }));
  CHECK(in_child([&] {
    CUpti_SubscriberHandle first = nullptr;
    CUpti_SubscriberHandle second = nullptr;
    Params132 multi{sizeof(Params132), "late", nullptr, 0, 1, {}};
    // The first subscriber did not ask: CUPTI stays single-subscriber.
    return cuptiSubscribe(&first, noop, nullptr) == CUPTI_SUCCESS &&
           cuptiSubscribe_v2(&second, noop, nullptr, reinterpret_cast<CUpti_SubscriberParams*>(&multi)) ==
               CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }));
  unsetenv("FAKE_CUPTI_VERSION");
}

TEST_CASE("API record filters and query records are process-wide settings") {
  CHECK(in_child([] {
    TestSubscriber subscriber({CUPTI_ACTIVITY_KIND_RUNTIME});
    fakecuda_init();  // CUDA's start is a runtime call of its own
    subscriber.flush();
    fakecuda_api_call_named("cudaGetDevice");
    const size_t before = of_kind(subscriber.flush(), CUPTI_ACTIVITY_KIND_RUNTIME).size();
    cuptiActivityEnableRuntimeApi(CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 0);
    fakecuda_api_call_named("cudaGetDevice");
    const size_t after = of_kind(subscriber.flush(), CUPTI_ACTIVITY_KIND_RUNTIME).size();
    if (before != 1 || after != 0) std::fprintf(stderr, "runtime records: %zu before, %zu after\n", before, after);
    return before == 1 && after == 0;
  }));
}

TEST_CASE("a record cuptiActivityGetNextRecord cannot step over ends its buffer's walk") {
  TestSubscriber subscriber({CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL});
  REQUIRE(subscriber.ok());
  fakecuda_launch_kernel("_Z6beforev", 1000, 7, nullptr);
  fakecuda_unreadable_record();
  fakecuda_launch_kernel("_Z5afterv", 1000, 7, nullptr);
  const std::vector<Record> kernels = of_kind(subscriber.flush(), CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  REQUIRE(kernels.size() == 1);
  CHECK(std::string(kernels[0].as<CUpti_ActivityKernel10>().name) == "_Z6beforev");
}

TEST_CASE("correlation ids are 32-bit: they wrap, and 0 is never one") {
  const uint32_t first = fakecuda_api_call_named("cudaGetDevice");
  REQUIRE(first != 0);
  fakecuda_skip_correlation_ids(0u - first - 2);  // next ids: 2^32-1, then 1
  CHECK(fakecuda_api_call_named("cudaGetDevice") == 0xffffffffu);
  CHECK(fakecuda_api_call_named("cuCtxGetCurrent") == 1u);
  CHECK(fakecuda_api_call_named("noSuchFunction") == 0u);
}

TEST_CASE("FAKE_CUPTI_FLUSH_DELAY_MS: a flush that takes its time") {
  setenv("FAKE_CUPTI_FLUSH_DELAY_MS", "150", 1);
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(cuptiActivityFlushAll(0) == CUPTI_SUCCESS);
  const auto waited = std::chrono::steady_clock::now() - t0;
  unsetenv("FAKE_CUPTI_FLUSH_DELAY_MS");
  CHECK(waited >= std::chrono::milliseconds(150));
}
