// T threads, each naming itself "worker-<k>" and doing R push/pop ranges.
//
//   nvtx_threads [THREADS=4] [RANGES=5000] [RANGE_US=0]
//
// Range "work" is pushed THREADS*RANGES times in all; each thread also does one
// enclosing "thread_main" range. The main thread names itself "main-thread" and does
// one "spawn" range around starting the workers.
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <nvtx3/nvToolsExt.h>

#include "busy.h"

namespace {

uint32_t os_tid() { return static_cast<uint32_t>(syscall(SYS_gettid)); }

void worker(int index, int ranges, double range_us) {
  const std::string name = "worker-" + std::to_string(index);
  pthread_setname_np(pthread_self(), name.c_str());
  nvtxNameOsThreadA(os_tid(), name.c_str());
  nvtxRangePushA("thread_main");
  for (int i = 0; i < ranges; ++i) {
    nvtxRangePushA("work");
    if (range_us > 0) tp_busy_us(range_us);
    nvtxRangePop();
  }
  nvtxRangePop();
}

}  // namespace

int main(int argc, char** argv) {
  nvtxInitialize(nullptr);  // loads the tool now, not inside the first timed range
  const int threads = static_cast<int>(tp_arg(argc, argv, 1, 4));
  const int ranges = static_cast<int>(tp_arg(argc, argv, 2, 5000));
  const double range_us = tp_arg(argc, argv, 3, 0);

  nvtxNameOsThreadA(os_tid(), "main-thread");
  std::vector<std::thread> pool;
  nvtxRangePushA("spawn");
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker, t, ranges, range_us);
  nvtxRangePop();
  for (auto& th : pool) th.join();
  std::printf("nvtx_threads: %d threads x %d ranges\n", threads, ranges);
  return 0;
}
