#include "inject/cupti_api.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "formats/wire/env.h"
#include "inject/config.h"

namespace torchprof::inject {
namespace {

CuptiApi g_api;
const CuptiApi* g_loaded = nullptr;

#ifndef TORCHPROF_CUPTI_BUILD_PATH
#define TORCHPROF_CUPTI_BUILD_PATH ""
#endif

// RTLD_LOCAL: CUPTI's symbols stay out of the program's namespace.
void* open_library(const char** used) {
  const char* from_env = getenv(env::kCuptiLib);
  if (from_env != nullptr && *from_env != '\0') {
    *used = from_env;  // an explicit choice is not second-guessed with fallbacks
    return dlopen(from_env, RTLD_NOW | RTLD_LOCAL);
  }
  static constexpr const char* kCandidates[] = {TORCHPROF_CUPTI_BUILD_PATH, "libcupti.so.13", "libcupti.so"};
  for (const char* path : kCandidates) {
    if (*path == '\0') continue;
    *used = path;
    if (void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL)) return handle;
  }
  return nullptr;
}

template <typename Fn>
bool resolve(void* handle, const char* name, Fn* out, const char** missing) {
  *out = reinterpret_cast<Fn>(dlsym(handle, name));
  if (*out == nullptr && *missing == nullptr) *missing = name;
  return *out != nullptr;
}

// Every function but the timestamp callback is required.
bool resolve_all(void* handle, CuptiApi* api, const char** missing) {
  bool ok = true;
  ok &= resolve(handle, "cuptiGetVersion", &api->get_version, missing);
  ok &= resolve(handle, "cuptiGetResultString", &api->get_result_string, missing);
  ok &= resolve(handle, "cuptiSubscribe", &api->subscribe, missing);
  ok &= resolve(handle, "cuptiEnableDomain", &api->enable_domain, missing);
  ok &= resolve(handle, "cuptiEnableCallback", &api->enable_callback, missing);
  ok &= resolve(handle, "cuptiActivityRegisterCallbacks", &api->register_callbacks, missing);
  ok &= resolve(handle, "cuptiActivityEnable", &api->activity_enable, missing);
  ok &= resolve(handle, "cuptiActivityFlushAll", &api->flush_all, missing);
  ok &= resolve(handle, "cuptiActivityGetNextRecord", &api->get_next_record, missing);
  ok &= resolve(handle, "cuptiActivityGetNumDroppedRecords", &api->get_num_dropped, missing);
  ok &= resolve(handle, "cuptiGetTimestamp", &api->get_timestamp, missing);
  api->register_timestamp_callback = reinterpret_cast<decltype(api->register_timestamp_callback)>(
      dlsym(handle, "cuptiActivityRegisterTimestampCallback"));
  return ok;
}

}  // namespace

const CuptiApi* load_cupti(char* why, size_t why_size) {
  const char* path = "libcupti";
  void* handle = open_library(&path);
  if (handle == nullptr) {
    const char* err = dlerror();
    snprintf(why, why_size, "cannot load %s (%s)", path, err != nullptr ? err : "not found");
    return nullptr;
  }
  CuptiApi api;
  const char* missing = nullptr;
  if (!resolve_all(handle, &api, &missing)) {
    snprintf(why, why_size, "%s lacks %s", path, missing);
    return nullptr;
  }
  uint32_t version = 0;
  if (api.get_version(&version) != CUPTI_SUCCESS || !cupti_version_compatible(version, CUPTI_API_VERSION)) {
    snprintf(why, why_size, "%s has CUPTI API version %u, this build reads the record layouts of %u (CUDA %u.x)",
             path, version, static_cast<unsigned>(CUPTI_API_VERSION),
             cupti_version_line(CUPTI_API_VERSION));
    return nullptr;
  }
  g_api = api;
  g_loaded = &g_api;
  notice(LogLevel::kDebug, "loaded %s (CUPTI API version %u)", path, version);
  return g_loaded;
}

const CuptiApi* cupti() { return g_loaded; }

const char* cupti_result_text(CUptiResult result) {
  const char* text = nullptr;
  if (g_loaded != nullptr && g_loaded->get_result_string(result, &text) == CUPTI_SUCCESS && text != nullptr) {
    return text;
  }
  return "unknown CUPTI result";
}

void cupti_call_failed(const char* call, CUptiResult result, const char* file, int line) {
  const char* base = file;
  for (const char* p = file; *p != '\0'; ++p) {
    if (*p == '/') base = p + 1;
  }
  notice(LogLevel::kWarn, "CUPTI call %s failed: %s (%d) at %s:%d", call, cupti_result_text(result),
         static_cast<int>(result), base, line);
}

}  // namespace torchprof::inject
