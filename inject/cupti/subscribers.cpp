#include "inject/cupti/subscribers.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

#include "inject/clock.h"
#include "inject/config.h"
#include "inject/cupti/api.h"
#include "inject/cupti/share.h"
#include "inject/cupti/tracer.h"
#include "inject/export.h"

namespace torchprof::inject {
namespace {

// Room for the domains and callback ids of CUPTIs newer than these headers (13.0 has 7
// domains, 807 driver and 523 runtime ids).
constexpr uint32_t kDomains = 16;
constexpr uint32_t kCbids = 2048;
constexpr uint32_t kMaxClients = 4;
constexpr uint8_t kOursBit = 0x80;

// Per callback: bit i = client i wants it, kOursBit = torchprof does. The real
// subscriber has a callback enabled while its byte is not 0.
std::atomic<uint8_t> g_want[kDomains][kCbids];
std::atomic<uint8_t> g_real_on[kDomains][kCbids];

struct Client {
  std::atomic<CUpti_CallbackFunc> callback{nullptr};
  std::atomic<void*> userdata{nullptr};
  bool live = false;   // under g_mu
  bool own = false;    // a real subscriber of its own (multi-subscriber CUPTI)
  CUpti_SubscriberHandle real = nullptr;  // that subscriber
  char name[96] = {};  // the library it lives in, or its subscriberName
};

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;  // client table edits only; never held calling CUPTI
Client g_clients[kMaxClients];
std::atomic<uint32_t> g_live_mask{0};  // clients whose callbacks may be called
std::atomic<uint32_t> g_subscribes{0};

std::atomic<CUpti_CallbackFunc> g_ours{nullptr};

// The real subscriber: 0 none yet, 1 being made (by g_sub_tid), 2 made, 3 failed.
std::atomic<int> g_sub_state{0};
std::atomic<long> g_sub_tid{0};
CUpti_SubscriberHandle g_real = nullptr;
CUptiResult g_sub_rc = CUPTI_SUCCESS;
bool g_multi = false;  // the real subscriber allows others beside it
std::atomic<bool> g_retry_due{false};
void (*g_retry)() = nullptr;

std::atomic<int> g_active{-1};  // -1 undecided
std::atomic<bool> g_forked{false};

long this_tid() { return static_cast<long>(syscall(SYS_gettid)); }

bool valid_domain(CUpti_CallbackDomain domain) {
  return static_cast<uint32_t>(domain) > CUPTI_CB_DOMAIN_INVALID && static_cast<uint32_t>(domain) < kDomains;
}

// The callback ids of a domain as this build knows them (kCbids for a newer domain).
uint32_t domain_size(CUpti_CallbackDomain domain) {
  switch (domain) {
    case CUPTI_CB_DOMAIN_DRIVER_API: return CUPTI_DRIVER_TRACE_CBID_SIZE;
    case CUPTI_CB_DOMAIN_RUNTIME_API: return CUPTI_RUNTIME_TRACE_CBID_SIZE;
    case CUPTI_CB_DOMAIN_RESOURCE: return CUPTI_CBID_RESOURCE_SIZE;
    case CUPTI_CB_DOMAIN_SYNCHRONIZE: return CUPTI_CBID_SYNCHRONIZE_SIZE;
    case CUPTI_CB_DOMAIN_NVTX: return CUPTI_CBID_NVTX_SIZE;
    case CUPTI_CB_DOMAIN_STATE: return CUPTI_CBID_STATE_SIZE;
    default: return kCbids;
  }
}

Client* client_of(CUpti_SubscriberHandle handle) {
  for (Client& c : g_clients) {
    if (reinterpret_cast<CUpti_SubscriberHandle>(&c) == handle) return &c;
  }
  return nullptr;
}

uint32_t index_of(const Client* c) { return static_cast<uint32_t>(c - g_clients); }

// ---- the real subscriber's enables follow g_want ----

// One callback's real enable brought in line with who wants it. Two threads changing
// the same callback at once could leave CUPTI a step behind; clients enable at setup.
CUptiResult sync_real(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  const CuptiApi* api = cupti();
  if (api == nullptr || g_real == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  for (;;) {
    const uint8_t want = g_want[domain][cbid].load(std::memory_order_acquire) != 0 ? 1 : 0;
    uint8_t have = g_real_on[domain][cbid].load(std::memory_order_acquire);
    if (have == want) return CUPTI_SUCCESS;
    if (!g_real_on[domain][cbid].compare_exchange_strong(have, want)) continue;
    const CUptiResult rc = api->enable_callback(want, g_real, domain, cbid);
    if (rc != CUPTI_SUCCESS) {
      g_real_on[domain][cbid].store(have, std::memory_order_release);
      return rc;
    }
  }
}

// ---- dispatch (CUPTI's callback threads: the program's) ----

// An API callback's correlationData is one slot per subscriber and call, kept from its
// ENTER to its EXIT. torchprof and each client get their own: a frame per call in
// flight on the thread, its index in the real slot. A call whose ENTER went to
// torchprof alone keeps the real slot for torchprof (its EXIT finds no frame tag).
constexpr uint32_t kMaxDepth = 16;
constexpr uint64_t kFrameTag = 0x4a7d5c0000000000ull;  // bit 63 clear: never torchprof's own value
constexpr uint64_t kFrameTagMask = ~uint64_t{0xff};

struct Frame {
  uint64_t ours;
  uint64_t client[kMaxClients];
};
thread_local Frame t_frames[kMaxDepth];
thread_local uint32_t t_depth = 0;

void call_clients(uint8_t mask, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data,
                  CUpti_CallbackData* api, Frame* frame) {
  for (uint32_t i = 0; i < kMaxClients; ++i) {
    if ((mask & (1u << i)) == 0) continue;
    CUpti_CallbackFunc fn = g_clients[i].callback.load(std::memory_order_acquire);
    if (fn == nullptr) continue;
    if (api != nullptr) api->correlationData = &frame->client[i];
    fn(g_clients[i].userdata.load(std::memory_order_relaxed), domain, cbid, data);
  }
}

void call_ours(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (CUpti_CallbackFunc fn = g_ours.load(std::memory_order_acquire)) fn(nullptr, domain, cbid, data);
}

// ENTER: the clients first, torchprof last (nearest the call); EXIT: torchprof first.
void dispatch_api(uint8_t want, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  auto* cb = const_cast<CUpti_CallbackData*>(static_cast<const CUpti_CallbackData*>(data));
  uint64_t* const slot = cb->correlationData;
  const uint8_t clients = want & static_cast<uint8_t>(~kOursBit);
  const bool ours = (want & kOursBit) != 0;
  Frame scratch{};
  if (cb->callbackSite == CUPTI_API_ENTER) {
    Frame* frame = &scratch;
    if (t_depth < kMaxDepth && slot != nullptr) {
      frame = &t_frames[t_depth];
      *frame = Frame{};
      *slot = kFrameTag | t_depth;
      ++t_depth;
    }
    call_clients(clients, domain, cbid, data, cb, frame);
    cb->correlationData = &frame->ours;
    if (ours) call_ours(domain, cbid, data);
    cb->correlationData = slot;
    return;
  }
  Frame* frame = &scratch;
  bool tagged = false;
  if (slot != nullptr && (*slot & kFrameTagMask) == kFrameTag && (*slot & 0xff) < t_depth) {
    frame = &t_frames[*slot & 0xff];
    tagged = true;
  }
  cb->correlationData = tagged ? &frame->ours : slot;
  if (ours) call_ours(domain, cbid, data);
  call_clients(clients, domain, cbid, data, cb, frame);
  cb->correlationData = slot;
  if (tagged) t_depth = static_cast<uint32_t>(*slot & 0xff);
}

void CUPTIAPI hub_dispatch(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (!valid_domain(domain) || cbid >= kCbids) return;
  const uint8_t want = g_want[domain][cbid].load(std::memory_order_relaxed);
  const bool api = data != nullptr && (domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API);
  if (__builtin_expect((want & ~kOursBit) == 0, 1)) {
    // A call whose ENTER went to a client that has gone since still has its frame.
    const uint64_t* slot = api ? static_cast<const CUpti_CallbackData*>(data)->correlationData : nullptr;
    if (__builtin_expect(slot == nullptr || (*slot & kFrameTagMask) != kFrameTag, 1)) {
      if (want != 0) call_ours(domain, cbid, data);
      return;
    }
  }
  if (api) {
    dispatch_api(want, domain, cbid, data);
    return;
  }
  call_clients(want & static_cast<uint8_t>(~kOursBit), domain, cbid, data, nullptr, nullptr);
  if ((want & kOursBit) != 0) call_ours(domain, cbid, data);
}

// ---- the real subscriber ----

// CUPTI 13.2's parameters of cuptiSubscribe_v2: 13.0's, then allowMultipleSubscribers.
struct SubscriberParams132 {
  size_t structSize;
  const char* subscriberName;
  char* oldSubscriberName;
  size_t oldSubscriberSize;
  uint8_t allowMultipleSubscribers;
};
constexpr uint32_t kMultiSubscriberVersion = 130200;

using SubscribeV2 = CUptiResult(CUPTIAPI*)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*,
                                           CUpti_SubscriberParams*);

SubscribeV2 real_subscribe_v2() {
  static std::atomic<void*> fn{nullptr};
  void* f = fn.load(std::memory_order_acquire);
  if (f == nullptr) {
    f = real_cupti_function("cuptiSubscribe_v2");
    fn.store(f, std::memory_order_release);
  }
  return reinterpret_cast<SubscribeV2>(f);
}

// CUPTI's multi-subscriber mode asks every subscriber to use its per-subscriber (_v2)
// activity API as well; torchprof's activity side speaks the process-wide one, so it
// subscribes as one subscriber (allowMultipleSubscribers off) on every CUPTI.
bool multi_subscriber_cupti() { return false; }

void make_real_subscriber() {
  const CuptiApi* api = cupti();
  if (api == nullptr) {
    char why[480];
    api = load_cupti(why, sizeof why);
    if (api == nullptr) {
      g_sub_rc = CUPTI_ERROR_NOT_INITIALIZED;
      notice(LogLevel::kDebug, "CUPTI for sharing: %s", why);
      return;
    }
  }
  CUpti_SubscriberHandle handle = nullptr;
  CUptiResult rc;
  if (multi_subscriber_cupti()) {
    SubscriberParams132 params{};
    params.structSize = sizeof params;
    params.subscriberName = "torchprof";
    params.allowMultipleSubscribers = 1;
    rc = real_subscribe_v2()(&handle, &hub_dispatch, nullptr, reinterpret_cast<CUpti_SubscriberParams*>(&params));
    g_multi = rc == CUPTI_SUCCESS;
  } else {
    rc = api->subscribe(&handle, &hub_dispatch, nullptr);
  }
  g_sub_rc = rc;
  if (rc == CUPTI_SUCCESS) g_real = handle;
}

// Decided at the first call, when the configuration is read.
bool decide_active() {
  const Config& c = config();
  return c.active && c.cuda_injection_ours && (c.trace_cuda || c.trace_gpu || c.trace_memory);
}

// ---- the program's clients ----

void client_name(Client* c, const void* callback, const char* given) {
  if (given != nullptr && *given != '\0') {
    snprintf(c->name, sizeof c->name, "%s", given);
    return;
  }
  Dl_info info{};
  const char* where = dladdr(callback, &info) != 0 && info.dli_fname != nullptr ? info.dli_fname : "the program";
  const char* slash = strrchr(where, '/');
  snprintf(c->name, sizeof c->name, "%s", slash != nullptr ? slash + 1 : where);
}

// A legacy subscriber of the program's already: CUPTI's one-subscriber rule.
Client* legacy_holder() {
  for (Client& c : g_clients) {
    if (c.live && !c.own) return &c;
  }
  return nullptr;
}

void say_path(const Client& c, HubPath path) {
  char line[400];
  const CuptiApi* api = cupti();
  const unsigned version = api != nullptr ? api->version : 0;
  if (path == HubPath::kForwarded) {
    snprintf(line, sizeof line,
             "CUPTI's callbacks are shared with the program's client in %s: forwarded through torchprof's "
             "subscriber (CUPTI %u allows one subscriber)",
             c.name, version);
  } else {
    snprintf(line, sizeof line,
             "CUPTI's callbacks are shared with the program's client in %s: its own subscriber (CUPTI %u's "
             "multi-subscriber mode)",
             c.name, version);
  }
  gpu_notice_line(LogLevel::kInfo, line);
  gpu_client_record(path, g_subscribes.load(std::memory_order_relaxed), c.name);
}

void remove_client(Client* c) {
  const uint32_t i = index_of(c);
  g_live_mask.fetch_and(~(1u << i), std::memory_order_acq_rel);
  const uint8_t bit = static_cast<uint8_t>(1u << i);
  for (uint32_t d = 1; d < kDomains; ++d) {
    for (uint32_t id = 0; id < kCbids; ++id) {
      if ((g_want[d][id].load(std::memory_order_relaxed) & bit) == 0) continue;
      g_want[d][id].fetch_and(static_cast<uint8_t>(~bit), std::memory_order_acq_rel);
      sync_real(static_cast<CUpti_CallbackDomain>(d), id);
    }
  }
  // A callback in flight on another thread may still read them: the slot is reused
  // only by a later subscribe, which sets them anew.
  c->callback.store(nullptr, std::memory_order_release);
  pthread_mutex_lock(&g_mu);
  c->live = false;
  c->own = false;
  c->real = nullptr;
  pthread_mutex_unlock(&g_mu);
}

// A client's subscribe, forwarded through ours.
CUptiResult subscribe_forwarded(CUpti_SubscriberHandle* handle, CUpti_CallbackFunc callback, void* userdata,
                                CUpti_SubscriberParams* params) {
  pthread_mutex_lock(&g_mu);
  if (Client* holder = legacy_holder()) {
    if (params != nullptr && params->oldSubscriberName != nullptr && params->oldSubscriberSize > 0) {
      snprintf(params->oldSubscriberName, params->oldSubscriberSize, "CUPTI for %s", holder->name);
    }
    pthread_mutex_unlock(&g_mu);
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  Client* free_slot = nullptr;
  for (Client& c : g_clients) {
    if (!c.live) {
      free_slot = &c;
      break;
    }
  }
  if (free_slot == nullptr) {
    pthread_mutex_unlock(&g_mu);
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  Client& c = *free_slot;
  c.live = true;
  c.own = false;
  c.userdata.store(userdata, std::memory_order_relaxed);
  c.callback.store(callback, std::memory_order_release);
  client_name(&c, reinterpret_cast<const void*>(callback),
              params != nullptr && params->structSize >= offsetof(CUpti_SubscriberParams, oldSubscriberName)
                  ? params->subscriberName
                  : nullptr);
  g_live_mask.fetch_or(1u << index_of(&c), std::memory_order_acq_rel);
  pthread_mutex_unlock(&g_mu);
  g_subscribes.fetch_add(1, std::memory_order_relaxed);
  *handle = reinterpret_cast<CUpti_SubscriberHandle>(&c);
  say_path(c, HubPath::kForwarded);
  return CUPTI_SUCCESS;
}

// A client's subscribe that asked for a subscriber of its own, where CUPTI has them.
CUptiResult subscribe_own(CUpti_SubscriberHandle* handle, CUpti_CallbackFunc callback, void* userdata,
                          CUpti_SubscriberParams* params) {
  const CUptiResult rc = real_subscribe_v2()(handle, callback, userdata, params);
  if (rc != CUPTI_SUCCESS) return rc;
  pthread_mutex_lock(&g_mu);
  Client* slot = nullptr;
  for (Client& c : g_clients) {
    if (!c.live) {
      slot = &c;
      break;
    }
  }
  if (slot != nullptr) {
    slot->live = true;
    slot->own = true;
    slot->real = *handle;
    client_name(slot, reinterpret_cast<const void*>(callback), params->subscriberName);
  }
  pthread_mutex_unlock(&g_mu);
  g_subscribes.fetch_add(1, std::memory_order_relaxed);
  if (slot != nullptr) say_path(*slot, HubPath::kOwnSubscriber);
  return rc;
}

// A client with a real subscriber of its own (multi-subscriber CUPTI): its calls go to CUPTI.
Client* own_client(CUpti_SubscriberHandle handle) {
  pthread_mutex_lock(&g_mu);
  Client* found = nullptr;
  for (Client& c : g_clients) {
    if (c.live && c.own && c.real == handle) found = &c;
  }
  pthread_mutex_unlock(&g_mu);
  return found;
}

Client* forwarded_client(CUpti_SubscriberHandle handle) {
  Client* c = client_of(handle);
  if (c == nullptr) return nullptr;
  pthread_mutex_lock(&g_mu);
  const bool ok = c->live && !c->own;
  pthread_mutex_unlock(&g_mu);
  return ok ? c : nullptr;
}

CUptiResult client_enable(Client* c, uint32_t enable, CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (!valid_domain(domain) || cbid >= kCbids) return CUPTI_ERROR_INVALID_PARAMETER;
  const uint8_t bit = static_cast<uint8_t>(1u << index_of(c));
  if (enable != 0) {
    const uint8_t before = g_want[domain][cbid].fetch_or(bit, std::memory_order_acq_rel);
    const CUptiResult rc = sync_real(domain, cbid);
    if (rc != CUPTI_SUCCESS) g_want[domain][cbid].store(before, std::memory_order_release);
    return rc;
  }
  g_want[domain][cbid].fetch_and(static_cast<uint8_t>(~bit), std::memory_order_acq_rel);
  sync_real(domain, cbid);
  return CUPTI_SUCCESS;
}

CUptiResult client_enable_domain(Client* c, uint32_t enable, CUpti_CallbackDomain domain) {
  if (!valid_domain(domain)) return CUPTI_ERROR_INVALID_PARAMETER;
  const uint32_t n = domain_size(domain) < kCbids ? domain_size(domain) : kCbids;
  const uint8_t bit = static_cast<uint8_t>(1u << index_of(c));
  if (enable != 0) {
    // One call to CUPTI for the whole domain, as the client would have made.
    const CUptiResult rc = cupti()->enable_domain(1, g_real, domain);
    if (rc != CUPTI_SUCCESS) return rc;
    for (uint32_t id = 0; id < n; ++id) {
      g_want[domain][id].fetch_or(bit, std::memory_order_acq_rel);
      g_real_on[domain][id].store(1, std::memory_order_release);
    }
    return CUPTI_SUCCESS;
  }
  for (uint32_t id = 0; id < n; ++id) {
    if ((g_want[domain][id].fetch_and(static_cast<uint8_t>(~bit), std::memory_order_acq_rel) & bit) != 0) {
      sync_real(domain, static_cast<CUpti_CallbackId>(id));
    }
  }
  return CUPTI_SUCCESS;
}

// The program's libcupti's own function of that name, for calls passed straight through.
template <typename Fn>
Fn real_fn(std::atomic<void*>& cache, const char* name) {
  void* fn = cache.load(std::memory_order_acquire);
  if (fn == nullptr) {
    fn = real_cupti_function(name);
    cache.store(fn, std::memory_order_release);
  }
  return reinterpret_cast<Fn>(fn);
}

}  // namespace

#define TP_REAL_CUPTI(fn)                                                          \
  ([]() {                                                                          \
    static std::atomic<void*> cache{nullptr};                                      \
    return ::torchprof::inject::real_fn<decltype(&fn)>(cache, #fn);                \
  }())

bool hub_active() {
  if (g_forked.load(std::memory_order_relaxed)) return false;
  int active = g_active.load(std::memory_order_acquire);
  if (active < 0) {
    active = decide_active() ? 1 : 0;
    g_active.store(active, std::memory_order_release);
  }
  return active == 1;
}

CUpti_SubscriberHandle hub_real_subscriber(CUptiResult* rc, bool* deferred) {
  if (deferred != nullptr) *deferred = false;
  int state = g_sub_state.load(std::memory_order_acquire);
  if (state == 0) {
    int expected = 0;
    if (g_sub_state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
      g_sub_tid.store(this_tid(), std::memory_order_release);
      make_real_subscriber();
      g_sub_state.store(g_real != nullptr ? 2 : 3, std::memory_order_release);
      // InitializeInjection ran inside that subscribe and waits for it: run it now.
      if (g_retry_due.exchange(false) && g_retry != nullptr) g_retry();
    }
    state = g_sub_state.load(std::memory_order_acquire);
  }
  if (state == 1) {
    if (g_sub_tid.load(std::memory_order_acquire) == this_tid()) {
      if (deferred != nullptr) {
        *deferred = true;
        g_retry_due.store(true);
      }
      *rc = CUPTI_ERROR_NOT_READY;
      return nullptr;
    }
    // Another thread is subscribing: a bounded wait (it may wait on CUDA's start, which
    // may wait on us).
    const uint64_t deadline = now_ns() + 2000000000ull;
    while (g_sub_state.load(std::memory_order_acquire) == 1 && now_ns() < deadline) sched_yield();
    state = g_sub_state.load(std::memory_order_acquire);
    if (state == 1) {
      *rc = CUPTI_ERROR_NOT_READY;
      return nullptr;
    }
  }
  *rc = g_sub_rc;
  return state == 2 ? g_real : nullptr;
}

void hub_set_ours(CUpti_CallbackFunc callback) { g_ours.store(callback, std::memory_order_release); }

CUptiResult hub_enable_ours(uint32_t enable, CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (!valid_domain(domain) || cbid >= kCbids) return CUPTI_ERROR_INVALID_PARAMETER;
  if (enable != 0) {
    const uint8_t before = g_want[domain][cbid].fetch_or(kOursBit, std::memory_order_acq_rel);
    const CUptiResult rc = sync_real(domain, cbid);
    if (rc != CUPTI_SUCCESS) g_want[domain][cbid].store(before, std::memory_order_release);
    return rc;
  }
  g_want[domain][cbid].fetch_and(static_cast<uint8_t>(~kOursBit), std::memory_order_acq_rel);
  return sync_real(domain, cbid);
}

void hub_forget_after_fork() {
  g_forked.store(true, std::memory_order_relaxed);
  pthread_mutex_init(&g_mu, nullptr);
}

void hub_set_retry(void (*retry)()) { g_retry = retry; }

}  // namespace torchprof::inject

// ---- the callback API the program's clients call ----

namespace ti = torchprof::inject;

namespace {

// The client's subscribe: through ours, or (CUPTI 13.2+, asked for) its own.
CUptiResult client_subscribe(CUpti_SubscriberHandle* handle, CUpti_CallbackFunc callback, void* userdata,
                             CUpti_SubscriberParams* params) {
  if (handle == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  CUptiResult rc = CUPTI_SUCCESS;
  if (ti::hub_real_subscriber(&rc, nullptr) == nullptr) return rc;  // what CUPTI said to us, it says to the client
  const auto* p132 = reinterpret_cast<const ti::SubscriberParams132*>(params);
  const bool asks_own = params != nullptr && params->structSize >= sizeof(ti::SubscriberParams132) &&
                        p132->allowMultipleSubscribers != 0;
  if (asks_own && ti::g_multi) return ti::subscribe_own(handle, callback, userdata, params);
  return ti::subscribe_forwarded(handle, callback, userdata, params);
}

}  // namespace

extern "C" {

TORCHPROF_EXPORT CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                                     void* userdata) {
  if (!ti::hub_active()) {
    auto forward = TP_REAL_CUPTI(cuptiSubscribe);
    return forward != nullptr ? forward(subscriber, callback, userdata) : CUPTI_ERROR_NOT_INITIALIZED;
  }
  return client_subscribe(subscriber, callback, userdata, nullptr);
}

TORCHPROF_EXPORT CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber,
                                                        CUpti_CallbackFunc callback, void* userdata,
                                                        CUpti_SubscriberParams* params) {
  if (!ti::hub_active()) {
    auto forward = TP_REAL_CUPTI(cuptiSubscribe_v2);
    return forward != nullptr ? forward(subscriber, callback, userdata, params) : CUPTI_ERROR_NOT_INITIALIZED;
  }
  if (params != nullptr && params->structSize == 0) return CUPTI_ERROR_INVALID_PARAMETER;
  return client_subscribe(subscriber, callback, userdata, params);
}

TORCHPROF_EXPORT CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  if (ti::hub_active()) {
    if (ti::Client* c = ti::forwarded_client(subscriber)) {
      ti::remove_client(c);
      return CUPTI_SUCCESS;
    }
    if (ti::Client* c = ti::own_client(subscriber)) {
      auto forward = TP_REAL_CUPTI(cuptiUnsubscribe);
      const CUptiResult rc = forward != nullptr ? forward(subscriber) : CUPTI_ERROR_NOT_INITIALIZED;
      if (rc == CUPTI_SUCCESS) ti::remove_client(c);
      return rc;
    }
    if (subscriber == ti::g_real && subscriber != nullptr) return CUPTI_ERROR_INVALID_PARAMETER;  // never ours
  }
  auto forward = TP_REAL_CUPTI(cuptiUnsubscribe);
  return forward != nullptr ? forward(subscriber) : CUPTI_ERROR_NOT_INITIALIZED;
}

TORCHPROF_EXPORT CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                                          CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (ti::hub_active()) {
    if (ti::Client* c = ti::forwarded_client(subscriber)) return ti::client_enable(c, enable, domain, cbid);
    if (subscriber == ti::g_real && subscriber != nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  }
  auto forward = TP_REAL_CUPTI(cuptiEnableCallback);
  return forward != nullptr ? forward(enable, subscriber, domain, cbid) : CUPTI_ERROR_NOT_INITIALIZED;
}

TORCHPROF_EXPORT CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                                        CUpti_CallbackDomain domain) {
  if (ti::hub_active()) {
    if (ti::Client* c = ti::forwarded_client(subscriber)) return ti::client_enable_domain(c, enable, domain);
    if (subscriber == ti::g_real && subscriber != nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  }
  auto forward = TP_REAL_CUPTI(cuptiEnableDomain);
  return forward != nullptr ? forward(enable, subscriber, domain) : CUPTI_ERROR_NOT_INITIALIZED;
}

TORCHPROF_EXPORT CUptiResult CUPTIAPI cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle subscriber) {
  if (ti::hub_active()) {
    if (ti::Client* c = ti::forwarded_client(subscriber)) {
      for (uint32_t d = CUPTI_CB_DOMAIN_DRIVER_API; d < CUPTI_CB_DOMAIN_SIZE; ++d) {
        const CUptiResult rc = ti::client_enable_domain(c, enable, static_cast<CUpti_CallbackDomain>(d));
        if (rc != CUPTI_SUCCESS) return rc;
      }
      return CUPTI_SUCCESS;
    }
    if (subscriber == ti::g_real && subscriber != nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  }
  auto forward = TP_REAL_CUPTI(cuptiEnableAllDomains);
  return forward != nullptr ? forward(enable, subscriber) : CUPTI_ERROR_NOT_INITIALIZED;
}

TORCHPROF_EXPORT CUptiResult CUPTIAPI cuptiGetCallbackState(uint32_t* enable, CUpti_SubscriberHandle subscriber,
                                                            CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (ti::hub_active()) {
    if (ti::Client* c = ti::forwarded_client(subscriber)) {
      if (enable == nullptr || !ti::valid_domain(domain) || cbid >= ti::domain_size(domain)) {
        return CUPTI_ERROR_INVALID_PARAMETER;
      }
      const uint8_t bit = static_cast<uint8_t>(1u << ti::index_of(c));
      *enable = (ti::g_want[domain][cbid].load(std::memory_order_acquire) & bit) != 0 ? 1 : 0;
      return CUPTI_SUCCESS;
    }
  }
  auto forward = TP_REAL_CUPTI(cuptiGetCallbackState);
  return forward != nullptr ? forward(enable, subscriber, domain, cbid) : CUPTI_ERROR_NOT_INITIALIZED;
}

// The program's finalize ends what the program's clients set up (every subscriber and
// activity setting of theirs, as CUPTI's own finalize would), never torchprof's tracing.
TORCHPROF_EXPORT CUptiResult CUPTIAPI cuptiFinalize(void) {
  if (!ti::hub_active() || ti::g_sub_state.load(std::memory_order_acquire) != 2) {
    auto forward = TP_REAL_CUPTI(cuptiFinalize);
    return forward != nullptr ? forward() : CUPTI_ERROR_NOT_INITIALIZED;
  }
  for (ti::Client& c : ti::g_clients) {
    pthread_mutex_lock(&ti::g_mu);
    const bool live = c.live;
    const bool own = c.own;
    CUpti_SubscriberHandle real = c.real;
    pthread_mutex_unlock(&ti::g_mu);
    if (!live) continue;
    if (own) {
      if (auto forward = TP_REAL_CUPTI(cuptiUnsubscribe)) forward(real);
    }
    ti::remove_client(&c);
  }
  ti::share_client_finalized();
  return CUPTI_SUCCESS;
}

}  // extern "C"
