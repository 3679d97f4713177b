// What torchprof's op observer (inject/torch_observer.cpp) costs per op, without torch:
// this program stands in for libtorch's RecordFunction API (it exports the five
// functions the observer looks up with dlsym, and lays its RecordFunction out as torch
// 1.13 does), registers the observer through the injected library as the Python
// bootstrap would, and calls its start and end callbacks in a loop, as torch calls them
// around each op. What torch itself does per op (RecordFunction's constructor, the
// callback list, the handle) is left out: only the callbacks are timed.
//
//   observer_pairs [OPS=2000000] [MODE=record] [WORK=500]
//
// MODE: none (no callback: the loop alone), floor (the observer's do-nothing callbacks,
// kObserverFloor), record (the observer's recording callbacks, kObserverRecord: run it
// under torchprof-run). Names rotate over torch op names at fixed addresses, as an
// operator's schema name is, and one op in four is named from a buffer that holds
// another autograd node's name at each call, as the std::string of a backward node is.
// Between two ops the loop does WORK steps of arithmetic (about 0.4 ns each here), so
// that ops come at the rate of a real program's (a small op takes a microsecond or more
// in torch) and the flusher keeps up, as it does there; WORK=0 floods the buffers.
//
// Prints `op_ns` (the loop thread's CPU time per op: begin and end), `page_faults` (the
// loop thread's minor faults in the timed loop), `clock_ns` (one
// clock_gettime(CLOCK_MONOTONIC) on this machine, which each recorded begin and end
// reads once unless the TSC is used) and `ops`.
#include <dlfcn.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "bench_util.h"

namespace {

// torch 1.13's RecordFunctionCallback (40 bytes, passed by value) and the fields of
// its RecordFunction that the observer reads (offsets from torch_observer.cpp's table).
struct Callback {
  unsigned char bytes[40];
};
constexpr size_t kThreadOffset = 88;
constexpr size_t kScopeOffset = 96;
constexpr size_t kNameOffset = 120;  // this stand-in's own: where name() finds the name
constexpr size_t kSequenceOffset = 200;
constexpr size_t kFwdThreadOffset = 248;
constexpr size_t kHandleOffset = 256;
constexpr size_t kRecordFunctionSize = 288;

// std::unique_ptr<ObserverContext> as returned by a start callback: through a hidden
// pointer, since it has a destructor.
struct Context {
  void* p = nullptr;
  ~Context() {}
};
using StartFn = Context (*)(const void*);
using EndFn = void (*)(const void*, void*);

StartFn g_start = nullptr;
EndFn g_end = nullptr;

}  // namespace

// libtorch's functions, found by the observer with dlsym(RTLD_DEFAULT, ...).
extern "C" {
uint64_t tp_bench_add_global_callback(Callback cb) __asm__("_ZN2at17addGlobalCallbackENS_22RecordFunctionCallbackE");
uint64_t tp_bench_add_global_callback(Callback cb) {
  memcpy(&g_start, cb.bytes + 0, sizeof g_start);
  memcpy(&g_end, cb.bytes + 8, sizeof g_end);
  return 1;
}
void tp_bench_remove_callback(uint64_t) __asm__("_ZN2at14removeCallbackEm");
void tp_bench_remove_callback(uint64_t) { g_start = nullptr; }
void tp_bench_disable_callback(uint64_t) __asm__("_ZN2at15disableCallbackEm");
void tp_bench_disable_callback(uint64_t) {}
void tp_bench_reenable_callback(uint64_t) __asm__("_ZN2at16reenableCallbackEm");
void tp_bench_reenable_callback(uint64_t) {}
const char* tp_bench_name(const void* rf) __asm__("_ZNK2at14RecordFunction4nameEv");
const char* tp_bench_name(const void* rf) {
  const char* name;
  memcpy(&name, static_cast<const char*>(rf) + kNameOffset, sizeof name);
  return name;
}
}

namespace {

const char* const kOpNames[] = {"aten::linear", "aten::t", "aten::transpose", "aten::as_strided",
                                "aten::addmm", "aten::expand", "aten::copy_", "aten::relu",
                                "aten::clamp_min", "aten::sub", "aten::pow", "aten::mean",
                                "aten::sum", "aten::add_", "aten::zero_", "aten::mm"};
const char* const kNodeNames[] = {"autograd::engine::evaluate_function: AddmmBackward0", "AddmmBackward0",
                                  "autograd::engine::evaluate_function: TBackward0", "TBackward0",
                                  "torch::autograd::AccumulateGrad", "ReluBackward0"};

template <typename T>
void put(unsigned char* rf, size_t offset, T value) {
  memcpy(rf + offset, &value, sizeof value);
}

double clock_read_ns() {
  constexpr int kReads = 1000000;
  volatile int64_t sink = 0;
  const int64_t t0 = bench_thread_cpu_ns();
  for (int i = 0; i < kReads; ++i) sink = sink + bench_now_ns();
  return static_cast<double>(bench_thread_cpu_ns() - t0) / kReads;
}

}  // namespace

int main(int argc, char** argv) {
  const long ops = static_cast<long>(bench_arg(argc, argv, 1, 2000000));
  const char* mode = argc > 2 ? argv[2] : "record";
  const auto work = static_cast<uint64_t>(bench_arg(argc, argv, 3, 500));
  const bool none = strcmp(mode, "none") == 0;
  const int observer_mode = strcmp(mode, "floor") == 0 ? 2 : strcmp(mode, "record") == 0 ? 0 : -1;
  if (ops < 1 || (!none && observer_mode < 0)) {
    fprintf(stderr, "usage: observer_pairs [OPS>0] [none|floor|record] [WORK>=0]\n");
    return 2;
  }
  if (!none) {
    using StartObserver = int (*)(const char*, int, char*, int);
    auto start = reinterpret_cast<StartObserver>(dlsym(RTLD_DEFAULT, "torchprof_torch_observer_start"));
    char why[256] = "";
    if (start == nullptr) {
      fprintf(stderr, "observer_pairs: no injected library (run it under torchprof-run, or LD_PRELOAD it)\n");
      return 2;
    }
    if (!start("1.13", observer_mode, why, sizeof why) || g_start == nullptr) {
      fprintf(stderr, "observer_pairs: the observer did not register: %s\n", why);
      return 2;
    }
  }
  alignas(64) unsigned char rf[kRecordFunctionSize] = {};
  put<uint64_t>(rf, kThreadOffset, 1);
  put<uint8_t>(rf, kScopeOffset, 0);
  char node[80];  // the heap block of a backward node's std::string, refilled at each call
  uint64_t handle = 0;
  uint64_t touched = 0;
  auto one_op = [&](long i) {
    touched += bench_work(work, static_cast<uint64_t>(i));
    const char* name;
    if ((i & 3) == 3) {
      const char* n = kNodeNames[(i >> 2) % (sizeof kNodeNames / sizeof kNodeNames[0])];
      strcpy(node, n);
      name = node;
    } else {
      name = kOpNames[i & 15];
    }
    put(rf, kNameOffset, name);
    put<int64_t>(rf, kSequenceOffset, i);
    put<uint64_t>(rf, kFwdThreadOffset, 0);
    put<uint64_t>(rf, kHandleOffset, ++handle);
    if (g_start != nullptr) {
      Context ctx = g_start(rf);
      g_end(rf, ctx.p);
    } else {
      touched += static_cast<unsigned char>(name[0]);
    }
  };
  for (long i = 0; i < 1000; ++i) one_op(i);  // the thread's buffer is made outside the timed loop
  rusage before{};
  getrusage(RUSAGE_THREAD, &before);
  const int64_t t0 = bench_thread_cpu_ns();
  for (long i = 0; i < ops; ++i) one_op(i);
  const double op_ns = static_cast<double>(bench_thread_cpu_ns() - t0) / static_cast<double>(ops);
  rusage after{};
  getrusage(RUSAGE_THREAD, &after);
  bench_figure("op_ns", op_ns, "ns/op");
  bench_figure("page_faults", static_cast<double>(after.ru_minflt - before.ru_minflt), "faults");
  bench_figure("clock_ns", clock_read_ns(), "ns/read");
  bench_figure("ops", static_cast<double>(ops + 1000), "ops");
  return touched == 1 ? 1 : 0;
}
