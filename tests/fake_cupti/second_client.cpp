#include "second_client.h"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace fake_workload {

namespace {

// Kineto's kBufSize.
constexpr size_t kBufferBytes = 4u << 20;
constexpr uint64_t kTicksPerNs = 3;
constexpr uint64_t kClockOrigin = 7000000000000ull;

// Kineto's kinds (CuptiActivityApi::enableCuptiActivities with the default activities).
constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};

// Kineto's two maps: buffers handed to CUPTI and not yet back, and buffers back.
std::mutex g_mutex;
std::vector<uint8_t*> g_allocated;
std::vector<std::pair<uint8_t*, size_t>> g_ready;  // with their valid bytes

void CUPTIAPI on_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (*buffer != nullptr) g_allocated.push_back(*buffer);
}

// Like Kineto's bufferCompleted: a buffer it never handed out is refused ("unknown buffer").
void CUPTIAPI on_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto mine = std::find(g_allocated.begin(), g_allocated.end(), buffer);
  if (mine == g_allocated.end()) {
    std::fprintf(stderr, "second client: bufferCompleted called with unknown buffer\n");
    return;
  }
  g_allocated.erase(mine);
  g_ready.emplace_back(buffer, valid);
}

// Kineto's activityBuffers(): with no buffer out with CUPTI it returns nothing, and
// does not flush; otherwise a forced flush, then every buffer that came back. The
// buffers that came back before, while none was out, stay where they are.
std::vector<std::pair<uint8_t*, size_t>> activity_buffers(const CuptiCalls& calls) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_allocated.empty()) return {};
  }
  calls.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<std::pair<uint8_t*, size_t>> ready;
  ready.swap(g_ready);
  return ready;
}

std::string copy_row(const CUpti_ActivityMemcpy6& copy) {
  switch (copy.copyKind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "Memcpy HtoD (Pageable -> Device)";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "Memcpy DtoH (Device -> Pageable)";
    default: return "Memcpy DtoD (Device -> Device)";
  }
}

bool enabled_kind(uint32_t kind) {
  return std::find(std::begin(kKinds), std::end(kKinds), static_cast<CUpti_ActivityKind>(kind)) != std::end(kKinds);
}

}  // namespace

uint64_t SecondClient::clock() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const uint64_t ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  return kClockOrigin + ns * kTicksPerNs;
}

void SecondClient::start(const CuptiCalls& calls) {
  calls_ = calls;
  expected_.clear();
  CUpti_SubscriberHandle subscriber = nullptr;
  // Kineto's CuptiCallbackApi::initCallbackApi: a failure only turns its callbacks off.
  calls_.subscribe(&subscriber, [](void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}, nullptr);
  calls_.register_timestamp_callback([]() -> uint64_t { return SecondClient::clock(); });
  calls_.register_callbacks(&on_requested, &on_completed);
  for (CUpti_ActivityKind kind : kKinds) calls_.enable(kind);
  active_ = true;
}

void SecondClient::launched(const std::string& row, uint64_t duration_ns) {
  if (active_) expected_[row].push_back(duration_ns);
}

// Kineto's order at a stop: its kinds are disabled first (stopTraceInternal), its
// buffers asked for afterwards (processTraceInternal).
bool SecondClient::stop() {
  if (!active_) return true;
  active_ = false;
  for (CUpti_ActivityKind kind : kKinds) calls_.disable(kind);
  std::vector<std::pair<uint8_t*, size_t>> buffers = activity_buffers(calls_);
  std::map<std::string, std::vector<uint64_t>> got;
  bool ok = true;
  size_t valid_bytes = 0;
  for (auto& [buffer, valid] : buffers) {
    valid_bytes += valid;
    CUpti_Activity* record = nullptr;
    while (calls_.get_next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
      if (!enabled_kind(record->kind)) {
        std::fprintf(stderr, "second client: a record of kind %u, which it never enabled\n", record->kind);
        ok = false;
      } else if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
        const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        got[kernel->name].push_back((kernel->end - kernel->start + kTicksPerNs / 2) / kTicksPerNs);
      } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
        const auto* copy = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        got[copy_row(*copy)].push_back((copy->end - copy->start + kTicksPerNs / 2) / kTicksPerNs);
      }
    }
    std::free(buffer);
  }
  // Each buffer back holds kBufferBytes until the trace is processed: CUPTI fills one
  // before it asks for the next, so the records fit in one more than they fill.
  const size_t fill = valid_bytes / kBufferBytes + 1;
  if (buffers.size() > fill) {
    std::fprintf(stderr, "second client: %zu buffers of %zu MiB came back for %zu bytes of records\n",
                 buffers.size(), kBufferBytes >> 20, valid_bytes);
    ok = false;
  }
  return compare(got) && ok;
}

// Durations in the client's clock, back in ns: within 0.1% + 10 ns of what was launched.
bool SecondClient::compare(const std::map<std::string, std::vector<uint64_t>>& got) const {
  bool ok = true;
  for (const auto& [row, durations] : expected_) {
    auto found = got.find(row);
    std::vector<uint64_t> want = durations;
    std::vector<uint64_t> have = found == got.end() ? std::vector<uint64_t>{} : found->second;
    std::sort(want.begin(), want.end());
    std::sort(have.begin(), have.end());
    bool same = want.size() == have.size();
    for (size_t i = 0; same && i < want.size(); ++i) {
      const uint64_t slack = want[i] / 1000 + 10;
      same = have[i] + slack >= want[i] && have[i] <= want[i] + slack;
    }
    if (!same) {
      std::fprintf(stderr, "second client: %zu records of %s (first %llu ns), launched %zu (first %llu ns)\n",
                   have.size(), row.c_str(), have.empty() ? 0ull : static_cast<unsigned long long>(have[0]),
                   want.size(), static_cast<unsigned long long>(want[0]));
      ok = false;
    }
  }
  for (const auto& [row, durations] : got) {
    if (expected_.count(row) == 0) {
      std::fprintf(stderr, "second client: %zu records of %s, none launched\n", durations.size(), row.c_str());
      ok = false;
    }
  }
  return ok;
}

}  // namespace fake_workload
