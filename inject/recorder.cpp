#include "inject/recorder.h"

#include <sys/prctl.h>

#include <atomic>
#include <cstring>

#include "inject/capture_control.h"
#include "inject/clock.h"
#include "inject/utf8.h"

namespace torchprof::inject {
namespace {

using wire::Kind;
using wire::Record;

std::atomic<uint32_t> g_next_string_id{1};
std::atomic<uint64_t> g_next_range_id{1};
// Set once the program names a range or mark "ProfilerStep#…" itself; the Python
// bootstrap's automatic steps then stand down (torchprof_step_range).
std::atomic<bool> g_program_steps{false};
constexpr char kStepPrefix[] = "ProfilerStep#";
constexpr uint32_t kStepPrefixLen = sizeof(kStepPrefix) - 1;

constexpr uint8_t k(Kind kind) { return static_cast<uint8_t>(kind); }

// The time of a record made now: now_ns(), but never before the thread's last one. The
// clock may step back a few nanoseconds where it changes between clock_gettime and the
// TSC map (its first calibration, a reader that meets the map being replaced); a
// thread's records keep their order all the same, as the analysis expects of them.
inline uint64_t stamp(ThreadBuffer* tb) {
  const uint64_t now = now_ns();
  const uint64_t ts = now > tb->last_ts ? now : tb->last_ts;
  tb->last_ts = ts;
  return ts;
}

// Only the owning thread writes `dropped`; the flusher reads it.
inline void count_drop(ThreadBuffer* tb, uint64_t heads) {
  tb->dropped.store(tb->dropped.load(std::memory_order_relaxed) + heads, std::memory_order_relaxed);
}

// Writes a kString head and its bytes starting `at` slots after the last
// committed one; returns the slots used.
uint64_t put_string(SegmentStream& stream, uint64_t at, uint32_t id, const char* text, uint32_t len, uint64_t ts) {
  uint32_t extra = wire::slots_for_bytes(len);
  wire::store_record(stream.slot(at), k(Kind::kString), static_cast<uint8_t>(extra), 0, id, ts, len, 0);
  for (uint32_t i = 0; i < extra; ++i) {
    auto* dst = reinterpret_cast<char*>(stream.slot(at + 1 + i));
    uint32_t off = i * wire::kSlotSize;
    uint32_t n = len - off < wire::kSlotSize ? len - off : wire::kSlotSize;
    memcpy(dst, text + off, n);
    if (n < wire::kSlotSize) memset(dst + n, 0, wire::kSlotSize - n);
  }
  return 1 + extra;
}

inline void publish(ThreadBuffer* tb, uint64_t slots) {
  uint64_t head = tb->stream.commit(slots);
  if (__builtin_expect(head >= tb->next_wake, 0)) {
    // Once per half segment: the flusher reads the other before this one is full.
    tb->next_wake = head + tb->wake_every;
    sem_post(tb->wake);
  }
}

// Writes `n` records (recs[0] gets the name's id) and, when the name is new to
// this thread, its kString first: all of it or nothing.
// `heads` of the `n` slots are records (the rest continuation slots); drops count heads.
// Only names new to the thread are looked at, so the check stays off the hot path.
inline void note_step_marker(const NameRef& name) {
  if (name.len >= kStepPrefixLen && memcmp(name.text, kStepPrefix, kStepPrefixLen) == 0) {
    g_program_steps.store(true, std::memory_order_relaxed);
    capture::note_has_steps();
  }
}

inline bool write_unit(ThreadBuffer* tb, const NameRef& name, Record* recs, uint32_t n, uint32_t heads,
                       bool program_name = true) {
  uint32_t id = name.id;
  StringIntern::Probe probe;
  bool define = false;
  if (name.text != nullptr) {
    id = tb->intern.find(name.text, name.len, &probe);
    if (id == StringIntern::kNotFound) {
      id = next_string_id();
      define = true;
      if (program_name) note_step_marker(name);
    }
  }
  recs[0].name = id;
  uint64_t slots = n + (define ? 1 + wire::slots_for_bytes(name.len) : 0);
  if (__builtin_expect(!tb->stream.has_room(slots), 0) && !grow_thread_buffer(tb, slots)) {
    count_drop(tb, heads + (define ? 1 : 0));
    return false;  // the string is not marked interned: the next use defines it again
  }
  uint64_t at = define ? put_string(tb->stream, 0, id, name.text, name.len, recs[0].ts) : 0;
  for (uint32_t i = 0; i < n; ++i) wire::store_record(tb->stream.slot(at + i), recs[i]);
  publish(tb, slots);
  if (define) tb->intern.insert(probe, name.text, name.len, id);
  if (name.address != nullptr) tb->addresses.remember(name.address, name.text, name.len, id);
  return true;
}

inline bool write_unit(ThreadBuffer* tb, const NameRef& name, Record* recs, uint32_t n) {
  return write_unit(tb, name, recs, n, n);
}

inline bool has_payload(uint64_t attr) { return wire::attr_payload_type(attr) != wire::PayloadType::kNone; }

}  // namespace

uint32_t next_string_id() { return g_next_string_id.fetch_add(1, std::memory_order_relaxed); }
uint64_t next_range_id() { return g_next_range_id.fetch_add(1, std::memory_order_relaxed); }

NameRef ascii_name(const char* s) {
  if (s == nullptr) return NameRef{};
  return NameRef{s, static_cast<uint32_t>(strnlen(s, wire::kMaxStringBytes)), 0};
}

NameRef cached_ascii_name(ThreadBuffer* tb, const char* s) {
  if (s == nullptr) return NameRef{};
  if (uint32_t id = tb->addresses.find(s)) return NameRef{nullptr, 0, id, nullptr};
  NameRef name = ascii_name(s);
  name.address = s;
  return name;
}

NameRef wide_name(ThreadBuffer* tb, const wchar_t* s) {
  if (s == nullptr) return NameRef{};
  size_t n = wide_to_utf8(s, tb->scratch, sizeof(tb->scratch));
  return NameRef{tb->scratch, static_cast<uint32_t>(n), 0};
}

namespace {

// A nesting record (push, op begin): one level deeper on its thread and domain.
inline int record_open(ThreadBuffer* tb, Kind kind, uint16_t domain, const NameRef& name, uint64_t a, uint64_t b) {
  int level = tb->depth[domain % ThreadBuffer::kDepthSlots]++;
  Record r{k(kind), 0, domain, 0, stamp(tb), a, b};
  write_unit(tb, name, &r, 1);
  return level;
}

// Its closing record (pop, op end): not written when nothing is open, nor when the level
// it closes was opened while recording was paused.
inline int record_close(ThreadBuffer* tb, Kind kind, uint16_t domain, uint64_t a) {
  const uint32_t slot = domain % ThreadBuffer::kDepthSlots;
  int32_t& depth = tb->depth[slot];
  if (depth <= 0) return -1;
  int level = --depth;
  if (__builtin_expect(tb->unrecorded[slot] != 0, 0) && capture::skip_pop(tb->unrecorded[slot], level)) return level;
  Record r{k(kind), 0, domain, 0, stamp(tb), a, 0};
  write_unit(tb, NameRef{}, &r, 1);
  return level;
}

}  // namespace

int record_push(ThreadBuffer* tb, uint16_t domain, const NameRef& name, uint64_t attr, uint64_t payload) {
  return record_open(tb, Kind::kPush, domain, name, attr, payload);
}

int record_pop(ThreadBuffer* tb, uint16_t domain) { return record_close(tb, Kind::kPop, domain, 0); }

int record_op_begin(ThreadBuffer* tb, uint16_t domain, const NameRef& name, uint64_t op_word, uint64_t handle) {
  return record_open(tb, Kind::kOpBegin, domain, name, op_word, handle);
}

int record_op_end(ThreadBuffer* tb, uint16_t domain, uint64_t handle) {
  return record_close(tb, Kind::kOpEnd, domain, handle);
}

uint64_t record_start(ThreadBuffer* tb, uint16_t domain, const NameRef& name, uint64_t attr, uint64_t payload) {
  uint64_t id = next_range_id();
  uint64_t ts = stamp(tb);
  Record recs[2] = {Record{k(Kind::kStart), 0, domain, 0, ts, id, attr},
                    Record{k(Kind::kPayload), 0, domain, 0, ts, attr, payload}};
  write_unit(tb, name, recs, has_payload(attr) ? 2 : 1);
  return id;
}

void record_end(ThreadBuffer* tb, uint16_t domain, uint64_t range_id) {
  Record r{k(Kind::kEnd), 0, domain, 0, stamp(tb), range_id, 0};
  write_unit(tb, NameRef{}, &r, 1);
}

void record_range(ThreadBuffer* tb, uint16_t domain, const NameRef& name, uint64_t start_ns, uint64_t end_ns) {
  uint64_t id = next_range_id();
  if (end_ns < start_ns) end_ns = start_ns;
  Record recs[2] = {Record{k(Kind::kStart), 0, domain, 0, start_ns, id, 0},
                    Record{k(Kind::kEnd), 0, domain, 0, end_ns, id, 0}};
  write_unit(tb, name, recs, 2, 2, /*program_name=*/false);
}

bool program_marks_steps() { return g_program_steps.load(std::memory_order_relaxed); }

void record_mark(ThreadBuffer* tb, uint16_t domain, const NameRef& name, uint64_t attr, uint64_t payload) {
  Record r{k(Kind::kMark), 0, domain, 0, stamp(tb), attr, payload};
  write_unit(tb, name, &r, 1);
}

void record_tensor_memory(ThreadBuffer* tb, wire::Kind kind, uint16_t domain, uint64_t address, uint64_t bytes,
                          const wire::TensorTotals* totals) {
  Record recs[2];
  recs[0] = Record{k(kind), static_cast<uint8_t>(totals != nullptr ? 1 : 0), domain, 0, stamp(tb), address, bytes};
  if (totals == nullptr) {
    write_unit(tb, NameRef{}, recs, 1);
    return;
  }
  memcpy(&recs[1], totals, sizeof *totals);
  write_unit(tb, NameRef{}, recs, 2, 1);
}

void record_allocator_stats(ThreadBuffer* tb, uint16_t device, uint64_t alloc_retries, uint64_t ooms) {
  Record r{k(Kind::kAllocatorStats), 0, device, 0, stamp(tb), alloc_retries, ooms};
  write_unit(tb, NameRef{}, &r, 1);
}

void record_thread_name(ThreadBuffer* tb, uint32_t os_tid, const NameRef& name, uint64_t source) {
  Record r{k(Kind::kThreadName), 0, 0, 0, stamp(tb), os_tid, source};
  write_unit(tb, name, &r, 1);
}

void record_thread_start(ThreadBuffer* tb) {
  Record r{k(Kind::kThreadStart), 0, 0, 0, stamp(tb), tb->is_main ? 1u : 0u, 0};
  write_unit(tb, NameRef{}, &r, 1);
  char name[17] = {};
  if (prctl(PR_GET_NAME, name, 0, 0, 0) == 0) record_thread_name(tb, 0, ascii_name(name), /*source=*/1);
}

bool record_plain(ThreadBuffer* tb, const wire::Record& r) {
  Record copy = r;
  copy.ts = stamp(tb);
  return write_unit(tb, NameRef{}, &copy, 1);
}

void record_api(ThreadBuffer* tb, wire::Kind kind, uint16_t cbid, const NameRef& name, uint64_t enter,
                uint64_t exit, uint64_t correlation) {
  Record r{k(kind), 0, cbid, 0, enter, exit, correlation};
  if (exit > tb->last_ts) tb->last_ts = exit;  // what the thread records next comes after the call
  write_unit(tb, name, &r, 1);
}

bool record_with_extra(ThreadBuffer* tb, const NameRef& name, const wire::Record& head, const void* extra,
                       uint32_t extra_slots) {
  if (extra_slots > kMaxExtraSlots) return false;
  Record recs[1 + kMaxExtraSlots];
  recs[0] = head;
  recs[0].extra = static_cast<uint8_t>(extra_slots);
  if (extra_slots != 0) memcpy(&recs[1], extra, extra_slots * sizeof(Record));
  return write_unit(tb, name, recs, 1 + extra_slots, 1);
}

bool record_string_def(ThreadBuffer* tb, uint32_t id, const char* text, uint32_t len, const wire::Record* follow) {
  if (len > wire::kMaxStringBytes) len = wire::kMaxStringBytes;
  uint64_t slots = 1 + wire::slots_for_bytes(len) + (follow != nullptr ? 1 : 0);
  uint64_t heads = follow != nullptr ? 2 : 1;
  if (!tb->stream.has_room(slots) && !grow_thread_buffer(tb, slots)) {
    count_drop(tb, heads);
    return false;
  }
  uint64_t ts = stamp(tb);
  uint64_t at = put_string(tb->stream, 0, id, text, len, ts);
  if (follow != nullptr) {
    wire::store_record(tb->stream.slot(at), follow->kind, follow->extra, follow->domain, follow->name, ts, follow->a,
                       follow->b);
  }
  publish(tb, slots);
  return true;
}

}  // namespace torchprof::inject
