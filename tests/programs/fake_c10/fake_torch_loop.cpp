// Training-like steps over the stand-in libc10 and libc10_cuda (fake_c10.cpp,
// fake_c10_cuda.cpp), for --profile-memory without torch.
//
//   fake_torch_loop STEPS CPU_BYTES CUDA_BYTES KEEP_CUDA
//
// Each step is an NVTX range "ProfilerStep#k" holding a range "forward", in which
// c10::alloc_cpu gives CPU_BYTES that c10::free_cpu takes back at the step's end and
// the caching allocator gives CUDA_BYTES (rounded up to 512) that are freed at the end
// too, unless KEEP_CUDA is 1: then every step's block is kept (a leak). Prints the
// reports libc10's own reportMemoryUsageToProfiler received and their byte sum.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nvtx3/nvToolsExt.h>

namespace c10 {
void* alloc_cpu(size_t nbytes);
void free_cpu(void* data);
}  // namespace c10

extern "C" void* fake_cuda_malloc(size_t bytes);
extern "C" void fake_cuda_free(void* ptr);
extern "C" long fake_c10_reports(long* bytes);

int main(int argc, char** argv) {
  nvtxInitialize(nullptr);
  const int steps = argc > 1 ? atoi(argv[1]) : 10;
  const size_t cpu = argc > 2 ? strtoull(argv[2], nullptr, 10) : 4096;
  const size_t cuda = argc > 3 ? strtoull(argv[3], nullptr, 10) : 1 << 20;
  const bool keep = argc > 4 && atoi(argv[4]) == 1;
  std::vector<void*> kept;
  for (int k = 0; k < steps; ++k) {
    const std::string name = "ProfilerStep#" + std::to_string(k);
    nvtxRangePushA(name.c_str());
    nvtxRangePushA("forward");
    void* host = c10::alloc_cpu(cpu);
    void* dev = fake_cuda_malloc(cuda);
    nvtxRangePop();
    c10::free_cpu(host);
    if (keep) {
      kept.push_back(dev);
    } else {
      fake_cuda_free(dev);
    }
    nvtxRangePop();
  }
  for (void* p : kept) fake_cuda_free(p);
  long bytes = 0;
  const long reports = fake_c10_reports(&bytes);
  printf("reports %ld bytes %ld\n", reports, bytes);
  return 0;
}
