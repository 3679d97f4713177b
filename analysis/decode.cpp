#include "analysis/decode.h"

#include "analysis/analysis.h"
#include "analysis/process_info.h"
#include "reading/capture_scan.h"
#include "reading/decoded_frames.h"
#include "reading/frame_decode.h"
#include "analysis/gpu_decode.h"
#include "analysis/op_message.h"
#include "analysis/range_pairing.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "common/wire/wire.h"

namespace torchprof {

namespace {

using capture::ChunkType;

// Frame bytes read so far against the total, reported
// to the caller's callback at most once per percent.
class ProgressMeter {
 public:
  explicit ProgressMeter(const DecodeProgress& callback) : callback_(callback) {}
  void set_total(uint64_t total) { total_ = total; }
  void add(uint64_t bytes) {
    done_ += bytes;
    if (!callback_ || total_ == 0) return;
    const uint64_t percent = done_ * 100 / total_;
    if (percent == last_percent_) return;
    last_percent_ = percent;
    callback_(done_, total_);
  }

 private:
  const DecodeProgress& callback_;
  uint64_t total_ = 0;
  uint64_t done_ = 0;
  uint64_t last_percent_ = ~uint64_t{0};
};

// What decoding learns about the order of a process's events list as it appends to it.
struct AppendOrder {
  bool strictly_increasing = true;  // by (tid, start): no sort and no check needed
  bool any = false;
  uint32_t last_tid = 0;
  int64_t last_start = 0;
  std::unordered_map<uint32_t, uint64_t> per_thread;  // events per thread
};

// Asks the kernel to back the vector's unused capacity with huge pages (2 MiB, where
// transparent huge pages are enabled for madvise): a list of events is written once,
// front to back, and faulting it in 4 KiB at a time costs a page fault every few dozen
// events. Capacity under 2 MiB is left as it is.
template <typename T>
void advise_huge_pages(std::vector<T>& v) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const auto from = reinterpret_cast<uintptr_t>(v.data() + v.size());
  const auto to = reinterpret_cast<uintptr_t>(v.data() + v.capacity());
  const uintptr_t first = (from + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t last = to & ~(kHuge - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

// Turns one connection's frames into events of `proc`.
class ConnDecoder {
 public:
  ConnDecoder(CaptureReader& reader, const ConnInput& conn, Process& proc, AppendOrder& order,
              ProgressMeter* meter = nullptr)
      : reader_(reader),
        conn_(conn),
        proc_(proc),
        order_(order),
        meter_(meter),
        gpu_(proc, static_cast<int64_t>(conn.hello.real_ns - conn.hello.mono_ns)) {}

  // One pass over the frames. A name, domain or category may be used in one thread's
  // frame before the frame of the thread that defined it (written later): such uses get
  // a stand-in that resolve_late_definitions() replaces once every frame has been read.
  // True when some string could make an event a PyTorch operator (classify_pytorch_ops).
  bool may_hold_ops() const { return may_hold_ops_; }

  void run() {
    first_event_ = proc_.events_list.size();
    first_gpu_event_ = proc_.gpu_events.size();
    // Every event takes at least one slot and an NVTX range, the usual event, two:
    // reserving half the slots spares most of a growing vector's copies (and its
    // doubled memory) without reserving far more than is used.
    uint64_t slots = 0;
    for (const FrameRef& ref : conn_.frames) slots += ref.slots;
    proc_.events_list.reserve(proc_.events_list.size() + slots / 2);
    advise_huge_pages(proc_.events_list);
    DecodedFrames frames(reader_, conn_.frames);
    for (const FrameRef& ref : conn_.frames) {
      const DecodedFrames::Frame* frame = frames.next();
      if (frame->ok) {
        raw_ = &frame->raw;
        build_events(frame->header);
      } else {
        ++bad_frames_;
      }
      if (meter_) meter_->add(ref.size);
    }
    raw_ = nullptr;
    close_open_ranges();
    gpu_.finish();
    resolve_late_definitions();
    finish();
  }

 private:
  struct ThreadState {
    int64_t last_ts = std::numeric_limits<int64_t>::min();
    uint64_t dropped = 0;
    uint32_t next_seq = 0;
    bool nvtx_named = false;
  };
  template <typename Fn>
  void walk(Fn&& fn) {
    if (!for_each_record(*raw_, fn)) ++cut_records_;
  }

  // Definitions: a string's text, a domain's name, a category's name.
  void define(const wire::Record& r, const uint8_t* extra, size_t extra_bytes) {
    switch (static_cast<wire::Kind>(r.kind)) {
      case wire::Kind::kString: {
        size_t len = std::min<uint64_t>(r.a, extra_bytes);
        std::string& text = strings_[r.name];
        text.assign(reinterpret_cast<const char*>(extra), len);
        // An operator is a range in the ops domain or a message with "key = value"
        // fields: without such a string no event can be one.
        if (text.find(" = ") != std::string::npos || text == kPytorchOpsDomain) may_hold_ops_ = true;
        if (r.name < names_known_.size()) names_known_[r.name] = false;
        break;
      }
      case wire::Kind::kDomain:
        domain_names_[r.domain] = r.name;
        break;
      case wire::Kind::kCategory:
        category_names_[category_key(r.domain, static_cast<uint32_t>(r.a))] = r.name;
        break;
      default:
        break;
    }
  }

  static uint64_t category_key(uint16_t domain, uint32_t category) { return (uint64_t{domain} << 32) | category; }

  static std::string stand_in_text(uint32_t id) { return "<string " + std::to_string(id) + ">"; }

  // The interned text of string `id` (ids are small and dense: a vector caches them).
  // A string not defined yet is named "<string ID>", which stays if it never is.
  Name string_of(uint32_t id) {
    if (id == 0) return {};
    if (id < names_.size() && names_known_[id]) return names_[id];
    Name name;
    auto it = strings_.find(id);
    if (it != strings_.end()) {
      name = it->second;
    } else {
      name = stand_in_text(id);
      stand_in_strings_.insert(id);
    }
    if (id < kDenseNames) {
      if (id >= names_.size()) {
        names_.resize(id + 1);
        names_known_.resize(id + 1, false);
      }
      names_[id] = name;
      names_known_[id] = true;
    }
    return name;
  }

  // The name of `domain` (of `category` in `domain`); a stand-in while it is not defined yet.
  Name domain_of(uint16_t domain) {
    if (domain == 0) return {};
    return defined_or_stand_in(domain_names_, late_domains_, domain, "domain ");
  }
  Name category_of(uint16_t domain, uint32_t category) {
    return defined_or_stand_in(category_names_, late_categories_, category_key(domain, category), "category ");
  }

  template <typename Key>
  Name defined_or_stand_in(const std::unordered_map<Key, uint32_t>& names, std::unordered_map<Name, Key>& late,
                           Key key, const char* what) {
    auto it = names.find(key);
    if (it != names.end()) return string_of(it->second);
    Name stand_in(std::string("\x01") + what + std::to_string(key));
    late.try_emplace(stand_in, key);
    return stand_in;
  }

  // Replaces the stand-ins of definitions read after their first use: strings defined
  // later get their text, domains and categories their name (none if never defined).
  void resolve_late_definitions() {
    std::unordered_map<Name, Name> final_name;
    std::unordered_map<std::string, std::string> final_text;  // thread and device names
    // A string named by a stand-in when used and defined by the end was defined later.
    for (uint32_t id : stand_in_strings_) {
      auto defined = strings_.find(id);
      if (defined == strings_.end()) {
        ++unknown_strings_;
        continue;
      }
      std::string old_text = stand_in_text(id);
      final_name[Name(old_text)] = Name(defined->second);
      final_text[old_text] = defined->second;
    }
    for (const auto& [stand_in, domain] : late_domains_) {
      auto d = domain_names_.find(domain);
      final_name[stand_in] = d != domain_names_.end() ? string_of(d->second) : Name();
    }
    for (const auto& [stand_in, key] : late_categories_) {
      auto c = category_names_.find(key);
      final_name[stand_in] = c != category_names_.end() ? string_of(c->second) : Name();
    }
    if (final_name.empty()) return;
    auto fix = [&final_name](Name& n) {
      auto it = final_name.find(n);
      if (it != final_name.end()) n = it->second;
    };
    for (size_t i = first_event_; i < proc_.events_list.size(); ++i) {
      Event& e = proc_.events_list[i];
      fix(e.name);
      if (e.tags == nullptr) continue;
      EventTags tags = *e.tags;
      fix(tags.domain);
      fix(tags.category_name);
      if (!(tags == *e.tags)) e.tags = EventTags::intern(tags);
    }
    for (size_t i = first_gpu_event_; i < proc_.gpu_events.size(); ++i) {
      GpuEvent& g = proc_.gpu_events[i];
      if (g.kind == GpuKind::kKernel && final_name.count(g.mangled) != 0) {
        fix(g.mangled);
        g.name = demangle(g.mangled);
      } else {
        fix(g.name);
      }
    }
    auto fix_text = [&final_text](std::string& t) {
      auto it = final_text.find(t);
      if (it != final_text.end()) t = it->second;
    };
    for (ThreadInfo& t : proc_.threads) fix_text(t.name);
    for (GpuDevice& d : proc_.devices) fix_text(d.name);
    for (std::string& n : proc_.gpu_notices) fix_text(n);
  }

  // The operation stack of (thread, domain); the last one is kept at hand.
  std::vector<int32_t>& stack_of(uint32_t tid, uint16_t domain) {
    const uint64_t key = (uint64_t{tid} << 16) | domain;
    if (last_stack_ == nullptr || key != last_stack_key_) {
      last_stack_ = &stacks_[key];  // unordered_map values keep their address
      last_stack_key_ = key;
    }
    return *last_stack_;
  }

  int64_t epoch(uint64_t ts) const { return record_epoch_ns(conn_.hello, ts); }

  void touch(ThreadState& t, int64_t ts) {
    t.last_ts = std::max(t.last_ts, ts);
    last_ts_ = std::max(last_ts_, ts);
    first_ts_ = std::min(first_ts_, ts);
  }

  // A new event of thread `tid` starting at `start`, appended to the process's list.
  Event& append_event(uint32_t tid, int64_t start) {
    if (order_.any && order_.strictly_increasing) {
      order_.strictly_increasing =
          order_.last_tid != tid ? order_.last_tid < tid : order_.last_start < start;
    }
    order_.any = true;
    if (tid != order_.last_tid || last_count_ == nullptr) last_count_ = &order_.per_thread[tid];
    ++*last_count_;
    order_.last_tid = tid;
    order_.last_start = start;
    Event& e = proc_.events_list.emplace_back();
    e.tid = tid;
    e.start_ns = e.end_ns = start;
    return e;
  }

  int32_t new_event(const wire::Record& r, uint32_t tid, EventKind kind, uint64_t attr) {
    auto index = static_cast<int32_t>(proc_.events_list.size());
    Event& e = append_event(tid, epoch(r.ts));
    e.name = string_of(r.name);
    e.kind = kind;
    if (r.domain != 0) e.set_domain(domain_of(r.domain));
    last_domain_ = r.domain;
    set_attr(e, r.domain, attr);
    return index;
  }

  void set_attr(Event& e, uint16_t domain, uint64_t attr) {
    const uint32_t category = wire::attr_category(attr);
    e.payload_type = static_cast<uint8_t>(wire::attr_payload_type(attr));
    if (category != e.category()) e.set_category(category, category != 0 ? category_of(domain, category) : Name());
  }

  void build_events(const wire::FrameHeader& fh) {
    ThreadState& thread = threads_[fh.tid];
    if (fh.seq != thread.next_seq) {
      if (fh.seq > thread.next_seq) lost_frames_ += fh.seq - thread.next_seq;
    }
    thread.next_seq = fh.seq + 1;
    int32_t last_event = -1;
    walk([&](const wire::Record& r, const uint8_t* extra, size_t extra_bytes) {
      if (r.kind >= static_cast<uint8_t>(wire::Kind::kKernel)) {
        // GPU records carry their own clock span; they do not move the writing thread's.
        if (gpu_.decode(r, extra, extra_bytes, fh.tid, string_of(r.name))) {
          last_event = -1;
          return;
        }
      }
      if (r.kind == static_cast<uint8_t>(wire::Kind::kString) || r.kind == static_cast<uint8_t>(wire::Kind::kDomain) ||
          r.kind == static_cast<uint8_t>(wire::Kind::kCategory)) {
        define(r, extra, extra_bytes);
        last_event = -1;
        return;
      }
      last_event = on_record(r, fh.tid, thread, last_event);
    });
  }

  // Returns the event a following kPayload would refer to (-1: none).
  int32_t on_record(const wire::Record& r, uint32_t tid, ThreadState& thread, int32_t last_event) {
    switch (static_cast<wire::Kind>(r.kind)) {
      case wire::Kind::kPush: {
        touch(thread, epoch(r.ts));
        int32_t i = new_event(r, tid, EventKind::kRange, r.a);
        proc_.events_list[i].payload = r.b;
        stack_of(tid, r.domain).push_back(i);
        return i;
      }
      case wire::Kind::kPop: {
        touch(thread, epoch(r.ts));
        auto& stack = stack_of(tid, r.domain);
        if (stack.empty()) {
          ++unmatched_pops_;
        } else {
          proc_.events_list[stack.back()].end_ns = epoch(r.ts);
          stack.pop_back();
        }
        return -1;
      }
      case wire::Kind::kStart:
        return on_start(r, tid, thread);
      case wire::Kind::kEnd:
        on_end(r, tid, thread);
        return -1;
      case wire::Kind::kMark: {
        touch(thread, epoch(r.ts));
        int32_t i = new_event(r, tid, EventKind::kMark, r.a);
        proc_.events_list[i].payload = r.b;
        return i;
      }
      case wire::Kind::kCudaRuntime:
      case wire::Kind::kCudaDriver:
        on_api_call(r, tid, thread);
        return -1;
      case wire::Kind::kPayload:
        if (last_event >= 0) {
          Event& e = proc_.events_list[last_event];
          set_attr(e, last_domain_, r.a);
          e.payload = r.b;
        }
        return -1;
      default:
        on_thread_record(r, tid, thread);
        return -1;
    }
  }

  int32_t on_start(const wire::Record& r, uint32_t tid, ThreadState& thread) {
    touch(thread, epoch(r.ts));
    int32_t i = new_event(r, tid, EventKind::kRange, r.b);
    proc_.events_list[i].push_pop = false;
    if (std::optional<RangePairing::End> end = start_ends_.start(r.a, static_cast<uint32_t>(i))) {
      proc_.events_list[i].end_ns = end->ts;
      proc_.events_list[i].set_end_tid(end->tid);
    }
    return i;
  }

  // An API call is a closed interval on its thread: enter at ts, exit in a.
  void on_api_call(const wire::Record& r, uint32_t tid, ThreadState& thread) {
    Event& e = append_event(tid, epoch(r.ts));
    e.name = string_of(r.name);
    e.kind = static_cast<wire::Kind>(r.kind) == wire::Kind::kCudaRuntime ? EventKind::kCudaRuntime
                                                                          : EventKind::kCudaDriver;
    e.end_ns = std::max(e.start_ns, epoch(r.a));
    e.set_cbid(r.domain);
    e.correlation = r.b;
    touch(thread, e.start_ns);
    touch(thread, e.end_ns);
  }

  void on_end(const wire::Record& r, uint32_t tid, ThreadState& thread) {
    touch(thread, epoch(r.ts));
    // The start may sit in another thread's frame that was written later: it waits.
    if (std::optional<uint32_t> open = start_ends_.end(r.a, epoch(r.ts), tid)) {
      Event& e = proc_.events_list[*open];
      e.end_ns = epoch(r.ts);
      e.set_end_tid(tid);
    }
  }

  void on_thread_record(const wire::Record& r, uint32_t tid, ThreadState& thread) {
    switch (static_cast<wire::Kind>(r.kind)) {
      case wire::Kind::kThreadName: {
        uint32_t named = r.a != 0 ? static_cast<uint32_t>(r.a) : tid;
        bool from_os = r.b == static_cast<uint64_t>(ThreadNameSource::kOs);
        ThreadState& target = threads_[named];
        if (from_os && target.nvtx_named) break;
        if (!from_os) target.nvtx_named = true;
        thread_info(named).name = string_of(r.name);
        break;
      }
      case wire::Kind::kThreadStart:
        touch(thread, epoch(r.ts));
        thread_info(tid).is_main = r.a == 1;
        break;
      case wire::Kind::kDropped:
        thread.dropped = std::max(thread.dropped, r.a);
        break;
      case wire::Kind::kBufferUsage:
      case wire::Kind::kBufferRefused:
        buffers_.take(r, conn_.hello);
        break;
      case wire::Kind::kCaptureWindow:
        proc_.capture_toggles.push_back(
            {epoch(r.ts), static_cast<uint32_t>(r.a), r.b == 1, static_cast<uint16_t>(r.domain)});
        break;
      default:
        break;  // kPad, kinds newer than this reader
    }
  }

  ThreadInfo& thread_info(uint32_t tid) {
    for (ThreadInfo& t : proc_.threads) {
      if (t.tid == tid) return t;
    }
    ThreadInfo& t = proc_.threads.emplace_back();
    t.tid = tid;
    return t;
  }

  // Ranges never closed end at their thread's last timestamp (start/end ranges,
  // which have no single thread, at the image's last timestamp).
  void close_open_ranges() {
    for (auto& [key, stack] : stacks_) {
      auto tid = static_cast<uint32_t>(key >> 16);
      for (int32_t i : stack) {
        Event& e = proc_.events_list[i];
        e.end_ns = std::max(e.start_ns, threads_[tid].last_ts);
        e.unterminated = true;
        ++unterminated_;
      }
    }
    for (const auto& [id, i] : start_ends_.open()) {
      Event& e = proc_.events_list[i];
      e.end_ns = std::max(e.start_ns, image_end());
      e.unterminated = true;
      ++unterminated_;
    }
  }

  int64_t image_end() const {
    int64_t end = last_ts_;
    if (conn_.bye && conn_.bye->mono_ns != 0) end = std::max(end, epoch(conn_.bye->mono_ns));
    return end;
  }

  void finish() {
    uint64_t thread_dropped = 0;
    for (auto& [tid, state] : threads_) {
      thread_dropped += state.dropped;
      if (state.dropped > 0) thread_info(tid).dropped += state.dropped;
    }
    uint64_t bye_dropped = conn_.bye ? conn_.bye->dropped : 0;
    proc_.dropped += std::max(bye_dropped, thread_dropped);
    buffers_.apply(proc_);
    if (gpu_.any()) {
      first_ts_ = std::min(first_ts_, gpu_.first_ns());
      last_ts_ = std::max(last_ts_, gpu_.last_ns());
    }
    if (first_ts_ != std::numeric_limits<int64_t>::max()) {
      proc_.start_ns = proc_.start_ns == 0 ? first_ts_ : std::min(proc_.start_ns, first_ts_);
    }
    if (last_ts_ != std::numeric_limits<int64_t>::min() || conn_.bye) {
      proc_.end_ns = std::max(proc_.end_ns, image_end());
    }
    add_decode_warnings(conn_,
                        {bad_frames_, cut_records_, lost_frames_, unmatched_pops_, start_ends_.waiting_ends(),
                         unterminated_, unknown_strings_},
                        proc_);
  }

  CaptureReader& reader_;
  const ConnInput& conn_;
  Process& proc_;
  AppendOrder& order_;
  uint64_t* last_count_ = nullptr;  // order_.per_thread[order_.last_tid]
  ProgressMeter* meter_;
  GpuDecoder gpu_;
  const std::vector<uint8_t>* raw_ = nullptr;  // the frame being read (DecodedFrames)
  static constexpr uint32_t kDenseNames = 1u << 20;
  std::unordered_map<uint32_t, std::string> strings_;
  std::vector<Name> names_;        // string_of()'s cache, by id
  std::vector<bool> names_known_;
  std::unordered_set<uint32_t> stand_in_strings_;  // ids named "<string ID>" when used
  std::unordered_map<Name, uint16_t> late_domains_;    // stand-in -> domain id
  std::unordered_map<Name, uint64_t> late_categories_; // stand-in -> category_key()
  size_t first_event_ = 0;      // this image's events start here in proc_.events_list
  size_t first_gpu_event_ = 0;
  bool may_hold_ops_ = false;
  std::vector<int32_t>* last_stack_ = nullptr;
  uint64_t last_stack_key_ = 0;
  std::unordered_map<uint16_t, uint32_t> domain_names_;
  std::unordered_map<uint64_t, uint32_t> category_names_;
  std::unordered_map<uint64_t, std::vector<int32_t>> stacks_;
  RangePairing start_ends_;
  BufferReport buffers_;
  std::unordered_map<uint32_t, ThreadState> threads_;
  uint16_t last_domain_ = 0;
  int64_t first_ts_ = std::numeric_limits<int64_t>::max();
  int64_t last_ts_ = std::numeric_limits<int64_t>::min();
  uint64_t bad_frames_ = 0;
  uint64_t cut_records_ = 0;
  uint64_t lost_frames_ = 0;
  uint64_t unmatched_pops_ = 0;
  uint64_t unterminated_ = 0;
  uint64_t unknown_strings_ = 0;
};

// Returns whether the image's strings could make an event a PyTorch operator.
bool decode_connection(CaptureReader& reader, const ConnInput& conn, Process& proc, AppendOrder& order,
                       ProgressMeter* meter) {
  ConnDecoder decoder(reader, conn, proc, order, meter);
  decoder.run();
  return decoder.may_hold_ops();
}

// Events in (tid, start, longer first) order and per-thread event counts, from what
// decoding saw while appending: a list appended in strictly increasing (tid, start)
// order (one thread's events, the usual case) needs neither a sort nor a check.
void sort_process_events(Process& proc, const AppendOrder& order) {
  for (ThreadInfo& t : proc.threads) t.events = 0;
  for (const auto& [tid, count] : order.per_thread) {
    ThreadInfo* info = nullptr;
    for (ThreadInfo& t : proc.threads) {
      if (t.tid == tid) info = &t;
    }
    if (info == nullptr) {
      info = &proc.threads.emplace_back();
      info->tid = tid;
    }
    info->events += count;
  }
  if (!order.strictly_increasing) sort_events(proc.events_list);
  std::stable_sort(proc.threads.begin(), proc.threads.end(),
                   [](const ThreadInfo& x, const ThreadInfo& y) {
                     if (x.is_main != y.is_main) return x.is_main;
                     return x.tid < y.tid;
                   });
}


void finish_run(Run& run) {
  int64_t first = std::numeric_limits<int64_t>::max();
  int64_t last = 0;
  for (Process& proc : run.processes) {
    run.dropped_events += proc.dropped;
    note_buffer_losses(proc);
    if (!proc.loss_note.empty()) run.loss_notes.push_back("pid " + std::to_string(proc.pid) + ": " + proc.loss_note);
    proc.events = proc.events_list.size() + proc.gpu_events.size() + proc.memory_events.size();
    if (proc.events_list.empty() && proc.gpu_events.empty()) ++run.processes_without_events;
    run.cupti_dropped += proc.cupti_dropped;
    if (!proc.gpu_events.empty() || !proc.memory_events.empty()) run.has_gpu = true;
    for (const std::string& n : proc.gpu_notices) {
      run.gpu_notices.push_back("pid " + std::to_string(proc.pid) + ": " + n);
    }
    if (proc.start_ns != 0) first = std::min(first, proc.start_ns);
    last = std::max(last, proc.end_ns);
  }
  if (run.start_ns == 0 && first != std::numeric_limits<int64_t>::max()) run.start_ns = first;
  if (run.end_ns == 0) run.end_ns = last;
  if (run.host.empty() && !run.processes.empty()) run.host = run.processes.front().host;
  if (run.command.empty() && !run.processes.empty()) run.command = run.processes.front().cmdline;
}

}  // namespace

Run decode_capture(CaptureReader& reader) { return decode_capture(reader, DecodeProgress()); }

Run decode_capture(CaptureReader& reader, const DecodeProgress& progress) {
  Run run;
  ScanResult scanned = scan_capture(reader);
  apply_run_info(scanned, run);
  ProgressMeter meter(progress);
  uint64_t frame_bytes = 0;
  for (const auto& conn : scanned.conns) {
    for (const FrameRef& ref : conn->frames) frame_bytes += ref.size;
  }
  meter.set_total(frame_bytes);
  run.truncated = reader.truncated();
  run.truncated_at = reader.truncated_at();

  std::unordered_map<int, size_t> by_pid;
  std::vector<bool> may_hold_ops;
  std::vector<AppendOrder> orders;
  for (const auto& conn : scanned.conns) {
    auto [it, fresh] = by_pid.try_emplace(conn->hello.pid, run.processes.size());
    if (fresh) {
      run.processes.emplace_back();
      may_hold_ops.push_back(false);
      orders.emplace_back();
    }
    Process& proc = run.processes[it->second];
    apply_identity(*conn, proc);
    if (decode_connection(reader, *conn, proc, orders[it->second], &meter)) {
      may_hold_ops[it->second] = true;
    }
    if (conn->bye) apply_bye(*conn->bye, proc);
  }
  for (size_t i = 0; i < run.processes.size(); ++i) {
    sort_process_events(run.processes[i], orders[i]);
    if (may_hold_ops[i]) classify_pytorch_ops(run.processes[i]);
  }
  apply_launcher_view(run, scanned);
  finish_run(run);
  return run;
}

Run decode_capture_file(const std::string& path) { return decode_capture_file(path, DecodeProgress()); }

Run decode_capture_file(const std::string& path, const DecodeProgress& progress) {
  CaptureReader reader(path);
  return decode_capture(reader, progress);
}

}  // namespace torchprof
