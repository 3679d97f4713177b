// The CUPTI cases scripts/gpu-check.sh runs on a real GPU, one per mode:
//   profiler-stop   8 kernels of ~20 ms queued, then cudaProfilerStop while they are
//                   still queued, then a synchronize
//   no-sync-exit    8 kernels of ~20 ms queued, then return from main: CUDA is torn down
//                   with work in flight
//   sigkill         a kernel of ~5 ms every ~25 ms for ever; prints "ready" after 20 and
//                   keeps the count it has launched and finished in --out (the check
//                   SIGKILLs it)
// --out FILE gets JSON: {"mode", "kernel", "launched", "each_ns"} (each_ns timed with
// CUDA events before the case itself runs).
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

#define CHECK_CUDA(call)                                                                     \
  do {                                                                                       \
    cudaError_t err_ = (call);                                                               \
    if (err_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "cupti_cases: %s failed: %s\n", #call, cudaGetErrorString(err_)); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

constexpr const char* kKernelName = "spin_kernel(long long)";

void write_out(const std::string& path, const char* mode, long launched, double each_ns) {
  if (path.empty()) return;
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return;
  std::fprintf(f, "{\"mode\": \"%s\", \"kernel\": \"%s\", \"launched\": %ld, \"each_ns\": %.0f}\n", mode,
               kKernelName, launched, each_ns);
  std::fclose(f);
  std::rename(tmp.c_str(), path.c_str());  // a SIGKILL never leaves half a file
}

}  // namespace

__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

namespace {

// Cycles for about `ms` milliseconds, and the time one such kernel takes.
long long calibrate(double ms, double* each_ns) {
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  long long cycles = 1000000;
  float got = 0;
  for (int i = 0; i < 4; ++i) {
    CHECK_CUDA(cudaEventRecord(a));
    spin_kernel<<<1, 1>>>(cycles);
    CHECK_CUDA(cudaEventRecord(b));
    CHECK_CUDA(cudaEventSynchronize(b));
    CHECK_CUDA(cudaEventElapsedTime(&got, a, b));
    if (got > 0) cycles = static_cast<long long>(cycles * ms / got);
  }
  CHECK_CUDA(cudaEventRecord(a));
  spin_kernel<<<1, 1>>>(cycles);
  CHECK_CUDA(cudaEventRecord(b));
  CHECK_CUDA(cudaEventSynchronize(b));
  CHECK_CUDA(cudaEventElapsedTime(&got, a, b));
  *each_ns = got * 1e6;
  return cycles;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: cupti_cases profiler-stop|no-sync-exit|sigkill [--out FILE]\n");
    return 2;
  }
  const std::string mode = argv[1];
  std::string out;
  for (int i = 2; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--out") == 0) out = argv[i + 1];
  }
  CHECK_CUDA(cudaFree(nullptr));
  double each_ns = 0;
  const long long cycles = calibrate(mode == "sigkill" ? 5.0 : 20.0, &each_ns);
  const long calibration_kernels = 5;  // launched by calibrate(): counted too
  if (mode == "profiler-stop" || mode == "no-sync-exit") {
    for (int i = 0; i < 8; ++i) spin_kernel<<<1, 1>>>(cycles);
    write_out(out, mode.c_str(), calibration_kernels + 8, each_ns);
    if (mode == "no-sync-exit") return 0;  // eight kernels still queued
    CHECK_CUDA(cudaProfilerStop());
    CHECK_CUDA(cudaDeviceSynchronize());
    return 0;
  }
  if (mode == "sigkill") {
    for (long n = 1;; ++n) {
      spin_kernel<<<1, 1>>>(cycles);
      CHECK_CUDA(cudaDeviceSynchronize());
      write_out(out, "sigkill", calibration_kernels + n, each_ns);
      if (n == 20) {
        std::printf("ready pid=%d\n", static_cast<int>(getpid()));
        std::fflush(stdout);
      }
      usleep(20000);
    }
  }
  std::fprintf(stderr, "cupti_cases: unknown mode %s\n", mode.c_str());
  return 2;
}
