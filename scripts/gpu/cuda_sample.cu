// Known GPU work for checking torchprof on a real device: two long kernels (>= 1 ms,
// back to back on one stream) beside a saxpy on another stream, pinned HtoD/DtoH copies of known sizes and cudaMalloc/cudaFree, inside
// NVTX ranges with one ProfilerStep#k per iteration. Each kernel and copy is also
// timed here with CUDA events and written as JSON, the reference compare.py uses.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace {

#define CHECK_CUDA(call)                                                                 \
  do {                                                                                   \
    cudaError_t err_ = (call);                                                           \
    if (err_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "cuda_sample: %s failed: %s\n", #call, cudaGetErrorString(err_)); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

// Names as torchprof displays them (demangled) and as Kineto names copies.
constexpr const char* kBusyName = "busy_kernel(long long)";
constexpr const char* kSaxpyName = "saxpy(int, float, float const*, float*)";
constexpr const char* kHtoDName = "Memcpy HtoD (Pinned -> Device)";
constexpr const char* kDtoHName = "Memcpy DtoH (Device -> Pinned)";

struct Options {
  int iters = 10;
  long long spin_cycles = 3000000;  // about 1.5 ms at ~2 GHz
  int n = 1 << 24;                  // saxpy elements; copies move n floats
  int grid_scale = 1;               // the kernels' grids times this (more waves, longer kernels)
  std::string out;
};

struct Timed {
  std::string name;
  std::string kind;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
};

struct Total {
  std::string kind;
  long long count = 0;
  double total_ns = 0;
};

}  // namespace

__global__ void busy_kernel(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

__global__ void saxpy(int n, float a, const float* x, float* y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}

namespace {

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--iters" && v) {
      o.iters = std::atoi(v), ++i;
    } else if (a == "--spin-cycles" && v) {
      o.spin_cycles = std::atoll(v), ++i;
    } else if (a == "--n" && v) {
      o.n = std::atoi(v), ++i;
    } else if (a == "--grid-scale" && v) {
      o.grid_scale = std::max(1, std::atoi(v)), ++i;
    } else if (a == "--out" && v) {
      o.out = v, ++i;
    } else {
      std::fprintf(stderr, "usage: cuda_sample [--iters N] [--spin-cycles C] [--n ELEMS] [--grid-scale K] [--out REF.json]\n");
      std::exit(2);
    }
  }
  return o;
}

Timed& begin(std::vector<Timed>& timed, const char* name, const char* kind, cudaStream_t s) {
  Timed& t = timed.emplace_back();
  t.name = name;
  t.kind = kind;
  CHECK_CUDA(cudaEventCreate(&t.start));
  CHECK_CUDA(cudaEventCreate(&t.stop));
  CHECK_CUDA(cudaEventRecord(t.start, s));
  return t;
}

// Merged length of [start, end) intervals (ms): the GPU busy time of the kernels.
double merged_ms(std::vector<std::pair<float, float>> iv) {
  std::sort(iv.begin(), iv.end());
  double total = 0;
  float cur_start = 0, cur_end = -1;
  for (const auto& [s, e] : iv) {
    if (s > cur_end) {
      if (cur_end > cur_start) total += cur_end - cur_start;
      cur_start = s;
      cur_end = e;
    } else {
      cur_end = std::max(cur_end, e);
    }
  }
  if (cur_end > cur_start) total += cur_end - cur_start;
  return total;
}

struct Buffers {
  float* host = nullptr;
  float* x = nullptr;
  float* y = nullptr;
  size_t bytes = 0;
};

// One iteration; returns the kernels' merged busy time in ms.
double iteration(const Options& o, int k, Buffers& b, cudaStream_t s0, cudaStream_t s1,
                 std::map<std::string, Total>& totals) {
  std::vector<Timed> timed;
  cudaEvent_t base;
  CHECK_CUDA(cudaEventCreate(&base));
  std::string step = "ProfilerStep#" + std::to_string(k);
  nvtxRangePushA(step.c_str());
  CHECK_CUDA(cudaEventRecord(base, s0));
  CHECK_CUDA(cudaStreamWaitEvent(s1, base, 0));

  nvtxRangePushA("alloc_scratch");
  void* scratch = nullptr;
  CHECK_CUDA(cudaMalloc(&scratch, 1 << 20));
  nvtxRangePop();

  nvtxRangePushA("h2d");
  Timed& h2d = begin(timed, kHtoDName, "memcpy", s0);
  CHECK_CUDA(cudaMemcpyAsync(b.x, b.host, b.bytes, cudaMemcpyHostToDevice, s0));
  CHECK_CUDA(cudaEventRecord(h2d.stop, s0));
  nvtxRangePop();

  nvtxRangePushA("compute");
  for (int i = 0; i < 2; ++i) {
    Timed& busy = begin(timed, kBusyName, "kernel", s1);
    // One wave of blocks that all spin as long: on an H200 (132 SMs) as long as one thread;
    // on tests/fake_cupti's drop-in runtime (10 us + 10 ns per thread) 2.6 ms, long too.
    busy_kernel<<<256 * o.grid_scale, 1024, 0, s1>>>(o.spin_cycles);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaEventRecord(busy.stop, s1));
  }
  Timed& sx = begin(timed, kSaxpyName, "kernel", s0);
  saxpy<<<1024 * o.grid_scale, 256, 0, s0>>>(o.n, 2.0f, b.x, b.y);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaEventRecord(sx.stop, s0));
  nvtxRangePop();

  nvtxRangePushA("d2h");
  Timed& d2h = begin(timed, kDtoHName, "memcpy", s0);
  CHECK_CUDA(cudaMemcpyAsync(b.host, b.y, b.bytes, cudaMemcpyDeviceToHost, s0));
  CHECK_CUDA(cudaEventRecord(d2h.stop, s0));
  nvtxRangePop();

  nvtxRangePushA("sync");
  CHECK_CUDA(cudaStreamSynchronize(s0));
  CHECK_CUDA(cudaStreamSynchronize(s1));
  nvtxRangePop();
  CHECK_CUDA(cudaFree(scratch));
  nvtxRangePop();

  std::vector<std::pair<float, float>> kernels;
  for (Timed& t : timed) {
    float ms = 0, from = 0, to = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, t.start, t.stop));
    CHECK_CUDA(cudaEventElapsedTime(&from, base, t.start));
    CHECK_CUDA(cudaEventElapsedTime(&to, base, t.stop));
    Total& tot = totals[t.name];
    tot.kind = t.kind;
    ++tot.count;
    tot.total_ns += ms * 1e6;
    if (t.kind == "kernel") kernels.emplace_back(from, to);
    CHECK_CUDA(cudaEventDestroy(t.start));
    CHECK_CUDA(cudaEventDestroy(t.stop));
  }
  CHECK_CUDA(cudaEventDestroy(base));
  return merged_ms(kernels);
}

void write_json(const Options& o, const std::map<std::string, Total>& totals, double busy_ms, long long wall_ns,
                int devices) {
  std::FILE* f = std::fopen(o.out.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "cuda_sample: cannot write %s\n", o.out.c_str());
    std::exit(1);
  }
  std::fprintf(f, "{\n  \"tool\": \"cuda_sample\",\n  \"devices\": %d,\n  \"iters\": %d,\n", devices, o.iters);
  std::fprintf(f, "  \"wall_ns\": %lld,\n  \"busy_ns\": %.0f,\n  \"gpu_ops\": {\n", wall_ns, busy_ms * 1e6);
  size_t i = 0;
  for (const auto& [name, t] : totals) {
    std::fprintf(f, "    \"%s\": {\"kind\": \"%s\", \"count\": %lld, \"total_ns\": %.0f}%s\n", name.c_str(),
                 t.kind.c_str(), t.count, t.total_ns, ++i < totals.size() ? "," : "");
  }
  std::fprintf(f, "  }\n}\n");
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  auto t0 = std::chrono::steady_clock::now();
  int devices = 0;  // the device's name is in nvidia-smi's part of the report
  CHECK_CUDA(cudaGetDeviceCount(&devices));
  cudaStream_t s0, s1;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  CHECK_CUDA(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  Buffers b;
  b.bytes = static_cast<size_t>(o.n) * sizeof(float);
  CHECK_CUDA(cudaMallocHost(reinterpret_cast<void**>(&b.host), b.bytes));  // the C form: the template calls cudaHostAlloc
  for (int i = 0; i < o.n; ++i) b.host[i] = static_cast<float>(i % 97);
  CHECK_CUDA(cudaMalloc(&b.x, b.bytes));
  CHECK_CUDA(cudaMalloc(&b.y, b.bytes));
  CHECK_CUDA(cudaDeviceSynchronize());

  std::map<std::string, Total> totals;
  double busy_ms = 0;
  for (int k = 0; k < o.iters; ++k) busy_ms += iteration(o, k, b, s0, s1, totals);

  CHECK_CUDA(cudaFree(b.x));
  CHECK_CUDA(cudaFree(b.y));
  CHECK_CUDA(cudaFreeHost(b.host));
  CHECK_CUDA(cudaStreamDestroy(s0));
  CHECK_CUDA(cudaStreamDestroy(s1));
  long long wall_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  std::printf("cuda_sample: %d iterations on %d devices, wall %.3f ms\n", o.iters, devices, wall_ns / 1e6);
  if (!o.out.empty()) write_json(o, totals, busy_ms, wall_ns, devices);
  return 0;
}
