#include "inject/cupti/share.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sys/random.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "inject/clock.h"
#include "inject/config.h"
#include "inject/cupti/activity.h"
#include "inject/cupti/api.h"
#include "inject/cupti/support.h"
#include "inject/cupti/subscribers.h"
#include "inject/cupti/tracer.h"
#include "inject/export.h"

namespace torchprof::inject {
namespace {

constexpr uint32_t kKinds = CUPTI_ACTIVITY_KIND_COUNT;

std::atomic<bool> g_capturing{false};  // our callbacks are CUPTI's: a client's are held here
CUpti_BuffersCallbackRequestFunc g_our_requested = nullptr;
CUpti_BuffersCallbackCompleteFunc g_our_completed = nullptr;
CUpti_TimestampCallbackFunc g_our_timestamp = nullptr;
std::atomic<bool> g_our_kinds[kKinds] = {};
uint64_t g_cookie = 0;  // marks the buffers this process fills for the client

// The second client as it registered itself with us.
std::atomic<CUpti_BuffersCallbackRequestFunc> g_requested{nullptr};
std::atomic<CUpti_BuffersCallbackCompleteFunc> g_completed{nullptr};
std::atomic<CUpti_TimestampCallbackFunc> g_clock{nullptr};
std::atomic<bool> g_wants[kKinds] = {};
// The client's window per kind (our clock), from its enable to its disable: what CUPTI
// recorded outside is not its. Records without times go to it while the kind is
// enabled, or was enabled since its last flush.
std::atomic<uint64_t> g_wanted_since[kKinds] = {};
std::atomic<uint64_t> g_wanted_until[kKinds] = {};
std::atomic<bool> g_unflushed[kKinds] = {};
std::atomic<bool> g_seen{false};
// The client's settings that CUPTI keeps per process, held here so that they shape only
// its own records: API record filters (cuptiActivityEnableRuntimeApi/DriverApi: true =
// the client turned that cbid's records off), its flush period, the attributes it set,
// and cuptiActivityEnableAllSyncRecords (CUPTI's default: every query's record).
constexpr uint32_t kApiCbids = 2048;
std::atomic<bool> g_api_off[2][kApiCbids] = {};
std::atomic<uint32_t> g_client_period_ms{0};
std::atomic<uint64_t> g_out_opened_ns{0};
constexpr uint32_t kAttributes = 16;
std::atomic<bool> g_attr_set[kAttributes] = {};
uint64_t g_attr_value[kAttributes] = {};  // under g_attr_mu
size_t g_attr_size[kAttributes] = {};
pthread_mutex_t g_attr_mu = PTHREAD_MUTEX_INITIALIZER;
std::atomic<bool> g_client_all_sync{true};
std::atomic<int> g_real_all_sync{-1};  // what CUPTI was last told: -1 nothing yet
// Pairs read on both clocks (ours, the client's): the first at its registration.
pthread_mutex_t g_clock_mu = PTHREAD_MUTEX_INITIALIZER;
// CUPTI's own clock (Unix-epoch ns) against ours, read before our timestamp callback
// replaced it: a client that registered no clock gets its records on CUPTI's, as alone.
std::atomic<bool> g_default_known{false};
std::atomic<int64_t> g_default_offset{0};
ClockPair g_first_pair;
double g_first_rate = 1.0;

bool capturing() { return g_capturing.load(std::memory_order_acquire); }

bool valid_kind(CUpti_ActivityKind kind) { return kind > CUPTI_ACTIVITY_KIND_INVALID && kind < kKinds; }

// The program's own CUPTI function, looked up once.
template <typename Fn>
Fn real(std::atomic<void*>& cache, const char* name) {
  void* fn = cache.load(std::memory_order_acquire);
  if (fn == nullptr) {
    fn = real_cupti_function(name);
    cache.store(fn, std::memory_order_release);
  }
  return reinterpret_cast<Fn>(fn);
}

}  // namespace
}  // namespace torchprof::inject

// The program's CUPTI function of that name, looked up at the first call.
#define TP_REAL(fn)                                                      \
  ([]() {                                                                \
    static std::atomic<void*> cache{nullptr};                            \
    return ::torchprof::inject::real<decltype(&fn)>(cache, #fn);         \
  }())

namespace torchprof::inject {
namespace {

void note_client(const void* callback) {
  if (g_seen.exchange(true)) return;
  Dl_info info{};
  const char* where = dladdr(callback, &info) != 0 && info.dli_fname != nullptr ? info.dli_fname : "the program";
  const char* slash = strrchr(where, '/');
  char line[400];
  snprintf(line, sizeof line,
           "CUPTI is shared with a second client in %s (torch.profiler, say): each gets its own GPU records",
           slash != nullptr ? slash + 1 : where);
  gpu_notice_line(LogLevel::kInfo, line);
}

// Their clock read between two of ours, the narrowest of a few tries: a pair whose
// reads were preempted apart would skew the rate and every time mapped with it.
ClockPair read_pair(CUpti_TimestampCallbackFunc clock) {
  ClockPair best;
  uint64_t best_width = UINT64_MAX;
  for (int i = 0; i < 8; ++i) {
    const uint64_t before = now_ns();
    const uint64_t theirs = clock();
    const uint64_t after = now_ns();
    if (after - before < best_width) {
      best_width = after - before;
      best = ClockPair{before + (after - before) / 2, theirs};
    }
  }
  return best;
}

// Two pairs 2 ms apart give the client clock's rate for the first buffers, shared
// before pairs far enough apart exist (once per registration, on the client's thread).
void hold_client_clock(CUpti_TimestampCallbackFunc clock) {
  const ClockPair first = read_pair(clock);
  ClockPair second = first;
  while (second.ours < first.ours + 2000000) second = read_pair(clock);
  pthread_mutex_lock(&g_clock_mu);
  g_first_pair = first;
  g_first_rate = clock_rate(first, second);
  pthread_mutex_unlock(&g_clock_mu);
  g_clock.store(clock, std::memory_order_release);
}

void keep_client_buffer_out();

void want_kind(CUpti_ActivityKind kind) {
  if (!valid_kind(kind)) return;
  if (!g_wants[kind].load(std::memory_order_relaxed)) g_wanted_since[kind].store(now_ns(), std::memory_order_relaxed);
  g_wanted_until[kind].store(UINT64_MAX, std::memory_order_relaxed);
  g_unflushed[kind].store(true, std::memory_order_relaxed);
  g_wants[kind].store(true, std::memory_order_relaxed);
  keep_client_buffer_out();
}

// Records CUPTI already holds stay the client's after its disable, as in CUPTI: Kineto
// disables its kinds at its stop and only then flushes.
void unwant_kind(CUpti_ActivityKind kind) {
  if (!valid_kind(kind) || !g_wants[kind].load(std::memory_order_relaxed)) return;
  g_wanted_until[kind].store(now_ns(), std::memory_order_relaxed);
  g_wants[kind].store(false, std::memory_order_relaxed);
}

bool client_record(uint32_t kind, uint64_t start) {
  if (kind >= kKinds) return false;
  if (start == 0) return g_wants[kind].load(std::memory_order_relaxed) || g_unflushed[kind].load(std::memory_order_relaxed);
  return start >= g_wanted_since[kind].load(std::memory_order_relaxed) &&
         start < g_wanted_until[kind].load(std::memory_order_relaxed);
}

// ---- the client's buffers ----

// The fields of the records a client reads that hold times, per kind, in this
// build's structs. Kinds not listed keep their times as written.
struct TimeFields {
  uint32_t kind;
  size_t offsets[5];
  int count;
};

constexpr TimeFields kTimeFields[] = {
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
     {offsetof(CUpti_ActivityKernel10, start), offsetof(CUpti_ActivityKernel10, end),
      offsetof(CUpti_ActivityKernel10, completed), offsetof(CUpti_ActivityKernel10, queued),
      offsetof(CUpti_ActivityKernel10, submitted)},
     5},
    {CUPTI_ACTIVITY_KIND_KERNEL,
     {offsetof(CUpti_ActivityKernel10, start), offsetof(CUpti_ActivityKernel10, end),
      offsetof(CUpti_ActivityKernel10, completed), offsetof(CUpti_ActivityKernel10, queued),
      offsetof(CUpti_ActivityKernel10, submitted)},
     5},
    {CUPTI_ACTIVITY_KIND_MEMCPY, {offsetof(CUpti_ActivityMemcpy6, start), offsetof(CUpti_ActivityMemcpy6, end)}, 2},
    {CUPTI_ACTIVITY_KIND_MEMCPY2,
     {offsetof(CUpti_ActivityMemcpyPtoP4, start), offsetof(CUpti_ActivityMemcpyPtoP4, end)}, 2},
    {CUPTI_ACTIVITY_KIND_MEMSET, {offsetof(CUpti_ActivityMemset4, start), offsetof(CUpti_ActivityMemset4, end)}, 2},
    {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
     {offsetof(CUpti_ActivitySynchronization2, start), offsetof(CUpti_ActivitySynchronization2, end)}, 2},
    {CUPTI_ACTIVITY_KIND_RUNTIME, {offsetof(CUpti_ActivityAPI, start), offsetof(CUpti_ActivityAPI, end)}, 2},
    {CUPTI_ACTIVITY_KIND_DRIVER, {offsetof(CUpti_ActivityAPI, start), offsetof(CUpti_ActivityAPI, end)}, 2},
    {CUPTI_ACTIVITY_KIND_OVERHEAD,
     {offsetof(CUpti_ActivityOverhead3, start), offsetof(CUpti_ActivityOverhead3, end)}, 2},
    {CUPTI_ACTIVITY_KIND_CUDA_EVENT, {offsetof(CUpti_ActivityCudaEvent2, deviceTimestamp)}, 1},
    {CUPTI_ACTIVITY_KIND_MEMORY2, {offsetof(CUpti_ActivityMemory4, timestamp)}, 1},
    {CUPTI_ACTIVITY_KIND_MARKER, {offsetof(CUpti_ActivityMarker2, timestamp)}, 1},
};

// One buffer the client handed out, being filled.
struct Out {
  uint8_t* data = nullptr;
  size_t size = 0;
  size_t used = 0;
};

// The client's buffer being filled, kept across deliveries as CUPTI keeps one: it goes
// back when full or at the client's flush. Kineto's activityBuffers() flushes and
// returns anything only while it has a buffer out, and each buffer back holds its
// 4 MiB until the trace is processed.
pthread_mutex_t g_out_mu = PTHREAD_MUTEX_INITIALIZER;
Out g_out;

bool open_out(Out* out) {
  CUpti_BuffersCallbackRequestFunc requested = g_requested.load(std::memory_order_acquire);
  uint8_t* data = nullptr;
  size_t size = 0;
  size_t max_records = 0;
  if (requested != nullptr) requested(&data, &size, &max_records);
  if (data == nullptr || size < kSharedHeaderBytes + 64) return false;
  const uint64_t head[2] = {kSharedBufferMagic, g_cookie};
  memcpy(data, head, sizeof head);
  *out = Out{data, size, kSharedHeaderBytes};
  g_out_opened_ns.store(now_ns(), std::memory_order_relaxed);
  return true;
}

void close_out(Out* out) {
  CUpti_BuffersCallbackCompleteFunc completed = g_completed.load(std::memory_order_acquire);
  if (out->data != nullptr && completed != nullptr) {
    const size_t valid = out->used > kSharedHeaderBytes ? out->used : 0;
    completed(/*context=*/nullptr, /*streamId=*/0, out->data, out->size, valid);
  }
  *out = Out{};
}

bool client_wants_any() {
  for (uint32_t kind = 0; kind < kKinds; ++kind) {
    if (g_wants[kind].load(std::memory_order_relaxed)) return true;
  }
  return false;
}

// While the client has kinds enabled it has a buffer out, as CUPTI asks for one before
// it writes: our CUPTI buffers hold its records until they are delivered.
void keep_client_buffer_out() {
  if (!capturing() || g_requested.load(std::memory_order_acquire) == nullptr || !client_wants_any()) return;
  pthread_mutex_lock(&g_out_mu);
  if (g_out.data == nullptr) open_out(&g_out);
  pthread_mutex_unlock(&g_out_mu);
}

// Times of a copied record moved from our clock (CUPTI writes ours, less the
// measured offset when it had no timestamp callback) to the client's.
const TimeFields* time_fields(uint32_t kind) {
  for (const TimeFields& f : kTimeFields) {
    if (f.kind == kind) return &f;
  }
  return nullptr;
}

// A record's first time (its start) on our clock, 0 when unknown or it has none.
uint64_t record_start(const uint8_t* record, size_t bytes, uint32_t kind) {
  const TimeFields* f = time_fields(kind);
  if (f == nullptr || f->offsets[0] + sizeof(uint64_t) > bytes) return 0;
  uint64_t t = 0;
  memcpy(&t, record + f->offsets[0], sizeof t);
  return t == 0 ? 0 : t - static_cast<uint64_t>(gpu_clock_offset());
}

// Only the fields inside the record as the loaded CUPTI wrote it (`bytes` long): an older
// CUPTI's record is a prefix of this build's struct (CUDA 12.4's CUDA_EVENT records, 24
// bytes, have no deviceTimestamp).
// `shift_only`: the client's clock is CUPTI's own, ours shifted by g_default_offset.
void to_client_clock(uint8_t* record, size_t bytes, uint32_t kind, const ClockPair& first, const ClockPair& last,
                     double rate0, bool shift_only) {
  const TimeFields* f = time_fields(kind);
  if (f == nullptr) return;
  const int64_t offset = gpu_clock_offset();
  const int64_t shift = g_default_offset.load(std::memory_order_relaxed);
  for (int i = 0; i < f->count; ++i) {
    if (f->offsets[i] + sizeof(uint64_t) > bytes) continue;
    uint64_t t = 0;
    memcpy(&t, record + f->offsets[i], sizeof t);
    if (t != 0) {
      const uint64_t ours = t - static_cast<uint64_t>(offset);
      t = shift_only ? ours + static_cast<uint64_t>(shift) : map_to_their_clock(ours, first, last, rate0);
    }
    memcpy(record + f->offsets[i], &t, sizeof t);
  }
}

// The client's own filters: API records of the cbids it turned off, and the records of
// queries that found the work unfinished when it turned those off.
bool filtered_out(const CUpti_Activity* record, size_t bytes, uint32_t kind) {
  if (kind == CUPTI_ACTIVITY_KIND_RUNTIME || kind == CUPTI_ACTIVITY_KIND_DRIVER) {
    const auto* api = reinterpret_cast<const CUpti_ActivityAPI*>(record);
    const int driver = kind == CUPTI_ACTIVITY_KIND_DRIVER ? 1 : 0;
    return api->cbid < kApiCbids && g_api_off[driver][api->cbid].load(std::memory_order_relaxed);
  }
  if (kind == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION && !g_client_all_sync.load(std::memory_order_relaxed) &&
      bytes >= offsetof(CUpti_ActivitySynchronization2, returnValue) + sizeof(uint32_t)) {
    return reinterpret_cast<const CUpti_ActivitySynchronization2*>(record)->returnValue != 0;
  }
  return false;
}

struct Copier {
  Out out;
  bool clock = false;
  bool shift_only = false;  // the client has no clock of its own: CUPTI's
  ClockPair first;
  ClockPair last;
  double rate0 = 1.0;

  void copy(const CUpti_Activity* record, size_t bytes) {
    const uint32_t kind = record->kind;
    if (kind >= kKinds) return;
    if (!client_record(kind, record_start(reinterpret_cast<const uint8_t*>(record), bytes, kind))) return;
    if (filtered_out(record, bytes, kind)) return;
    bytes = (bytes + 7) & ~size_t{7};
    if (out.data != nullptr && out.used + 8 + bytes > out.size) close_out(&out);  // full: the next at once
    if (out.data == nullptr && !open_out(&out)) return;  // the client gave no buffer: it loses the record
    if (out.used + 8 + bytes > out.size) return;         // a record larger than its buffers
    const uint64_t length = bytes;
    memcpy(out.data + out.used, &length, sizeof length);
    uint8_t* copied = out.data + out.used + 8;
    memcpy(copied, record, bytes);
    if (clock) to_client_clock(copied, bytes, kind, first, last, rate0, shift_only);
    out.used += 8 + bytes;
  }
};

}  // namespace

void share_start(CUpti_BuffersCallbackRequestFunc requested, CUpti_BuffersCallbackCompleteFunc completed,
                 CUpti_TimestampCallbackFunc timestamp) {
  g_our_requested = requested;
  g_our_completed = completed;
  g_our_timestamp = timestamp;
  if (getrandom(&g_cookie, sizeof g_cookie, GRND_NONBLOCK) != sizeof g_cookie) g_cookie = now_ns() ^ 0x9e3779b97f4a7c15ull;
  g_capturing.store(true, std::memory_order_release);
  // A client registered before us: its callbacks and clock were CUPTI's until now.
  if (CUpti_BuffersCallbackCompleteFunc earlier = g_completed.load(std::memory_order_acquire)) {
    note_client(reinterpret_cast<const void*>(earlier));
    keep_client_buffer_out();
  }
}

void share_note_our_kind(CUpti_ActivityKind kind) {
  if (valid_kind(kind)) g_our_kinds[kind].store(true, std::memory_order_relaxed);
}

bool share_client_wants(CUpti_ActivityKind kind) {
  return valid_kind(kind) && g_wants[kind].load(std::memory_order_relaxed);
}

void share_forget_after_fork() {
  g_capturing.store(false, std::memory_order_relaxed);
  g_completed.store(nullptr, std::memory_order_relaxed);
  pthread_mutex_init(&g_out_mu, nullptr);
  g_out = Out{};
}

bool second_client_seen() { return g_seen.load(std::memory_order_relaxed); }

bool return_to_second_client(uint8_t* buffer, size_t size, size_t valid) {
  CUpti_BuffersCallbackCompleteFunc completed = g_completed.load(std::memory_order_acquire);
  if (completed == nullptr || !capturing()) return false;
  completed(/*context=*/nullptr, /*streamId=*/0, buffer, size, valid);
  return true;
}

void share_with_second_client(const uint8_t* buffer, size_t valid) {
  const CuptiApi* api = cupti();
  if (g_completed.load(std::memory_order_acquire) == nullptr || api == nullptr || !capturing()) return;
  Copier copier;
  if (CUpti_TimestampCallbackFunc clock = g_clock.load(std::memory_order_acquire)) {
    pthread_mutex_lock(&g_clock_mu);
    copier.first = g_first_pair;
    copier.rate0 = g_first_rate;
    pthread_mutex_unlock(&g_clock_mu);
    copier.last = read_pair(clock);
    copier.clock = true;
  } else if (g_default_known.load(std::memory_order_acquire)) {
    copier.clock = true;
    copier.shift_only = true;
  }
  pthread_mutex_lock(&g_out_mu);
  copier.out = g_out;
  // A record's length is the distance to the next one; the last runs to the end.
  auto* data = const_cast<uint8_t*>(buffer);
  CUpti_Activity* previous = nullptr;
  CUpti_Activity* record = nullptr;
  while (api->get_next_record(data, valid, &record) == CUPTI_SUCCESS) {
    if (previous != nullptr) {
      copier.copy(previous, static_cast<size_t>(reinterpret_cast<uint8_t*>(record) -
                                                reinterpret_cast<uint8_t*>(previous)));
    }
    previous = record;
  }
  if (previous != nullptr) {
    copier.copy(previous, static_cast<size_t>(data + valid - reinterpret_cast<uint8_t*>(previous)));
  }
  // The client's own flush period: its buffer goes back once it is that old.
  const uint32_t period = g_client_period_ms.load(std::memory_order_relaxed);
  if (period != 0 && copier.out.data != nullptr &&
      now_ns() - g_out_opened_ns.load(std::memory_order_relaxed) >= uint64_t{period} * 1000000ull) {
    close_out(&copier.out);
  }
  if (copier.out.data == nullptr && client_wants_any()) open_out(&copier.out);
  g_out = copier.out;
  pthread_mutex_unlock(&g_out_mu);
}

// The client's flush: what CUPTI held has reached our bufferCompleted, and so its
// share of it the client's buffer, which now goes back to it.
void share_client_flushed() {
  if (!capturing()) return;
  pthread_mutex_lock(&g_out_mu);
  if (g_out.data != nullptr) close_out(&g_out);
  pthread_mutex_unlock(&g_out_mu);
  for (uint32_t kind = 0; kind < kKinds; ++kind) {
    if (!g_wants[kind].load(std::memory_order_relaxed)) g_unflushed[kind].store(false, std::memory_order_relaxed);
  }
  keep_client_buffer_out();
}

// What CUPTI is told of query records: torchprof needs only those of queries that
// found their work done, so CUPTI writes no others unless the client wants every one
// (its default) for the kind it enabled.
void apply_all_sync() {
  const bool all = g_client_all_sync.load(std::memory_order_relaxed) &&
                   g_wants[CUPTI_ACTIVITY_KIND_SYNCHRONIZATION].load(std::memory_order_relaxed);
  const int value = all ? 1 : 0;
  if (g_real_all_sync.exchange(value) == value) return;
  using Fn = CUptiResult(CUPTIAPI*)(uint8_t);
  static std::atomic<void*> cache{nullptr};
  if (auto fn = real<Fn>(cache, "cuptiActivityEnableAllSyncRecords")) fn(static_cast<uint8_t>(value));
}

// The client registers other callbacks: the buffer it is filling goes back to the
// ones that asked for it.
void share_client_replaced(CUpti_BuffersCallbackCompleteFunc completed) {
  pthread_mutex_lock(&g_out_mu);
  if (g_out.data != nullptr && g_completed.load(std::memory_order_acquire) != completed) close_out(&g_out);
  pthread_mutex_unlock(&g_out_mu);
}

bool share_api_records_ours() {
  const Config& c = config();
  return c.trace_cuda && c.cuda_api_activity;
}

void share_set_all_sync() { apply_all_sync(); }

void share_set_cupti_clock(int64_t offset_ns) {
  g_default_offset.store(offset_ns, std::memory_order_relaxed);
  g_default_known.store(true, std::memory_order_release);
}

void share_client_finalized() {
  pthread_mutex_lock(&g_out_mu);
  if (g_out.data != nullptr) close_out(&g_out);
  pthread_mutex_unlock(&g_out_mu);
  using Disable = CUptiResult(CUPTIAPI*)(CUpti_ActivityKind);
  static std::atomic<void*> disable_cache{nullptr};
  Disable disable = real<Disable>(disable_cache, "cuptiActivityDisable");
  for (uint32_t kind = 1; kind < kKinds; ++kind) {
    const bool wanted = g_wants[kind].load(std::memory_order_relaxed);
    unwant_kind(static_cast<CUpti_ActivityKind>(kind));
    g_unflushed[kind].store(false, std::memory_order_relaxed);
    if (wanted && !(capturing() && g_our_kinds[kind].load(std::memory_order_relaxed)) && disable != nullptr) {
      disable(static_cast<CUpti_ActivityKind>(kind));
    }
  }
  g_requested.store(nullptr, std::memory_order_release);
  g_completed.store(nullptr, std::memory_order_release);
  g_clock.store(nullptr, std::memory_order_release);
  for (auto& side : g_api_off) {
    for (auto& off : side) off.store(false, std::memory_order_relaxed);
  }
  g_client_period_ms.store(0, std::memory_order_relaxed);
  for (auto& set : g_attr_set) set.store(false, std::memory_order_relaxed);
  g_client_all_sync.store(true, std::memory_order_relaxed);
  apply_all_sync();
}

}  // namespace torchprof::inject

// ---- the CUPTI entry points a second client calls ----

namespace ti = torchprof::inject;

extern "C" {

// A client that registers before our tracing starts is remembered too: once ours are
// CUPTI's callbacks, it gets its share, and the buffers it had handed CUPTI go back to it.
TORCHPROF_EXPORT CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested,
                                                                     CUpti_BuffersCallbackCompleteFunc completed) {
  if (requested == nullptr || completed == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (!ti::capturing()) {
    auto forward = TP_REAL(cuptiActivityRegisterCallbacks);
    if (forward == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
    const CUptiResult rc = forward(requested, completed);
    if (rc != CUPTI_SUCCESS) return rc;
    ti::g_requested.store(requested, std::memory_order_release);
    ti::g_completed.store(completed, std::memory_order_release);
    if (!ti::capturing()) return rc;
    // Our tracing started inside that call (it started CUDA): ours must be CUPTI's.
    forward(ti::g_our_requested, ti::g_our_completed);
  }
  ti::share_client_replaced(completed);
  ti::g_requested.store(requested, std::memory_order_release);
  ti::g_completed.store(completed, std::memory_order_release);
  ti::note_client(reinterpret_cast<const void*>(completed));
  return CUPTI_SUCCESS;
}

TORCHPROF_EXPORT CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc clock) {
  if (clock == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (!ti::capturing()) {
    auto forward = TP_REAL(cuptiActivityRegisterTimestampCallback);
    if (forward == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
    const CUptiResult rc = forward(clock);
    if (rc != CUPTI_SUCCESS) return rc;
    ti::hold_client_clock(clock);  // for when our tracing replaces it
    if (!ti::capturing()) return rc;
    if (ti::g_our_timestamp != nullptr) forward(ti::g_our_timestamp);
    return rc;
  }
  ti::hold_client_clock(clock);
  return CUPTI_SUCCESS;
}

TORCHPROF_EXPORT CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  auto forward = TP_REAL(cuptiActivityEnable);
  if (forward == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  const CUptiResult rc = forward(kind);
  if (rc == CUPTI_SUCCESS) ti::want_kind(kind);
  if (kind == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION && ti::hub_active()) ti::apply_all_sync();
  return rc;
}

TORCHPROF_EXPORT CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  ti::unwant_kind(kind);
  if (kind == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION && ti::hub_active()) ti::apply_all_sync();
  if (ti::capturing() && ti::valid_kind(kind) && ti::g_our_kinds[kind].load(std::memory_order_relaxed)) {
    return CUPTI_SUCCESS;  // we still trace it; the client simply gets no more of it
  }
  auto forward = TP_REAL(cuptiActivityDisable);
  return forward != nullptr ? forward(kind) : CUPTI_ERROR_NOT_INITIALIZED;
}

TORCHPROF_EXPORT CUptiResult CUPTIAPI cuptiActivityEnableContext(CUcontext context, CUpti_ActivityKind kind) {
  auto forward = TP_REAL(cuptiActivityEnableContext);
  if (forward == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  const CUptiResult rc = forward(context, kind);
  if (rc == CUPTI_SUCCESS) ti::want_kind(kind);
  return rc;
}

TORCHPROF_EXPORT CUptiResult CUPTIAPI cuptiActivityDisableContext(CUcontext context, CUpti_ActivityKind kind) {
  if (ti::capturing() && ti::valid_kind(kind) && ti::g_our_kinds[kind].load(std::memory_order_relaxed)) {
    return CUPTI_SUCCESS;
  }
  auto forward = TP_REAL(cuptiActivityDisableContext);
  return forward != nullptr ? forward(context, kind) : CUPTI_ERROR_NOT_INITIALIZED;
}

// The client's records reach our bufferCompleted within this call, and its buffer
// goes back to it after (either flag: the records copied into it are complete).
TORCHPROF_EXPORT CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  auto forward = TP_REAL(cuptiActivityFlushAll);
  if (forward == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  const CUptiResult rc = forward(flag);
  ti::share_client_flushed();
  return rc;
}

TORCHPROF_EXPORT CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  if (record != nullptr && ti::is_shared_buffer(buffer, valid, ti::g_cookie) && ti::g_cookie != 0) {
    auto* current = reinterpret_cast<uint8_t*>(*record);
    if (!ti::next_shared_record(buffer, valid, &current)) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *record = reinterpret_cast<CUpti_Activity*>(current);
    return CUPTI_SUCCESS;
  }
  auto forward = TP_REAL(cuptiActivityGetNextRecord);
  return forward != nullptr ? forward(buffer, valid, record) : CUPTI_ERROR_NOT_INITIALIZED;
}

// Per-cbid API record filters: the client's records only. Forwarded too when
// torchprof takes no API records from CUPTI's activity buffers (then CUPTI writes fewer).
namespace {

CUptiResult api_filter(bool driver, const char* name, CUpti_CallbackId cbid, uint8_t enable) {
  using Fn = CUptiResult(CUPTIAPI*)(CUpti_CallbackId, uint8_t);
  static std::atomic<void*> caches[2] = {};
  Fn forward = ti::real<Fn>(caches[driver ? 1 : 0], name);
  if (!ti::hub_active()) return forward != nullptr ? forward(cbid, enable) : CUPTI_ERROR_NOT_INITIALIZED;
  if (forward == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  if (cbid < ti::kApiCbids) ti::g_api_off[driver ? 1 : 0][cbid].store(enable == 0, std::memory_order_relaxed);
  if (!ti::share_api_records_ours()) return forward(cbid, enable);
  return CUPTI_SUCCESS;
}

// Attributes that give CUPTI more room: raised for both when the client asks for more.
bool room_attribute(CUpti_ActivityAttribute attr) {
  switch (attr) {
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE:
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE_CDP:
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT:
    case CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_POOL_SIZE:
    case CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_POOL_LIMIT:
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE:
    case CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_PRE_ALLOCATE_VALUE:
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE_DEVICE_GRAPHS: return true;
    default: return false;
  }
}

}  // namespace

TORCHPROF_EXPORT CUptiResult CUPTIAPI cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable) {
  return api_filter(false, "cuptiActivityEnableRuntimeApi", cbid, enable);
}

TORCHPROF_EXPORT CUptiResult CUPTIAPI cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable) {
  return api_filter(true, "cuptiActivityEnableDriverApi", cbid, enable);
}

// The client's period: its buffer goes back once that old (when torchprof's own
// deliveries come, every TORCHPROF_GPU_FLUSH_MS at most), CUPTI's stays torchprof's.
TORCHPROF_EXPORT CUptiResult CUPTIAPI cuptiActivityFlushPeriod(uint32_t time) {
  if (!ti::hub_active()) {
    auto forward = TP_REAL(cuptiActivityFlushPeriod);
    return forward != nullptr ? forward(time) : CUPTI_ERROR_NOT_INITIALIZED;
  }
  ti::g_client_period_ms.store(time, std::memory_order_relaxed);
  return CUPTI_SUCCESS;
}

// Attributes the client sets are its own: read back as it set them. Those giving CUPTI
// more room are raised for both; the others (per-thread buffers, zeroed buffers, pinned
// host memory) are not passed on.
TORCHPROF_EXPORT CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t* valueSize,
                                                                void* value) {
  auto forward = TP_REAL(cuptiActivitySetAttribute);
  if (!ti::hub_active()) return forward != nullptr ? forward(attr, valueSize, value) : CUPTI_ERROR_NOT_INITIALIZED;
  if (valueSize == nullptr || value == nullptr || *valueSize == 0 || *valueSize > sizeof(uint64_t)) {
    return forward != nullptr ? forward(attr, valueSize, value) : CUPTI_ERROR_INVALID_PARAMETER;
  }
  const auto index = static_cast<uint32_t>(attr);
  if (index >= ti::kAttributes) return forward != nullptr ? forward(attr, valueSize, value) : CUPTI_ERROR_NOT_INITIALIZED;
  uint64_t wanted = 0;
  memcpy(&wanted, value, *valueSize);
  if (room_attribute(attr) && forward != nullptr) {
    auto get = TP_REAL(cuptiActivityGetAttribute);
    uint64_t now = 0;
    size_t size = *valueSize;
    if (get != nullptr && get(attr, &size, &now) == CUPTI_SUCCESS && wanted > now) {
      const CUptiResult rc = forward(attr, valueSize, value);
      if (rc != CUPTI_SUCCESS) return rc;
    }
  }
  pthread_mutex_lock(&ti::g_attr_mu);
  ti::g_attr_value[index] = wanted;
  ti::g_attr_size[index] = *valueSize;
  pthread_mutex_unlock(&ti::g_attr_mu);
  ti::g_attr_set[index].store(true, std::memory_order_release);
  return CUPTI_SUCCESS;
}

TORCHPROF_EXPORT CUptiResult CUPTIAPI cuptiActivityGetAttribute(CUpti_ActivityAttribute attr, size_t* valueSize,
                                                                void* value) {
  const auto index = static_cast<uint32_t>(attr);
  if (ti::hub_active() && index < ti::kAttributes && ti::g_attr_set[index].load(std::memory_order_acquire) &&
      valueSize != nullptr && value != nullptr) {
    pthread_mutex_lock(&ti::g_attr_mu);
    const size_t n = *valueSize < ti::g_attr_size[index] ? *valueSize : ti::g_attr_size[index];
    memcpy(value, &ti::g_attr_value[index], n);
    *valueSize = n;
    pthread_mutex_unlock(&ti::g_attr_mu);
    return CUPTI_SUCCESS;
  }
  auto forward = TP_REAL(cuptiActivityGetAttribute);
  return forward != nullptr ? forward(attr, valueSize, value) : CUPTI_ERROR_NOT_INITIALIZED;
}

TORCHPROF_EXPORT CUptiResult CUPTIAPI cuptiActivityEnableAllSyncRecords(uint8_t enable) {
  if (!ti::hub_active()) {
    auto forward = TP_REAL(cuptiActivityEnableAllSyncRecords);
    return forward != nullptr ? forward(enable) : CUPTI_ERROR_NOT_INITIALIZED;
  }
  ti::g_client_all_sync.store(enable != 0, std::memory_order_relaxed);
  ti::apply_all_sync();
  return CUPTI_SUCCESS;
}

}  // extern "C"
