#include "formats/kineto_trace.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "formats/json_writer.h"
#include "formats/kineto_gpu.h"
#include "common/wire/wire.h"
#include "formats/write_behind.h"

namespace torchprof {

namespace {

namespace fs = std::filesystem;

constexpr size_t kFlushBytes = 1 << 20;
constexpr size_t kBlockBytes = kFlushBytes + (64 << 10);  // a block is handed on once it passes kFlushBytes
constexpr const char* kStepPrefix = "ProfilerStep#";

class PlainFile : public OutputFile {
 public:
  explicit PlainFile(const std::string& path) : path_(path), file_(std::fopen(path.c_str(), "wb")) {
    if (!file_) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  }
  ~PlainFile() override {
    if (file_) std::fclose(file_);
  }
  void write(std::string_view bytes) override {
    if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) fail();
  }
  void close() override {
    std::FILE* f = std::exchange(file_, nullptr);
    if (std::fclose(f) != 0) fail();
  }

 private:
  [[noreturn]] void fail() { throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(errno)); }
  std::string path_;
  std::FILE* file_;
};

class GzipFile : public OutputFile {
 public:
  // Level 3: most of level 6's ratio on JSON at several times its speed.
  explicit GzipFile(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "wb3")) {
    if (!file_) throw std::runtime_error("cannot write " + path);
  }
  ~GzipFile() override {
    if (file_) gzclose(file_);
  }
  void write(std::string_view bytes) override {
    if (bytes.empty()) return;
    if (gzwrite(file_, bytes.data(), static_cast<unsigned>(bytes.size())) <= 0) {
      throw std::runtime_error("cannot write " + path_);
    }
  }
  void close() override {
    gzFile f = std::exchange(file_, nullptr);
    if (gzclose(f) != Z_OK) throw std::runtime_error("cannot write " + path_);
  }

 private:
  std::string path_;
  gzFile file_;
};

// A trace's bytes handed to the writing thread block by block.
class BehindSink : public TraceSink {
 public:
  BehindSink(WriteBehind& behind, std::shared_ptr<OutputFile> file) : behind_(behind), file_(std::move(file)) {}
  void write(std::string_view bytes) override {
    if (bytes.empty()) return;
    json::Buffer block(bytes.size());
    block += bytes;
    take(block);
  }
  void take(json::Buffer& block) override { behind_.write(file_, block); }

 private:
  WriteBehind& behind_;
  std::shared_ptr<OutputFile> file_;
};

std::string basename_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

struct CycleSpan {
  int64_t start = std::numeric_limits<int64_t>::max();
  int64_t end = std::numeric_limits<int64_t>::min();
};

// Writes one trace; the buffer goes to the sink whenever it grows past kFlushBytes.
// Ascending indices stored as runs [first, last): a cycle's events are mostly
// consecutive in the list (per thread, in time order), so a run costs 8 bytes where
// listing every index would cost 4 per event.
class IndexRuns {
 public:
  void add(uint32_t i) {
    if (!runs_.empty() && runs_.back().second == i) {
      ++runs_.back().second;
    } else {
      runs_.emplace_back(i, i + 1);
    }
  }

  class Iterator {
   public:
    Iterator(const std::vector<std::pair<uint32_t, uint32_t>>& runs, size_t run)
        : runs_(&runs), run_(run), i_(run < runs.size() ? runs[run].first : 0) {}
    uint32_t operator*() const { return i_; }
    Iterator& operator++() {
      if (++i_ == (*runs_)[run_].second && ++run_ < runs_->size()) i_ = (*runs_)[run_].first;
      return *this;
    }
    bool operator!=(const Iterator& o) const { return run_ != o.run_ || (run_ < runs_->size() && i_ != o.i_); }

   private:
    const std::vector<std::pair<uint32_t, uint32_t>>* runs_;
    size_t run_;
    uint32_t i_;
  };
  Iterator begin() const { return Iterator(runs_, 0); }
  Iterator end() const { return Iterator(runs_, runs_.size()); }

 private:
  std::vector<std::pair<uint32_t, uint32_t>> runs_;
};

// What each cycle of a process holds (its events, GPU records and memory events, in
// list order), found in one pass, so that writing a cycle visits only its own; and the
// per-event scratch the cycles' writers share (left all zero after each cycle when
// there are several).
// A process of one cycle (no schedule, or one window) has its events read once, by the
// writer, which skips those outside the cycle: a pass over the list that only indexed
// them cost as much as a quarter of writing the trace.
class CycleIndex {
 public:
  explicit CycleIndex(const Process& proc) : proc_(proc) {
    for (const Step& s : proc.steps) cycles_ = std::max(cycles_, s.cycle + 1);
    const size_t n = proc.events_list.size();
    if (one_cycle()) {
      // API calls are not known without reading the list: External ids are kept for
      // every event (4 bytes each, while the trace is written).
      external_ids.assign(n, 0);
      if (!proc.gpu_events.empty()) launches.assign(n, false);
    } else {
      bool api_calls = false;
      for (size_t i = 0; i < n; ++i) {
        add(events_, cycle_of(proc.events_list[i].step), i);
        api_calls = api_calls || is_cuda_api(proc.events_list[i].kind);
      }
      // Only API calls and GPU records look up the External id of their enclosing range.
      if (api_calls || !proc.gpu_events.empty()) {
        external_ids.assign(n, 0);
        launches.assign(n, false);
      }
    }
    for (size_t i = 0; i < proc.gpu_events.size(); ++i) add(gpu_, cycle_of(proc.gpu_events[i].step), i);
    for (size_t i = 0; i < proc.memory_events.size(); ++i) add(memory_, cycle_of(proc.memory_events[i].step), i);
    for (size_t k = 0; k < proc.steps.size(); ++k) {
      const Step& s = proc.steps[k];
      add(steps_, s.cycle, k);
      if (s.cycle < 0) continue;
      if (static_cast<size_t>(s.cycle) >= spans_.size()) spans_.resize(static_cast<size_t>(s.cycle) + 1);
      CycleSpan& span = spans_[static_cast<size_t>(s.cycle)];
      span.start = std::min(span.start, s.start_ns);
      span.end = std::max(span.end, s.start_ns + s.dur_ns);
    }
  }

  // The steps of `cycle` from the first one's start to the last one's end.
  CycleSpan span(int cycle) const {
    return cycle >= 0 && static_cast<size_t>(cycle) < spans_.size() ? spans_[static_cast<size_t>(cycle)] : CycleSpan{};
  }

  // How many cycles the process's steps make.
  int cycles() const { return cycles_; }

  // Calls fn(i) for each event of `cycle`, in list order.
  template <typename Fn>
  void for_each_event(int cycle, Fn&& fn) const {
    if (!one_cycle()) {
      for (uint32_t i : of(events_, cycle)) fn(i);
      return;
    }
    for (size_t i = 0; i < proc_.events_list.size(); ++i) {
      if (cycle_of(proc_.events_list[i].step) == cycle) fn(static_cast<uint32_t>(i));
    }
  }
  // Whether an event's External id must be cleared after its cycle: another cycle's
  // writer reads the list.
  bool shared() const { return !one_cycle(); }
  const IndexRuns& gpu(int cycle) const { return of(gpu_, cycle); }
  const IndexRuns& memory(int cycle) const { return of(memory_, cycle); }
  const IndexRuns& steps(int cycle) const { return of(steps_, cycle); }

  std::vector<uint32_t> external_ids;  // per event index: the External id written for it
                                       // (empty when nothing looks them up)
  std::vector<bool> launches;          // per event index: an API call with GPU work in the cycle
  std::unordered_map<uint64_t, uint32_t> api_tids;  // correlation id → calling thread
  bool api_tids_built = false;

  // TraceWriter::common()'s prefixes, by (name, thread, category): direct-mapped.
  struct Prefix {
    const void* name = nullptr;
    uint32_t tid = 0;
    const char* ph = nullptr;  // nullptr: empty
    const char* cat = nullptr;
    std::string text;
  };
  Prefix& prefix(const void* name, uint32_t tid, const char* cat) {
    const uintptr_t h = (reinterpret_cast<uintptr_t>(name) >> 4) ^ (uintptr_t{tid} * 0x9E3779B1u) ^
                        (reinterpret_cast<uintptr_t>(cat) >> 2);
    return prefixes_[h & (kPrefixes - 1)];
  }

 private:
  bool one_cycle() const { return cycles_ == 1; }
  int cycle_of(int32_t step) const { return step >= 0 ? proc_.steps[static_cast<size_t>(step)].cycle : -1; }

  using Lists = std::vector<IndexRuns>;
  static void add(Lists& lists, int cycle, size_t i) {
    if (cycle < 0) return;
    if (static_cast<size_t>(cycle) >= lists.size()) lists.resize(static_cast<size_t>(cycle) + 1);
    lists[static_cast<size_t>(cycle)].add(static_cast<uint32_t>(i));
  }
  const IndexRuns& of(const Lists& lists, int cycle) const {
    return cycle >= 0 && static_cast<size_t>(cycle) < lists.size() ? lists[static_cast<size_t>(cycle)] : none_;
  }
  static constexpr size_t kPrefixes = 1024;  // power of two
  const Process& proc_;
  int cycles_ = 0;
  std::vector<Prefix> prefixes_ = std::vector<Prefix>(kPrefixes);
  Lists events_, gpu_, memory_, steps_;
  std::vector<CycleSpan> spans_;
  IndexRuns none_;
};

class TraceWriter {
 public:
  TraceWriter(const Run& run, const Process& proc, int cycle, CycleIndex& index, TraceSink& sink)
      : run_(run), proc_(proc), cycle_(cycle), index_(index), sink_(sink), span_(index.span(cycle)) {
    base_ = span_.start == std::numeric_limits<int64_t>::max() ? proc.start_ns : span_.start;
    process_name_ = proc.exe.empty() ? proc.worker : basename_of(proc.exe);
  }

  void write(const std::string& trace_name) {
    header();
    bool first = true;
    mark_launchers(true);
    index_.for_each_event(cycle_, [&](uint32_t i) {
      const Event& e = proc_.events_list[i];
      begin_event(first);
      if (e.kind == EventKind::kMark) {
        mark(e);
      } else if (is_cuda_api(e.kind)) {
        api_call(first, i);
      } else {
        range(e);
        if (!index_.external_ids.empty()) index_.external_ids[i] = static_cast<uint32_t>(external_id_);
      }
    });
    gpu_events(first);
    mark_launchers(false);
    if (!index_.external_ids.empty() && index_.shared()) {
      index_.for_each_event(cycle_, [&](uint32_t i) { index_.external_ids[i] = 0; });
    }
    for (uint32_t k : index_.steps(cycle_)) {
      const Step& s = proc_.steps[k];
      if (needs_synthetic_step(s)) {
        begin_event(first);
        synthetic_step(s);
      }
    }
    metadata(first);
    out_ += "\n  ],\n  \"traceName\": ";
    json::append_string(out_, trace_name);
    out_ += "\n}\n";
    flush(/*force=*/true);
  }

 private:
  void flush(bool force) {
    if (force || out_.size() >= kFlushBytes) sink_.take(out_);
  }

  void begin_event(bool& first) {
    begin_value(first);
    out_ += '{';
  }

  // For helpers that write a whole object themselves (formats/kineto_gpu.h).
  void begin_value(bool& first) {
    out_ += first ? std::string_view("\n  ") : std::string_view(",\n  ");
    first = false;
    flush(/*force=*/false);
  }

  void ts(int64_t ns) { json::append_us(out_, ns - base_); }

  // API calls that launched GPU work in this cycle get the flow start (`on`); false
  // clears the marks again for the next cycle.
  void mark_launchers(bool on) {
    for (uint32_t i : index_.gpu(cycle_)) {
      const GpuEvent& g = proc_.gpu_events[i];
      if (g.api >= 0 && g.kind != GpuKind::kSync) index_.launches[g.api] = on;
    }
  }

  // External id of the range around event i (Kineto links kernels to ops this way), 0 = none.
  uint64_t enclosing_external_id(int32_t i) const {
    for (int32_t p = proc_.events_list[i].parent; p >= 0; p = proc_.events_list[p].parent) {
      if (proc_.events_list[p].kind == EventKind::kRange) return index_.external_ids[p];
    }
    return 0;
  }

  void api_call(bool& first, size_t i) {
    const Event& e = proc_.events_list[i];
    const std::string_view cat =
        e.kind == EventKind::kCudaRuntime ? std::string_view("cuda_runtime") : std::string_view("cuda_driver");
    common_named("X", cat, e.name, e.tid, e.start_ns);
    out_ += ", \"dur\": ";
    json::append_us(out_, e.dur_ns());
    out_ += ",\n    \"args\": {";
    if (uint64_t ext = enclosing_external_id(static_cast<int32_t>(i))) {
      out_ += "\"External id\": ";
      json::append_uint(out_, ext);
      out_ += ", ";
    }
    out_ += "\"cbid\": ";
    json::append_uint(out_, e.cbid());
    out_ += ", \"correlation\": ";
    json::append_uint(out_, e.correlation);
    out_ += "}}";
    if (!index_.launches.empty() && index_.launches[i]) {
      begin_value(first);
      kineto::append_flow(out_, /*start=*/true, e.correlation, proc_.pid, e.tid, e.start_ns, base_);
    }
  }

  const GpuDevice* device(uint32_t id) const {
    for (const GpuDevice& d : proc_.devices) {
      if (d.id == id) return &d;
    }
    return nullptr;
  }

  void gpu_events(bool& first) {
    for (uint32_t i : index_.gpu(cycle_)) {
      const GpuEvent& g = proc_.gpu_events[i];
      begin_value(first);
      uint64_t ext = g.api >= 0 ? enclosing_external_id(g.api) : 0;
      kineto::append_gpu_event(out_, g, base_, ext, device(g.device));
      gpu_threads_.insert({g.device, kineto::gpu_tid(g)});
      if (g.api >= 0 && g.kind != GpuKind::kSync) {
        begin_value(first);
        kineto::append_flow(out_, /*start=*/false, g.correlation, g.device, kineto::gpu_tid(g), g.start_ns, base_);
      }
    }
    for (uint32_t i : index_.memory(cycle_)) {
      const MemoryEvent& m = proc_.memory_events[i];
      begin_value(first);
      kineto::append_memory_event(out_, m, proc_.pid, memory_tid(m), base_);
    }
  }

  // The thread that called the allocator, else the main thread.
  uint32_t memory_tid(const MemoryEvent& m) {
    if (m.correlation != 0) {
      if (!index_.api_tids_built) {
        // The first API call of each correlation id, as a scan of the list finds it.
        for (const Event& e : proc_.events_list) {
          if (is_cuda_api(e.kind)) index_.api_tids.emplace(e.correlation, e.tid);
        }
        index_.api_tids_built = true;
      }
      auto it = index_.api_tids.find(m.correlation);
      if (it != index_.api_tids.end()) return it->second;
    }
    return proc_.threads.empty() ? static_cast<uint32_t>(proc_.pid) : proc_.threads.front().tid;
  }

  void header() {
    out_ += "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": ";
    kineto::append_device_properties(out_, proc_.devices);
    out_ += ",\n";
    if (proc_.rank) {
      // HTA reads the rank with a regex that expects the space after the colon.
      out_ += "  \"distributedInfo\": {\"backend\": \"\", \"rank\": ";
      json::append_int(out_, *proc_.rank);
      out_ += ", \"world_size\": ";
      json::append_int(out_, world_size());
      out_ += "},\n";
    }
    out_ += "  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": ";
    json::append_int(out_, base_);
    out_ += ",\n  \"traceEvents\": [";
  }

  int world_size() const {
    if (proc_.world_size) return *proc_.world_size;
    int size = 1;
    for (const Process& p : run_.processes) {
      if (p.rank) size = std::max(size, *p.rank + 1);
    }
    return size;
  }

  // An event's fields up to its timestamp: phase, category, name, pid, tid.
  template <typename Out>
  void common_prefix(Out& out, std::string_view ph, std::string_view cat, std::string_view name, uint32_t tid) {
    out += "\"ph\": \"";
    out += ph;
    out += "\", \"cat\": \"";
    out += cat;
    out += "\", \"name\": ";
    json::append_string(out, name);
    out += ", \"pid\": ";
    json::append_int(out, proc_.pid);
    out += ", \"tid\": ";
    json::append_uint(out, tid);
    out += ", \"ts\": ";
  }

  void common(std::string_view ph, std::string_view cat, std::string_view name, uint32_t tid,
              int64_t start) {
    common_prefix(out_, ph, cat, name, tid);
    ts(start);
  }

  // The same for an interned name: the prefix is the same bytes for every event of a
  // (phase, category, name, thread), so it is built once and copied (`ph` and `cat` are
  // string literals, known by address).
  void common_named(std::string_view ph, std::string_view cat, const Name& name, uint32_t tid, int64_t start) {
    CycleIndex::Prefix& p = index_.prefix(name.id(), tid, cat.data());
    if (p.name != name.id() || p.tid != tid || p.ph != ph.data() || p.cat != cat.data()) {
      p.name = name.id();
      p.tid = tid;
      p.ph = ph.data();
      p.cat = cat.data();
      p.text.clear();
      common_prefix(p.text, ph, cat, name, tid);
    }
    char* out = out_.reserve(p.text.size() + 32);
    out = json::put(out, p.text);
    out_.commit(json::format_us(out, start - base_));
  }

  void range(const Event& e) {
    const OpInfo* op = e.op();
    const std::string_view cat = op != nullptr ? std::string_view("cpu_op") : std::string_view("user_annotation");
    common_named("X", cat, e.name, e.tid, e.start_ns);
    char* out = json::put(out_.reserve(48), ", \"dur\": ");
    out_.commit(json::format_us(out, e.dur_ns()));
    if (op != nullptr) {
      op_args(*op);
    } else {
      args(e);
    }
    out_ += "}";
  }

  // Kineto's cpu_op args: Sequence number (with Fwd thread id, 0 as in torch's traces
  // for ops run on their own thread), Input Dims (emit_nvtx's sizes, JSON as they
  // are: the parser let only nested integer lists through), Call stack (frames
  // innermost first, ';'-separated).
  void op_args(const OpInfo& op) {
    annotation_ids();
    if (op.sequence >= 0) {
      out_ += ", \"Sequence number\": ";
      json::append_int(out_, op.sequence);
      out_ += ", \"Fwd thread id\": 0";
    }
    if (!op.input_shapes.empty()) {
      out_ += ", \"Input Dims\": ";
      out_ += op.input_shapes;
    }
    if (!op.stack.empty()) {
      out_ += ", \"Call stack\": ";
      json::append_string(out_, joined_frames(op.stack));
    }
    out_ += "}";
  }

  void mark(const Event& e) {
    common_named("i", "user_annotation", e.name, e.tid, e.start_ns);
    out_ += ", \"s\": \"t\"";
    args(e);
    out_ += "}";
  }

  // Kineto's user_annotation args: its External id, the RecordFunction handle (0
  // outside torch) and the event's index in the profiler's event list.
  void annotation_ids() {
    ++external_id_;
    external_id_text_.increment();
    char* out = out_.reserve(128);  // the text below and two ids of at most 21 digits
    out = json::put(out, ",\n    \"args\": {\"External id\": ");
    out = json::put(out, external_id_text_.view());
    out = json::put(out, ", \"Record function id\": 0, \"Ev Idx\": ");
    out_.commit(json::put(out, event_index_text_.view()));  // external_id_ - 1
    event_index_text_.increment();
  }

  void args(const Event& e) {
    annotation_ids();
    if (const Name domain = e.domain(); !domain.empty()) {
      out_ += ", \"domain\": ";
      json::append_string(out_, domain);
    }
    if (const uint32_t category = e.category(); category != 0) {
      out_ += ", \"category\": ";
      if (const Name text = e.category_name(); text.empty()) {
        json::append_uint(out_, category);
      } else {
        json::append_string(out_, text);
      }
    }
    payload(e);
    if (!e.push_pop && e.end_tid() != e.tid) {
      out_ += ", \"end tid\": ";
      json::append_uint(out_, e.end_tid());
    }
    if (e.unterminated) out_ += ", \"unterminated\": true";
    out_ += "}";
  }

  void payload(const Event& e) {
    using wire::PayloadType;
    auto type = static_cast<PayloadType>(e.payload_type);
    if (type == PayloadType::kNone) return;
    out_ += ", \"payload\": ";
    switch (type) {
      case PayloadType::kU64:
        json::append_uint(out_, e.payload);
        break;
      case PayloadType::kI64:
        json::append_int(out_, static_cast<int64_t>(e.payload));
        break;
      case PayloadType::kDouble:
        json::append_double(out_, std::bit_cast<double>(e.payload));
        break;
      case PayloadType::kU32:
        json::append_uint(out_, static_cast<uint32_t>(e.payload));
        break;
      case PayloadType::kI32:
        json::append_int(out_, static_cast<int32_t>(static_cast<uint32_t>(e.payload)));
        break;
      case PayloadType::kFloat:
        json::append_double(out_, std::bit_cast<float>(static_cast<uint32_t>(e.payload)));
        break;
      default:
        out_ += "null";
        break;
    }
  }

  // TensorBoard and HTA find iterations by ProfilerStep#N ranges; give them one when
  // the marker is a mark or has another name. The implicit whole-run step gets none.
  bool needs_synthetic_step(const Step& s) const {
    if (s.marker < 0) return false;
    const Event& m = proc_.events_list[s.marker];
    return m.kind != EventKind::kRange || !m.name.starts_with(kStepPrefix);
  }

  void synthetic_step(const Step& s) {
    const Event& m = proc_.events_list[s.marker];
    std::string name = kStepPrefix + std::to_string(s.index);
    common("X", "user_annotation", name, m.tid, s.start_ns);
    out_ += ", \"dur\": ";
    json::append_us(out_, s.dur_ns);
    annotation_ids();
    out_ += ", \"marker\": ";
    json::append_string(out_, m.name);
    out_ += "}}";
  }

  void meta(bool& first, const char* name, uint32_t tid, const char* key, const std::string* text,
            int64_t number) {
    gpu_meta(first, name, proc_.pid, tid, key, text, number);
  }

  void metadata(bool& first) {
    const std::string labels = proc_.rank ? "CPU, rank " + std::to_string(*proc_.rank) : "CPU";
    meta(first, "process_name", 0, "name", &process_name_, 0);
    meta(first, "process_labels", 0, "labels", &labels, 0);
    meta(first, "process_sort_index", 0, "sort_index", nullptr, proc_.pid);
    int64_t order = 0;
    for (const ThreadInfo& t : proc_.threads) {
      std::string name = t.name.empty()
                             ? "thread " + std::to_string(t.tid) + " (" + process_name_ + ")"
                             : t.name;
      meta(first, "thread_name", t.tid, "name", &name, 0);
      // Threads are listed main thread first, then by tid (decode's order).
      meta(first, "thread_sort_index", t.tid, "sort_index", nullptr, order++);
    }
    gpu_metadata(first);
    profiler_span(first);
  }

  // Kineto names device pids after the process, labels them "GPU N" and sorts them
  // after the CPU rows; streams are "stream N " threads.
  void gpu_metadata(bool& first) {
    std::set<uint32_t> devices;
    for (const auto& [device, tid] : gpu_threads_) devices.insert(device);
    for (uint32_t d : devices) {
      const std::string label = "GPU " + std::to_string(d);
      gpu_meta(first, "process_name", d, 0, "name", &process_name_, 0);
      gpu_meta(first, "process_labels", d, 0, "labels", &label, 0);
      gpu_meta(first, "process_sort_index", d, 0, "sort_index", nullptr, 5000000 + int64_t{d});
    }
    for (const auto& [device, tid] : gpu_threads_) {
      const std::string name = tid < 0 ? "Device " + std::to_string(device) : "stream " + std::to_string(tid) + " ";
      gpu_meta(first, "thread_name", device, tid, "name", &name, 0);
      gpu_meta(first, "thread_sort_index", device, tid, "sort_index", nullptr, tid);
    }
  }

  // A metadata ("M") event on any pid/tid: CPU rows use the OS pid, GPU rows the device.
  void gpu_meta(bool& first, const char* name, int64_t pid, int64_t tid, const char* key,
                const std::string* text, int64_t number) {
    begin_event(first);
    out_ += "\"name\": \"";
    out_ += name;
    out_ += "\", \"ph\": \"M\", \"ts\": ";
    ts(base_);
    out_ += ", \"pid\": ";
    json::append_int(out_, pid);
    out_ += ", \"tid\": ";
    json::append_int(out_, tid);
    out_ += ",\n    \"args\": {\"";
    out_ += key;
    out_ += "\": ";
    if (text) {
      json::append_string(out_, *text);
    } else {
      json::append_int(out_, number);
    }
    out_ += "}}";
  }

  // Kineto closes every trace with these; some viewers use them for the window.
  void profiler_span(bool& first) {
    int64_t end = span_.end == std::numeric_limits<int64_t>::min() ? proc_.end_ns : span_.end;
    begin_event(first);
    out_ += "\"ph\": \"X\", \"cat\": \"Trace\", \"ts\": ";
    ts(base_);
    out_ += ", \"dur\": ";
    json::append_us(out_, std::max<int64_t>(0, end - base_));
    out_ += ", \"pid\": \"Spans\", \"tid\": \"PyTorch Profiler\", \"name\": \"PyTorch Profiler (";
    json::append_int(out_, cycle_);
    out_ += ")\",\n    \"args\": {\"Op count\": 0}}";
    begin_event(first);
    out_ += "\"name\": \"process_sort_index\", \"ph\": \"M\", \"ts\": ";
    ts(base_);
    out_ += ", \"pid\": \"Spans\", \"tid\": 0, \"args\": {\"sort_index\": 536870912}}";
    begin_event(first);
    out_ += "\"name\": \"Iteration Start: PyTorch Profiler\", \"ph\": \"i\", \"s\": \"g\", "
            "\"pid\": \"Traces\", \"tid\": \"Trace PyTorch Profiler\", \"ts\": ";
    ts(base_);
    out_ += "}";
    begin_event(first);
    out_ += "\"name\": \"Record Window End\", \"ph\": \"i\", \"s\": \"g\", \"pid\": \"\", "
            "\"tid\": \"\", \"ts\": ";
    ts(end);
    out_ += "}";
  }

  const Run& run_;
  const Process& proc_;
  int cycle_;
  CycleIndex& index_;
  TraceSink& sink_;
  CycleSpan span_;
  int64_t base_ = 0;
  std::string process_name_;
  json::Buffer out_{kBlockBytes};  // filled to kFlushBytes, then handed on
  uint64_t external_id_ = 0;
  json::DecimalCounter external_id_text_;  // external_id_ as text
  json::DecimalCounter event_index_text_;  // the next annotation's Ev Idx: external_id_ before its ++
  std::set<std::pair<uint32_t, int64_t>> gpu_threads_;  // (device, stream) rows written
};

// A worker name becomes a file name inside traces/: no directory separators, and no
// leading dot (no "..", no hidden files).
std::string sanitize(std::string name) {
  for (char& c : name) {
    if (c == '/' || c == '\0') c = '_';
  }
  if (!name.empty() && name[0] == '.') name[0] = '_';
  return name.empty() ? "worker" : name;
}

}  // namespace

std::string trace_worker_name(const Run& run, const Process& proc, const std::string& override) {
  if (override.empty()) return sanitize(proc.worker);
  size_t traced = 0;
  for (const Process& p : run.processes) traced += p.events_list.empty() ? 0 : 1;
  if (traced <= 1) return sanitize(override);
  return sanitize(override + "_" + std::to_string(proc.pid));
}

void render_kineto_trace(const Run& run, const Process& proc, int cycle,
                         const std::string& trace_name, TraceSink& sink) {
  CycleIndex index(proc);
  TraceWriter(run, proc, cycle, index, sink).write(trace_name);
}

std::vector<TraceFile> write_kineto_traces(const Run& run, const TraceOptions& options) {
  std::vector<TraceFile> files;
  std::set<std::string> used;
  fs::create_directories(options.dir);
  const char* suffix = options.gzip ? ".pt.trace.json.gz" : ".pt.trace.json";
  WriteBehind behind(4, kBlockBytes);
  for (const Process& proc : run.processes) {
    if (proc.events_list.empty()) continue;
    const std::string worker = trace_worker_name(run, proc, options.worker_name);
    CycleIndex index(proc);
    for (int cycle = 0; cycle < index.cycles(); ++cycle) {
      int64_t unix_ns = index.span(cycle).end;
      std::string path;
      // Never overwrite: bump the time stamp until the name is free.
      do {
        path = (fs::path(options.dir) / (worker + "." + std::to_string(unix_ns++) + suffix)).string();
      } while (used.count(path) || fs::exists(path));
      used.insert(path);
      std::shared_ptr<OutputFile> file;
      if (options.gzip) {
        file = std::make_shared<GzipFile>(path);
      } else {
        file = std::make_shared<PlainFile>(path);
      }
      BehindSink sink(behind, file);
      TraceWriter(run, proc, cycle, index, sink).write(path);
      behind.close(file);
      files.push_back({proc.pid, cycle, path});
    }
  }
  behind.finish();
  return files;
}

}  // namespace torchprof
