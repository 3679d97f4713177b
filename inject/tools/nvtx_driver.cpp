// Drives libtorchprof_inject.so through the real NVTX v3 headers (which dlopen
// NVTX_INJECTION64_PATH): every filled entry point, threads, fork, exec, exits,
// crashes, and the push/pop benchmark. Run under mini_collector.py (check_inject.py
// runs the scenarios and asserts on the results).
#include <nvtx3/nvToolsExt.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

namespace {

void exercise_all() {
  nvtxNameOsThreadA(static_cast<uint32_t>(gettid()), "driver-main");
  nvtxNameCategoryA(7, "io");
  nvtxMarkA("mark_a");
  nvtxMarkW(L"mark_w_\u00e9\u4e2d");
  nvtxRangePushA("outer");
  nvtxRangePushW(L"inner_w");
  nvtxRangePop();
  nvtxRangePop();
  nvtxDomainHandle_t dom = nvtxDomainCreateA("my_domain");
  nvtxStringHandle_t reg = nvtxDomainRegisterStringA(dom, "registered_name");
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.category = 7;
  a.payloadType = NVTX_PAYLOAD_TYPE_DOUBLE;
  a.payload.dValue = 2.5;
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = reg;
  nvtxDomainRangePushEx(dom, &a);
  nvtxDomainRangePop(dom);
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = "ex_ascii";
  a.payloadType = NVTX_PAYLOAD_TYPE_INT32;
  a.payload.iValue = -3;
  nvtxRangePushEx(&a);
  nvtxRangePop();
  nvtxDomainMarkEx(dom, &a);
  nvtxRangeId_t id = nvtxRangeStartA("cross_thread");
  std::thread t([id] {
    nvtxRangePushA("worker_op");
    nvtxRangePop();
    nvtxRangeEnd(id);
  });
  t.join();
  int level0 = nvtxRangePushA("level0");
  int level1 = nvtxRangePushA("level1");
  int pop1 = nvtxRangePop();
  int pop0 = nvtxRangePop();
  int empty = nvtxRangePop();
  printf("levels %d %d pops %d %d empty %d\n", level0, level1, pop1, pop0, empty);
}

// The floor of any recorded pair: two clock reads.
double clock_floor(long n) {
  timespec ts;
  volatile uint64_t sink = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) {
    clock_gettime(CLOCK_MONOTONIC, &ts);
    sink = sink + static_cast<uint64_t>(ts.tv_nsec);
  }
  auto t1 = std::chrono::steady_clock::now();
  return 2 * std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(n);
}

double thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// Wall time per pair, and this thread's CPU time per pair (what the hot path
// costs the program even when the flusher and collector compete for the cores).
double bench(long n, double* cpu_per_pair) {
  nvtxRangePushA("warmup");
  nvtxRangePop();
  double c0 = thread_cpu_ns();
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) {
    nvtxRangePushA("bench::op");
    nvtxRangePop();
  }
  auto t1 = std::chrono::steady_clock::now();
  *cpu_per_pair = (thread_cpu_ns() - c0) / static_cast<double>(n);
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(n);
}

void threads(int count, long n) {
  std::vector<std::thread> ts;
  for (int k = 0; k < count; ++k) {
    ts.emplace_back([k, n] {
      char name[32];
      for (long i = 0; i < n; ++i) {
        snprintf(name, sizeof(name), "t%d_op%ld", k, i % 8);
        nvtxRangePushA(name);
        nvtxRangePop();
      }
    });
  }
  for (auto& t : ts) t.join();
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "all";
  long n = argc > 2 ? atol(argv[2]) : 1000000;
  if (mode == "all") {
    exercise_all();
  } else if (mode == "bench") {
    double floor_before = clock_floor(n);
    double cpu = 0;
    double pair = bench(n, &cpu);
    double floor_after = clock_floor(n);
    printf("ns_per_pair %.2f cpu_ns_per_pair %.2f two_clock_reads_ns %.2f\n", pair, cpu,
           (floor_before + floor_after) / 2);
  } else if (mode == "threads") {
    threads(4, n);
  } else if (mode == "fork") {
    nvtxDomainHandle_t dom = nvtxDomainCreateA("forked_domain");
    nvtxRangePushA("parent");
    pid_t pid = fork();
    if (pid == 0) {
      nvtxEventAttributes_t a{};
      a.version = NVTX_VERSION;
      a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
      a.messageType = NVTX_MESSAGE_TYPE_ASCII;
      a.message.ascii = "child";
      nvtxDomainRangePushEx(dom, &a);
      nvtxDomainRangePop(dom);
      exit(5);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    nvtxRangePop();
    printf("child exit %d\n", WEXITSTATUS(status));
  } else if (mode == "crash") {
    nvtxRangePushA("before_crash");
    volatile int* p = nullptr;
    *p = 1;
  } else if (mode == "abort") {
    nvtxRangePushA("before_abort");
    abort();
  } else if (mode == "exit") {
    nvtxMarkA("exiting");
    exit(static_cast<int>(n));
  } else if (mode == "return") {
    nvtxMarkA("returning");
    return static_cast<int>(n);
  } else if (mode == "_exit") {
    nvtxMarkA("underscore_exit");
    _exit(static_cast<int>(n));
  } else if (mode == "exec") {
    nvtxMarkA("pre_exec");
    char* const env[] = {const_cast<char*>("SCRUBBED=1"), nullptr};
    execle(argv[0], argv[0], "exit", "9", static_cast<char*>(nullptr), env);
    perror("execle");
    return 1;
  } else if (mode == "sleep_term") {
    nvtxMarkA("waiting_for_term");
    pause();
  }
  return 0;
}
