#include "kineto_client.h"

#include <dlfcn.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "second_client.h"

#ifndef KINETO_SEQUENCES_DIR
#define KINETO_SEQUENCES_DIR "kineto_sequences"
#endif

namespace fake_workload {

namespace {

// ---- CUPTI as a program linked against libcupti reaches it ----

template <typename Fn>
Fn linked(const char* name) {
  void* fn = dlsym(RTLD_DEFAULT, name);
  if (fn == nullptr) throw std::runtime_error(std::string("kineto client: no ") + name + " in the process");
  return reinterpret_cast<Fn>(fn);
}

#define KINETO_FN(name) linked<decltype(&name)>(#name)

// ---- symbolic arguments of the call lists ----

const std::map<std::string, CUpti_ActivityKind>& kinds() {
  static const std::map<std::string, CUpti_ActivityKind> table = {
      {"MEMCPY", CUPTI_ACTIVITY_KIND_MEMCPY},
      {"MEMSET", CUPTI_ACTIVITY_KIND_MEMSET},
      {"CONCURRENT_KERNEL", CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL},
      {"EXTERNAL_CORRELATION", CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION},
      {"RUNTIME", CUPTI_ACTIVITY_KIND_RUNTIME},
      {"DRIVER", CUPTI_ACTIVITY_KIND_DRIVER},
      {"OVERHEAD", CUPTI_ACTIVITY_KIND_OVERHEAD},
      {"SYNCHRONIZATION", CUPTI_ACTIVITY_KIND_SYNCHRONIZATION},
  };
  return table;
}

template <typename T>
T lookup(const std::map<std::string, T>& table, const std::string& name, const char* what) {
  auto found = table.find(name);
  if (found == table.end()) throw std::runtime_error(std::string("kineto client: unknown ") + what + " " + name);
  return found->second;
}

CUpti_CallbackDomain domain_of(const std::string& name) {
  static const std::map<std::string, CUpti_CallbackDomain> table = {
      {"RESOURCE", CUPTI_CB_DOMAIN_RESOURCE},
      {"RUNTIME_API", CUPTI_CB_DOMAIN_RUNTIME_API},
      {"DRIVER_API", CUPTI_CB_DOMAIN_DRIVER_API},
  };
  return lookup(table, name, "domain");
}

CUpti_CallbackId cbid_of(const std::string& name) {
  static const std::map<std::string, CUpti_CallbackId> table = {
      {"CUPTI_CBID_RESOURCE_CONTEXT_CREATED", CUPTI_CBID_RESOURCE_CONTEXT_CREATED},
      {"CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING", CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING},
      {"CUPTI_CBID_RESOURCE_STREAM_CREATED", CUPTI_CBID_RESOURCE_STREAM_CREATED},
      {"CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020", CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020},
      {"CUPTI_DRIVER_TRACE_CBID_cuKernelGetAttribute", CUPTI_DRIVER_TRACE_CBID_cuKernelGetAttribute},
      {"CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState", CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState},
      {"CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent", CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent},
  };
  return lookup(table, name, "callback id");
}

const std::string& arg(const KinetoClient::Line& line, size_t i) {
  if (i >= line.args.size()) {
    throw std::runtime_error("kineto client: " + line.function + " needs argument " + std::to_string(i + 1) + " (" +
                             line.source + ")");
  }
  return line.args[i];
}

// ---- the client's clocks ----

uint64_t system_clock_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// getApproximateTime: Kineto's raw TSC; here SecondClient's TSC-like clock (3 ticks per ns).
uint64_t CUPTIAPI approximate_time() { return SecondClient::clock(); }
constexpr uint64_t kTicksPerNs = 3;

// ---- Kineto's buffers (CuptiActivityApi): 4 MiB each, kept in two maps ----

constexpr size_t kBufferBytes = 4u << 20;
std::mutex g_mutex;
std::vector<uint8_t*> g_allocated;                  // handed to CUPTI, not back yet
std::vector<std::pair<uint8_t*, size_t>> g_ready;   // back, with their valid bytes
int g_unknown_buffers = 0;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::malloc(kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (*buffer != nullptr) g_allocated.push_back(*buffer);
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto mine = std::find(g_allocated.begin(), g_allocated.end(), buffer);
  if (mine == g_allocated.end()) {
    std::fprintf(stderr, "kineto client: bufferCompleted called with unknown buffer\n");
    ++g_unknown_buffers;
    return;
  }
  g_allocated.erase(mine);
  g_ready.emplace_back(buffer, valid);
}

bool buffers_outstanding() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return !g_allocated.empty();
}

// ---- the callback switchboard, and TEARDOWN_CUPTI's unsubscribe at the next API exit ----

CUpti_SubscriberHandle g_subscriber = nullptr;
std::mutex g_teardown_mutex;
bool g_teardown_due = false;
KinetoClient::Line g_unsubscribe_line;
KinetoClient::Line g_finalize_line;
CUptiResult g_unsubscribe_rc = CUPTI_SUCCESS;
CUptiResult g_finalize_rc = CUPTI_SUCCESS;
bool g_torn_down = false;
int g_callbacks = 0;

void CUPTIAPI switchboard(void*, CUpti_CallbackDomain domain, CUpti_CallbackId, const void* data) {
  ++g_callbacks;
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (cb->callbackSite != CUPTI_API_EXIT) return;
  std::lock_guard<std::mutex> lock(g_teardown_mutex);
  if (!g_teardown_due) return;
  g_teardown_due = false;
  g_unsubscribe_rc = KINETO_FN(cuptiUnsubscribe)(g_subscriber);
  g_finalize_rc = KINETO_FN(cuptiFinalize)();
  g_subscriber = nullptr;
  g_torn_down = true;
}

std::string rc_text(CUptiResult rc) {
  const char* text = nullptr;
  if (KINETO_FN(cuptiGetResultString)(rc, &text) == CUPTI_SUCCESS && text != nullptr) return text;
  return std::to_string(static_cast<int>(rc));
}

}  // namespace

KinetoClient::Sequence KinetoClient::load(const std::string& commit) {
  const char* dir = std::getenv("KINETO_SEQUENCES_DIR");
  const std::string path = std::string(dir != nullptr && *dir != '\0' ? dir : KINETO_SEQUENCES_DIR) + "/kineto-" +
                           commit + ".seq";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("kineto client: cannot read " + path);
  Sequence seq;
  int session = 0;
  bool after_process = false;
  std::string text;
  while (std::getline(in, text)) {
    Line line;
    const size_t hash = text.find('#');
    if (hash != std::string::npos) {
      std::istringstream comment(text.substr(hash + 1));
      comment >> line.source;
      text.resize(hash);
    }
    std::istringstream fields(text);
    std::vector<std::string> words;
    for (std::string w; fields >> w;) words.push_back(w);
    if (words.size() < 2) continue;
    line.phase = words[0];
    line.function = words[1];
    for (size_t i = 2; i < words.size(); ++i) {
      if (words[i][0] == '?') {
        line.condition = words[i].substr(1);
      } else {
        line.args.push_back(words[i]);
      }
    }
    if (line.phase == "init") {
      seq.init.push_back(line);
      continue;
    }
    if (line.phase == "teardown") {
      if (session == 0) seq.teardown.push_back(line);
      after_process = true;
      continue;
    }
    static const std::map<std::string, int> kBlocks = {{"start", 0}, {"work", 1}, {"stop", 2}, {"process", 3}};
    const int block = lookup(kBlocks, line.phase, "phase");
    if (block == 0 && after_process) {
      session = 1;
      after_process = false;
    }
    if (block == 3) after_process = true;
    if (line.function != "work") seq.session[session][block].push_back(line);
  }
  if (seq.init.empty() || seq.session[0][0].empty()) throw std::runtime_error("kineto client: " + path + " is empty");
  if (seq.session[1][0].empty()) {
    for (int b = 0; b < 4; ++b) seq.session[1][b] = seq.session[0][b];
  }
  return seq;
}

uint64_t KinetoClient::now() const { return tsc_clock_ ? approximate_time() : system_clock_ns(); }

// The build and torch facts of a default torch.profiler session on Linux with CUDA 13 and
// torch's own choices at each commit, the options, and the client's state.
bool KinetoClient::holds(const std::string& condition) const {
  if (condition.empty()) return true;
  const bool torch26 = options_.commit != "b7b1fbe6";  // OVERHEAD is torch's since 2.6
  const std::map<std::string, bool> atoms = {
      {"_WIN32", false},
      {"TMP_USE_TSC_AS_TIMESTAMP", false},
      {"CUDA_VERSION>=11060", true},
      {"CUDA_VERSION<11020", false},
      {"CUDA_VERSION>=13000", true},
      {"CUDART>=12050", true},
      {"CUDART>=12030", true},
      {"KINETO_ENABLE_EVENT_PROFILER", false},
      {"HAS_CUPTI_RANGE_PROFILER", false},
      {"context_event", false},
      {"VLOG>=1", false},
      {"OVERHEAD_selected", torch26},
      {"enable_cuda_sync_events", options_.sync_events},
      {"USER_SCOPE_op", true},
      {"CUPTI_PER_THREAD_BUFFER_ENABLED", false},
      {"KINETO_USE_DAEMON", false},
      {"TEARDOWN_CUPTI", options_.teardown},
      {"DISABLE_CUPTI_LAZY_REINIT", false},
      {"GetNextRecord_error", false},
      {"buffers_outstanding", buffers_outstanding()},
      {"init_failed", init_failed_},
      {"initSuccess", init_success_},
  };
  size_t at = 0;
  while (at <= condition.size()) {
    const size_t amp = condition.find("&&", at);
    std::string atom = condition.substr(at, amp == std::string::npos ? std::string::npos : amp - at);
    const bool negated = !atom.empty() && atom[0] == '!';
    if (negated) atom.erase(0, 1);
    if (lookup(atoms, atom, "condition") == negated) return false;
    if (amp == std::string::npos) break;
    at = amp + 2;
  }
  return true;
}

bool KinetoClient::check(const Line& line, CUptiResult rc, CUptiResult expected) {
  ++calls_made_;
  if (rc == expected) return true;
  std::fprintf(stderr, "kineto client %s: %s %s (%s) returned %s, a lone client gets %s\n", options_.commit.c_str(),
               line.phase.c_str(), line.function.c_str(), line.source.c_str(), rc_text(rc).c_str(),
               rc_text(expected).c_str());
  ok_ = false;
  return false;
}

// One line of the call list; false when the client goes CPU-only (its init failed).
bool KinetoClient::call(const Line& line) {
  const std::string& f = line.function;
  if (f == "cuptiSubscribe") {
    if (line.phase == "start" && !in_reinit_) return true;  // only the lazy re-init subscribes again
    const CUptiResult rc = KINETO_FN(cuptiSubscribe)(&g_subscriber, &switchboard, nullptr);
    init_success_ = rc == CUPTI_SUCCESS;
    if (!init_success_) {
      init_failed_ = true;
      check(line, rc);
      return false;
    }
    g_torn_down = false;
    return check(line, rc);
  }
  if (f == "cuptiEnableCallback") {
    if (line.phase == "start" && !in_reinit_) return true;
    const CUptiResult rc = KINETO_FN(cuptiEnableCallback)(static_cast<uint32_t>(std::stoul(arg(line, 0))), g_subscriber,
                                                          domain_of(arg(line, 1)), cbid_of(arg(line, 2)));
    if (rc != CUPTI_SUCCESS && line.phase == "init") init_failed_ = true;
    return check(line, rc);
  }
  if (f == "cuptiEnableDomain") {
    return check(line, KINETO_FN(cuptiEnableDomain)(static_cast<uint32_t>(std::stoul(arg(line, 0))), g_subscriber,
                                                    domain_of(arg(line, 1))));
  }
  if (f == "cuptiGetVersion") {
    uint32_t version = 0;
    return check(line, KINETO_FN(cuptiGetVersion)(&version));
  }
  if (f == "cuptiGetResultString") {
    const char* text = nullptr;
    return check(line, KINETO_FN(cuptiGetResultString)(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, &text));
  }
  if (f == "cuptiActivityRegisterTimestampCallback") {
    if (arg(line, 0) != "getApproximateTime") throw std::runtime_error("kineto client: unknown clock " + arg(line, 0));
    tsc_clock_ = true;
    return check(line, KINETO_FN(cuptiActivityRegisterTimestampCallback)(&approximate_time));
  }
  if (f == "cuptiActivityRegisterCallbacks") {
    return check(line, KINETO_FN(cuptiActivityRegisterCallbacks)(&buffer_requested, &buffer_completed));
  }
  if (f == "cuptiActivityEnable") return check(line, KINETO_FN(cuptiActivityEnable)(lookup(kinds(), arg(line, 0), "kind")));
  if (f == "cuptiActivityDisable") {
    return check(line, KINETO_FN(cuptiActivityDisable)(lookup(kinds(), arg(line, 0), "kind")));
  }
  if (f == "cuptiActivityEnableRuntimeApi" || f == "cuptiActivityEnableDriverApi") {
    auto fn = f == "cuptiActivityEnableRuntimeApi" ? KINETO_FN(cuptiActivityEnableRuntimeApi)
                                                   : KINETO_FN(cuptiActivityEnableDriverApi);
    return check(line, fn(cbid_of(arg(line, 0)), static_cast<uint8_t>(std::stoul(arg(line, 1)))));
  }
  if (f == "cuptiActivityEnableCudaEventDeviceTimestamps") {
    return check(line, KINETO_FN(cuptiActivityEnableCudaEventDeviceTimestamps)(
                           static_cast<uint8_t>(std::stoul(arg(line, 0)))));
  }
  if (f == "cuptiActivitySetAttribute") {
    if (arg(line, 0) != "CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER") {
      throw std::runtime_error("kineto client: unknown attribute " + arg(line, 0));
    }
    uint8_t value = static_cast<uint8_t>(std::stoul(arg(line, 1)));
    size_t size = sizeof value;
    return check(line,
                 KINETO_FN(cuptiActivitySetAttribute)(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &size, &value));
  }
  if (f == "cuptiActivityFlushAll") {
    const uint32_t flag = arg(line, 0) == "FORCED" ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0;
    return check(line, KINETO_FN(cuptiActivityFlushAll)(flag));
  }
  if (f == "cuptiActivityGetNextRecord") return process_buffers();
  if (f == "cuptiUnsubscribe") {
    std::lock_guard<std::mutex> lock(g_teardown_mutex);
    g_unsubscribe_line = line;
    g_teardown_due = true;  // at the next runtime API exit, in the callback (Kineto's teardown)
    return true;
  }
  if (f == "cuptiFinalize") {
    std::lock_guard<std::mutex> lock(g_teardown_mutex);
    g_finalize_line = line;
    return true;
  }
  // Calls the default configuration never reaches with a live condition (dropped-record
  // counts under VLOG, the range profiler's cuptiGetDeviceId).
  if (f == "cuptiActivityGetNumDroppedRecords" || f == "cuptiGetDeviceId") return true;
  throw std::runtime_error("kineto client: no replay for " + f + " (" + line.source + ")");
}

bool KinetoClient::run_block(const std::vector<Line>& lines, bool* ok) {
  for (const Line& line : lines) {
    if (!holds(line.condition)) continue;
    if (!call(line)) {
      *ok = false;
      if (init_failed_) return false;
    }
  }
  return true;
}

bool KinetoClient::start(const KinetoOptions& options) {
  if (active_) return true;
  if (!loaded_ || options.commit != options_.commit) {
    seq_ = load(options.commit);
    loaded_ = true;
  }
  options_ = options;
  expected_.clear();
  pushed_ids_.clear();
  bool ok = true;
  if (!initialized_) {
    initialized_ = true;
    if (!run_block(seq_.init, &ok)) cpu_only_ = true;  // Kineto: "CUPTI initialization failed"
  }
  if (cpu_only_) {
    std::fprintf(stderr, "kineto client %s: CPU-only (its CUPTI initialization failed)\n", options_.commit.c_str());
    ok_ = false;
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(g_teardown_mutex);
    in_reinit_ = g_torn_down && options_.teardown;
    if (in_reinit_) {
      init_success_ = false;
      check(g_unsubscribe_line, g_unsubscribe_rc);  // made in the callback since the last session
      check(g_finalize_line, g_finalize_rc);
    }
  }
  const int s = sessions_ == 0 ? 0 : 1;
  run_block(seq_.session[s][0], &ok);
  in_reinit_ = false;
  window_start_ = now();
  active_ = true;
  return ok && ok_;
}

void KinetoClient::op_begin() {
  if (!active_) return;
  const uint64_t id = next_op_id_++;
  pushed_ids_.insert(id);
  op_stack_.push_back(id);
  const CUptiResult rc = KINETO_FN(cuptiActivityPushExternalCorrelationId)(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
  Line line{"work", "cuptiActivityPushExternalCorrelationId", {"CUSTOM0"}, "", "op begin"};
  for (const Line& l : seq_.session[sessions_ == 0 ? 0 : 1][1]) {
    if (l.function == line.function && !l.args.empty() && l.args[0] == "CUSTOM0") line = l;
  }
  check(line, rc);
}

void KinetoClient::op_end() {
  if (!active_ || op_stack_.empty()) return;
  op_stack_.pop_back();
  uint64_t last = 0;
  const CUptiResult rc = KINETO_FN(cuptiActivityPopExternalCorrelationId)(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
  Line line{"work", "cuptiActivityPopExternalCorrelationId", {"CUSTOM0"}, "", "op end"};
  for (const Line& l : seq_.session[sessions_ == 0 ? 0 : 1][1]) {
    if (l.function == line.function && !l.args.empty() && l.args[0] == "CUSTOM0") line = l;
  }
  check(line, rc);
}

void KinetoClient::launched(const std::string& row, uint64_t duration_ns) {
  if (active_) expected_[row].push_back(duration_ns);
}

namespace {

std::string copy_row(const CUpti_ActivityMemcpy& copy) {
  switch (copy.copyKind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "Memcpy HtoD (Pageable -> Device)";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "Memcpy DtoH (Device -> Pageable)";
    default: return "Memcpy DtoD (Device -> Device)";
  }
}

struct Received {
  std::string row;
  uint64_t start;
  uint64_t end;
  uint32_t correlation;
};

}  // namespace

// Kineto's processActivities: every record of every ready buffer, by its old structs
// (CUpti_ActivityKernel4, CUpti_ActivityMemcpy: the prefix of what CUPTI writes).
bool KinetoClient::process_buffers() {
  std::vector<std::pair<uint8_t*, size_t>> ready;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    ready.swap(g_ready);
  }
  std::vector<Received> got;
  std::map<uint32_t, uint64_t> external;  // correlation id -> CUSTOM0 external id
  Line line{"process", "cuptiActivityGetNextRecord", {}, "", "record loop"};
  for (auto& [buffer, valid] : ready) {
    CUpti_Activity* record = nullptr;
    CUptiResult rc;
    while ((rc = KINETO_FN(cuptiActivityGetNextRecord)(buffer, valid, &record)) == CUPTI_SUCCESS) {
      ++calls_made_;
      if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel4*>(record);
        got.push_back(Received{k->name != nullptr ? k->name : "", k->start, k->end, k->correlationId});
      } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
        const auto* c = reinterpret_cast<const CUpti_ActivityMemcpy*>(record);
        got.push_back(Received{copy_row(*c), c->start, c->end, c->correlationId});
      } else if (record->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
        const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
        if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) external[e->correlationId] = e->externalId;
      }
    }
    check(line, rc, CUPTI_ERROR_MAX_LIMIT_REACHED);
    std::free(buffer);
  }
  // What torch.profiler's trace would hold: the records inside the capture window, on the
  // client's clock, with the external ids it pushed.
  std::map<std::string, std::vector<uint64_t>> durations;
  bool ok = true;
  const uint64_t per_ns = tsc_clock_ ? kTicksPerNs : 1;
  for (const Received& r : got) {
    if (r.start < window_start_ || r.end > window_end_) {
      std::fprintf(stderr,
                   "kineto client %s: %s at %llu..%llu, outside its capture window %llu..%llu (%s clock): Kineto "
                   "drops it\n",
                   options_.commit.c_str(), r.row.c_str(), static_cast<unsigned long long>(r.start),
                   static_cast<unsigned long long>(r.end), static_cast<unsigned long long>(window_start_),
                   static_cast<unsigned long long>(window_end_), tsc_clock_ ? "TSC" : "system_clock");
      ok = false;
      continue;
    }
    durations[r.row].push_back((r.end - r.start + per_ns / 2) / per_ns);
    auto ext = external.find(r.correlation);
    if (ext == external.end() || pushed_ids_.count(ext->second) == 0) {
      std::fprintf(stderr, "kineto client %s: %s (correlation %u) has no external id of its ops\n",
                   options_.commit.c_str(), r.row.c_str(), r.correlation);
      ok = false;
    }
  }
  for (const auto& [row, want_in] : expected_) {
    std::vector<uint64_t> want = want_in;
    std::vector<uint64_t> have = durations.count(row) != 0 ? durations[row] : std::vector<uint64_t>{};
    std::sort(want.begin(), want.end());
    std::sort(have.begin(), have.end());
    bool same = want.size() == have.size();
    for (size_t i = 0; same && i < want.size(); ++i) {
      const uint64_t slack = want[i] / 1000 + 10;
      same = have[i] + slack >= want[i] && have[i] <= want[i] + slack;
    }
    if (!same) {
      std::fprintf(stderr, "kineto client %s: %zu records of %s in its trace (first %llu ns), %zu launched (%llu ns)\n",
                   options_.commit.c_str(), have.size(), row.c_str(),
                   have.empty() ? 0ull : static_cast<unsigned long long>(have[0]), want.size(),
                   static_cast<unsigned long long>(want[0]));
      ok = false;
    }
  }
  for (const auto& [row, have] : durations) {
    if (expected_.count(row) == 0) {
      std::fprintf(stderr, "kineto client %s: %zu records of %s, none launched\n", options_.commit.c_str(), have.size(),
                   row.c_str());
      ok = false;
    }
  }
  size_t kernels = 0;
  for (const auto& [row, have] : durations) kernels += row.rfind("Memcpy", 0) == 0 ? 0 : have.size();
  std::fprintf(stderr, "kineto client %s: session %d: %zu kernels and %zu other records on its %s clock\n",
               options_.commit.c_str(), sessions_ + 1, kernels, got.size() - kernels,
               tsc_clock_ ? "TSC" : "system_clock");
  if (!ok) ok_ = false;
  return true;
}

bool KinetoClient::stop() {
  if (!active_) return ok_;
  active_ = false;
  window_end_ = now();
  const int s = sessions_ == 0 ? 0 : 1;
  bool ok = true;
  run_block(seq_.session[s][2], &ok);
  run_block(seq_.session[s][3], &ok);
  if (options_.teardown) run_block(seq_.teardown, &ok);
  ++sessions_;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_unknown_buffers != 0) ok_ = false;
  }
  std::fprintf(stderr, "kineto client %s: %d CUPTI calls, %d callbacks so far%s\n", options_.commit.c_str(),
               calls_made_, g_callbacks, ok_ && ok ? ", each returned what CUPTI gives a lone client" : "");
  return ok && ok_;
}

}  // namespace fake_workload
