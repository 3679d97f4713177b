// gpu_workload: a "CUDA program" for machines without a GPU. It loads the fake
// libcupti (FAKE_CUPTI_PATH, else TORCHPROF_CUPTI_LIB, else the path it was built
// with) into the process's global scope, as a program linked against it has it, initialises
// "CUDA" through it (which calls a CUDA-injected tool's InitializeInjection),
// and runs scenarios or scripts of NVTX ranges and fake CUDA calls.
//
//   gpu_workload [--expect FILE] [--no-run] [--list] SCENARIO|SCRIPT ...
//
// Several arguments run one after the other, as one script. --expect FILE
// writes the exact values a profiler must report (JSON, see workload_expect.cpp);
// the scenarios and their hand-computed values are listed in workload_scenarios.cpp,
// the script language in workload_script.h. Exit code 1 when the script's second
// CUPTI client (client_start … client_stop) got other records than were launched.
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>

#include "workload_script.h"

#ifndef FAKE_CUPTI_DEFAULT_PATH
#define FAKE_CUPTI_DEFAULT_PATH "libfake_cupti.so"
#endif

namespace {

template <typename Fn>
void resolve(void* handle, const char* name, Fn* out) {
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) throw std::runtime_error(std::string("fake libcupti lacks ") + name);
  *out = reinterpret_cast<Fn>(symbol);
}

const char* fake_path() {
  for (const char* name : {"FAKE_CUPTI_PATH", "TORCHPROF_CUPTI_LIB"}) {
    const char* path = std::getenv(name);
    if (path != nullptr && path[0] != '\0') return path;
  }
  return FAKE_CUPTI_DEFAULT_PATH;
}

// `linked`: as the process binds the names (a preloaded interposer first); `direct`: the library's own.
void resolve_cupti(void* scope, fake_workload::CuptiCalls* calls) {
  resolve(scope, "cuptiSubscribe", &calls->subscribe);
  resolve(scope, "cuptiActivityRegisterCallbacks", &calls->register_callbacks);
  resolve(scope, "cuptiActivityRegisterTimestampCallback", &calls->register_timestamp_callback);
  resolve(scope, "cuptiActivityEnable", &calls->enable);
  resolve(scope, "cuptiActivityDisable", &calls->disable);
  resolve(scope, "cuptiActivityFlushAll", &calls->flush_all);
  resolve(scope, "cuptiActivityGetNextRecord", &calls->get_next_record);
}

fake_workload::FakeCudaApi load_fake_cuda(fake_workload::CuptiApi* cupti) {
  const char* path = fake_path();
  void* handle = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) throw std::runtime_error(std::string("cannot load ") + path + ": " + dlerror());
  resolve_cupti(RTLD_DEFAULT, &cupti->linked);
  resolve_cupti(handle, &cupti->direct);
  fake_workload::FakeCudaApi api;
  resolve(handle, "fakecuda_init", &api.init);
  resolve(handle, "fakecuda_launch_kernel", &api.launch_kernel);
  resolve(handle, "fakecuda_driver_launch_kernel", &api.driver_launch_kernel);
  resolve(handle, "fakecuda_memcpy", &api.memcpy);
  resolve(handle, "fakecuda_memset", &api.memset);
  resolve(handle, "fakecuda_malloc", &api.malloc);
  resolve(handle, "fakecuda_free", &api.free);
  resolve(handle, "fakecuda_synchronize", &api.synchronize);
  resolve(handle, "fakecuda_graph_launch", &api.graph_launch);
  resolve(handle, "fakecuda_profiler_stop", &api.profiler_stop);
  resolve(handle, "fakecuda_profiler_start", &api.profiler_start);
  resolve(handle, "fakecuda_device_reset", &api.device_reset);
  resolve(handle, "fakecuda_set_dropped", &api.set_dropped);
  resolve(handle, "fakecuda_memcpy_peer", &api.memcpy_peer);
  resolve(handle, "fakecuda_api_call_named", &api.api_call_named);
  resolve(handle, "fakecuda_skip_correlation_ids", &api.skip_correlation_ids);
  resolve(handle, "fakecuda_unreadable_record", &api.unreadable_record);
  return api;
}

int usage(const char* message) {
  std::fprintf(stderr, "gpu_workload: %s\nusage: gpu_workload [--expect FILE] [--no-run] [--list] SCENARIO|SCRIPT ...\n",
               message);
  return 2;
}

struct Options {
  std::string expect_path;
  bool run = true;
  std::string names;
  std::string script;
};

// Returns an exit code >= 0 when the program should stop there.
int parse_args(int argc, char** argv, Options* options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--list") {
      for (const std::string& name : fake_workload::scenario_names()) std::printf("%s\n", name.c_str());
      return 0;
    }
    if (arg == "--no-run") {
      options->run = false;
    } else if (arg == "--expect") {
      if (++i >= argc) return usage("--expect needs a file");
      options->expect_path = argv[i];
    } else {
      const char* scenario = fake_workload::scenario_script(arg);
      if (scenario == nullptr && arg.find(':') == std::string::npos && arg.find('{') == std::string::npos) {
        return usage(("unknown scenario " + arg).c_str());
      }
      options->names += (options->names.empty() ? "" : "+") + (scenario != nullptr ? arg : std::string("script"));
      options->script += (options->script.empty() ? "" : " ; ") + std::string(scenario != nullptr ? scenario : arg);
    }
  }
  if (options->script.empty()) return usage("nothing to run");
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (const int code = parse_args(argc, argv, &options); code >= 0) return code;
  try {
    const fake_workload::Script script = fake_workload::Script::parse(options.script);
    if (!options.expect_path.empty()) {
      nlohmann::json expect = script.expectations();
      expect["scenario"] = options.names;
      std::ofstream out(options.expect_path);
      out << expect.dump(2) << "\n";
      if (!out) return usage(("cannot write " + options.expect_path).c_str());
    }
    if (!options.run) return 0;
    fake_workload::CuptiApi cupti;
    const fake_workload::FakeCudaApi api = load_fake_cuda(&cupti);
    api.init();
    const fake_workload::RangeHooks hooks{[](const std::string& name) { nvtxRangePushA(name.c_str()); },
                                          [] { nvtxRangePop(); }};
    if (!script.run(api, hooks, cupti)) return 1;
  } catch (const std::exception& error) {
    return usage(error.what());
  }
  return 0;
}
