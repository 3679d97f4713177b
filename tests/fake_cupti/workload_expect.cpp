// Script::expectations(): what a correct profiler must report for a script,
// computed the way torch.profiler attributes GPU time (see workload_scenarios.cpp).
#include <cupti_activity.h>

#include <map>

#include "workload_script.h"

namespace fake_workload {

namespace {

using nlohmann::json;

struct RangeStats {
  uint64_t calls = 0;
  uint64_t self_cuda_ns = 0;
  uint64_t cuda_total_ns = 0;
  uint64_t cpu_total_min_ns = 0;
};

struct GpuOpStats {
  std::string kind;
  uint64_t calls = 0;
  uint64_t total_ns = 0;
};

const char* memcpy_row_name(int kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "Memcpy HtoD (Pageable -> Device)";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "Memcpy DtoH (Device -> Pageable)";
    default: return "Memcpy DtoD (Device -> Device)";
  }
}

const char* memcpy_kind_name(int kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "htod";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "dtoh";
    default: return "dtod";
  }
}

json innermost(const std::vector<std::string>& stack) { return stack.empty() ? json(nullptr) : json(stack.back()); }

class Walker {
 public:
  void walk(const std::vector<Item>& items, std::vector<std::string>* stack);
  json result() const;

 private:
  void gpu_work(const std::vector<std::string>& stack, const std::string& row, const char* kind, uint64_t ns,
                uint32_t stream);
  void busy(const std::vector<std::string>& stack, uint64_t ns);
  void memory(const Item& item);
  void walk_item(const Item& item, std::vector<std::string>* stack);
  void gpu_item(const Item& item, const std::vector<std::string>& s);

  json kernels_ = json::array();
  json memcpys_ = json::array();
  json memsets_ = json::array();
  std::vector<std::string> range_order_;
  std::map<std::string, RangeStats> ranges_;
  std::vector<std::string> gpu_order_;
  std::map<std::string, GpuOpStats> gpu_ops_;
  std::map<std::string, uint64_t> api_calls_;
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> streams_;  // ops, busy ns
  std::map<std::string, uint64_t> totals_{{"gpu_ns", 0}, {"kernel_ns", 0}, {"memcpy_ns", 0},
                                          {"memset_ns", 0}, {"outside_ranges_ns", 0}};
  std::map<std::string, uint64_t> live_;
  uint64_t live_bytes_ = 0;
  uint64_t peak_bytes_ = 0;
  uint64_t allocations_ = 0;
  uint64_t frees_ = 0;
  uint64_t dropped_ = 0;
};

// Self CUDA goes to the innermost range, CUDA total to every enclosing range
// event (a name nested in itself counts once per event, as key_averages sums events).
void Walker::gpu_work(const std::vector<std::string>& stack, const std::string& row, const char* kind, uint64_t ns,
                      uint32_t stream) {
  if (stack.empty()) {
    totals_["outside_ranges_ns"] += ns;
  } else {
    ranges_[stack.back()].self_cuda_ns += ns;
  }
  for (const std::string& name : stack) ranges_[name].cuda_total_ns += ns;
  auto [it, fresh] = gpu_ops_.try_emplace(row);
  if (fresh) gpu_order_.push_back(row);
  it->second.kind = kind;
  ++it->second.calls;
  it->second.total_ns += ns;
  ++streams_[stream].first;
  streams_[stream].second += ns;
  totals_["gpu_ns"] += ns;
  totals_[std::string(kind) + "_ns"] += ns;
}

void Walker::busy(const std::vector<std::string>& stack, uint64_t ns) {
  for (const std::string& name : stack) ranges_[name].cpu_total_min_ns += ns;
}

void Walker::memory(const Item& item) {
  if (item.op == Op::kMalloc) {
    ++allocations_;
    live_[item.name] = item.bytes;
    live_bytes_ += item.bytes;
    peak_bytes_ = std::max(peak_bytes_, live_bytes_);
    return;
  }
  auto found = live_.find(item.name);
  if (found == live_.end()) return;
  ++frees_;
  live_bytes_ -= found->second;
  live_.erase(found);
}

void Walker::gpu_item(const Item& item, const std::vector<std::string>& s) {
  switch (item.op) {
    case Op::kKernel:
    case Op::kDriverKernel: {
      const char* api = item.op == Op::kKernel ? "cudaLaunchKernel" : "cuLaunchKernel";
      ++api_calls_[api];
      kernels_.push_back({{"name", item.name}, {"stream", item.stream}, {"dur_ns", item.duration_ns},
                          {"api", api}, {"graph_id", nullptr}, {"range", innermost(s)}});
      gpu_work(s, item.name, "kernel", item.duration_ns, item.stream);
      break;
    }
    case Op::kGraph:
      ++api_calls_["cudaGraphLaunch"];
      for (const GraphNode& node : item.nodes) {
        kernels_.push_back({{"name", node.name}, {"stream", item.stream}, {"dur_ns", node.duration_ns},
                            {"api", "cudaGraphLaunch"}, {"graph_id", item.graph_id}, {"range", innermost(s)}});
        gpu_work(s, node.name, "kernel", node.duration_ns, item.stream);
      }
      break;
    case Op::kMemcpy:
      ++api_calls_[item.blocking ? "cudaMemcpy" : "cudaMemcpyAsync"];
      memcpys_.push_back({{"name", memcpy_row_name(item.memcpy_kind)}, {"kind", memcpy_kind_name(item.memcpy_kind)},
                          {"bytes", item.bytes}, {"stream", item.stream}, {"dur_ns", item.duration_ns},
                          {"blocking", item.blocking}, {"range", innermost(s)}});
      gpu_work(s, memcpy_row_name(item.memcpy_kind), "memcpy", item.duration_ns, item.stream);
      // A blocking copy returns no earlier than its own GPU end.
      if (item.blocking) busy(s, item.duration_ns + kFakeLaunchLatencyNs);
      break;
    case Op::kPeerCopy:
      ++api_calls_["cudaMemcpyPeerAsync"];
      memcpys_.push_back({{"name", "Memcpy PtoP (Device -> Device)"}, {"kind", "ptop"}, {"bytes", item.bytes},
                          {"stream", item.stream}, {"dur_ns", item.duration_ns}, {"blocking", false},
                          {"range", innermost(s)}});
      gpu_work(s, "Memcpy PtoP (Device -> Device)", "memcpy", item.duration_ns, item.stream);
      break;
    case Op::kMemset:
      ++api_calls_["cudaMemsetAsync"];
      memsets_.push_back({{"name", "Memset (Device)"}, {"bytes", item.bytes}, {"stream", item.stream},
                          {"dur_ns", item.duration_ns}, {"range", innermost(s)}});
      gpu_work(s, "Memset (Device)", "memset", item.duration_ns, item.stream);
      break;
    default: break;
  }
}

void Walker::walk_item(const Item& item, std::vector<std::string>* stack) {
  const std::vector<std::string>& s = *stack;
  switch (item.op) {
    case Op::kRange: {
      auto [it, fresh] = ranges_.try_emplace(item.name);
      if (fresh) range_order_.push_back(item.name);
      ++it->second.calls;
      stack->push_back(item.name);
      walk(item.body, stack);
      stack->pop_back();
      break;
    }
    case Op::kRepeat:
      for (uint64_t i = 0; i < item.bytes; ++i) walk(item.body, stack);
      break;
    case Op::kThread: {
      std::vector<std::string> own;  // ranges do not cross threads
      walk(item.body, &own);
      break;
    }
    case Op::kKernel:
    case Op::kDriverKernel:
    case Op::kGraph:
    case Op::kMemcpy:
    case Op::kPeerCopy:
    case Op::kMemset: gpu_item(item, s); break;
    case Op::kMalloc:
    case Op::kFree:
      ++api_calls_[item.op == Op::kMalloc ? "cudaMalloc" : "cudaFree"];
      memory(item);
      break;
    case Op::kSync:
      ++api_calls_[item.sync_stream == kFakeAllStreams ? "cudaDeviceSynchronize" : "cudaStreamSynchronize"];
      break;
    case Op::kDropped: dropped_ += item.bytes; break;
    case Op::kBusy: busy(s, item.duration_ns); break;
    case Op::kProfilerStop: ++api_calls_["cudaProfilerStop"]; break;
    case Op::kProfilerStart: ++api_calls_["cudaProfilerStart"]; break;
    case Op::kDeviceReset:
      ++api_calls_["cudaDeviceReset"];
      live_.clear();
      live_bytes_ = 0;
      break;
    // No GPU work of their own, and nothing a profiler must show.
    case Op::kApi:
    case Op::kSkipIds:
    case Op::kCuptiFlush:
    case Op::kUnreadable:
    case Op::kClientStart:
    case Op::kClientStop:
    case Op::kKinetoStart:
    case Op::kKinetoStop:
    case Op::kReady: break;
    case Op::kSleep: busy(s, item.duration_ns); break;
  }
}

void Walker::walk(const std::vector<Item>& items, std::vector<std::string>* stack) {
  for (const Item& item : items) walk_item(item, stack);
}

json Walker::result() const {
  json ranges = json::array();
  for (const std::string& name : range_order_) {
    const RangeStats& r = ranges_.at(name);
    ranges.push_back({{"name", name}, {"calls", r.calls}, {"self_cuda_ns", r.self_cuda_ns},
                      {"cuda_total_ns", r.cuda_total_ns}, {"cpu_total_min_ns", r.cpu_total_min_ns}});
  }
  json gpu_ops = json::array();
  for (const std::string& name : gpu_order_) {
    const GpuOpStats& op = gpu_ops_.at(name);
    gpu_ops.push_back({{"name", name}, {"kind", op.kind}, {"calls", op.calls}, {"total_ns", op.total_ns}});
  }
  json streams = json::object();
  for (const auto& [id, stats] : streams_) {
    streams[std::to_string(id)] = {{"ops", stats.first}, {"busy_ns", stats.second}};
  }
  return {{"launch_latency_ns", kFakeLaunchLatencyNs},
          {"device", {{"id", kFakeDeviceId}, {"name", "Fake H200"}, {"context", kFakeContextId}}},
          {"kernels", kernels_},
          {"memcpys", memcpys_},
          {"memsets", memsets_},
          {"ranges", ranges},
          {"gpu_ops", gpu_ops},
          {"api_calls", api_calls_},
          {"streams", streams},
          {"totals", totals_},
          {"memory", {{"allocations", allocations_}, {"frees", frees_}, {"peak_bytes", peak_bytes_},
                      {"final_bytes", live_bytes_}}},
          {"dropped", dropped_}};
}

}  // namespace

nlohmann::json Script::expectations() const {
  Walker walker;
  std::vector<std::string> stack;
  walker.walk(items_, &stack);
  nlohmann::json result = walker.result();
  result["script"] = text_;
  return result;
}

}  // namespace fake_workload
