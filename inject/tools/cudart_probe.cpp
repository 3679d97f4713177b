// A program linked against the real libcudart, for machines with or without a
// driver: NVTX ranges around cudaGetDeviceCount, then exit code 3, so a test
// can see that the program's own exit code and NVTX survive the injection
// (without a driver, cuInit fails and InitializeInjection is never called).
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>

int main() {
  nvtxRangePushA("cudart_outer");
  int count = -1;
  nvtxRangePushA("cudart_inner");
  cudaError_t rc = cudaGetDeviceCount(&count);
  nvtxRangePop();
  nvtxRangePop();
  std::printf("cudaGetDeviceCount: %s, %d device(s)\n", cudaGetErrorName(rc), rc == cudaSuccess ? count : 0);
  return 3;
}
