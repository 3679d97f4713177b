// Cost of the CUDA API callbacks: times N fake cudaLaunchKernel calls through
// the fake libcupti (argv[1]) and prints ns per call. Run it under the
// injected library with TORCHPROF_TRACE=gpu (no API callbacks) and with
// TORCHPROF_TRACE=cuda,gpu: the difference is what one recorded runtime call
// (ENTER + EXIT callbacks and its record) adds.
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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: cupti_bench LIBFAKE_CUPTI [N]\n");
    return 2;
  }
  void* fake = dlopen(argv[1], RTLD_NOW);
  if (fake == nullptr) return 2;
  using InitFn = int (*)();
  using LaunchFn = uint32_t (*)(const char*, uint64_t, uint32_t, const void*);
  auto init = reinterpret_cast<InitFn>(dlsym(fake, "fakecuda_init"));
  auto launch = reinterpret_cast<LaunchFn>(dlsym(fake, "fakecuda_launch_kernel"));
  if (init == nullptr || launch == nullptr) return 2;
  init();
  const long n = argc > 2 ? std::atol(argv[2]) : 200000;
  for (int i = 0; i < 1000; ++i) launch("_Z4warmv", 1, 7, nullptr);
  uint64_t t0 = now();
  for (long i = 0; i < n; ++i) launch("_Z5benchv", 1, static_cast<uint32_t>(i & 7), nullptr);
  uint64_t t1 = now();
  std::printf("%.1f ns per launch\n", static_cast<double>(t1 - t0) / static_cast<double>(n));
  return 0;
}
