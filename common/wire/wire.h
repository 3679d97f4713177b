// The wire protocol between the injected library (inject/) and the collector.
//
// A process opens one stream socket to the collector and sends messages, each a
// MsgHeader followed by `size` bytes of body:
//
//   Hello            once, first; the collector answers with a HelloAck
//   Frame            any number: one thread's records, zstd-compressed
//   Bye              once, last, when the process exits cleanly or dies of a signal
//   WindowEvent      a capture window a trigger opened or closed at a step boundary
//   Arena            once, after the HelloAck (protocol 3): an ArenaInfo, with the memfd
//                    of the process's shared buffers in SCM_RIGHTS (arena.h)
//
// and the collector may send, after the HelloAck and at any time later:
//
//   Control          start / stop recording, or arm a trigger of N steps. Sent only
//                    when the run is controlled (torchprof-run --paused, --capture-range
//                    signal, or a `torchprof start|stop|trigger`); a library that never
//                    reads it (protocol 2 before it) is never sent a WindowEvent to answer.
//
// A Frame body is a FrameHeader followed by the compressed bytes. Decoded (as its
// FrameEncoding says), it is a run of 32-byte slots: a Record head, then `extra` continuation slots that
// belong to that record (the bytes of a string, a GPU record's extra fields).
// A decoder that meets an unknown kind skips 1 + extra slots, so new kinds never
// break old readers.
//
// Every struct here is part of the format: sizes and offsets are asserted below,
// and any change to them bumps kProtocolVersion.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace torchprof::wire {

// 2: frames may use FrameEncoding::kZstdDelta (the injected library sends only that).
// Readers and the collector still take version 1 (kZstdRaw frames only); a reader of
// version 1 refuses version-2 captures with a clear message instead of misreading them.
// 3: the Arena message (sent only to a collector whose HelloAck says 3 or more); the
// records and frames are those of version 2.
constexpr uint32_t kProtocolVersion = 3;
// The oldest version the collector accepts at the handshake and readers decode.
constexpr uint32_t kMinProtocolVersion = 1;
constexpr char kHelloMagic[8] = {'T', 'P', 'R', 'F', 'H', 'L', 'O', '1'};
constexpr uint32_t kSlotSize = 32;
// Largest body the collector accepts in one message; bigger closes the connection.
constexpr uint32_t kMaxMessageBody = 16u << 20;
// Strings longer than this are cut (255 continuation slots of 32 bytes).
constexpr uint32_t kMaxStringBytes = 255 * kSlotSize;

enum class MsgType : uint32_t {
  kHello = 1,
  kHelloAck = 2,
  kFrame = 3,
  kBye = 4,
  kControl = 5,      // collector -> library: Control
  kWindowEvent = 6,  // library -> collector: WindowEvent
  kArena = 7,        // library -> collector: arena::ArenaInfo + the memfd (protocol >= 3)
};

enum class ControlCommand : uint32_t {
  kStop = 0,     // record nothing new (what is open is still closed)
  kStart = 1,    // record from now on
  kTrigger = 2,  // record from the next step boundary for `steps` steps
};

// Control.flags
constexpr uint32_t kControlFollow = 1;  // start/stop echoed from the process that counts the
                                        // trigger's steps: a process counting them itself ignores it

struct Control {
  uint32_t command;  // ControlCommand
  uint32_t window;   // capture window id (from 1; 0 = none)
  uint32_t steps;    // kTrigger: steps to record
  uint32_t flags;
};

struct WindowEvent {
  uint32_t window;
  uint32_t open;     // 1 = opened, 0 = closed
  uint64_t mono_ns;  // when, on the records' clock
};

struct MsgHeader {
  uint32_t type;  // MsgType
  uint32_t size;  // body bytes that follow
};

// Hello: fixed part, then exe_len bytes of executable path, cmdline_len bytes of
// NUL-separated argv, host_len bytes of host name, env_len bytes of NUL-separated
// "KEY=VALUE" entries (only the variables the analysis needs: RANK and friends,
// TORCHPROF_WORKER_NAME).
struct Hello {
  char magic[8];
  uint32_t version;      // kProtocolVersion
  uint32_t slot_size;    // kSlotSize
  int32_t pid;
  int32_t ppid;
  uint64_t mono_ns;      // CLOCK_MONOTONIC and CLOCK_REALTIME read back to back:
  uint64_t real_ns;      // converts record timestamps to Unix-epoch ns
  uint32_t exe_len;
  uint32_t cmdline_len;
  uint32_t host_len;
  uint32_t env_len;
};

enum class AckStatus : uint32_t {
  kOk = 0,
  kBadVersion = 1,
  kBadMagic = 2,
  kRefused = 3,  // wrong uid, collector shutting down, …
};

struct HelloAck {
  uint32_t version;  // the collector's kProtocolVersion
  uint32_t status;   // AckStatus
};

enum class FrameEncoding : uint32_t {
  kZstdRaw = 0,    // zstd of the slots as they are
  kZstdDelta = 1,  // zstd of the slots' delta transform (frame_codec.h); protocol >= 2
};

struct FrameHeader {
  uint32_t tid;       // OS thread id whose records these are
  uint32_t encoding;  // FrameEncoding
  uint32_t raw_size;  // bytes of slots once decoded, a multiple of kSlotSize
  uint32_t seq;       // per-thread frame number, from 0; a gap means a lost frame
};

enum class ExitKind : int32_t {
  kExit = 0,     // status = exit code (exit, _exit, return from main)
  kSignal = 1,   // status = signal number
  kExec = 2,     // the image was replaced by exec; the pid goes on
  kUnknown = 3,  // the flusher was stopped without knowing why
};

struct Bye {
  int32_t exit_kind;    // ExitKind
  int32_t exit_status;
  uint64_t emitted;     // records the program produced, over all threads
  uint64_t dropped;     // of those, records that were not delivered
  uint64_t mono_ns;     // when the process ended
};

// ---------------------------------------------------------------------------
// Records

enum class Kind : uint8_t {
  kPad = 0,          // filler, ignored
  kString = 1,       // name = new string id, a = byte length; bytes in `extra` slots
  kPush = 2,         // domain, name, ts, a = attr (category | payload type), b = payload
  kPop = 3,          // domain, ts
  kStart = 4,        // domain, name, ts, a = range id, b = attr; a kPayload may follow
  kEnd = 5,          // ts, a = range id (may be on another thread than its kStart)
  kMark = 6,         // domain, name, ts, a = attr, b = payload
  kDomain = 7,       // domain = new domain id, name = its name (0 for a nameless one)
  kCategory = 8,     // domain, name = category's name, a = category id
  kThreadName = 9,   // name, a = OS tid being named (0 = this thread), b = source:
                     // 0 = NVTX naming call, 1 = the OS thread name (NVTX names win)
  kDropped = 10,     // a = records dropped on this thread so far, b = emitted so far
  kPayload = 11,     // a = attr, b = payload of the record just before
  kThreadStart = 12, // ts = first event of this thread, a = 1 if it is the main thread
  // Written by the flusher into any thread's frame, for the whole process:
  kBufferUsage = 13,   // a = the most bytes the process's buffers held so far, b = their cap
                       // (TORCHPROF_BUFFER_LIMIT) in bytes
  kBufferRefused = 14, // ts = when buffer memory was first refused, losing records (a thread's
                       // record, or CUPTI's activity buffer); domain = BufferRefusal; a = the cap
                       // in bytes, b = bytes held then
  kCaptureWindow = 15,  // ts, a = window id, b = 1 recording from ts on, 0 recording stopped;
                        // domain = CaptureSource (what switched it)

  // PyTorch ops from torch's RecordFunction callbacks (inject/torch_observer.cpp), on
  // the thread that ran them. They nest with each other as push/pop do, in their own
  // NVTX-style domain (the "torchprof.ops" domain's id).
  kOpBegin = 16,  // domain, name = the op's name, ts, a = OpWord (op_word()), b = RecordFunction handle
  kOpEnd = 17,    // domain, ts, a = the handle of the op that ends

  // Tensor memory from torch's allocators (inject/torch_memory.cpp), on the thread that
  // allocated or freed it, for --profile-memory. domain = the device type as torch numbers
  // it (0 CPU, 1 CUDA) | the device index << 8. A free names only the address: the analysis
  // pairs it with its allocation. CUDA tensors (the caching allocator's reports) carry
  // extra = 1: TensorTotals.
  kTensorAlloc = 24,  // domain, ts, a = address, b = bytes
  kTensorFree = 25,   // domain, ts, a = address
  // torch.cuda.memory_stats(device) as the Python bootstrap reads it at exit (CUDA
  // initialised): domain = the device index, a = num_alloc_retries, b = num_ooms.
  kAllocatorStats = 26,
  // Written by the collector (never the library), last in a thread's records read from the
  // shared arena after its process died without a goodbye: a = record heads read there,
  // b = slots that could not be read (a segment outside the arena or failing its checks).
  kRecovered = 27,

  // CUDA and GPU records (32 and up). Host-side API calls are written by the calling
  // thread into its own stream; GPU activity records go into the stream of the
  // thread that converts CUPTI's buffers (any tid; the kinds say what they are).
  // All timestamps are on the records' clock (CLOCK_MONOTONIC ns, CUPTI aligned).
  kCudaRuntime = 32, // domain = cbid, name = function name, ts = enter, a = exit ts, b = correlation id
  kCudaDriver = 33,  // as kCudaRuntime, driver API
  kKernel = 34,      // domain = device, name = mangled kernel name, ts = start, a = end, b = correlation;
                     // extra = 2: GpuKernelExtra
  kMemcpy = 35,      // domain = device, ts = start, a = end, b = correlation; extra = 1: GpuCopyExtra
  kMemset = 36,      // as kMemcpy; GpuCopyExtra.copy_kind holds the value set
  kMemory = 37,      // domain = device, ts, a = address, b = bytes; extra = 1: GpuMemoryExtra
  kSync = 38,        // domain = device, ts = start, a = end, b = correlation; extra = 1: GpuSyncExtra
  kDevice = 39,      // domain = device, name = device name; extra = 2: GpuDeviceExtra
  kGpuDropped = 40,  // a = activity records CUPTI dropped so far (cumulative, whole process)
  kGpuNotice = 41,   // name = one-line notice (e.g. why GPU tracing is off)
  kCudaProfiler = 42,// ts, a = 1 at cudaProfilerStart/cuProfilerStart, 0 at Stop
  kGpuUnreadable = 43,  // ts, a = CUPTI buffers cut short by a record cuptiActivityGetNextRecord
                        // could not read (cumulative, whole process), b = bytes of them left
                        // unread (cumulative), domain = the last CUptiResult
  kGpuState = 44,    // ts, a = GpuTracing: whether GPU tracing ran in this process
  // A runtime or driver API call from CUPTI's RUNTIME / DRIVER activity records
  // (TORCHPROF_CUDA_API=activity), in the converting thread's stream: domain = cbid,
  // name = function name, ts = start, a = end, b = correlation id; extra = 1: GpuApiExtra
  // (the calling thread). The analysis places it among that thread's records by time.
  kCudaApiActivity = 45,
  // The program's own CUPTI client (torch.profiler's Kineto, say) subscribed, and how it is
  // served: ts, domain = CuptiClientPath, a = the program's subscribes so far, name = the
  // library the client lives in (or the name it gave).
  kCuptiClient = 46,
};

// kCuptiClient's paths.
enum class CuptiClientPath : uint16_t {
  kForwarded = 1,      // through torchprof's one subscriber (CUPTI allows one)
  kOwnSubscriber = 2,  // a subscriber of its own (CUPTI 13.2+ multi-subscriber mode)
};

// kCaptureWindow's domain.
enum class CaptureSource : uint16_t {
  kCommand = 0,  // torchprof start / stop, or the state the collector sent at connect
  kTrigger = 1,  // a trigger's step boundary in this process
  kFollow = 2,   // a trigger window opened or closed by another process's steps
};

// kGpuState's values.
enum class GpuTracing : uint8_t {
  kOn = 1,          // CUPTI subscribed, activity kinds enabled
  kOff = 2,         // CUPTI refused or unusable (a kGpuNotice says why)
  kNotStarted = 3,  // CUDA libraries loaded but CUDA never initialised with the injection
};

// Why a kBufferRefused record's memory was refused.
enum class BufferRefusal : uint16_t {
  kCap = 1,     // the buffers already held TORCHPROF_BUFFER_LIMIT
  kSystem = 2,  // mmap failed (the system is short of memory)
};

struct GpuKernelExtra {  // two slots
  uint32_t stream;
  uint32_t context;
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t registers_per_thread;
  uint32_t static_shared_memory;
  uint32_t dynamic_shared_memory;
  uint32_t graph_id;     // 0 when not launched by a graph
  uint64_t graph_node_id;
  uint64_t queued;       // ts when queued, 0 unknown
};

struct GpuCopyExtra {  // one slot
  uint64_t bytes;
  uint32_t stream;
  uint32_t context;
  uint8_t copy_kind;   // CUpti_ActivityMemcpyKind (memset: value & 0xff)
  uint8_t src_kind;    // CUpti_ActivityMemoryKind
  uint8_t dst_kind;
  uint8_t flags;
  uint32_t graph_id;
  uint64_t reserved;
};

struct GpuMemoryExtra {  // one slot
  uint8_t operation;     // 1 = allocation, 2 = release (CUpti_ActivityMemoryOperationType)
  uint8_t memory_kind;   // CUpti_ActivityMemoryKind
  uint16_t reserved0;
  uint32_t stream;
  uint32_t context;
  uint32_t reserved1;
  uint64_t correlation;
  uint64_t pc;
};

struct GpuSyncExtra {  // one slot
  uint32_t type;         // CUpti_ActivitySynchronizationType
  uint32_t stream;       // ~0u when not a stream sync
  uint32_t context;
  uint32_t event;
  uint32_t event_stream1;  // stream wait event: the stream the event was last recorded on, + 1 (0 unknown)
  uint32_t reserved32;
  uint64_t reserved;
};

struct GpuApiExtra {  // one slot
  uint32_t tid;           // the calling thread (CUPTI's thread id, of the system's kind)
  uint32_t return_value;  // the call's CUresult / cudaError_t
  uint8_t driver;         // 1: driver API, 0: runtime API
  uint8_t reserved8[7];
  uint64_t reserved[2];
};

struct TensorTotals {  // one slot: what the caching allocator said with the block
  uint64_t allocated;  // bytes allocated on the device after it
  uint64_t reserved;   // bytes the allocator holds from the driver after it
  uint64_t reserved0;
  uint64_t reserved1;
};

struct GpuDeviceExtra {  // two slots; deviceProperties in Kineto's names
  uint64_t total_global_mem;
  uint32_t compute_major;
  uint32_t compute_minor;
  uint32_t max_threads_per_block;
  uint32_t max_threads_per_multiprocessor;
  uint32_t regs_per_block;
  uint32_t warp_size;
  uint32_t shared_mem_per_block;
  uint32_t num_sms;
  uint32_t regs_per_multiprocessor;
  uint32_t shared_mem_per_block_optin;
  uint32_t shared_mem_per_multiprocessor;
  uint32_t reserved[3];
};

// Payload types carried in attr bits 32..39 (NVTX's nvtxPayloadType_t values).
enum class PayloadType : uint8_t {
  kNone = 0,
  kU64 = 1,
  kI64 = 2,
  kDouble = 3,
  kU32 = 4,
  kI32 = 5,
  kFloat = 6,
};

constexpr uint64_t make_attr(uint32_t category, PayloadType type) {
  return uint64_t{category} | (uint64_t{static_cast<uint8_t>(type)} << 32);
}
constexpr uint32_t attr_category(uint64_t attr) { return static_cast<uint32_t>(attr); }
constexpr PayloadType attr_payload_type(uint64_t attr) {
  return static_cast<PayloadType>(static_cast<uint8_t>(attr >> 32));
}

// kOpBegin's `a`: the autograd sequence number + 1 (0 = none) in bits 0..39, torch's
// RecordScope in bits 40..46, and in bits 48..63 a thread in torch's own numbering, cut to
// 16 bits: a backward op's forward thread id (bit 47 clear), or, for an op torch gives no
// forward thread (0: forward ops and ops outside autograd), the op's own thread with bit
// 47 set (Kineto's fwdbwd flows pair (own thread, sequence) with (forward thread,
// sequence)).
constexpr uint64_t kOpWordOwnThread = uint64_t{1} << 47;
constexpr uint64_t op_word(int64_t sequence, uint8_t scope, uint64_t fwd_thread, uint64_t thread = 0) {
  const uint64_t seq = sequence >= 0 && sequence < (int64_t{1} << 40) - 1 ? static_cast<uint64_t>(sequence) + 1 : 0;
  const uint64_t word = seq | uint64_t{scope & 0x7Fu} << 40;
  if (fwd_thread == 0 && thread != 0) return word | kOpWordOwnThread | (thread < 0xFFFF ? thread : 0xFFFF) << 48;
  return word | (fwd_thread < 0xFFFF ? fwd_thread : 0xFFFF) << 48;
}
// RecordScope::USER_SCOPE (record_function), the same value in torch 1.13's and 2.x's enum.
constexpr uint8_t kOpScopeUser = 7;
constexpr int64_t op_word_sequence(uint64_t w) { return static_cast<int64_t>(w & ((uint64_t{1} << 40) - 1)) - 1; }
constexpr uint8_t op_word_scope(uint64_t w) { return static_cast<uint8_t>((w >> 40) & 0x7F); }
// torch's forwardThreadId(): 0 for an op that is not a backward op.
constexpr uint32_t op_word_fwd_thread(uint64_t w) {
  return (w & kOpWordOwnThread) != 0 ? 0 : static_cast<uint32_t>(w >> 48);
}
// torch's id of the op's own thread, when it was recorded (0 otherwise); backward ops
// carry their forward thread instead.
constexpr uint32_t op_word_thread(uint64_t w) {
  return (w & kOpWordOwnThread) != 0 ? static_cast<uint32_t>(w >> 48) : 0;
}
static_assert(op_word_sequence(op_word(-1, 0, 0)) == -1);
static_assert(op_word_sequence(op_word(123, 7, 9)) == 123 && op_word_scope(op_word(123, 7, 9)) == 7 &&
              op_word_fwd_thread(op_word(123, 7, 9)) == 9 && op_word_thread(op_word(123, 7, 9, 4)) == 0);
static_assert(op_word_fwd_thread(op_word(5, 0, 0, 3)) == 0 && op_word_thread(op_word(5, 0, 0, 3)) == 3 &&
              op_word_scope(op_word(5, 0, 0, 3)) == 0 && op_word_sequence(op_word(5, 0, 0, 3)) == 5);

struct Record {
  uint8_t kind;     // Kind
  uint8_t extra;    // continuation slots that follow this one
  uint16_t domain;  // NVTX domain id, 0 = default domain
  uint32_t name;    // string id, 0 = none
  uint64_t ts;      // CLOCK_MONOTONIC ns (Hello's clock pair converts it)
  uint64_t a;
  uint64_t b;
};

constexpr uint32_t slots_for_bytes(uint32_t bytes) { return (bytes + kSlotSize - 1) / kSlotSize; }

static_assert(sizeof(Record) == kSlotSize);
static_assert(offsetof(Record, kind) == 0);
static_assert(offsetof(Record, extra) == 1);
static_assert(offsetof(Record, domain) == 2);
static_assert(offsetof(Record, name) == 4);
static_assert(offsetof(Record, ts) == 8);
static_assert(offsetof(Record, a) == 16);
static_assert(offsetof(Record, b) == 24);
static_assert(sizeof(GpuKernelExtra) == 2 * kSlotSize);
static_assert(offsetof(GpuKernelExtra, registers_per_thread) == 32);
static_assert(sizeof(GpuCopyExtra) == kSlotSize);
static_assert(sizeof(GpuMemoryExtra) == kSlotSize);
static_assert(sizeof(GpuSyncExtra) == kSlotSize);
static_assert(sizeof(GpuApiExtra) == kSlotSize);
static_assert(sizeof(GpuDeviceExtra) == 2 * kSlotSize);
static_assert(sizeof(TensorTotals) == kSlotSize);
static_assert(sizeof(MsgHeader) == 8);
static_assert(sizeof(Hello) == 56);
static_assert(offsetof(Hello, version) == 8);
static_assert(offsetof(Hello, pid) == 16);
static_assert(offsetof(Hello, mono_ns) == 24);
static_assert(offsetof(Hello, exe_len) == 40);
static_assert(sizeof(HelloAck) == 8);
static_assert(sizeof(FrameHeader) == 16);
static_assert(sizeof(Bye) == 32);
static_assert(sizeof(Control) == 16);
static_assert(sizeof(WindowEvent) == 16);
static_assert(offsetof(Bye, emitted) == 8);

// Writes a record's fields to the slot at `dst` as four 8-byte words in Record's
// layout. A Record built field by field and then copied whole stalls on the copy:
// its narrow stores cannot be forwarded to the copy's 16-byte loads.
static_assert(std::endian::native == std::endian::little);
inline void store_record(void* dst, uint8_t kind, uint8_t extra, uint64_t domain, uint64_t name, uint64_t ts,
                         uint64_t a, uint64_t b) {
  const uint64_t word0 = uint64_t{kind} | uint64_t{extra} << 8 | domain << 16 | name << 32;
  auto* out = static_cast<uint8_t*>(dst);
  std::memcpy(out + offsetof(Record, kind), &word0, 8);
  std::memcpy(out + offsetof(Record, ts), &ts, 8);
  std::memcpy(out + offsetof(Record, a), &a, 8);
  std::memcpy(out + offsetof(Record, b), &b, 8);
}
inline void store_record(void* dst, const Record& r) {
  store_record(dst, r.kind, r.extra, r.domain, r.name, r.ts, r.a, r.b);
}

}  // namespace torchprof::wire
