// Ground truth for the timing checks: each program notes, with its own clock, when it
// entered and left every range, and writes the list at exit to
// $TP_TRUTH_FILE.<pid> ("kind tid start_ns end_ns name" per line; kind p = push/pop,
// s = start/end). The tests compare torchprof's numbers with these rather than with
// the nominal busy waits, which a loaded machine stretches at random.
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <nvtx3/nvToolsExt.h>

#include "busy.h"

#define TP_TRUTH_MAX 8192

typedef struct {
  const char* name;  // string literal or otherwise static
  int64_t start_ns;
  int64_t end_ns;
  int tid;
  char kind;
} TpTruthRecord;

static TpTruthRecord tp_truth_records[TP_TRUTH_MAX];
static unsigned tp_truth_count;
static pid_t tp_truth_owner;  // records belong to this pid; a forked child starts afresh

static void tp_truth_write(void) {
  const char* base = getenv("TP_TRUTH_FILE");
  if (base == NULL || tp_truth_owner != getpid()) return;
  char path[4096];
  snprintf(path, sizeof path, "%s.%d", base, (int)getpid());
  FILE* f = fopen(path, "a");  // an exec'd image appends to what it wrote before exec
  if (f == NULL) return;
  unsigned n = tp_truth_count < TP_TRUTH_MAX ? tp_truth_count : TP_TRUTH_MAX;
  for (unsigned i = 0; i < n; ++i) {
    const TpTruthRecord* r = &tp_truth_records[i];
    fprintf(f, "%c\t%d\t%lld\t%lld\t%s\n", r->kind, r->tid, (long long)r->start_ns, (long long)r->end_ns,
            r->name);
  }
  fclose(f);
}

// Call once at the start of main, before any thread starts.
static inline void tp_truth_init(void) {
  tp_truth_owner = getpid();
  atexit(tp_truth_write);
}

// A tool may set itself up on a process's first event (socket, threads, buffers) and
// take that event's timestamp afterwards; one "ready" mark first keeps that cost out of
// the timed ranges, whose truth brackets would include it. Call at the start of every
// process (after fork too).
static inline void tp_ready(void) { nvtxMarkA("ready"); }

static inline void tp_truth(char kind, const char* name, int64_t start_ns, int64_t end_ns) {
  if (tp_truth_owner != getpid()) {
    if (tp_truth_owner == 0) atexit(tp_truth_write);
    tp_truth_owner = getpid();
    tp_truth_count = 0;
  }
  unsigned i = __atomic_fetch_add(&tp_truth_count, 1, __ATOMIC_RELAXED);
  if (i >= TP_TRUTH_MAX) return;
  TpTruthRecord r = {name, start_ns, end_ns, (int)syscall(SYS_gettid), kind};
  tp_truth_records[i] = r;
}

// A push/pop range, timed from just before the push to just after the pop.
static inline int64_t tp_push(const char* name) {
  int64_t start = tp_now_ns();
  nvtxRangePushA(name);
  return start;
}

static inline void tp_pop(const char* name, int64_t start) {
  nvtxRangePop();
  tp_truth('p', name, start, tp_now_ns());
}
