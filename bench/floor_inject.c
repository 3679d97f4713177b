// The floor for a recorded NVTX event: an injection library that does the least a
// profiler must, storing (timestamp, name pointer) per push and pop into a
// thread-local array. No names are copied, nothing is sent anywhere. Built twice:
// with clock_gettime(CLOCK_MONOTONIC) and, with FLOOR_RDTSC, with the raw TSC.
//
//   NVTX_INJECTION64_PATH=libfloor_inject_clock.so nvtx_pairs ...
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include <nvtx3/nvToolsExt.h>

#if defined(FLOOR_RDTSC) && (defined(__x86_64__) || defined(__i386__))
#include <x86intrin.h>
static inline uint64_t floor_now(void) { return __rdtsc(); }
#else
static inline uint64_t floor_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
#endif

typedef struct {
  uint64_t ts;
  const char* name;  // NULL for a pop
} FloorEvent;

// A fixed window that wraps: the stores are real, the memory stays bounded. Its size
// in events is FLOOR_EVENTS (a power of two, default 2^20: 16 MiB), so that a run can
// also give it room for every event, never reusing memory, as a profiler's buffer that
// holds a whole run does.
static uint32_t window_events(void) {
  const char* v = getenv("FLOOR_EVENTS");
  unsigned long n = v != NULL ? strtoul(v, NULL, 10) : 0;
  if (n < 1024 || n > (1ul << 30) || (n & (n - 1)) != 0) n = 1ul << 20;
  return (uint32_t)n;
}

static __thread FloorEvent* t_events;
static __thread uint32_t t_mask;
static __thread uint32_t t_next;
static __thread int t_depth;

static inline int floor_record(const char* name) {
  if (__builtin_expect(t_events == NULL, 0)) {
    const uint32_t n = window_events();
    t_events = (FloorEvent*)calloc(n, sizeof(FloorEvent));
    if (t_events == NULL) return -1;
    t_mask = n - 1;
  }
  FloorEvent* e = &t_events[t_next++ & t_mask];
  e->ts = floor_now();
  e->name = name;
  return 0;
}

static int floor_push_a(const char* message) {
  floor_record(message);
  return t_depth++;
}

static int floor_pop(void) {
  if (t_depth <= 0) return -1;
  floor_record(NULL);
  return --t_depth;
}

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  const NvtxExportTableCallbacks* cb = (const NvtxExportTableCallbacks*)get_export_table(NVTX_ETID_CALLBACKS);
  if (cb == NULL || cb->GetModuleFunctionTable == NULL) return 0;
  NvtxFunctionTable table = NULL;
  unsigned int size = 0;
  if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) == 0 || table == NULL) return 0;
  if (NVTX_CBID_CORE_RangePop >= size) return 0;
  *table[NVTX_CBID_CORE_RangePushA] = (NvtxFunctionPointer)floor_push_a;
  *table[NVTX_CBID_CORE_RangePop] = (NvtxFunctionPointer)floor_pop;
  return 1;
}
