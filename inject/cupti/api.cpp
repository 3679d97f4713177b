#include "inject/cupti/api.h"

#include <dlfcn.h>
#include <glob.h>
#include <link.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/wire/env.h"
#include "inject/config.h"
#include "inject/cupti/search.h"
#include "inject/cupti/support.h"

namespace torchprof::inject {
namespace {

CuptiApi g_api;
const CuptiApi* g_loaded = nullptr;
void* g_handle = nullptr;
char g_loaded_path[512];

const char* base_name(const char* path) {
  const char* slash = strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

// A loaded object that is a libcupti: "libcupti.so*", or the file TORCHPROF_CUPTI_LIB names.
struct LoadedSearch {
  const char* wanted_base = nullptr;  // basename of TORCHPROF_CUPTI_LIB, or nullptr
  char path[512] = {};
};

int find_loaded_cupti(dl_phdr_info* info, size_t, void* data) {
  auto* search = static_cast<LoadedSearch*>(data);
  if (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0') return 0;
  const char* base = base_name(info->dlpi_name);
  const bool cupti = strncmp(base, "libcupti.so", 11) == 0 ||
                     (search->wanted_base != nullptr && strcmp(base, search->wanted_base) == 0);
  if (!cupti) return 0;
  snprintf(search->path, sizeof search->path, "%s", info->dlpi_name);
  return 1;
}

// The libcupti the program has loaded already, without loading anything.
void* open_loaded(const char** used) {
  const char* from_env = getenv(env::kCuptiLib);
  LoadedSearch search;
  if (from_env != nullptr && *from_env != '\0') search.wanted_base = base_name(from_env);
  if (dl_iterate_phdr(&find_loaded_cupti, &search) == 0) return nullptr;
  void* handle = dlopen(search.path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (handle == nullptr) return nullptr;
  snprintf(g_loaded_path, sizeof g_loaded_path, "%s", search.path);
  *used = g_loaded_path;
  return handle;
}

#ifndef TORCHPROF_CUPTI_BUILD_PATH
#define TORCHPROF_CUPTI_BUILD_PATH ""
#endif

// The loaded libcudart and libtorch, which say where the program's CUDA lives.
struct LoadedCuda {
  char cudart[512] = {};
  char torch[512] = {};
};

int find_loaded_cuda(dl_phdr_info* info, size_t, void* data) {
  auto* found = static_cast<LoadedCuda*>(data);
  if (info->dlpi_name == nullptr || info->dlpi_name[0] != '/') return 0;
  const char* base = base_name(info->dlpi_name);
  if (found->cudart[0] == '\0' && strncmp(base, "libcudart.so.", 13) == 0) {
    snprintf(found->cudart, sizeof found->cudart, "%s", info->dlpi_name);
  }
  if (strcmp(base, "libtorch_cuda.so") == 0 || (found->torch[0] == '\0' && strcmp(base, "libtorch.so") == 0)) {
    snprintf(found->torch, sizeof found->torch, "%s", info->dlpi_name);
  }
  return 0;
}

bool file_exists(const char* path) { return access(path, R_OK) == 0; }

char g_candidates[kCuptiCandidatesMax][kCuptiPathMax];

// RTLD_LOCAL: CUPTI's symbols stay out of the program's namespace.
void* open_library(const char** used) {
  if (void* loaded = open_loaded(used)) return loaded;
  const char* from_env = getenv(env::kCuptiLib);
  if (from_env != nullptr && *from_env != '\0') {
    *used = from_env;  // an explicit choice is not second-guessed with fallbacks
    return dlopen(from_env, RTLD_NOW | RTLD_LOCAL);
  }
  LoadedCuda cuda;
  dl_iterate_phdr(&find_loaded_cuda, &cuda);
  CuptiSearchInputs in;
  in.cudart = cuda.cudart[0] != '\0' ? cuda.cudart : nullptr;
  in.torch_lib = cuda.torch[0] != '\0' ? cuda.torch : nullptr;
  in.build_path = TORCHPROF_CUPTI_BUILD_PATH[0] != '\0' ? TORCHPROF_CUPTI_BUILD_PATH : nullptr;
  in.exists = &file_exists;
  glob_t sites{};
  const char* venv = getenv("VIRTUAL_ENV");
  if (venv != nullptr && venv[0] == '/') {
    char pattern[kCuptiPathMax];
    snprintf(pattern, sizeof pattern, "%s/lib/python3*/site-packages", venv);
    if (glob(pattern, 0, nullptr, &sites) == 0) {
      in.virtual_env = venv;
      in.site_packages = sites.gl_pathv;
      in.site_packages_count = sites.gl_pathc;
    }
  }
  const size_t count = cupti_search_paths(in, g_candidates, kCuptiCandidatesMax);
  globfree(&sites);
  for (size_t i = 0; i < count; ++i) {
    *used = g_candidates[i];
    if (void* handle = dlopen(g_candidates[i], RTLD_NOW | RTLD_LOCAL)) {
      notice(LogLevel::kDebug, "libcupti: %s (candidate %zu of %zu)", g_candidates[i], i + 1, count);
      return handle;
    }
  }
  if (count > 0) *used = g_candidates[count - 1];
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
  ok &= resolve(handle, "cuptiActivityDisable", &api->activity_disable, missing);
  ok &= resolve(handle, "cuptiActivityFlushAll", &api->flush_all, missing);
  ok &= resolve(handle, "cuptiActivityGetNextRecord", &api->get_next_record, missing);
  ok &= resolve(handle, "cuptiActivityGetNumDroppedRecords", &api->get_num_dropped, missing);
  ok &= resolve(handle, "cuptiGetTimestamp", &api->get_timestamp, missing);
  api->register_timestamp_callback = reinterpret_cast<decltype(api->register_timestamp_callback)>(
      dlsym(handle, "cuptiActivityRegisterTimestampCallback"));
  api->set_thread_id_type = reinterpret_cast<decltype(api->set_thread_id_type)>(dlsym(handle, "cuptiSetThreadIdType"));
  return ok;
}

}  // namespace

const CuptiApi* load_cupti(char* why, size_t why_size) {
  if (g_loaded != nullptr) return g_loaded;  // loaded already (a client's subscribe came first)
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
  if (api.get_version(&version) != CUPTI_SUCCESS || !cupti_version_readable(version)) {
    char release[32];
    cupti_release_name(version, release, sizeof release);
    snprintf(why, why_size,
             "%s has CUPTI API version %u (CUDA %s); torchprof reads the records of CUPTI from CUDA 12.0 (API "
             "version %u) on",
             path, version, release, kOldestReadableCupti);
    return nullptr;
  }
  if (version > kNewestKnownCupti + 99) {
    notice(LogLevel::kInfo, "%s has CUPTI API version %u, newer than the layouts checked here (13.3); its records are "
                            "read by the fields 13.3 has", path, version);
  }
  api.version = version;
  api.path = path;
  g_api = api;
  g_handle = handle;
  g_loaded = &g_api;
  notice(LogLevel::kDebug, "loaded %s (CUPTI API version %u)", path, version);
  return g_loaded;
}

const CuptiApi* cupti() { return g_loaded; }

void* real_cupti_function(const char* name) {
  if (g_handle != nullptr) return dlsym(g_handle, name);
  // The program's libcupti is normally a dependency of one of its libraries (torch's
  // libtorch_cuda.so), outside the global scope RTLD_NEXT searches: look for it.
  if (void* next = dlsym(RTLD_NEXT, name)) return next;
  const char* used = nullptr;
  void* handle = open_loaded(&used);
  return handle != nullptr ? dlsym(handle, name) : nullptr;
}

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
