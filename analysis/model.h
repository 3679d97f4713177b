// The analysed run: what decoding and analysis produce and every output format reads.
// Times are Unix-epoch nanoseconds (int64).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <array>
#include <map>
#include <utility>
#include <vector>

#include "analysis/name.h"
#include "analysis/series.h"

namespace torchprof {

// [start, end) intervals; sorted and disjoint once merged.
using Intervals = std::vector<std::pair<int64_t, int64_t>>;

enum class EventKind : uint8_t {
  kRange,       // NVTX push/pop or start/end range on a CPU thread
  kMark,        // NVTX mark (instant)
  kCudaRuntime, // CUDA runtime API call (CUPTI callback): a CPU interval on its thread
  kCudaDriver,  // CUDA driver API call made directly by the program
};

inline bool is_cuda_api(EventKind k) { return k == EventKind::kCudaRuntime || k == EventKind::kCudaDriver; }

enum class StepAction : uint8_t { kNone, kWarmup, kRecord, kRecordAndSave };

// What a PyTorch op range's message said (analysis/op_message.h). Events of the
// same message share one.
struct OpInfo {
  std::string name;                 // e.g. "aten::addmm"
  int64_t sequence = -1;            // autograd sequence number; -1 none
  uint64_t op_id = 0;               // emit_nvtx's op id; 0 none
  std::string input_shapes;         // "[[2, 3], [3, 4], []]" as torch prints them; "" not recorded
  std::string input_types;          // "[\"float\", \"Scalar\"]", Kineto's Input type (JSON); "" not recorded
  uint64_t flops = 0;               // torch's FLOP count of one call (--with-flops); 0 none
  std::vector<std::string> stack;   // the program's Python frames, innermost first
};

// A stack's frames as one string, innermost first, ';'-separated (Kineto's "Call stack").
inline std::string joined_frames(const std::vector<std::string>& frames) {
  std::string out;
  for (const std::string& frame : frames) {
    if (!out.empty()) out += ';';
    out += frame;
  }
  return out;
}

// What an event carries beside its name and times that most events share: its NVTX
// domain and category, or a CUDA API call's callback id, a PyTorch op range's op, and
// the thread a start/end range ended on when that is not the one it started on.
// Interned like names (analysis/event_tags.cpp): a run holds a few distinct sets, so
// an event holds one pointer to its set instead of the fields themselves.
struct EventTags {
  Name domain;                // "" for NVTX's default domain
  Name category_name;         // the NVTX category's name, "" when it has none
  const OpInfo* op = nullptr; // set for PyTorch op ranges (owned by the Process: op_infos)
  uint32_t category = 0;      // ranges and marks: NVTX category; CUDA API calls: CUPTI callback id
  static constexpr uint32_t kSameThread = ~0u;
  uint32_t end_tid = kSameThread;  // the thread a range ended on, kSameThread: the one it started on

  bool empty() const {
    return domain.empty() && category_name.empty() && op == nullptr && category == 0 && end_tid == kSameThread;
  }
  friend bool operator==(const EventTags& a, const EventTags& b) {
    return a.domain == b.domain && a.category_name == b.category_name && a.op == b.op &&
           a.category == b.category && a.end_tid == b.end_tid;
  }
  // The one shared copy of `tags`, which lives as long as the process (nullptr for the
  // empty set). Thread-safe; a per-thread cache answers repeated sets without a lock.
  static const EventTags* intern(const EventTags& tags);
};

// One timeline event as the engine hands it to a trace sink when it completes
// (analysis/engine.h): a range once it ended, a mark, a CUDA API call once it returned.
// Names and tags are interned (analysis/name.h, EventTags).
struct Event {
  Name name;
  int64_t start_ns = 0;
  int64_t end_ns = 0;        // == start_ns for marks
  int64_t self_ns = 0;       // duration minus direct children's durations
  // A field of ranges and marks shares its bytes with one of CUDA API calls (an event
  // is never both).
  union {
    uint64_t payload = 0;    // ranges and marks: the NVTX payload's raw bits
    uint64_t correlation;    // CUDA API calls: CUPTI correlation id, ties GPU records to this call
  };
  const EventTags* tags = nullptr;  // nullptr: default domain, no category, no op
  uint32_t tid = 0;          // thread the range started on
  int32_t step = -1;         // index into Process::steps, -1 outside any step
  EventKind kind = EventKind::kRange;
  uint8_t payload_type = 0;  // wire::PayloadType
  bool push_pop = true;      // false for start/end ranges
  bool unterminated = false; // never popped/ended: closed at the thread's last event
  // A PyTorch op from torch's RecordFunction callbacks (wire::Kind::kOpBegin): payload is
  // its RecordFunction handle, op_word its sequence number, scope and forward thread.
  bool op_call = false;
  uint64_t op_word = 0;

  int64_t dur_ns() const { return end_ns - start_ns; }

  Name domain() const { return tags != nullptr ? tags->domain : Name(); }
  Name category_name() const { return tags != nullptr ? tags->category_name : Name(); }
  // Set for PyTorch op ranges (emit_nvtx messages, the bootstrap's op capture): the
  // range is a cpu_op named op()->name.
  const OpInfo* op() const { return tags != nullptr ? tags->op : nullptr; }
  uint32_t category() const { return tags != nullptr ? tags->category : 0; }  // ranges and marks
  uint32_t cbid() const { return category(); }                                // CUDA API calls
  // The thread the range ended on (start/end ranges may end on another).
  uint32_t end_tid() const {
    return tags != nullptr && tags->end_tid != EventTags::kSameThread ? tags->end_tid : tid;
  }

  void set_domain(Name domain) { retag([&](EventTags& t) { t.domain = domain; }); }
  void set_category(uint32_t category, Name text) {
    retag([&](EventTags& t) {
      t.category = category;
      t.category_name = text;
    });
  }
  void set_cbid(uint32_t cbid) { retag([&](EventTags& t) { t.category = cbid; }); }
  void set_op(const OpInfo* op) { retag([&](EventTags& t) { t.op = op; }); }
  // Call after tid is set.
  void set_end_tid(uint32_t end_tid) {
    if (end_tid == this->end_tid()) return;
    retag([&](EventTags& t) { t.end_tid = end_tid == tid ? EventTags::kSameThread : end_tid; });
  }

 private:
  template <typename Fn>
  void retag(Fn&& change) {
    EventTags t = tags != nullptr ? *tags : EventTags{};
    change(t);
    tags = EventTags::intern(t);
  }
};

enum class GpuKind : uint8_t { kKernel, kMemcpy, kMemset, kSync };

// One activity record of a GPU: kernel, memcpy, memset or synchronisation.
struct GpuEvent {
  GpuKind kind = GpuKind::kKernel;
  Name name;                 // display name: demangled kernel, "Memcpy HtoD (Pageable -> Device)", …
  Name mangled;              // kernel name as recorded ("" for other kinds)
  uint32_t device = 0;
  uint32_t stream = 0;       // ~0u: not tied to a stream (device/context syncs)
  uint32_t context = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t queued_ns = 0;     // 0 unknown
  uint64_t correlation = 0;
  uint64_t bytes = 0;        // memcpy/memset
  uint32_t grid[3] = {0, 0, 0};
  uint32_t block[3] = {0, 0, 0};
  uint32_t registers_per_thread = 0;
  uint32_t static_shared_memory = 0;
  uint32_t dynamic_shared_memory = 0;
  uint32_t graph_id = 0;     // 0: not launched by a CUDA graph
  uint64_t graph_node_id = 0;
  uint8_t copy_kind = 0;     // CUpti_ActivityMemcpyKind; memset: the value set (low byte)
  uint8_t src_kind = 0;      // CUpti_ActivityMemoryKind
  uint8_t dst_kind = 0;
  uint32_t sync_type = 0;    // CUpti_ActivitySynchronizationType
  uint32_t sync_event = ~0u;       // sync: CUPTI's event id, ~0u none
  uint32_t wait_on_stream = ~0u;   // stream wait event: the stream the event was recorded on, ~0u unknown
  int32_t step = -1;         // the launching call's step, else the one holding start_ns

  int64_t dur_ns() const { return end_ns - start_ns; }
};

// What the overview, the utilisation figures and the stats read of a GPU record, kept
// for every record of a process (the trace sink gets the whole GpuEvent as it comes).
struct GpuRecord {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t api_start_ns = 0;  // the launching API call's interval, when api_known
  int64_t api_end_ns = 0;
  uint64_t bytes = 0;        // memcpy/memset
  Name name;                 // as GpuEvent::name
  Name api_name;             // the launching call's name, when api_known
  uint32_t device = 0;
  uint32_t stream = 0;
  int32_t step = -1;
  uint32_t sync_type = 0;
  GpuKind kind = GpuKind::kKernel;
  uint8_t copy_kind = 0;
  uint8_t src_kind = 0;
  uint8_t dst_kind = 0;
  uint32_t api_tid = 0;       // the launching call's thread, when api_known
  bool api_known = false;
  bool api_runtime = false;  // the launching call is a runtime API call (else driver)

  int64_t dur_ns() const { return end_ns - start_ns; }
};

// The NVTX domain of the Python bootstrap's nn.Module calls (--with-modules).
constexpr std::string_view kModulesDomain = "torchprof.modules";

// One nn.Module call (--with-modules), of a counted step: "nn.Module: Linear_0" as torch's
// Python tracer names it. Kept apart from the op tree: it changes no op's times.
struct ModuleCall {
  Name name;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t self_ns = 0;   // less its direct child ops and module calls
  uint32_t tid = 0;
  int32_t step = -1;
  uint32_t id = 0;       // from 1 in the process, in order of start
  uint32_t parent = 0;   // the id of the module call around it on its thread; 0 none
  uint32_t ops = 0;      // its direct child ops (those with no op around them inside it)
};

// A collective of a distributed job as one process recorded it (Process::collectives):
// c10d's op on the calling thread (c10d::allreduce_), the backend's record of the work
// (gloo:all_reduce on gloo's worker thread, nccl:all_reduce, record_param_comms), or an
// NCCL kernel on the GPU.
enum class CollectiveSource : uint8_t { kC10dOp = 0, kBackend = 1, kNcclKernel = 2 };

struct CollectiveCall {
  Name name;                 // as recorded: "gloo:all_reduce", "c10d::allreduce_", "ncclDevKernel_…"
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t in_elems = -1;     // elements of its input tensors, from the recorded shapes; -1 unknown
  CollectiveSource source = CollectiveSource::kC10dOp;
};

// A device memory allocation or release (CUPTI MEMORY2), or a tensor's from torch's
// allocators (--profile-memory: Process::tensor_memory).
struct MemoryEvent {
  bool alloc = true;         // false: release
  uint32_t device = 0;
  uint8_t memory_kind = 0;   // CUpti_ActivityMemoryKind
  uint32_t stream = 0;
  uint32_t context = 0;
  int64_t ts_ns = 0;
  uint64_t address = 0;
  uint64_t bytes = 0;
  uint64_t correlation = 0;
  int64_t live_bytes = 0;    // analysis: bytes allocated on the device after this event
  int32_t step = -1;         // analysis
  uint32_t tid = 0;          // the thread of the API call that caused it, else 0
  uint8_t device_type = 1;   // c10's DeviceType: 0 CPU, 1 CUDA
  // CUDA tensors: the caching allocator's totals after it (Kineto's Total Allocated and
  // Total Reserved), -1 when not reported (then the trace writes live_bytes for both).
  int64_t total_allocated = -1;
  int64_t total_reserved = -1;
};

// A step's tensor memory (--profile-memory), per device type.
struct StepMemory {
  int step = 0;               // index into Process::steps
  int64_t start_bytes = 0;    // allocated when the step began
  int64_t peak_bytes = 0;     // the most allocated during it
  int64_t end_bytes = 0;      // allocated when it ended
  uint64_t allocated = 0;     // bytes allocated during it
  std::string peak_op;        // the op (innermost range) running at the peak, "" none
};

// --memory-snapshot: the CUDA tensor allocations and frees as torch's allocator history
// (torch.cuda.memory._record_memory_history) holds them, for memory_snapshot.pickle:
// the last max_entries of them in order, and before those the allocations still live at
// the end that came earlier (marked `before`). Each names the ranges open on its thread,
// innermost first, then the innermost op's Python frames (--with-stack).
struct MemoryFrame {
  std::string filename;        // a Python frame's file; "<torch op>" or "<range>" for ranges
  int line = 0;
  std::string name;            // the function, the op or the range's name
};
struct MemoryHistoryEntry {
  bool alloc = true;           // false: a free (of a block whose allocation was read)
  bool before = false;         // an allocation from before the kept entries, live at the end
  uint32_t device = 0;         // the CUDA device index
  uint64_t address = 0;
  uint64_t bytes = 0;
  int64_t ts_ns = 0;
  uint32_t stack = 0;          // index into MemoryHistory::stacks
};
struct MemoryHistory {
  std::vector<std::vector<MemoryFrame>> stacks;
  std::vector<MemoryHistoryEntry> entries;
  uint64_t dropped = 0;        // older entries past max_entries, left out
  size_t max_entries = 0;
};

// Tensor allocations made during the steps that outlived them, by the op that made them.
struct SurvivingAllocations {
  std::string op;             // the innermost range open at the allocation
  std::string top;            // the outermost op around it (below the step's range)
  uint64_t bytes = 0;
  uint64_t allocations = 0;
  int steps = 0;              // the steps they were made in
};

// What a process's tensor memory says (analysis/tensor_memory.h).
struct TensorMemorySummary {
  uint64_t allocations = 0;
  uint64_t frees = 0;
  uint64_t allocated_bytes = 0;     // bytes allocated
  uint64_t unpaired_frees = 0;      // frees of memory allocated before recording began
  std::array<int64_t, 2> peak_bytes{};  // CPU, CUDA: the most allocated at once
  std::vector<StepMemory> steps[2]; // CPU, CUDA: per step, in step order
  std::vector<SurvivingAllocations> surviving;  // most bytes first
  // CUDA tensors, from the caching allocator's totals (reserved: what it holds from the
  // driver): at the most allocated, what was reserved; the most reserved. -1: not reported.
  int64_t cuda_allocated_at_peak = -1;
  int64_t cuda_reserved_at_peak = -1;
  int64_t cuda_reserved_peak = -1;
  // torch.cuda.memory_stats()'s num_alloc_retries and num_ooms at exit, summed over the
  // devices; -1: not read (CUDA not initialised, or the program did not exit normally).
  int64_t cuda_alloc_retries = -1;
  int64_t cuda_ooms = -1;
};

// deviceProperties of one GPU, in Kineto's names.
struct GpuDevice {
  uint32_t id = 0;
  std::string name;
  uint64_t total_global_mem = 0;
  uint32_t compute_major = 0;
  uint32_t compute_minor = 0;
  uint32_t max_threads_per_block = 0;
  uint32_t max_threads_per_multiprocessor = 0;
  uint32_t regs_per_block = 0;
  uint32_t warp_size = 0;
  uint32_t shared_mem_per_block = 0;
  uint32_t num_sms = 0;
  uint32_t regs_per_multiprocessor = 0;
  uint32_t shared_mem_per_block_optin = 0;
  uint32_t shared_mem_per_multiprocessor = 0;
};

// cudaProfilerStart/Stop (and the driver's cuProfilerStart/Stop), for
// `--capture-range cudaProfilerApi`.
struct ProfilerToggle {
  int64_t ts_ns = 0;
  uint32_t tid = 0;
  bool start = false;
};

// On-demand capture: a kCaptureWindow record (recording switched on or off).
struct CaptureToggle {
  int64_t ts_ns = 0;
  uint32_t window = 0;
  bool on = false;
  uint16_t source = 0;  // wire::CaptureSource
};

// What one process recorded of an on-demand capture window (analysis/capture_windows.h).
struct CaptureWindow {
  uint32_t id = 0;      // the launcher's window id; 0 = from the process's start
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  std::string source;   // "command" | "trigger" | "follow"
  int cycle = -1;       // the trace cycle its steps make
  int steps = 0;        // steps recorded in it
};

struct Step {
  int index = 0;             // 0.. per process, in order of appearance
  std::string name;          // e.g. "ProfilerStep#0"
  int64_t start_ns = 0;
  int64_t dur_ns = 0;
  StepAction action = StepAction::kRecord;
  int cycle = -1;            // which saved trace holds it, -1 when not recorded
  bool marker = false;       // made by a step marker (false: the process's one implicit
                             // step, or a capture window's)
  uint32_t marker_tid = 0;   // the marker's thread
  bool marker_is_mark = false;
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
  // The argv of each image this pid ran before it exec'd the one above, oldest first (a
  // fork copy's is its parent's command line).
  std::vector<std::vector<std::string>> earlier_images;
  std::string host;
  std::string worker;         // "<host>_<pid>" unless named otherwise
  // What the process is in the tree (assign_roles): "python", "compile worker" (torch
  // inductor's), "python fork" (a copy of a Python process that did not exec: DataLoader
  // and multiprocessing workers), "shell", or "program".
  std::string role;
  std::optional<int> rank;
  std::optional<int> world_size;  // WORLD_SIZE / SLURM_NTASKS / OMPI_COMM_WORLD_SIZE
  std::optional<int> local_rank;  // LOCAL_RANK / SLURM_LOCALID / OMPI_COMM_WORLD_LOCAL_RANK
  int input = 0;              // merged reports: index into Run::inputs of the run it came from
  uint64_t events = 0;        // records delivered
  uint64_t dropped = 0;       // records lost (emitted - delivered)
  std::optional<int> exit_code;   // exit status or 128+signal, when known
  std::optional<int> exit_signal;
  int64_t start_ns = 0;       // first event
  int64_t end_ns = 0;         // last event or exit
  std::vector<ThreadInfo> threads;  // the main thread first, then by tid
  uint64_t cpu_events = 0;    // ranges, marks and CUDA API calls recorded
  std::vector<Step> steps;
  // Whether what lies outside every step counts in the ops and the first trace (no
  // schedule, no on-demand capture windows); else the ranges, API calls and GPU records
  // left out, those of steps not recorded and those outside every step.
  bool outside_steps_counted = false;
  uint64_t left_out_in_steps = 0;
  uint64_t left_out_outside_steps = 0;
  std::vector<std::string> warnings;
  // GPU side (CUPTI); API calls are CPU events.
  std::vector<GpuRecord> gpu_records;      // sorted by start_ns
  // c10d ops and backend records of collectives in the counted steps, in order of their
  // ends on each thread (analysis/collectives.h reads them with the NCCL kernels).
  std::vector<CollectiveCall> collectives;
  std::vector<ModuleCall> module_calls;   // --with-modules, in order of their ends
  std::vector<MemoryEvent> memory_events;  // sorted by ts_ns
  // torch's tensor allocations and frees (--profile-memory) of the traced steps, sorted
  // by ts_ns, with the running totals of all of them (live_bytes); for the traces and
  // report.html.
  std::vector<MemoryEvent> tensor_memory;
  std::optional<TensorMemorySummary> tensor_summary;  // set when tensor memory was recorded
  std::optional<MemoryHistory> memory_history;        // --memory-snapshot, when CUDA tensors were recorded
  // What the overview's step time breakdown needs of the CPU side: the merged intervals
  // of the CUDA runtime calls, DataLoader ranges and other ranges (step markers aside) of
  // the recorded steps (analysis/overview.h). Kept to a bounded number of intervals: past
  // it the shortest gaps are filled, and roles_filled_ns says how much time that added.
  std::array<Intervals, 3> cpu_roles;
  int64_t roles_filled_ns = 0;
  std::vector<GpuDevice> devices;          // sorted by id
  std::vector<ProfilerToggle> profiler_toggles;  // in time order
  std::vector<CaptureToggle> capture_toggles;    // on-demand capture switches, in time order
  std::vector<CaptureWindow> capture_windows;    // made of them by apply_capture_windows()
  std::vector<std::string> gpu_notices;    // e.g. why GPU tracing is off
  // The program's own CUPTI clients (torch.profiler's Kineto), by library and path
  // ("forwarded": through torchprof's subscriber; "own_subscriber": CUPTI 13.2+'s
  // multi-subscriber mode), with how many subscribes the program made so far.
  struct CuptiClient {
    std::string library;
    std::string path;
    uint64_t subscribes = 0;
  };
  std::vector<CuptiClient> cupti_clients;
  uint64_t cupti_dropped = 0;              // activity records CUPTI dropped
  // GPU records CUPTI delivered without times (not collected): counted, in no span or row.
  uint64_t gpu_incomplete = 0;
  uint64_t gpu_unreadable_buffers = 0;     // CUPTI buffers cut short by a record it could not read
  uint64_t gpu_unreadable_bytes = 0;       // the bytes of them left unread
  // Died without a goodbye: the records its threads had not sent, read by the collector
  // from its shared buffers after its death (kRecovered), and the slots that could not be.
  bool recovered = false;
  uint64_t recovered_events = 0;
  uint64_t unrecovered_slots = 0;
  std::string gpu_tracing;                 // "on" | "off" | "not_started"; empty: CUDA never came up
  std::string cuda_api;                    // where its API calls came from: "callbacks" | "activity"
                                           // (TORCHPROF_CUDA_API); empty: none recorded
  // The injected library's buffers (its flusher's kBufferUsage / kBufferRefused records):
  // the most bytes they held and their cap (0: not said, an older library), and when
  // memory was first refused, losing events (0: never).
  uint64_t buffer_peak_bytes = 0;
  uint64_t buffer_cap_bytes = 0;
  int64_t buffer_refused_ns = 0;           // Unix-epoch ns
  uint64_t buffer_refused_after_ns = 0;    // the same, from the process's first event
  uint16_t buffer_refusal = 0;             // wire::BufferRefusal: 1 the cap, 2 the system
  std::string loss_note;                   // why events were lost, in words ("" unknown)
};

struct OpStats {
  std::string name;
  std::string kind;           // nvtx | cpu_op | cuda_api | kernel | memcpy | memset
  uint64_t calls = 0;
  int64_t self_cpu_ns = 0;
  int64_t cpu_total_ns = 0;
  int64_t self_cuda_ns = 0;
  int64_t cuda_total_ns = 0;
  std::string mangled;        // kernels: the name as recorded (name is demangled)
  // Tensor memory (--profile-memory) as torch's profile_memory counts it: the bytes
  // allocated less the bytes freed while the row's ranges ran (total: inside them and
  // the ranges inside them; self: with nothing else open inside them), CPU and CUDA.
  int64_t cpu_memory = 0;
  int64_t self_cpu_memory = 0;
  int64_t cuda_memory = 0;
  int64_t self_cuda_memory = 0;
  uint64_t flops = 0;         // cpu_op rows (--with-flops): torch's FLOP counts of its calls, summed
  // cpu_op rows: part of the row's key when grouped by input shape, and when the ops
  // carry Python stacks (the first frames AnalysisOptions::group_by_stack_n keeps, innermost first).
  std::string input_shapes;
  std::vector<std::string> stack;
};

// One of the runs a merged report (`torchprof report DIR1 DIR2 …`) combines.
struct RunInput {
  std::string label;            // the path as given on the command line
  std::string capture;          // the capture file read
  std::vector<std::string> command;
  int exit_code = 0;
  std::string host;
  bool truncated = false;
  bool corrupted = false;
  size_t processes = 0;
};

// Frames of an op's stack that key its row and show under Source Location (torch's
// MAX_STACK_ENTRY for the table).
constexpr size_t kOpStackFrames = 5;

// What makes two OpStats one row: kind, name, and for cpu_op rows their input
// shapes and stack (empty unless grouped by them).
inline std::string op_row_key(const OpStats& op, std::string_view name) {
  std::string key = op.kind;
  key += '\0';
  key += name;
  key += '\0';
  key += op.input_shapes;
  for (const std::string& frame : op.stack) {
    key += '\n';
    key += frame;
  }
  return key;
}

// One slice of report.html's timeline: the engine keeps the longest of a run's events
// and GPU records (Run::timeline), not all of them.
struct TimelineSlice {
  int input = 0;          // merged reports: the run it came from
  int pid = 0;
  uint8_t track = 0;      // TimelineTrack
  uint8_t category = 0;   // 0 range, 1 mark, 2 API call, 3 + GpuKind
  uint32_t id = 0;        // CPU tracks: the thread; GPU tracks: the device
  uint32_t stream = 0;    // GPU tracks: the stream (~0u: device syncs)
  Name name;
  int64_t start_ns = 0;
  int64_t dur_ns = 0;
};
enum class TimelineTrack : uint8_t { kCpu = 0, kCudaApi = 1, kGpu = 2 };

// nsys-style summaries (`--stats`, formats/stats.h) by name, of the recorded steps.
struct RunStats {
  std::map<std::string, Series> ranges, api, kernels, mem_time, mem_size;
};

struct Run {
  std::vector<RunInput> inputs; // empty unless several runs were merged into this one
  std::vector<std::string> command;
  // Injection variables another tool held (Nsight Systems' CUDA_INJECTION64_PATH, say):
  // torchprof left that side to it. Variable, library, the tool's name.
  struct OutsideTool {
    std::string variable;
    std::string library;
    std::string tool;
  };
  std::vector<OutsideTool> outside_tools;
  int exit_code = 0;
  std::string host;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t dropped_events = 0;
  uint64_t processes_without_events = 0;
  bool truncated = false;       // capture ended mid-chunk
  uint64_t truncated_at = 0;    // byte offset of the first unreadable chunk
  // Damage inside the capture (reading/capture_reader.h): chunks that failed their checks,
  // stepped over (file version 3 on) or where reading stopped (older versions).
  bool corrupted = false;
  uint64_t corrupt_chunks = 0;  // damaged chunks or stretches
  uint64_t corrupt_bytes = 0;   // bytes that could not be read as chunks
  uint64_t corrupt_at = 0;      // byte offset of the first damage
  std::vector<std::string> warnings;
  std::vector<Process> processes;
  // Aggregated over the recorded steps of every process, and without a schedule over
  // what lies outside every step too (Process::outside_steps_counted).
  std::vector<OpStats> ops;
  uint64_t left_out_in_steps = 0;       // sums of Process's
  uint64_t left_out_outside_steps = 0;
  bool has_gpu = false;         // any GPU record (kernel, memcpy, memset, sync, memory) was decoded
  uint64_t cupti_dropped = 0;   // sum over processes
  std::vector<std::string> loss_notes;  // "pid N: <Process::loss_note>", one per process with one
  std::vector<std::string> gpu_notices;  // "pid N: <notice>", one per distinct notice
  // What the engine kept for report.html, `--stats` and stacks.folded (each only when
  // asked for: analysis/engine.h).
  std::vector<TimelineSlice> timeline;   // the longest slices
  uint64_t timeline_slices = 0;          // slices seen, kept or not
  RunStats stats;
  std::map<std::string, int64_t> folded;  // Python stack ';' op name -> self CPU ns
  std::vector<std::shared_ptr<const OpInfo>> op_infos;  // what Event::op() pointed to
};

// The one line that says a capture is damaged (table notes, stderr, report.html).
inline std::string corruption_text(const Run& run) {
  return "capture corrupted: " + std::to_string(run.corrupt_chunks) +
         (run.corrupt_chunks == 1 ? " damaged chunk" : " damaged chunks") + " (first at byte " +
         std::to_string(run.corrupt_at) + ", " + std::to_string(run.corrupt_bytes) +
         " bytes skipped); results cover the rest of the capture, and the losses are counted";
}

}  // namespace torchprof
