// A CUDA program as nvcc 13 builds it: <<<>>> (__cudaLaunchKernel), cudaLaunchKernelExC,
// a captured graph, two streams ordered by an event, a second thread, nested NVTX
// ranges. Built with -cudart shared (and once more with --default-stream per-thread)
// by tests/CMakeLists.txt; tests/integration/test_nvcc.py runs it against the drop-in
// runtime of tests/fake_cupti and checks every kernel's attribution against the
// kernel-time rule of fake_cudart.cpp. Exit code 0 when every CUDA call succeeded.
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <thread>

__global__ void k_add(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}
__global__ void k_scale(float* x) { x[threadIdx.x] *= 2.0f; }

static int g_failures = 0;
static void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    ++g_failures;
  }
}

int main() {
  float* d = nullptr;
  check(cudaMalloc(&d, 1 << 20), "cudaMalloc");
  check(cudaMemset(d, 0, 1 << 20), "cudaMemset");

  nvtxRangePushA("chevrons");  // 3 x <<<4,256>>> + 2 x <<<1,32>>>
  for (int i = 0; i < 3; ++i) k_add<<<4, 256>>>(d, 1024);
  for (int i = 0; i < 2; ++i) k_scale<<<1, 32>>>(d);
  check(cudaGetLastError(), "chevrons");
  nvtxRangePop();

  nvtxRangePushA("launch_ex");  // 2 x cudaLaunchKernelExC, grid 2, block 128
  for (int i = 0; i < 2; ++i) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(2);
    config.blockDim = dim3(128);
    void* args[] = {&d};
    check(cudaLaunchKernelExC(&config, reinterpret_cast<const void*>(k_scale), args), "cudaLaunchKernelExC");
  }
  nvtxRangePop();

  cudaStream_t s1 = nullptr;
  cudaStream_t s2 = nullptr;
  check(cudaStreamCreate(&s1), "cudaStreamCreate");
  check(cudaStreamCreate(&s2), "cudaStreamCreate");

  // Captured outside any range: the kernels run (and count) at each launch of the graph.
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  check(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  k_add<<<1, 64, 0, s1>>>(d, 64);
  k_scale<<<1, 32, 0, s1>>>(d);
  k_add<<<2, 64, 0, s1>>>(d, 128);
  check(cudaStreamEndCapture(s1, &graph), "cudaStreamEndCapture");
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  nvtxRangePushA("graph");  // 2 launches of 3 kernels
  check(cudaGraphLaunch(exec, s1), "cudaGraphLaunch");
  check(cudaGraphLaunch(exec, s1), "cudaGraphLaunch");
  nvtxRangePop();
  check(cudaStreamSynchronize(s1), "cudaStreamSynchronize");

  nvtxRangePushA("streams");  // <<<8,128>>> on s1, then <<<1,128>>> on s2 after it
  cudaEvent_t done = nullptr;
  check(cudaEventCreate(&done), "cudaEventCreate");
  k_add<<<8, 128, 0, s1>>>(d, 1024);
  check(cudaEventRecord(done, s1), "cudaEventRecord");
  // Polled as PyTorch polls its events: the queries before the work ends synchronise nothing.
  int polls = 0;
  while (cudaEventQuery(done) == cudaErrorNotReady) ++polls;
  std::printf("cuda13_sample: event ready after %d polls\n", polls > 0 ? 1 : 0);
  check(cudaStreamWaitEvent(s2, done, 0), "cudaStreamWaitEvent");
  k_scale<<<1, 128, 0, s2>>>(d);
  check(cudaStreamSynchronize(s2), "cudaStreamSynchronize");
  nvtxRangePop();

  nvtxRangePushA("outer");  // <<<1,1>>> here and one in inner
  k_scale<<<1, 1>>>(d);
  nvtxRangePushA("inner");
  k_scale<<<1, 1>>>(d);
  nvtxRangePop();
  nvtxRangePop();

  std::thread worker([d] {  // 2 x <<<1,256>>> on a second thread
    nvtxRangePushA("worker");
    k_add<<<1, 256>>>(d, 256);
    k_add<<<1, 256>>>(d, 256);
    nvtxRangePop();
    cudaStreamSynchronize(nullptr);
  });
  worker.join();

  float host[4] = {};
  check(cudaMemcpy(host, d, sizeof host, cudaMemcpyDeviceToHost), "cudaMemcpy");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  cudaEventDestroy(done);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s1);
  cudaStreamDestroy(s2);
  check(cudaFree(d), "cudaFree");
  std::printf("cuda13_sample: %d failures\n", g_failures);
  return g_failures == 0 ? 0 : 1;
}
