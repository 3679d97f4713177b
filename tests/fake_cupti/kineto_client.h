// A CUPTI client that makes the calls torch.profiler's Kineto makes, in Kineto's order,
// read from a call list written from Kineto's sources (kineto_sequences/kineto-<commit>.seq,
// each line with the kineto file:line it comes from). It runs in the profiled program as
// Kineto does, through the process's CUPTI symbols (so under torchprof-run through the
// injected library's), against the fake alone or under torchprof.
//
// What it checks is what torch.profiler's user sees:
//   - every call returns what CUPTI gives a lone client (CUPTI_SUCCESS, and
//     CUPTI_ERROR_MAX_LIMIT_REACHED at the end of a buffer's records);
//   - its buffers come back through its own bufferCompleted, none it did not hand out;
//   - it gets exactly the kernels and copies launched while it was on, on its own clock
//     (b7b1fbe6: CUPTI's default clock, Unix-epoch ns, compared with system_clock as
//     Kineto's capture window is; dfce61c9: its TSC timestamp callback's), each with the
//     external correlation id it pushed around the launch.
//
// Conditions in the call list (?COND) are settled here: the build and torch facts of a
// default torch.profiler.profile(activities=[CPU, CUDA]) on Linux with CUDA 13, the options
// below, and the client's own state (buffers out with CUPTI, init failed, torn down).
#pragma once

#include <cupti.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace fake_workload {

struct KinetoOptions {
  std::string commit;        // b7b1fbe6 or dfce61c9 (the .seq file's name)
  bool teardown = false;     // TEARDOWN_CUPTI=1
  bool sync_events = false;  // _ExperimentalConfig(enable_cuda_sync_events=True)
};

class KinetoClient {
 public:
  // Init (first call only), then a session's start calls. False when a call returned
  // something CUPTI would not give a lone client (reasons on stderr).
  bool start(const KinetoOptions& options);
  // Around each launch while a session is on: the op's external correlation id.
  void op_begin();
  void op_end();
  // Work launched while on, by row name.
  void launched(const std::string& row, uint64_t duration_ns);
  // Stop, process (and teardown): disables, flushes, reads and compares. False on a mismatch.
  bool stop();
  bool active() const { return active_; }

  // The call list for `commit`, as lines "phase function args… ?cond # source".
  struct Line {
    std::string phase;
    std::string function;
    std::vector<std::string> args;
    std::string condition;  // without the '?', "" when none
    std::string source;     // kineto path:line
  };
  struct Sequence {
    std::vector<Line> init;
    std::vector<Line> session[2][4];  // [first, later][start, work, stop, process]
    std::vector<Line> teardown;
  };
  static Sequence load(const std::string& commit);

 private:
  bool run_block(const std::vector<Line>& lines, bool* ok);
  bool call(const Line& line);
  bool holds(const std::string& condition) const;
  bool check(const Line& line, CUptiResult rc, CUptiResult expected = CUPTI_SUCCESS);
  bool process_buffers();
  uint64_t now() const;

  KinetoOptions options_;
  Sequence seq_;
  bool loaded_ = false;
  bool initialized_ = false;
  bool init_success_ = false;
  bool init_failed_ = false;
  bool cpu_only_ = false;
  bool active_ = false;
  bool in_reinit_ = false;  // a start block after a teardown: the lazy re-init lines run
  int sessions_ = 0;
  bool tsc_clock_ = false;  // getApproximateTime registered
  uint64_t window_start_ = 0;
  uint64_t window_end_ = 0;
  uint64_t next_op_id_ = 1;
  std::vector<uint64_t> op_stack_;
  std::set<uint64_t> pushed_ids_;
  std::map<std::string, std::vector<uint64_t>> expected_;
  int calls_made_ = 0;
  bool ok_ = true;
};

}  // namespace fake_workload
