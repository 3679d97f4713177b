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
  CHECK(kernel.end - kernel.start >= 990);
  CHECK(kernel.end - kernel.start <= 1010);
  CHECK(apis[0].as<CUpti_ActivityAPI>().start < 1000000000000000ull);
  CHECK(cuptiActivityRegisterTimestampCallback(nullptr) == CUPTI_ERROR_INVALID_PARAMETER);
  REQUIRE(cuptiActivityRegisterTimestampCallback(&monotonic_ns) == CUPTI_SUCCESS);
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

TEST_CASE("a CUPTI reporting 13.2 writes kernels and devices in other layouts") {
  setenv("FAKE_CUPTI_VERSION", "130200", 1);
  const bool ok = in_child([] {
    TestSubscriber subscriber({CUPTI_ACTIVITY_KIND_DEVICE, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL});
    fakecuda_launch_kernel("_Z5newerv", 1000, 7, nullptr);
    const std::vector<Record> records = subscriber.flush();
    const std::vector<Record> kernels = of_kind(records, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    const std::vector<Record> devices = of_kind(records, CUPTI_ACTIVITY_KIND_DEVICE);
    if (kernels.size() != 1 || devices.size() != 1) return false;
    const auto& misread = kernels[0].as<CUpti_ActivityKernel10>();
    const auto& device = devices[0].as<CUpti_ActivityDevice5>();
    return kernels[0].storage.size() * 8 == sizeof(CUpti_ActivityKernel10) + 8 && misread.start > misread.end &&
           device.globalMemorySize == 4800000000ull;
  });
  unsetenv("FAKE_CUPTI_VERSION");
  CHECK(ok);
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
