#include "replay_plan.h"

#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <regex>
#include <string_view>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "replay_cbids.h"

namespace kineto_replay {

namespace {

using Json = nlohmann::json;

enum class Category { kCpuOp, kAnnotation, kRuntime, kDriver, kKernel, kMemcpy, kMemset, kSync, kIgnored };

// X events of these categories carry nothing the fake CUPTI or NVTX would see:
// the profiler's own spans, Python frames (with_stack), GPU-side copies of
// user_annotation ranges, the profiler's overhead.
constexpr std::string_view kIgnoredCategories[] = {"Trace", "python_function", "gpu_user_annotation", "overhead"};

std::optional<Category> category_of(std::string_view cat) {
  static const std::map<std::string_view, Category> kKnown = {
      {"cpu_op", Category::kCpuOp},        {"user_annotation", Category::kAnnotation},
      {"cuda_runtime", Category::kRuntime}, {"cuda_driver", Category::kDriver},
      {"kernel", Category::kKernel},        {"gpu_memcpy", Category::kMemcpy},
      {"gpu_memset", Category::kMemset},    {"cuda_sync", Category::kSync}};
  if (auto it = kKnown.find(cat); it != kKnown.end()) return it->second;
  for (std::string_view ignored : kIgnoredCategories) {
    if (cat == ignored) return Category::kIgnored;
  }
  return std::nullopt;
}

std::string read_text(const std::string& path) {
  // gzread reads plain files as they are, so .json and .json.gz take one path.
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) throw ReplayError("cannot open " + path);
  std::string text;
  char chunk[1 << 16];
  int got = 0;
  while ((got = gzread(file, chunk, sizeof chunk)) > 0) text.append(chunk, static_cast<size_t>(got));
  int error = Z_OK;
  const char* message = gzerror(file, &error);
  gzclose(file);
  if (got < 0 || (error != Z_OK && error != Z_STREAM_END)) {
    throw ReplayError("cannot read " + path + ": " + (message != nullptr ? message : "gzip error"));
  }
  return text;
}

// Microseconds (Kineto's unit) to nanoseconds, rounded half up; offsets are taken
// before scaling so that absolute epoch timestamps keep what precision they have.
int64_t to_ns(double us) { return static_cast<int64_t>(std::floor(us * 1000.0 + 0.5)); }

const Json& args_of(const Json& ev) {
  static const Json kNoArgs = Json::object();
  auto it = ev.find("args");
  return it != ev.end() && it->is_object() ? *it : kNoArgs;
}

int64_t int_of(const Json& ev, const char* key, int64_t fallback) {
  auto it = ev.find(key);
  return it != ev.end() && it->is_number() ? it->get<int64_t>() : fallback;
}

int64_t int_arg(const Json& args, const char* key, int64_t fallback) {
  auto it = args.find(key);
  return it != args.end() && it->is_number() ? it->get<int64_t>() : fallback;
}

std::string describe(const Json& ev) {
  return "'" + ev.value("name", std::string("?")) + "' (category " + ev.value("cat", std::string("none")) + ")";
}

struct Raw {
  const Json* ev = nullptr;
  Category cat = Category::kIgnored;
  int64_t ts = 0;  // ns from the first replayed event
  int64_t dur = 0;
  size_t order = 0;  // position in the file
};

std::string thread_key(const Json& ev) {
  return ev.value("pid", Json()).dump() + "/" + ev.value("tid", Json()).dump();
}

// ---- GPU records ----

int index_in(const char* const* names, int count, std::string_view name) {
  for (int i = 0; i < count; ++i) {
    if (name == names[i]) return i;
  }
  return -1;
}

// CUpti_ActivityMemcpyKind and CUpti_ActivityMemoryKind in enum order, as Kineto names them.
constexpr const char* kCopyKinds[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                      "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
constexpr const char* kMemoryKinds[] = {"Unknown", "Pageable", "Pinned",        "Device",
                                        "Array",   "Managed",  "Device Static", "Managed Static"};
// CUpti_ActivitySynchronizationType in enum order, as Kineto names them.
constexpr const char* kSyncTypes[] = {"Unknown", "Event Sync", "Stream Wait Event", "Stream Sync", "Context Sync"};

int memory_kind(std::string_view name) { return index_in(kMemoryKinds, 8, name); }

// "Memcpy HtoD (Pinned -> Device)" / "Memset (Device)".
bool parse_copy_name(std::string_view name, bool memset, FakeGpuRecord* r) {
  const std::string_view head = memset ? "Memset (" : "Memcpy ";
  if (!name.starts_with(head) || !name.ends_with(")")) return false;
  std::string_view rest = name.substr(head.size(), name.size() - head.size() - 1);
  if (memset) {
    const int kind = memory_kind(rest);
    r->dst_kind = static_cast<uint8_t>(kind);
    return kind >= 0;
  }
  const size_t open = rest.find(" (");
  const size_t arrow = rest.find(" -> ");
  if (open == std::string_view::npos || arrow == std::string_view::npos || arrow < open) return false;
  const int copy = index_in(kCopyKinds, 11, rest.substr(0, open));
  const int src = memory_kind(rest.substr(open + 2, arrow - open - 2));
  const int dst = memory_kind(rest.substr(arrow + 4));
  if (copy < 0 || src < 0 || dst < 0) return false;
  r->copy_kind = static_cast<uint8_t>(copy);
  r->src_kind = static_cast<uint8_t>(src);
  r->dst_kind = static_cast<uint8_t>(dst);
  return true;
}

void kernel_fields(const Json& args, FakeGpuRecord* r) {
  r->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  for (int i = 0; i < 3; ++i) r->grid[i] = r->block[i] = 1;
  auto dims = [&](const char* key, int32_t* out) {
    auto it = args.find(key);
    if (it == args.end() || !it->is_array()) return;
    for (size_t i = 0; i < 3 && i < it->size(); ++i) {
      if ((*it)[i].is_number()) out[i] = (*it)[i].get<int32_t>();
    }
  };
  dims("grid", r->grid);
  dims("block", r->block);
  r->registers_per_thread = static_cast<uint16_t>(int_arg(args, "registers per thread", 0));
  // Kineto writes static + dynamic as one "shared memory".
  r->static_shared_memory = static_cast<int32_t>(int_arg(args, "shared memory", 0));
}

void sync_fields(const Json& ev, const Json& args, FakeGpuRecord* r) {
  r->kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  const std::string kind = args.value("cuda_sync_kind", ev.value("name", std::string()));
  const int type = index_in(kSyncTypes, 5, kind);
  if (type < 0) throw ReplayError("cannot replay synchronisation " + describe(ev) + ": unknown kind");
  r->sync_type = static_cast<uint32_t>(type);
  r->cuda_event_id = static_cast<uint32_t>(int_arg(args, "wait_on_cuda_event_id", CUPTI_SYNCHRONIZATION_INVALID_VALUE));
  if (static_cast<int32_t>(r->stream) < 0) r->stream = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
}

GpuWork gpu_work(const Raw& raw) {
  const Json& ev = *raw.ev;
  const Json& args = args_of(ev);
  GpuWork w;
  w.name = ev.value("name", std::string());
  FakeGpuRecord& r = w.record;
  // GPU rows: pid = device, tid = stream, also in the args.
  r.device = static_cast<uint32_t>(int_arg(args, "device", int_of(ev, "pid", 0)));
  r.context = static_cast<uint32_t>(int_arg(args, "context", 1));
  r.stream = static_cast<uint32_t>(int_arg(args, "stream", int_of(ev, "tid", 0)));
  r.start = static_cast<uint64_t>(raw.ts);
  r.end = static_cast<uint64_t>(raw.ts + raw.dur);
  r.correlation_id = static_cast<uint32_t>(int_arg(args, "correlation", 0));
  r.bytes = static_cast<uint64_t>(int_arg(args, "bytes", 0));
  switch (raw.cat) {
    case Category::kKernel: kernel_fields(args, &r); break;
    case Category::kSync: sync_fields(ev, args, &r); break;
    default: {
      const bool memset = raw.cat == Category::kMemset;
      r.kind = memset ? CUPTI_ACTIVITY_KIND_MEMSET : CUPTI_ACTIVITY_KIND_MEMCPY;
      if (!parse_copy_name(w.name, memset, &r)) throw ReplayError("cannot replay " + describe(ev) + ": unknown copy name");
    }
  }
  return w;
}

// ---- CPU events ----

// Kineto's "Input Dims" as emit_nvtx writes sizes: [[2, 3], [], [[1], [4]]].
bool append_dims(const Json& dims, std::string* out) {
  if (dims.is_number_integer()) {
    *out += std::to_string(dims.get<int64_t>());
    return true;
  }
  if (!dims.is_array()) return false;
  *out += '[';
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) *out += ", ";
    if (!append_dims(dims[i], out)) return false;
  }
  *out += ']';
  return true;
}

// emit_nvtx's message: NAME, seq = N, op_id = ID[, sizes = [...]]. Every op gets an
// op_id (the trace's External id, else one of its own), so that it parses as an op.
std::string op_message(const Json& ev, int64_t fallback_id) {
  const Json& args = args_of(ev);
  std::string message = ev.value("name", std::string());
  if (const int64_t seq = int_arg(args, "Sequence number", -1); seq >= 0) message += ", seq = " + std::to_string(seq);
  const int64_t id = int_arg(args, "External id", 0);
  message += ", op_id = " + std::to_string(id > 0 ? id : fallback_id);
  if (auto dims = args.find("Input Dims"); dims != args.end() && dims->is_array()) {
    std::string sizes;
    if (append_dims(*dims, &sizes)) message += ", sizes = " + sizes;
  }
  return message;
}

struct CpuEvent {
  int64_t ts = 0;
  int64_t dur = 0;
  bool api = false;
  bool marker = false;
  uint32_t index = 0;  // message or call
  size_t order = 0;
};

bool before(const CpuEvent& x, const CpuEvent& y) {
  if (x.ts != y.ts) return x.ts < y.ts;
  if (x.dur != y.dur) return x.dur > y.dur;
  if (x.api != y.api) return !x.api;
  return x.order < y.order;
}

struct Open {
  int64_t start = 0;
  int64_t end = 0;
  bool api = false;
  bool marker = false;
};

bool holds(const Open& open, const CpuEvent& e) { return !open.api && (e.ts < open.end || e.ts == open.start); }

void nest_thread(std::vector<CpuEvent>& events, uint32_t thread, Plan& plan) {
  std::sort(events.begin(), events.end(), before);
  std::vector<Action>& actions = plan.threads[thread].actions;
  std::vector<Open> stack;
  int64_t last = 0;
  auto emit = [&](ActionKind kind, int64_t at, uint32_t index, bool marker, bool start) {
    last = std::max(last, at);
    actions.push_back({kind, last, index});
    if (marker) plan.fences.push_back({last, thread, static_cast<uint32_t>(actions.size() - 1), start});
  };
  auto close = [&] {
    const Open open = stack.back();
    stack.pop_back();
    emit(open.api ? ActionKind::kApiExit : ActionKind::kPop, open.end, 0, open.marker, /*start=*/false);
  };
  for (const CpuEvent& e : events) {
    while (!stack.empty() && !holds(stack.back(), e)) close();
    emit(e.api ? ActionKind::kApiEnter : ActionKind::kPush, e.ts, e.index, e.marker, /*start=*/true);
    stack.push_back({e.ts, e.ts + e.dur, e.api, e.marker});
  }
  while (!stack.empty()) close();
}

ApiCall api_call(const Raw& raw) {
  const Json& ev = *raw.ev;
  const int domain = raw.cat == Category::kRuntime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
  const Json& args = args_of(ev);
  const std::string name = ev.value("name", std::string());
  const auto callback = lookup_callback(domain, name, int_arg(args, "cbid", -1));
  if (!callback) {
    throw ReplayError(std::string("cannot replay ") + (domain == CUPTI_CB_DOMAIN_RUNTIME_API ? "runtime" : "driver") +
                      " function " + describe(ev) + ": no such function in this toolkit's CUPTI headers");
  }
  return ApiCall{domain, callback->cbid, callback->name, static_cast<uint32_t>(int_arg(args, "correlation", 0)), {}};
}

void merge_busy(std::vector<std::pair<int64_t, int64_t>>& spans) {
  std::sort(spans.begin(), spans.end());
  std::vector<std::pair<int64_t, int64_t>> merged;
  for (const auto& s : spans) {
    if (!merged.empty() && s.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, s.second);
    } else {
      merged.push_back(s);
    }
  }
  spans = std::move(merged);
}

const Json& trace_events(const Json& trace) {
  if (trace.is_array()) return trace;
  if (trace.is_object()) {
    auto it = trace.find("traceEvents");
    if (it != trace.end() && it->is_array()) return *it;
  }
  throw ReplayError("not a Chrome/Kineto trace: no traceEvents list");
}

// The X events to replay, timestamps as offsets from the first of them.
std::vector<Raw> replayed_events(const Json& events, int64_t* ignored) {
  std::vector<Raw> raws;
  double first = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    const Json& ev = events[i];
    if (!ev.is_object() || ev.value("ph", std::string()) != "X") continue;
    const auto cat = category_of(ev.value("cat", std::string()));
    if (!cat) throw ReplayError("cannot replay event " + describe(ev) + ": unknown category");
    if (*cat == Category::kIgnored) {
      ++*ignored;
      continue;
    }
    if (!ev.contains("ts") || !ev["ts"].is_number()) throw ReplayError("event " + describe(ev) + " has no ts");
    const double ts = ev["ts"].get<double>();
    first = raws.empty() ? ts : std::min(first, ts);
    raws.push_back({&ev, *cat, 0, 0, i});
  }
  for (Raw& r : raws) {
    const Json& ev = *r.ev;
    r.ts = to_ns(ev["ts"].get<double>() - first);
    r.dur = ev.contains("dur") && ev["dur"].is_number() ? std::max<int64_t>(0, to_ns(ev["dur"].get<double>())) : 0;
  }
  return raws;
}

// Runtime and driver calls, and the GPU records each launched.
void add_gpu_side(const std::vector<Raw>& raws, Plan& plan, std::vector<int64_t>* call_of_raw) {
  std::unordered_map<uint32_t, uint32_t> call_by_correlation;
  call_of_raw->assign(raws.size(), -1);
  for (size_t i = 0; i < raws.size(); ++i) {
    if (raws[i].cat != Category::kRuntime && raws[i].cat != Category::kDriver) continue;
    (*call_of_raw)[i] = static_cast<int64_t>(plan.calls.size());
    plan.calls.push_back(api_call(raws[i]));
    call_by_correlation.emplace(plan.calls.back().correlation, static_cast<uint32_t>(plan.calls.size() - 1));
  }
  for (const Raw& raw : raws) {
    if (raw.cat < Category::kKernel || raw.cat > Category::kSync) continue;
    plan.gpu.push_back(gpu_work(raw));
    const auto index = static_cast<uint32_t>(plan.gpu.size() - 1);
    plan.span_ns = std::max(plan.span_ns, raw.ts + raw.dur);
    auto call = call_by_correlation.find(plan.gpu.back().record.correlation_id);
    if (call != call_by_correlation.end()) {
      plan.calls[call->second].gpu.push_back(index);
    } else {
      plan.unlaunched.push_back(index);
    }
  }
}

// Threads and their actions; threads[0] is the one whose tid is the pid (else the busiest).
void add_cpu_side(const std::vector<Raw>& raws, const std::vector<int64_t>& call_of_raw, const std::regex& marker,
                  Plan& plan) {
  std::map<std::string, std::vector<CpuEvent>> by_thread;
  std::string main_key;
  for (size_t i = 0; i < raws.size(); ++i) {
    const Raw& raw = raws[i];
    if (raw.cat > Category::kDriver) continue;
    const Json& ev = *raw.ev;
    CpuEvent e{raw.ts, raw.dur, call_of_raw[i] >= 0, false, 0, raw.order};
    if (e.api) {
      e.index = static_cast<uint32_t>(call_of_raw[i]);
    } else {
      const std::string name = ev.value("name", std::string());
      e.marker = raw.cat == Category::kAnnotation && std::regex_search(name, marker);
      e.index = static_cast<uint32_t>(plan.messages.size());
      plan.messages.push_back(raw.cat == Category::kCpuOp ? op_message(ev, static_cast<int64_t>(raw.order) + 1) : name);
    }
    const std::string key = thread_key(ev);
    if (main_key.empty() && ev.value("pid", Json()) == ev.value("tid", Json())) main_key = key;
    by_thread[key].push_back(e);
    plan.cpu_busy.emplace_back(raw.ts, raw.ts + raw.dur);
    plan.span_ns = std::max(plan.span_ns, raw.ts + raw.dur);
    ++plan.cpu_events;
  }
  if (main_key.empty() && !by_thread.empty()) {
    main_key = std::max_element(by_thread.begin(), by_thread.end(), [](const auto& x, const auto& y) {
                 return x.second.size() < y.second.size();
               })->first;
  }
  std::vector<std::string> keys{main_key};
  for (const auto& entry : by_thread) {
    if (entry.first != main_key) keys.push_back(entry.first);
  }
  for (const std::string& key : keys) {
    if (key.empty()) continue;
    plan.threads.push_back({key, {}});
    nest_thread(by_thread[key], static_cast<uint32_t>(plan.threads.size() - 1), plan);
  }
  std::stable_sort(plan.fences.begin(), plan.fences.end(),
                   [](const Fence& x, const Fence& y) { return x.at_ns < y.at_ns; });
  merge_busy(plan.cpu_busy);
}

}  // namespace

Plan load_plan(const std::string& path, const std::string& step_marker) {
  std::regex marker;
  try {
    marker = std::regex(step_marker);
  } catch (const std::regex_error& error) {
    throw ReplayError("invalid --step-marker '" + step_marker + "': " + error.what());
  }
  Json trace;
  try {
    trace = Json::parse(read_text(path));
  } catch (const Json::parse_error& error) {
    throw ReplayError(path + " is not JSON: " + error.what());
  }
  Plan plan;
  const std::vector<Raw> raws = replayed_events(trace_events(trace), &plan.ignored);
  std::vector<int64_t> call_of_raw;
  add_gpu_side(raws, plan, &call_of_raw);
  add_cpu_side(raws, call_of_raw, marker, plan);
  return plan;
}

const char* categories_help() {
  return "  cpu_op           NVTX range, emit_nvtx's message: NAME, seq = N, op_id = ID[, sizes = [...]]\n"
         "  user_annotation  NVTX range named as the event\n"
         "  cuda_runtime     runtime API callback (cbid from the CUPTI headers by name), its correlation id\n"
         "  cuda_driver      driver API callback, likewise\n"
         "  kernel, gpu_memcpy, gpu_memset, cuda_sync\n"
         "                   activity record inside the call with the same correlation id (or at the start\n"
         "                   when the trace lacks that call), at the trace's offset and duration\n"
         "  Trace, python_function, gpu_user_annotation, overhead: ignored, as are flows, metadata,\n"
         "                   instants and counters; any other category: exit 2\n";
}

}  // namespace kineto_replay
