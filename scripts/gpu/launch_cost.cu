// The host's cost of a kernel launch as a framework makes it, for scripts/gpu-check.sh's
// launch_cost case: each launch is four runtime calls (cudaGetDevice, cudaGetLastError,
// cudaGetDeviceCount, cudaPeekAtLastError; the first two are on Kineto's blocklist and not
// recorded, the other two are) and one <<<>>> launch of an empty kernel. Launches go in batches of 256 with a synchronize after each, outside the timed
// part, so the GPU's queue never fills and only the host's time is measured. A warm-up
// batch of the same shape comes first (its launches are counted in `launched`).
//
//   launch_cost [LAUNCHES=100000]
//
// Prints one line:
//   launch_cost ns_per_launch=X launched=N
// (launched includes the warm-up; each of the four calls is made once per launch)
// and exits 1 on a CUDA error.
#include <cuda_runtime.h>

#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

__global__ void empty_kernel() {}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

constexpr long kBatch = 256;

// One batch of `n` launches; false on a CUDA error.
bool batch(long n) {
  int device = 0;
  int count = 0;
  for (long i = 0; i < n; ++i) {
    cudaGetDevice(&device);
    cudaGetLastError();
    cudaGetDeviceCount(&count);
    cudaPeekAtLastError();
    empty_kernel<<<1, 1>>>();
  }
  return cudaGetLastError() == cudaSuccess;
}

}  // namespace

int main(int argc, char** argv) {
  const long launches = argc > 1 ? std::atol(argv[1]) : 100000;
  if (launches <= 0) {
    std::fprintf(stderr, "usage: launch_cost [LAUNCHES>0]\n");
    return 2;
  }
  if (!batch(kBatch) || cudaDeviceSynchronize() != cudaSuccess) {
    std::fprintf(stderr, "launch_cost: the warm-up batch failed\n");
    return 1;
  }
  uint64_t timed = 0;
  for (long done = 0; done < launches; done += kBatch) {
    const long n = launches - done < kBatch ? launches - done : kBatch;
    const uint64_t t0 = now_ns();
    const bool ok = batch(n);
    timed += now_ns() - t0;
    if (!ok || cudaDeviceSynchronize() != cudaSuccess) {
      std::fprintf(stderr, "launch_cost: a CUDA call failed after %ld launches\n", done);
      return 1;
    }
  }
  std::printf("launch_cost ns_per_launch=%.1f launched=%ld\n", static_cast<double>(timed) / static_cast<double>(launches),
              launches + kBatch);
  return 0;
}
