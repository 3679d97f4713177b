#include "formats/summary_json.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "analysis/analysis.h"
#include "analysis/gpu_analysis.h"
#include "analysis/module_view.h"
#include "analysis/overview.h"
#include "analysis/rank_steps.h"
#include "analysis/tensor_memory.h"
#include "formats/overview_json.h"
#include "formats/rank_table.h"
#include "common/wire/wire.h"

namespace torchprof {

namespace {

using Json = nlohmann::ordered_json;

template <typename T>
Json optional_value(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

// The program's own CUPTI clients and how torchprof served each.
Json cupti_clients_json(const Process& p) {
  Json out = Json::array();
  for (const Process::CuptiClient& c : p.cupti_clients) {
    out.push_back({{"library", c.library}, {"path", c.path}, {"subscribes", c.subscribes}});
  }
  return out;
}

Json process_json(const Process& p) {
  Json threads = Json::array();
  for (const ThreadInfo& t : p.threads) {
    threads.push_back({{"tid", t.tid},
                       {"name", t.name},
                       {"is_main", t.is_main},
                       {"events", t.events},
                       {"dropped", t.dropped}});
  }
  return {{"pid", p.pid},
          {"ppid", p.ppid},
          {"exe", p.exe},
          {"worker", p.worker},
          {"role", p.role},
          {"rank", optional_value(p.rank)},
          {"local_rank", optional_value(p.local_rank)},
          {"world_size", optional_value(p.world_size)},
          {"events", p.cpu_events},
          {"dropped", p.dropped},
          {"exit_code", optional_value(p.exit_code)},
          {"exit_signal", optional_value(p.exit_signal)},
          {"host", p.host},
          {"cmdline", p.cmdline},
          {"start_ns", p.start_ns},
          {"end_ns", p.end_ns},
          {"steps", p.steps.size()},
          {"cycles", cycle_count(p)},
          {"outside_steps_counted", p.outside_steps_counted},
          {"left_out_in_steps", p.left_out_in_steps},
          {"left_out_outside_steps", p.left_out_outside_steps},
          {"threads", std::move(threads)},
          {"warnings", p.warnings},
          {"gpu_tracing", p.gpu_tracing.empty() ? Json(nullptr) : Json(p.gpu_tracing)},
          {"cuda_api", p.cuda_api.empty() ? Json(nullptr) : Json(p.cuda_api)},
          {"cupti_clients", cupti_clients_json(p)},
          {"gpu_incomplete_records", p.gpu_incomplete},
          {"gpu_unreadable_bytes", p.gpu_unreadable_bytes},
          {"recovered_events", p.recovered ? Json(p.recovered_events) : Json(nullptr)},
          {"unrecovered_slots", p.unrecovered_slots},
          {"buffer_peak_bytes", p.buffer_peak_bytes},
          {"buffer_cap_bytes", p.buffer_cap_bytes},
          {"buffer_cap_reached", p.buffer_refusal == static_cast<uint16_t>(wire::BufferRefusal::kCap)},
          {"buffer_cap_reached_ns", p.buffer_refusal == static_cast<uint16_t>(wire::BufferRefusal::kCap)
                                        ? Json(p.buffer_refused_ns)
                                        : Json(nullptr)},
          {"buffer_out_of_memory", p.buffer_refusal == static_cast<uint16_t>(wire::BufferRefusal::kSystem)},
          {"loss_note", p.loss_note.empty() ? Json(nullptr) : Json(p.loss_note)}};
}

// On-demand capture windows (analysis/capture_windows.h), one entry per process and window.
Json capture_windows_json(const Run& run) {
  Json out = Json::array();
  for (const Process& p : run.processes) {
    for (const CaptureWindow& w : p.capture_windows) {
      out.push_back({{"pid", p.pid},
                     {"id", w.id},
                     {"start_ns", w.start_ns},
                     {"dur_ns", std::max<int64_t>(0, w.end_ns - w.start_ns)},
                     {"source", w.source},
                     {"steps", w.steps},
                     {"cycle", w.cycle >= 0 ? Json(w.cycle) : Json(nullptr)}});
    }
  }
  return out;
}

Json steps_json(const Run& run) {
  Json steps = Json::array();
  for (const Process& p : run.processes) {
    // GPU work of a step is what its API calls launched, even when it ran after the step's CPU end.
    const std::vector<std::vector<DeviceUsage>> per_step = device_usage_per_step(p);
    for (size_t k = 0; k < p.steps.size(); ++k) {
      const Step& s = p.steps[k];
      int64_t busy = 0;
      int64_t gpu_ns = 0;
      for (const DeviceUsage& u : per_step[k]) {
        busy += u.busy_ns;
        gpu_ns += u.kernel_ns + u.memcpy_ns + u.memset_ns;
      }
      steps.push_back({{"pid", p.pid},
                       {"index", s.index},
                       {"name", s.name},
                       {"start_ns", s.start_ns},
                       {"dur_ns", s.dur_ns},
                       {"action", step_action_name(s.action)},
                       {"cycle", s.cycle >= 0 ? Json(s.cycle) : Json(nullptr)},
                       {"gpu_busy_ns", busy},
                       {"gpu_ns", gpu_ns}});
      if (!run.inputs.empty()) steps.back()["input"] = p.input;
    }
  }
  return steps;
}

bool has_tensor_memory(const Run& run) {
  return std::any_of(run.processes.begin(), run.processes.end(),
                     [](const Process& p) { return p.tensor_summary.has_value(); });
}

Json ops_json(const Run& run) {
  const bool with_memory = has_tensor_memory(run);
  Json ops = Json::array();
  for (const OpStats& o : run.ops) {
    ops.push_back({{"name", o.name},
                   {"kind", o.kind},
                   {"calls", o.calls},
                   {"self_cpu_ns", o.self_cpu_ns},
                   {"cpu_total_ns", o.cpu_total_ns},
                   {"self_cuda_ns", o.self_cuda_ns},
                   {"cuda_total_ns", o.cuda_total_ns},
                   {"input_shapes", nullptr}});
    if (with_memory) {
      // torch's FunctionEventAvg names, in bytes.
      ops.back()["cpu_memory_usage"] = o.cpu_memory;
      ops.back()["self_cpu_memory_usage"] = o.self_cpu_memory;
      ops.back()["cuda_memory_usage"] = o.cuda_memory;
      ops.back()["self_cuda_memory_usage"] = o.self_cuda_memory;
    }
    // Shapes are a row's own only when rows were grouped by them.
    if (!o.input_shapes.empty()) ops.back()["input_shapes"] = o.input_shapes;
    if (o.flops > 0) ops.back()["flops"] = o.flops;  // --with-flops: torch's counts, summed
    if (!o.stack.empty()) ops.back()["stack"] = o.stack;
    if (!o.mangled.empty() && o.mangled != o.name) ops.back()["mangled_name"] = o.mangled;
  }
  return ops;
}

Json device_json(const Process& p, const DeviceUsage& u) {
  Json d = {{"pid", p.pid}, {"id", u.device}, {"name", nullptr}};
  for (const GpuDevice& g : p.devices) {
    if (g.id != u.device) continue;
    d["name"] = g.name;
    d["totalGlobalMem"] = g.total_global_mem;
    d["computeMajor"] = g.compute_major;
    d["computeMinor"] = g.compute_minor;
    d["maxThreadsPerBlock"] = g.max_threads_per_block;
    d["maxThreadsPerMultiprocessor"] = g.max_threads_per_multiprocessor;
    d["regsPerBlock"] = g.regs_per_block;
    d["warpSize"] = g.warp_size;
    d["sharedMemPerBlock"] = g.shared_mem_per_block;
    d["numSms"] = g.num_sms;
    d["regsPerMultiprocessor"] = g.regs_per_multiprocessor;
    d["sharedMemPerBlockOptin"] = g.shared_mem_per_block_optin;
    d["sharedMemPerMultiprocessor"] = g.shared_mem_per_multiprocessor;
  }
  Json streams = Json::object();
  for (const auto& [id, st] : u.streams) streams[std::to_string(id)] = {{"ops", st.ops}, {"busy_ns", st.busy_ns}};
  d.update({{"window_start_ns", u.window_start_ns}, {"window_end_ns", u.window_end_ns},
            {"busy_ns", u.busy_ns}, {"busy_all_ns", u.busy_all_ns}, {"idle_ns", u.idle_ns},
            {"kernels", u.kernels}, {"memcpys", u.memcpys}, {"memsets", u.memsets}, {"syncs", u.syncs},
            {"kernel_ns", u.kernel_ns}, {"memcpy_ns", u.memcpy_ns}, {"memset_ns", u.memset_ns},
            {"memcpy_bytes", u.memcpy_bytes}, {"memset_bytes", u.memset_bytes},
            {"streams", std::move(streams)}});
  return d;
}

// Copies by Kineto name over the recorded steps: count, bytes, time and bandwidth.
Json memcpy_json(const Run& run) {
  struct Copy {
    uint64_t calls = 0, bytes = 0;
    int64_t ns = 0;
  };
  std::map<std::string, Copy> copies;
  for (const Process& p : run.processes) {
    for (const GpuRecord& g : p.gpu_records) {
      if ((g.kind != GpuKind::kMemcpy && g.kind != GpuKind::kMemset) || !in_recorded_step(p, g)) continue;
      Copy& c = copies[g.name];
      ++c.calls;
      c.bytes += g.bytes;
      c.ns += g.dur_ns();
    }
  }
  Json out = Json::array();
  for (const auto& [name, c] : copies) {
    // bytes per ns is GB/s (1e9 bytes per second), Kineto's "memory bandwidth (GB/s)".
    double gbps = c.ns > 0 ? static_cast<double>(c.bytes) / static_cast<double>(c.ns) : 0.0;
    out.push_back({{"name", name}, {"calls", c.calls}, {"bytes", c.bytes}, {"total_ns", c.ns},
                   {"bandwidth_gb_per_s", gbps}});
  }
  return out;
}

// Utilisation over the recorded steps; busy is HTA's: merged kernel intervals
// (busy_all_ns adds copies and memsets); idle = recorded window - busy.
Json gpu_json(const Run& run) {
  Json devices = Json::array();
  int64_t busy = 0;
  int64_t idle = 0;
  for (const Process& p : run.processes) {
    for (const DeviceUsage& u : device_usage(p, [&](const GpuRecord& g) { return in_recorded_step(p, g); })) {
      busy += u.busy_ns;
      idle += u.idle_ns;
      devices.push_back(device_json(p, u));
    }
  }
  return {{"devices", std::move(devices)},
          {"busy_ns", busy},
          {"idle_ns", idle},
          {"busy_definition", "merged kernel intervals per device"},
          {"memcpy", memcpy_json(run)},
          {"cupti_dropped", run.cupti_dropped},
          {"notices", run.gpu_notices}};
}

const char* device_type_name(size_t dev) { return dev == 0 ? "cpu" : "cuda"; }

// --profile-memory: torch's tensor allocations per process, and per step.
Json tensor_memory_json(const Run& run) {
  Json procs = Json::array();
  for (const Process& p : run.processes) {
    if (!p.tensor_summary) continue;
    const TensorMemorySummary& m = *p.tensor_summary;
    Json steps = Json::array();
    for (size_t dev = 0; dev < 2; ++dev) {
      for (const StepMemory& s : m.steps[dev]) {
        steps.push_back({{"index", p.steps[static_cast<size_t>(s.step)].index},
                         {"device_type", device_type_name(dev)},
                         {"start_bytes", s.start_bytes},
                         {"peak_bytes", s.peak_bytes},
                         {"end_bytes", s.end_bytes},
                         {"allocated_bytes", s.allocated},
                         {"peak_op", s.peak_op.empty() ? Json(nullptr) : Json(s.peak_op)}});
      }
    }
    procs.push_back({{"pid", p.pid},
                     {"allocations", m.allocations},
                     {"frees", m.frees},
                     {"allocated_bytes", m.allocated_bytes},
                     {"unpaired_frees", m.unpaired_frees},
                     {"peak_bytes", {{"cpu", m.peak_bytes[0]}, {"cuda", m.peak_bytes[1]}}},
                     {"steps", std::move(steps)}});
  }
  return procs;
}

Json surviving_json(const SurvivingAllocations& s) {
  return {{"op", s.op}, {"called_from", s.top.empty() || s.top == s.op ? Json(nullptr) : Json(s.top)},
          {"bytes", s.bytes}, {"allocations", s.allocations}, {"steps", s.steps}};
}

// CUDA tensors: what the caching allocator held beyond what was allocated, at the most
// allocated (null without its reports: CPU tensors have no cache).
Json fragmentation_json(const Run& run) {
  for (const Process& p : run.processes) {
    if (!p.tensor_summary) continue;
    const TensorMemorySummary& m = *p.tensor_summary;
    if (m.cuda_allocated_at_peak < 0 && m.cuda_alloc_retries < 0) continue;
    auto known = [](int64_t v) { return v < 0 ? Json(nullptr) : Json(v); };
    const bool reported = m.cuda_allocated_at_peak >= 0;
    return {{"pid", p.pid},
            {"allocated_bytes_at_peak", known(m.cuda_allocated_at_peak)},
            {"reserved_bytes_at_peak", known(m.cuda_reserved_at_peak)},
            {"unused_reserved_bytes", reported ? Json(m.cuda_reserved_at_peak - m.cuda_allocated_at_peak) : Json(nullptr)},
            {"reserved_peak_bytes", known(m.cuda_reserved_peak)},
            {"alloc_retries", known(m.cuda_alloc_retries)},
            {"ooms", known(m.cuda_ooms)}};
  }
  return nullptr;
}

// The first process whose tensor memory leaks, or null.
Json leak_json(const Run& run) {
  for (const Process& p : run.processes) {
    if (!p.tensor_summary) continue;
    const std::optional<LeakFinding> f = leak_finding(*p.tensor_summary);
    if (!f) continue;
    Json ops = Json::array();
    for (const SurvivingAllocations& s : f->ops) ops.push_back(surviving_json(s));
    return {{"pid", p.pid}, {"device_type", device_type_name(static_cast<size_t>(f->device))},
            {"bytes_per_step", f->bytes_per_step}, {"steps", f->steps}, {"rises", f->rises},
            {"ops", std::move(ops)}};
  }
  return nullptr;
}

Json memory_json(const Run& run) {
  Json peak = Json::object();
  Json per_step = Json::array();
  uint64_t allocations = 0, frees = 0, alloc_bytes = 0, free_bytes = 0;
  for (const Process& p : run.processes) {
    if (p.memory_events.empty()) continue;
    MemoryUsage m = memory_usage(p);
    allocations += m.allocations;
    frees += m.frees;
    alloc_bytes += m.alloc_bytes;
    free_bytes += m.free_bytes;
    // Device ids are per process: with several processes the highest peak is shown.
    for (const auto& [device, bytes] : m.peak_bytes) {
      std::string key = std::to_string(device);
      peak[key] = std::max<int64_t>(peak.value(key, int64_t{0}), bytes);
    }
    const std::vector<std::map<uint32_t, int64_t>> step_peaks = peak_bytes_per_step(p);
    for (size_t k = 0; k < p.steps.size(); ++k) {
      Json devs = Json::object();
      for (const auto& [device, bytes] : step_peaks[k]) devs[std::to_string(device)] = bytes;
      per_step.push_back({{"pid", p.pid}, {"index", p.steps[k].index}, {"peak_bytes_per_device", std::move(devs)}});
    }
  }
  Json j = {{"peak_bytes_per_device", std::move(peak)}, {"peak_bytes_per_step", std::move(per_step)},
            {"alloc_bytes", alloc_bytes},  {"free_bytes", free_bytes},
            {"allocations", allocations},  {"frees", frees}};
  if (has_tensor_memory(run)) {
    j["tensors"] = tensor_memory_json(run);
    j["leak"] = leak_json(run);
    j["fragmentation"] = fragmentation_json(run);
  }
  return j;
}

Json warnings_json(const Run& run) {
  Json warnings = run.warnings;
  for (const std::string& n : run.gpu_notices) warnings.push_back(n);
  for (const Process& p : run.processes) {
    const std::string tag = run.inputs.empty() ? std::string() : run.inputs[p.input].label + ": ";
    for (const std::string& w : p.warnings) warnings.push_back(tag + "pid " + std::to_string(p.pid) + ": " + w);
  }
  return warnings;
}

Json inputs_json(const Run& run) {
  Json inputs = Json::array();
  for (const RunInput& in : run.inputs) {
    inputs.push_back({{"path", in.label},
                      {"capture", in.capture},
                      {"command", in.command},
                      {"exit_code", in.exit_code},
                      {"host", in.host},
                      {"truncated", in.truncated},
                      {"corrupted", in.corrupted},
                      {"processes", in.processes}});
  }
  return inputs;
}

}  // namespace

std::string render_summary_json(const Run& run, const std::vector<std::string>& traces,
                                const std::string& out_dir, const RankReport* ranks, const Overview* overview) {
  Json j;
  j["schema"] = "torchprof.summary/1";
  j["command"] = run.command;
  j["exit_code"] = run.exit_code;
  j["dropped_events"] = run.dropped_events;
  j["host"] = run.host;
  j["start_ns"] = run.start_ns;
  j["end_ns"] = run.end_ns;
  j["truncated"] = run.truncated;
  j["truncated_at"] = run.truncated ? Json(run.truncated_at) : Json(nullptr);
  j["corrupted"] = run.corrupted;
  j["corruption"] = run.corrupted ? Json{{"damaged_chunks", run.corrupt_chunks},
                                         {"skipped_bytes", run.corrupt_bytes},
                                         {"first_at", run.corrupt_at}}
                                  : Json(nullptr);
  j["warnings"] = warnings_json(run);
  j["processes_without_events"] = run.processes_without_events;
  j["processes"] = Json::array();
  for (const Process& p : run.processes) {
    j["processes"].push_back(process_json(p));
    if (!run.inputs.empty()) j["processes"].back()["input"] = p.input;
  }
  j["steps"] = steps_json(run);
  j["capture_windows"] = capture_windows_json(run);
  j["ops"] = ops_json(run);
  j["left_out_in_steps"] = run.left_out_in_steps;
  j["left_out_outside_steps"] = run.left_out_outside_steps;
  j["cupti_dropped"] = run.cupti_dropped;
  uint64_t incomplete = 0;
  uint64_t unreadable = 0;
  for (const Process& p : run.processes) {
    incomplete += p.gpu_incomplete;
    unreadable += p.gpu_unreadable_bytes;
  }
  j["gpu_incomplete_records"] = incomplete;
  j["gpu_unreadable_bytes"] = unreadable;
  j["gpu_notices"] = run.gpu_notices;
  j["outside_tools"] = Json::array();
  for (const Run::OutsideTool& t : run.outside_tools) {
    j["outside_tools"].push_back({{"variable", t.variable}, {"library", t.library}, {"tool", t.tool}});
  }
  j["gpu"] = gpu_json(run);
  j["memory"] = memory_json(run);
  j["overview"] = overview_json(overview != nullptr ? *overview : compute_overview(run));
  Json files = Json::array();
  for (const std::string& t : traces) {
    std::filesystem::path rel = out_dir.empty() ? std::filesystem::path(t)
                                                : std::filesystem::path(t).lexically_relative(out_dir);
    files.push_back(rel.empty() || rel.native().starts_with("..") ? t : rel.string());
  }
  j["traces"] = std::move(files);
  // --with-modules: the module view, each process's instances depth first.
  if (const std::vector<ModuleRow> modules = module_view(run); !modules.empty()) {
    j["modules"] = module_view_json(modules);
  }
  if (!run.inputs.empty()) j["inputs"] = inputs_json(run);
  if (ranks) j["ranks"] = rank_report_json(*ranks);
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace torchprof
