// The gpu_workload scenarios: their JSON expectations must agree with the
// hand-computed table in workload_scenarios.cpp, and with what a subscriber
// actually receives from the fake when the scenario runs.
#include <doctest/doctest.h>

#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "fake_cuda.h"
#include "fake_cupti_test_support.h"
#include "workload_script.h"

using fake_cupti_test::Record;
using fake_cupti_test::TestSubscriber;
using fake_workload::Script;
using nlohmann::json;

namespace {

fake_workload::FakeCudaApi linked_api() {
  fake_workload::FakeCudaApi api;
  api.init = &fakecuda_init;
  api.launch_kernel = &fakecuda_launch_kernel;
  api.driver_launch_kernel = &fakecuda_driver_launch_kernel;
  api.memcpy = &fakecuda_memcpy;
  api.memset = &fakecuda_memset;
  api.malloc = &fakecuda_malloc;
  api.free = &fakecuda_free;
  api.synchronize = &fakecuda_synchronize;
  api.graph_launch = &fakecuda_graph_launch;
  api.profiler_stop = &fakecuda_profiler_stop;
  api.profiler_start = &fakecuda_profiler_start;
  api.device_reset = &fakecuda_device_reset;
  api.set_dropped = &fakecuda_set_dropped;
  api.memcpy_peer = &fakecuda_memcpy_peer;
  api.api_call_named = &fakecuda_api_call_named;
  api.skip_correlation_ids = &fakecuda_skip_correlation_ids;
  api.unreadable_record = &fakecuda_unreadable_record;
  return api;
}

json expect(const char* scenario) { return Script::parse(fake_workload::scenario_script(scenario)).expectations(); }

json range(const json& expectations, const std::string& name) {
  for (const json& row : expectations["ranges"]) {
    if (row["name"] == name) return row;
  }
  return json();
}

struct RangeTotals {
  uint64_t self_cuda = 0;
  uint64_t cuda_total = 0;
  uint64_t calls = 0;
  uint64_t cpu_total = 0;
};

// What a profiler computes from the subscriber's view of one run.
struct Observed {
  std::map<std::string, RangeTotals> ranges;
  std::map<std::string, uint64_t> gpu_total_by_row;
  std::map<std::string, uint64_t> api_calls;
  uint64_t peak_bytes = 0;
  size_t dropped = 0;
  std::vector<Record> records;
};

std::string memcpy_row(uint8_t kind) {
  if (kind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD) return "Memcpy HtoD (Pageable -> Device)";
  if (kind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH) return "Memcpy DtoH (Device -> Pageable)";
  return "Memcpy DtoD (Device -> Device)";
}

void attribute(Observed* observed, const std::vector<std::string>& stack, uint64_t ns) {
  if (!stack.empty()) observed->ranges[stack.back()].self_cuda += ns;
  for (const std::string& name : stack) observed->ranges[name].cuda_total += ns;
}

void attribute_gpu_records(Observed* observed, const std::map<uint32_t, std::vector<std::string>>& ranges_at) {
  uint64_t live = 0;
  for (const Record& record : observed->records) {
    std::string row;
    uint32_t correlation = 0;
    uint64_t ns = 0;
    if (record.kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      const auto& kernel = record.as<CUpti_ActivityKernel10>();
      row = kernel.name;
      correlation = kernel.correlationId;
      ns = kernel.end - kernel.start;
    } else if (record.kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto& copy = record.as<CUpti_ActivityMemcpy6>();
      row = memcpy_row(copy.copyKind);
      correlation = copy.correlationId;
      ns = copy.end - copy.start;
    } else if (record.kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const auto& set = record.as<CUpti_ActivityMemset4>();
      row = "Memset (Device)";
      correlation = set.correlationId;
      ns = set.end - set.start;
    } else if (record.kind == CUPTI_ACTIVITY_KIND_MEMORY2) {
      const auto& memory = record.as<CUpti_ActivityMemory4>();
      const bool allocation = memory.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
      live = allocation ? live + memory.bytes : live - memory.bytes;
      observed->peak_bytes = std::max(observed->peak_bytes, live);
      continue;
    } else {
      continue;
    }
    observed->gpu_total_by_row[row] += ns;
    const auto found = ranges_at.find(correlation);
    attribute(observed, found == ranges_at.end() ? std::vector<std::string>{} : found->second, ns);
  }
}

Observed run_observed(const char* scenario) {
  const Script script = Script::parse(fake_workload::scenario_script(scenario));
  Observed observed;
  std::mutex mutex;
  TestSubscriber subscriber({CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                             CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_RUNTIME,
                             CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION});
  REQUIRE(subscriber.ok());
  std::map<std::thread::id, std::vector<uint64_t>> starts;  // per thread, like the range stacks
  fake_workload::RangeHooks hooks{
      [&](const std::string& name) {
        TestSubscriber::range_stack().push_back(name);
        std::lock_guard<std::mutex> lock(mutex);
        starts[std::this_thread::get_id()].push_back(fakecuda_now());
      },
      [&] {
        const uint64_t now = fakecuda_now();
        std::lock_guard<std::mutex> lock(mutex);
        std::vector<uint64_t>& mine = starts[std::this_thread::get_id()];
        RangeTotals& totals = observed.ranges[TestSubscriber::range_stack().back()];
        ++totals.calls;
        totals.cpu_total += now - mine.back();
        mine.pop_back();
        TestSubscriber::range_stack().pop_back();
      }};
  script.run(linked_api(), hooks);
  observed.records = subscriber.flush();
  REQUIRE(cuptiActivityGetNumDroppedRecords(nullptr, 0, &observed.dropped) == CUPTI_SUCCESS);
  std::map<uint32_t, std::vector<std::string>> ranges_at;
  std::map<std::thread::id, int> runtime_depth;  // driver calls inside a runtime call are its internals
  for (const auto& event : subscriber.api_events()) {
    const bool runtime = event.domain == CUPTI_CB_DOMAIN_RUNTIME_API;
    if (event.site != CUPTI_API_ENTER) {
      if (runtime) --runtime_depth[event.thread];
      continue;
    }
    ranges_at[event.correlation] = event.ranges;
    if (runtime || runtime_depth[event.thread] == 0) ++observed.api_calls[event.function];
    if (runtime) ++runtime_depth[event.thread];
  }
  attribute_gpu_records(&observed, ranges_at);
  return observed;
}

}  // namespace

TEST_CASE("scenario expectations agree with the hand-computed table") {
  const json nested = expect("nested");
  CHECK(range(nested, "train")["self_cuda_ns"] == 4100000);
  CHECK(range(nested, "train")["cuda_total_ns"] == 4700000);
  CHECK(range(nested, "inner")["self_cuda_ns"] == 600000);
  CHECK(range(nested, "inner")["cpu_total_min_ns"] == 200000);
  CHECK(nested["api_calls"]["cudaLaunchKernel"] == 4);
  CHECK(nested["totals"]["gpu_ns"] == 4700000);

  const json steps = expect("steps");
  CHECK(range(steps, "ProfilerStep#3")["cuda_total_ns"] == 1500000);
  CHECK(range(steps, "ProfilerStep#3")["self_cuda_ns"] == 0);
  CHECK(range(steps, "forward")["calls"] == 4);
  CHECK(range(steps, "backward")["self_cuda_ns"] == 4000000);

  const json streams = expect("streams");
  CHECK(range(streams, "multi")["self_cuda_ns"] == 41550000);
  CHECK(streams["totals"]["gpu_ns"] == 42250000);
  CHECK(range(streams, "side")["cuda_total_ns"] == 700000);
  CHECK(streams["streams"]["13"]["busy_ns"] == 40000000);
  CHECK(streams["streams"]["22"]["ops"] == 1);

  const json memory = expect("memory");
  CHECK(memory["memory"]["peak_bytes"] == 6291456);
  CHECK(memory["memory"]["final_bytes"] == 0);
  CHECK(memory["memory"]["frees"] == 3);
  CHECK(range(memory, "alloc")["self_cuda_ns"] == 20000);

  const json graph = expect("graph");
  CHECK(range(graph, "graph_step")["self_cuda_ns"] == 1200000);
  CHECK(graph["kernels"].size() == 6);
  CHECK(graph["api_calls"]["cudaGraphLaunch"] == 2);
  CHECK(graph["api_calls"].count("cudaLaunchKernel") == 0);

  CHECK(expect("drops")["dropped"] == 5);
  CHECK(range(expect("drops"), "lossy")["self_cuda_ns"] == 30000);
  CHECK(range(expect("driver"), "triton")["self_cuda_ns"] == 100000);
  CHECK(expect("driver")["api_calls"]["cuLaunchKernel"] == 2);
  CHECK(range(expect("blocking"), "copy_back")["cuda_total_ns"] == 4000000);
  CHECK(range(expect("blocking"), "copy_back")["cpu_total_min_ns"] == 3005000);
}

TEST_CASE("every scenario's records give exactly its expectations") {
  for (const std::string& name : fake_workload::scenario_names()) {
    CAPTURE(name);
    const json expected = expect(name.c_str());
    const Observed observed = run_observed(name.c_str());
    for (const json& row : expected["ranges"]) {
      const std::string range_name = row["name"];
      CAPTURE(range_name);
      REQUIRE(observed.ranges.count(range_name) == 1);
      const RangeTotals& totals = observed.ranges.at(range_name);
      CHECK(totals.calls == row["calls"].get<uint64_t>());
      CHECK(totals.self_cuda == row["self_cuda_ns"].get<uint64_t>());
      CHECK(totals.cuda_total == row["cuda_total_ns"].get<uint64_t>());
      CHECK(totals.cpu_total >= row["cpu_total_min_ns"].get<uint64_t>());
    }
    CHECK(observed.ranges.size() == expected["ranges"].size());
    for (const json& row : expected["gpu_ops"]) {
      CHECK(observed.gpu_total_by_row.at(row["name"].get<std::string>()) == row["total_ns"].get<uint64_t>());
    }
    CHECK(observed.gpu_total_by_row.size() == expected["gpu_ops"].size());
    for (const auto& [function, count] : expected["api_calls"].items()) {
      CHECK(observed.api_calls.at(function) == count.get<uint64_t>());
    }
    CHECK(observed.peak_bytes == expected["memory"]["peak_bytes"].get<uint64_t>());
    CHECK(observed.dropped == expected["dropped"].get<size_t>());
  }
}

TEST_CASE("streams scenario: work on one stream runs back to back") {
  const Observed observed = run_observed("streams");
  std::vector<CUpti_ActivityKernel10> stream13;
  for (const Record& record : fake_cupti_test::of_kind(observed.records, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) {
    if (record.as<CUpti_ActivityKernel10>().streamId == 13) stream13.push_back(record.as<CUpti_ActivityKernel10>());
  }
  REQUIRE(stream13.size() == 2);
  const uint64_t second_start = stream13[1].start;
  const uint64_t first_end = stream13[0].end;
  CHECK(second_start == first_end);
}
