// The analysed run: what decoding and analysis produce and every output format reads.
// Times are Unix-epoch nanoseconds (int64).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace torchprof {

enum class EventKind : uint8_t {
  kRange,     // NVTX push/pop or start/end range on a CPU thread
  kMark,      // NVTX mark (instant)
};

enum class StepAction : uint8_t { kNone, kWarmup, kRecord, kRecordAndSave };

struct Event {
  std::string name;
  EventKind kind = EventKind::kRange;
  uint32_t tid = 0;          // thread the range started on
  uint32_t end_tid = 0;      // thread it ended on (start/end ranges may differ)
  int64_t start_ns = 0;
  int64_t end_ns = 0;        // == start_ns for marks
  std::string domain;        // "" for NVTX's default domain
  uint32_t category = 0;
  std::string category_name;
  uint8_t payload_type = 0;  // wire::PayloadType
  uint64_t payload = 0;      // raw bits
  bool push_pop = true;      // false for start/end ranges
  bool unterminated = false; // never popped/ended: closed at the thread's last event
  int32_t parent = -1;       // index of the enclosing event on the same thread
  int32_t step = -1;         // index into Process::steps, -1 outside any step
  int64_t self_ns = 0;       // duration minus direct children's durations

  int64_t dur_ns() const { return end_ns - start_ns; }
};

struct Step {
  int index = 0;             // 0.. per process, in order of appearance
  std::string name;          // e.g. "ProfilerStep#0"
  int64_t start_ns = 0;
  int64_t dur_ns = 0;
  StepAction action = StepAction::kRecord;
  int cycle = -1;            // which saved trace holds it, -1 when not recorded
};

struct ThreadInfo {
  uint32_t tid = 0;
  std::string name;
  bool is_main = false;
  uint64_t events = 0;
  uint64_t dropped = 0;
};

struct Process {
  int pid = 0;
  int ppid = 0;
  std::string exe;
  std::vector<std::string> cmdline;
  std::string host;
  std::string worker;         // "<host>_<pid>" unless named otherwise
  std::optional<int> rank;
  uint64_t events = 0;        // records delivered
  uint64_t dropped = 0;       // records lost (emitted - delivered)
  std::optional<int> exit_code;   // exit status or 128+signal, when known
  std::optional<int> exit_signal;
  int64_t start_ns = 0;       // first event
  int64_t end_ns = 0;         // last event or exit
  std::vector<ThreadInfo> threads;
  std::vector<Event> events_list;  // sorted by (tid, start_ns, longer first)
  std::vector<Step> steps;
  std::vector<std::string> warnings;
};

struct OpStats {
  std::string name;
  std::string kind;           // nvtx | cpu_op | cuda_api | kernel | memcpy | memset
  uint64_t calls = 0;
  int64_t self_cpu_ns = 0;
  int64_t cpu_total_ns = 0;
  int64_t self_cuda_ns = 0;
  int64_t cuda_total_ns = 0;
};

struct Run {
  std::vector<std::string> command;
  int exit_code = 0;
  std::string host;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t dropped_events = 0;
  uint64_t processes_without_events = 0;
  bool truncated = false;       // capture ended mid-chunk
  std::vector<std::string> warnings;
  std::vector<Process> processes;
  std::vector<OpStats> ops;     // aggregated over recorded steps of every process
  bool has_gpu = false;
};

}  // namespace torchprof
