// Cost of the CUDA API callbacks per kernel launch, through the fake libcupti
// (argv[1]). A framework's launch is not one API call: torch asks for the current
// device, the last error and the stream's capture state around each one. Each
// "launch" here is CHATTER such calls (cudaGetDevice, cudaGetLastError,
// cudaStreamGetCaptureInfo, cuCtxGetCurrent in turn) and one cudaLaunchKernel
// (which makes its own driver calls inside, as in CUDA). Prints ns per launch.
//
//   cupti_bench LIBFAKE_CUPTI [LAUNCHES] [CHATTER]     (defaults 200000, 4)
//
// inject/tools/cupti_bench.sh runs it without torchprof and under torchprof-run
// with TORCHPROF_TRACE=gpu (no API callbacks) and cuda,gpu, alternating.
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <dlfcn.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

uint64_t now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

using InitFn = int (*)();
using LaunchFn = uint32_t (*)(const char*, uint64_t, uint32_t, const void*);
using CallFn = uint32_t (*)(int, uint32_t, const char*);
using SyncFn = uint32_t (*)(int64_t);

struct Chatter {
  int driver;
  uint32_t cbid;
  const char* name;
};
constexpr Chatter kChatter[] = {
    {0, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, "cudaGetDevice"},
    {0, CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020, "cudaGetLastError"},
    {0, CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v10010, "cudaStreamGetCaptureInfo"},
    {1, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, "cuCtxGetCurrent"}};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: cupti_bench LIBFAKE_CUPTI [LAUNCHES] [CHATTER]\n");
    return 2;
  }
  void* fake = dlopen(argv[1], RTLD_NOW);
  if (fake == nullptr) return 2;
  auto init = reinterpret_cast<InitFn>(dlsym(fake, "fakecuda_init"));
  auto launch = reinterpret_cast<LaunchFn>(dlsym(fake, "fakecuda_launch_kernel"));
  auto call = reinterpret_cast<CallFn>(dlsym(fake, "fakecuda_api_call"));
  auto sync = reinterpret_cast<SyncFn>(dlsym(fake, "fakecuda_synchronize"));
  if (init == nullptr || launch == nullptr || call == nullptr || sync == nullptr) return 2;
  init();
  const long n = argc > 2 ? std::atol(argv[2]) : 200000;
  const int chatter = argc > 3 ? std::atoi(argv[3]) : 4;
  for (int i = 0; i < 1000; ++i) launch("_Z4warmv", 1, 7, nullptr);
  sync(-1);
  const uint64_t t0 = now();
  for (long i = 0; i < n; ++i) {
    for (int c = 0; c < chatter; ++c) call(kChatter[c % 4].driver, kChatter[c % 4].cbid, kChatter[c % 4].name);
    launch("_Z5benchv", 1, static_cast<uint32_t>(i & 7), nullptr);
  }
  const uint64_t t1 = now();
  sync(-1);
  std::printf("%.1f ns per launch (%d other API calls each)\n",
              static_cast<double>(t1 - t0) / static_cast<double>(n), chatter);
  return 0;
}
