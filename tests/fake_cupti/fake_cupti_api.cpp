// The exported CUPTI functions of libfake_cupti. Signatures come from the real
// headers (compiled with CUPTI_LIB so the headers mark them visible), so the
// compiler checks every one against this header version.
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "fake_cupti_internal.h"
#include "fake_cupti_tables.inc"

namespace fake_cupti {

namespace {

State* g_state = nullptr;
int g_context_tag = 0;

void reset_after_fork() {
  // A forked child must not inherit CUPTI's threads or locks: start from nothing.
  if (g_state != nullptr) g_state->activity.forget_worker_after_fork();
  g_state = new State();
}

__attribute__((constructor)) void on_load() {
  if (g_state == nullptr) g_state = new State();
  pthread_atfork(nullptr, nullptr, reset_after_fork);
}

__attribute__((destructor)) void on_unload() {
  if (g_state != nullptr) g_state->activity.stop_worker();
}

bool fail_mode_is(const char* mode) {
  const char* value = std::getenv("FAKE_CUPTI_FAIL");
  return value != nullptr && std::strcmp(value, mode) == 0;
}

// Read once: the GPU clock is read for every record.
uint64_t clock_offset_ns() {
  static const uint64_t offset = [] {
    const char* value = std::getenv("FAKE_CUPTI_CLOCK_OFFSET_NS");
    return value != nullptr ? std::strtoull(value, nullptr, 10) : 0ull;
  }();
  return offset;
}

size_t domain_size(int domain) {
  switch (domain) {
    case CUPTI_CB_DOMAIN_DRIVER_API: return CUPTI_DRIVER_TRACE_CBID_SIZE;
    case CUPTI_CB_DOMAIN_RUNTIME_API: return CUPTI_RUNTIME_TRACE_CBID_SIZE;
    case CUPTI_CB_DOMAIN_RESOURCE: return CUPTI_CBID_RESOURCE_SIZE;
    case CUPTI_CB_DOMAIN_SYNCHRONIZE: return CUPTI_CBID_SYNCHRONIZE_SIZE;
    case CUPTI_CB_DOMAIN_NVTX: return CUPTI_CBID_NVTX_SIZE;
    case CUPTI_CB_DOMAIN_STATE: return CUPTI_CBID_STATE_SIZE;
    default: return 0;
  }
}

bool valid_domain(CUpti_CallbackDomain domain) {
  return domain > CUPTI_CB_DOMAIN_INVALID && domain < CUPTI_CB_DOMAIN_SIZE;
}

// External correlation ids pushed per thread, one stack per kind.
thread_local std::vector<uint64_t> t_external_ids[CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2 + 1];

}  // namespace

bool find_callback_by_name(const char* name, CUpti_CallbackDomain* domain, CUpti_CallbackId* cbid) {
  const size_t length = std::strlen(name);
  for (const auto& entry : kCallbackNames) {
    // Runtime names carry a version tag ("cudaGetDevice_v3020"); the bare name matches too.
    const bool same = std::strcmp(entry.name, name) == 0 ||
                      (std::strncmp(entry.name, name, length) == 0 && std::strncmp(entry.name + length, "_v", 2) == 0 &&
                       entry.domain == CUPTI_CB_DOMAIN_RUNTIME_API);
    if (same) {
      *domain = static_cast<CUpti_CallbackDomain>(entry.domain);
      *cbid = entry.cbid;
      return true;
    }
  }
  return false;
}

bool fail_unknown() { return fail_mode_is("unknown"); }
bool fail_subscriber() { return fail_mode_is("subscriber"); }

uint32_t flush_delay_ms() {
  const char* value = std::getenv("FAKE_CUPTI_FLUSH_DELAY_MS");
  return value != nullptr ? static_cast<uint32_t>(std::strtoul(value, nullptr, 10)) : 0;
}

uint32_t reported_version() {
  const char* forced = std::getenv("FAKE_CUPTI_VERSION");
  return forced != nullptr ? static_cast<uint32_t>(std::strtoul(forced, nullptr, 10)) : CUPTI_API_VERSION;
}

State& state() {
  if (g_state == nullptr) g_state = new State();
  return *g_state;
}

uint64_t raw_now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec) + clock_offset_ns();
}

uint64_t now_ns() {
  CUpti_TimestampCallbackFunc callback = state().timestamps.callback.load(std::memory_order_acquire);
  return callback != nullptr ? callback() : raw_now_ns();
}

namespace {

// The callback's clock read between two raw readings, the narrowest of a few brackets
// (a preempted read would skew the rate): the pair's raw time is the bracket's middle.
void read_pair(CUpti_TimestampCallbackFunc callback, uint64_t* raw, uint64_t* theirs) {
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < 8; ++i) {
    const uint64_t before = raw_now_ns();
    const uint64_t t = callback();
    const uint64_t after = raw_now_ns();
    if (after - before < best) {
      best = after - before;
      *raw = before + (after - before) / 2;
      *theirs = t;
    }
  }
}

}  // namespace

void register_timestamp_callback(CUpti_TimestampCallbackFunc callback) {
  TimestampSource& source = state().timestamps;
  std::lock_guard<std::mutex> lock(source.mutex);
  read_pair(callback, &source.raw0, &source.theirs0);
  source.callback.store(callback, std::memory_order_release);
}

// Linear interpolation between the pair read at registration and one read now,
// so a callback whose clock runs at another rate (a TSC) is followed too.
GpuClockMap gpu_clock_map() {
  TimestampSource& source = state().timestamps;
  GpuClockMap map;
  CUpti_TimestampCallbackFunc callback = source.callback.load(std::memory_order_acquire);
  if (callback == nullptr) return map;
  uint64_t raw0 = 0;
  uint64_t theirs0 = 0;
  {
    std::lock_guard<std::mutex> lock(source.mutex);
    raw0 = source.raw0;
    theirs0 = source.theirs0;
  }
  map.active = true;
  // CUPTI follows the callback's clock over time; a delivery right after the registration
  // waits until the two readings are 10 ms apart, so that a clock of another rate (a TSC)
  // is converted at its rate.
  while (raw_now_ns() < raw0 + 10000000) std::this_thread::sleep_for(std::chrono::microseconds(500));
  read_pair(callback, &map.raw1, &map.theirs1);
  if (map.raw1 > raw0 + 1000000) {
    map.rate = static_cast<double>(map.theirs1 - theirs0) / static_cast<double>(map.raw1 - raw0);
  }
  // A nanosecond clock (a tool's CLOCK_MONOTONIC, say) runs at rate 1 up to read jitter: kept exact.
  if (map.rate > 0.99 && map.rate < 1.01) map.rate = 1.0;
  return map;
}

uint64_t GpuClockMap::map(uint64_t raw) const {
  if (!active || raw == 0) return raw;
  if (rate == 1.0) return theirs1 + raw - raw1;
  // The difference first, in integers: Unix-epoch ns as doubles are 256 ns apart.
  const double delta = static_cast<double>(static_cast<int64_t>(raw - raw1)) * rate;
  return theirs1 + static_cast<uint64_t>(static_cast<int64_t>(delta));
}

// Read once per thread (a forked child's first thread gets a fresh copy of the
// parent's thread-locals, so the system id is checked against the process's).
uint32_t current_thread_id() {
  if (state().thread_id_type.load() == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) {
    thread_local uint32_t tid = 0;
    thread_local uint32_t pid_of_tid = 0;
    const uint32_t pid = current_process_id();
    if (tid == 0 || pid_of_tid != pid) {
      tid = static_cast<uint32_t>(syscall(SYS_gettid));
      pid_of_tid = pid;
    }
    return tid;
  }
  return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(reinterpret_cast<void*>(pthread_self())));
}

namespace {
std::atomic<uint32_t> g_pid{0};
void forget_pid() { g_pid.store(0, std::memory_order_relaxed); }
}  // namespace

uint32_t current_process_id() {
  uint32_t pid = g_pid.load(std::memory_order_relaxed);
  if (pid == 0) {
    static const int registered = pthread_atfork(nullptr, nullptr, &forget_pid);
    (void)registered;
    pid = static_cast<uint32_t>(getpid());
    g_pid.store(pid, std::memory_order_relaxed);
  }
  return pid;
}

CUcontext fake_context() { return reinterpret_cast<CUcontext>(&g_context_tag); }

void emit_external_correlations(uint32_t correlation_id) {
  if (!state().activity.enabled(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)) return;
  for (uint32_t kind = 0; kind <= CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2; ++kind) {
    if (t_external_ids[kind].empty()) continue;
    CUpti_ActivityExternalCorrelation record{};
    record.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    record.externalKind = static_cast<CUpti_ExternalCorrelationKind>(kind);
    record.externalId = t_external_ids[kind].back();
    record.correlationId = correlation_id;
    state().activity.append(&record, sizeof(record));
  }
}

CallbackRegistry::CallbackRegistry() = default;

CallbackRegistry::Subscriber* CallbackRegistry::find(CUpti_SubscriberHandle handle) {
  for (Subscriber& s : subscribers_) {
    if (s.used && reinterpret_cast<CUpti_SubscriberHandle>(&s) == handle) return &s;
  }
  return nullptr;
}

namespace {

// CUPTI 13.2's CUpti_SubscriberParams: 13.0's fields, then allowMultipleSubscribers.
struct SubscriberParams132 {
  size_t structSize;
  const char* subscriberName;
  char* oldSubscriberName;
  size_t oldSubscriberSize;
  uint8_t allowMultipleSubscribers;
  uint8_t padding[7];
};

bool asks_multiple(const CUpti_SubscriberParams* params) {
  if (params == nullptr || reported_version() < kCupti132 || params->structSize < sizeof(SubscriberParams132)) {
    return false;
  }
  return reinterpret_cast<const SubscriberParams132*>(params)->allowMultipleSubscribers != 0;
}

}  // namespace

CUptiResult CallbackRegistry::subscribe(CUpti_SubscriberHandle* handle, CUpti_CallbackFunc callback, void* userdata,
                                        const CUpti_SubscriberParams* params, bool v2) {
  if (handle == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard<std::mutex> lock(mutex_);
  const bool multiple = v2 && asks_multiple(params);
  const char* holder = fail_subscriber() ? "fake_other_tool" : nullptr;
  if (holder == nullptr && mode_ != 0 && !(mode_ == 2 && multiple)) {
    for (const Subscriber& s : subscribers_) {
      if (s.used) holder = s.name.c_str();
    }
  }
  Subscriber* slot = nullptr;
  for (Subscriber& s : subscribers_) {
    if (!s.used) {
      slot = &s;
      break;
    }
  }
  if (holder != nullptr || slot == nullptr) {
    if (params != nullptr && params->oldSubscriberName != nullptr && params->oldSubscriberSize > 0) {
      std::snprintf(params->oldSubscriberName, params->oldSubscriberSize, "CUPTI for %s",
                    holder != nullptr ? holder : "another subscriber");
    }
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  if (mode_ == 0) mode_ = multiple ? 2 : 1;
  *slot = Subscriber{};
  slot->used = true;
  slot->callback = callback;
  slot->userdata = userdata;
  slot->name = params != nullptr && params->subscriberName != nullptr ? params->subscriberName : "subscriber";
  for (int domain = 0; domain < CUPTI_CB_DOMAIN_SIZE; ++domain) slot->enabled[domain].assign(domain_size(domain), 0);
  *handle = reinterpret_cast<CUpti_SubscriberHandle>(slot);
  return CUPTI_SUCCESS;
}

CUptiResult CallbackRegistry::unsubscribe(CUpti_SubscriberHandle handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  Subscriber* s = find(handle);
  if (s == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *s = Subscriber{};
  bool any = false;
  for (const Subscriber& other : subscribers_) any = any || other.used;
  if (!any) mode_ = 0;
  return CUPTI_SUCCESS;
}

void CallbackRegistry::unsubscribe_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Subscriber& s : subscribers_) s = Subscriber{};
  mode_ = 0;
}

int CallbackRegistry::subscriber_count() {
  std::lock_guard<std::mutex> lock(mutex_);
  int n = 0;
  for (const Subscriber& s : subscribers_) n += s.used ? 1 : 0;
  return n;
}

CUptiResult CallbackRegistry::enable_callback(uint32_t enable, CUpti_SubscriberHandle handle,
                                              CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  std::lock_guard<std::mutex> lock(mutex_);
  Subscriber* s = find(handle);
  if (s == nullptr || !valid_domain(domain) || cbid >= s->enabled[domain].size()) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  s->enabled[domain][cbid] = enable != 0 ? 1 : 0;
  return CUPTI_SUCCESS;
}

CUptiResult CallbackRegistry::enable_domain(uint32_t enable, CUpti_SubscriberHandle handle,
                                            CUpti_CallbackDomain domain) {
  std::lock_guard<std::mutex> lock(mutex_);
  Subscriber* s = find(handle);
  if (s == nullptr || !valid_domain(domain)) return CUPTI_ERROR_INVALID_PARAMETER;
  std::fill(s->enabled[domain].begin(), s->enabled[domain].end(), enable != 0 ? 1 : 0);
  return CUPTI_SUCCESS;
}

CUptiResult CallbackRegistry::enable_all(uint32_t enable, CUpti_SubscriberHandle handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  Subscriber* s = find(handle);
  if (s == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  for (auto& bits : s->enabled) std::fill(bits.begin(), bits.end(), enable != 0 ? 1 : 0);
  return CUPTI_SUCCESS;
}

CUptiResult CallbackRegistry::get_state(uint32_t* enable, CUpti_SubscriberHandle handle,
                                        CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  std::lock_guard<std::mutex> lock(mutex_);
  Subscriber* s = find(handle);
  if (enable == nullptr || s == nullptr || !valid_domain(domain) || cbid >= s->enabled[domain].size()) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  *enable = s->enabled[domain][cbid];
  return CUPTI_SUCCESS;
}

void CallbackRegistry::fire(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  struct Target {
    CUpti_CallbackFunc callback;
    void* userdata;
    int slot;
  };
  Target targets[kMaxSubscribers];
  int n = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!valid_domain(domain)) return;
    for (int i = 0; i < kMaxSubscribers; ++i) {
      const Subscriber& s = subscribers_[i];
      if (s.used && cbid < s.enabled[domain].size() && s.enabled[domain][cbid] && s.callback != nullptr) {
        targets[n++] = Target{s.callback, s.userdata, i};
      }
    }
  }
  const bool api = domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API;
  auto* call = api ? const_cast<CUpti_CallbackData*>(static_cast<const CUpti_CallbackData*>(data)) : nullptr;
  uint64_t* const slots = call != nullptr ? call->correlationData : nullptr;
  for (int i = 0; i < n; ++i) {
    if (call != nullptr && slots != nullptr) call->correlationData = slots + targets[i].slot;
    targets[i].callback(targets[i].userdata, domain, cbid, data);
  }
  if (call != nullptr) call->correlationData = slots;
}

}  // namespace fake_cupti

namespace fc = fake_cupti;

#define FAKE_CUPTI_GUARD()                            \
  do {                                                \
    if (fc::fail_unknown()) return CUPTI_ERROR_UNKNOWN; \
  } while (0)

extern "C" {

// Version and result strings need no driver, so they work in every mode, as in CUPTI.
CUptiResult CUPTIAPI cuptiGetVersion(uint32_t* version) {
  if (version == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *version = fc::reported_version();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** str) {
  if (str == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  for (const auto& entry : kResultNames) {
    if (entry.result == static_cast<unsigned>(result)) {
      *str = entry.name;
      return CUPTI_SUCCESS;
    }
  }
  *str = nullptr;
  return CUPTI_ERROR_INVALID_PARAMETER;
}

CUptiResult CUPTIAPI cuptiGetErrorMessage(CUptiResult result, const char** str) {
  return cuptiGetResultString(result, str);
}

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                    void* userdata) {
  FAKE_CUPTI_GUARD();
  return fc::state().callbacks.subscribe(subscriber, callback, userdata, nullptr, false);
}

CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                       void* userdata, CUpti_SubscriberParams* pParams) {
  FAKE_CUPTI_GUARD();
  if (pParams != nullptr && pParams->structSize == 0) return CUPTI_ERROR_INVALID_PARAMETER;
  return fc::state().callbacks.subscribe(subscriber, callback, userdata, pParams, true);
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  FAKE_CUPTI_GUARD();
  return fc::state().callbacks.unsubscribe(subscriber);
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                         CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  FAKE_CUPTI_GUARD();
  return fc::state().callbacks.enable_callback(enable, subscriber, domain, cbid);
}

CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                       CUpti_CallbackDomain domain) {
  FAKE_CUPTI_GUARD();
  return fc::state().callbacks.enable_domain(enable, subscriber, domain);
}

CUptiResult CUPTIAPI cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle subscriber) {
  FAKE_CUPTI_GUARD();
  return fc::state().callbacks.enable_all(enable, subscriber);
}

CUptiResult CUPTIAPI cuptiGetCallbackState(uint32_t* enable, CUpti_SubscriberHandle subscriber,
                                           CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  FAKE_CUPTI_GUARD();
  return fc::state().callbacks.get_state(enable, subscriber, domain, cbid);
}

CUptiResult CUPTIAPI cuptiSupportedDomains(size_t* domainCount, CUpti_DomainTable* domainTable) {
  FAKE_CUPTI_GUARD();
  static const CUpti_CallbackDomain kDomains[] = {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_CB_DOMAIN_RUNTIME_API,
                                                  CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CB_DOMAIN_SYNCHRONIZE,
                                                  CUPTI_CB_DOMAIN_NVTX, CUPTI_CB_DOMAIN_STATE};
  if (domainCount == nullptr || domainTable == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *domainCount = sizeof(kDomains) / sizeof(kDomains[0]);
  *domainTable = const_cast<CUpti_CallbackDomain*>(kDomains);
  return CUPTI_SUCCESS;
}

// Names carry the version suffix of the cbid enum (e.g. "cudaLaunchKernel_v7000"),
// unlike CUpti_CallbackData::functionName.
CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) {
  FAKE_CUPTI_GUARD();
  if (name == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *name = nullptr;
  for (const auto& entry : kCallbackNames) {
    if (entry.domain == static_cast<unsigned>(domain) && entry.cbid == cbid) {
      *name = entry.name;
      return CUPTI_SUCCESS;
    }
  }
  return CUPTI_ERROR_INVALID_PARAMETER;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
                                                    CUpti_BuffersCallbackCompleteFunc funcBufferCompleted) {
  FAKE_CUPTI_GUARD();
  return fc::state().activity.register_callbacks(funcBufferRequested, funcBufferCompleted);
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  FAKE_CUPTI_GUARD();
  return fc::state().activity.set_enabled(kind, true);
}

CUptiResult CUPTIAPI cuptiActivityEnableAndDump(CUpti_ActivityKind kind) { return cuptiActivityEnable(kind); }

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  FAKE_CUPTI_GUARD();
  return fc::state().activity.set_enabled(kind, false);
}

CUptiResult CUPTIAPI cuptiActivityEnableContext(CUcontext context, CUpti_ActivityKind kind) {
  FAKE_CUPTI_GUARD();
  if (context != fc::fake_context()) return CUPTI_ERROR_INVALID_CONTEXT;
  return fc::state().activity.set_enabled(kind, true);
}

CUptiResult CUPTIAPI cuptiActivityDisableContext(CUcontext context, CUpti_ActivityKind kind) {
  FAKE_CUPTI_GUARD();
  if (context != fc::fake_context()) return CUPTI_ERROR_INVALID_CONTEXT;
  return fc::state().activity.set_enabled(kind, false);
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  FAKE_CUPTI_GUARD();
  if (const uint32_t delay = fc::flush_delay_ms(); delay != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(delay));
  }
  fc::emit_static_records_once();
  fc::state().activity.flush_all((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlush(CUcontext context, uint32_t streamId, uint32_t flag) {
  (void)context;
  (void)streamId;
  return cuptiActivityFlushAll(flag);
}

CUptiResult CUPTIAPI cuptiActivityFlushPeriod(uint32_t time) {
  FAKE_CUPTI_GUARD();
  fc::state().activity.set_flush_period_ms(time);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t validBufferSizeBytes,
                                                CUpti_Activity** record) {
  FAKE_CUPTI_GUARD();
  if (buffer == nullptr || record == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  const uint8_t* end = buffer + validBufferSizeBytes;
  const uint8_t* next = nullptr;
  if (*record == nullptr) {
    const auto address = reinterpret_cast<uintptr_t>(buffer);
    next = buffer + (((address + 7) & ~uintptr_t{7}) - address);
  } else {
    const size_t size = fc::record_size((*record)->kind);
    if (size == 0) return CUPTI_ERROR_INVALID_KIND;
    next = reinterpret_cast<const uint8_t*>(*record) + size;
  }
  if (next + sizeof(CUpti_Activity) > end) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  const auto* candidate = reinterpret_cast<const CUpti_Activity*>(next);
  const size_t size = fc::record_size(candidate->kind);
  if (size == 0 || next + size > end) return CUPTI_ERROR_INVALID_KIND;
  *record = const_cast<CUpti_Activity*>(candidate);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t streamId, size_t* dropped) {
  FAKE_CUPTI_GUARD();
  (void)context;
  (void)streamId;
  if (dropped == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *dropped = fc::state().activity.take_dropped();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
  FAKE_CUPTI_GUARD();
  if (timestamp == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *timestamp = fc::now_ns();
  return CUPTI_SUCCESS;
}

// One callback per process, the last registered wins; records already written
// keep the clock they were written in (CPU times) or get the new one when
// their buffer is delivered (GPU times), as the header warns.
CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc funcTimestamp) {
  FAKE_CUPTI_GUARD();
  if (funcTimestamp == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  fc::register_timestamp_callback(funcTimestamp);
  return CUPTI_SUCCESS;
}

// Detaches the subscriber and stops activity collection; records not yet
// flushed are abandoned, as CUPTI documents.
CUptiResult CUPTIAPI cuptiFinalize(void) {
  FAKE_CUPTI_GUARD();
  fc::State& s = fc::state();
  s.activity.stop_worker();
  for (uint32_t kind = 1; kind < CUPTI_ACTIVITY_KIND_COUNT; ++kind) s.activity.set_enabled(kind, false);
  s.callbacks.unsubscribe_all();
  for (auto& side : s.api_off) {
    for (auto& off : side) off.store(false);
  }
  s.all_sync_records.store(true);
  {
    std::lock_guard<std::mutex> lock(s.attribute_mutex);
    s.attributes.clear();
  }
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetDeviceId(CUcontext context, uint32_t* deviceId) {
  FAKE_CUPTI_GUARD();
  if (deviceId == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (context != nullptr && context != fc::fake_context()) return CUPTI_ERROR_INVALID_CONTEXT;
  *deviceId = 0;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetContextId(CUcontext context, uint32_t* contextId) {
  FAKE_CUPTI_GUARD();
  if (contextId == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (context != fc::fake_context()) return CUPTI_ERROR_INVALID_CONTEXT;
  *contextId = 1;
  return CUPTI_SUCCESS;
}

// Fake CUstream handles are the stream ids themselves (NULL = legacy default stream 7).
CUptiResult CUPTIAPI cuptiGetStreamIdEx(CUcontext context, CUstream stream, uint8_t perThreadStream,
                                        uint32_t* streamId) {
  FAKE_CUPTI_GUARD();
  (void)context;
  (void)perThreadStream;
  if (streamId == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  const auto value = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(stream));
  *streamId = value == 0 ? 7u : value;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetStreamId(CUcontext context, CUstream stream, uint32_t* streamId) {
  return cuptiGetStreamIdEx(context, stream, 0, streamId);
}

CUptiResult CUPTIAPI cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id) {
  FAKE_CUPTI_GUARD();
  if (kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID || kind > CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  fc::t_external_ids[kind].push_back(id);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t* lastId) {
  FAKE_CUPTI_GUARD();
  if (kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID || kind > CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  auto& ids = fc::t_external_ids[kind];
  if (ids.empty()) return CUPTI_ERROR_QUEUE_EMPTY;
  if (lastId != nullptr) *lastId = ids.back();
  ids.pop_back();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSetThreadIdType(CUpti_ActivityThreadIdType type) {
  FAKE_CUPTI_GUARD();
  if (type >= CUPTI_ACTIVITY_THREAD_ID_TYPE_SIZE) return CUPTI_ERROR_INVALID_PARAMETER;
  fc::state().thread_id_type.store(type);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetThreadIdType(CUpti_ActivityThreadIdType* type) {
  FAKE_CUPTI_GUARD();
  if (type == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *type = static_cast<CUpti_ActivityThreadIdType>(fc::state().thread_id_type.load());
  return CUPTI_SUCCESS;
}

// Attributes are remembered and read back; none changes which records are written.
CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t* valueSize, void* value) {
  FAKE_CUPTI_GUARD();
  if (valueSize == nullptr || value == nullptr || *valueSize == 0 || *valueSize > sizeof(uint64_t)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  if (attr > CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE_DEVICE_GRAPHS) return CUPTI_ERROR_INVALID_PARAMETER;
  uint64_t v = 0;
  std::memcpy(&v, value, *valueSize);
  std::lock_guard<std::mutex> lock(fc::state().attribute_mutex);
  fc::state().attributes[attr] = v;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetAttribute(CUpti_ActivityAttribute attr, size_t* valueSize, void* value) {
  FAKE_CUPTI_GUARD();
  if (valueSize == nullptr || value == nullptr || *valueSize == 0) return CUPTI_ERROR_INVALID_PARAMETER;
  if (attr > CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE_DEVICE_GRAPHS) return CUPTI_ERROR_INVALID_PARAMETER;
  // CUPTI's documented defaults: 8 MiB device buffers, a pool limit of 250 buffers.
  uint64_t v = attr == CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE ? (8u << 20)
               : attr == CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT ? 250
                                                                      : 0;
  {
    std::lock_guard<std::mutex> lock(fc::state().attribute_mutex);
    auto found = fc::state().attributes.find(attr);
    if (found != fc::state().attributes.end()) v = found->second;
  }
  const size_t n = *valueSize < sizeof v ? *valueSize : sizeof v;
  std::memset(value, 0, *valueSize);
  std::memcpy(value, &v, n);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetLastError(void) {
  return fc::fail_unknown() ? CUPTI_ERROR_UNKNOWN : CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableLatencyTimestamps(uint8_t enable) {
  FAKE_CUPTI_GUARD();
  (void)enable;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableLaunchAttributes(uint8_t enable) {
  FAKE_CUPTI_GUARD();
  (void)enable;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableAllSyncRecords(uint8_t enable) {
  FAKE_CUPTI_GUARD();
  fc::state().all_sync_records.store(enable != 0);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableCudaEventDeviceTimestamps(uint8_t enable) {
  FAKE_CUPTI_GUARD();
  fc::state().cuda_event_device_timestamps.store(enable != 0);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableAllocationSource(uint8_t enable) {
  FAKE_CUPTI_GUARD();
  (void)enable;
  return CUPTI_SUCCESS;
}

// Per-cbid API record filters, process-wide: a disabled cbid writes no RUNTIME/DRIVER record.
CUptiResult CUPTIAPI cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable) {
  FAKE_CUPTI_GUARD();
  if (cbid >= CUPTI_DRIVER_TRACE_CBID_SIZE) return CUPTI_ERROR_INVALID_PARAMETER;
  fc::state().api_off[1][cbid].store(enable == 0);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable) {
  FAKE_CUPTI_GUARD();
  if (cbid >= CUPTI_RUNTIME_TRACE_CBID_SIZE) return CUPTI_ERROR_INVALID_PARAMETER;
  fc::state().api_off[0][cbid].store(enable == 0);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiDeviceSupported(CUdevice dev, int* support) {
  FAKE_CUPTI_GUARD();
  if (support == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *support = dev == 0 ? 1 : 0;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiComputeCapabilitySupported(int major, int minor, int* support) {
  FAKE_CUPTI_GUARD();
  (void)minor;
  if (support == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *support = major >= 7 ? 1 : 0;
  return CUPTI_SUCCESS;
}

}  // extern "C"
