// A minimal CUDA-injection tool used to test the fake end to end: loaded via
// CUDA_INJECTION64_PATH by fakecuda_init, it dlopens TORCHPROF_CUPTI_LIB (the
// same library the workload loaded), subscribes, collects activity records and
// at exit writes a summary JSON to FAKE_PROBE_OUT.
#include <cupti.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

namespace {

struct Cupti {
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiEnableDomain) enable_domain = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped = nullptr;
};

Cupti g_cupti;
std::mutex g_mutex;
std::set<uint32_t> g_api_correlations;
uint64_t g_kernels = 0;
uint64_t g_gpu_ns = 0;
uint64_t g_uncorrelated = 0;
uint64_t g_dropped = 0;
std::set<uint32_t> g_gpu_correlations;

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const auto* info = static_cast<const CUpti_CallbackData*>(data);
  if (info->callbackSite != CUPTI_API_ENTER) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  g_api_correlations.insert(info->correlationId);
}

void CUPTIAPI on_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 256 * 1024;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

void note_gpu(uint32_t correlation, uint64_t start, uint64_t end) {
  g_gpu_ns += end - start;
  g_gpu_correlations.insert(correlation);
}

void CUPTIAPI on_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(g_mutex);
  CUpti_Activity* record = nullptr;
  while (g_cupti.next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      ++g_kernels;
      note_gpu(kernel->correlationId, kernel->start, kernel->end);
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* copy = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      note_gpu(copy->correlationId, copy->start, copy->end);
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const auto* set = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      note_gpu(set->correlationId, set->start, set->end);
    }
  }
  size_t dropped = 0;
  if (g_cupti.dropped(nullptr, 0, &dropped) == CUPTI_SUCCESS) g_dropped += dropped;
  std::free(buffer);
}

void at_exit() {
  g_cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  const char* path = std::getenv("FAKE_PROBE_OUT");
  if (path == nullptr) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  size_t dropped = 0;
  if (g_cupti.dropped(nullptr, 0, &dropped) == CUPTI_SUCCESS) g_dropped += dropped;
  for (uint32_t correlation : g_gpu_correlations) {
    if (g_api_correlations.count(correlation) == 0) ++g_uncorrelated;
  }
  if (FILE* out = std::fopen(path, "w")) {
    std::fprintf(out, "{\"kernels\": %llu, \"gpu_ns\": %llu, \"uncorrelated\": %llu, \"dropped\": %llu}\n",
                 static_cast<unsigned long long>(g_kernels), static_cast<unsigned long long>(g_gpu_ns),
                 static_cast<unsigned long long>(g_uncorrelated), static_cast<unsigned long long>(g_dropped));
    std::fclose(out);
  }
}

template <typename Fn>
bool resolve(void* handle, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(handle, name));
  return *out != nullptr;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  const char* path = std::getenv("TORCHPROF_CUPTI_LIB");
  void* handle = path != nullptr ? dlopen(path, RTLD_NOW) : nullptr;
  if (handle == nullptr || !resolve(handle, "cuptiSubscribe", &g_cupti.subscribe) ||
      !resolve(handle, "cuptiEnableDomain", &g_cupti.enable_domain) ||
      !resolve(handle, "cuptiActivityRegisterCallbacks", &g_cupti.register_callbacks) ||
      !resolve(handle, "cuptiActivityEnable", &g_cupti.enable) ||
      !resolve(handle, "cuptiActivityFlushAll", &g_cupti.flush_all) ||
      !resolve(handle, "cuptiActivityGetNextRecord", &g_cupti.next_record) ||
      !resolve(handle, "cuptiActivityGetNumDroppedRecords", &g_cupti.dropped)) {
    std::fprintf(stderr, "fake_injection_probe: cannot load CUPTI from TORCHPROF_CUPTI_LIB\n");
    return 1;
  }
  CUpti_SubscriberHandle subscriber = nullptr;
  if (g_cupti.subscribe(&subscriber, &on_callback, nullptr) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "fake_injection_probe: subscribe failed\n");
    return 1;
  }
  g_cupti.enable_domain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
  g_cupti.enable_domain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
  g_cupti.register_callbacks(&on_requested, &on_completed);
  g_cupti.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  g_cupti.enable(CUPTI_ACTIVITY_KIND_MEMCPY);
  g_cupti.enable(CUPTI_ACTIVITY_KIND_MEMSET);
  std::atexit(at_exit);
  return 1;
}
