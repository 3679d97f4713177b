#include "formats/kineto_trace.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <utility>

#include "analysis/analysis.h"
#include "analysis/collectives.h"
#include "common/errors.h"
#include "common/wire/wire.h"
#include "formats/fwdbwd.h"
#include "formats/json_writer.h"
#include "formats/kineto_gpu.h"
#include "formats/write_behind.h"

namespace torchprof {

namespace {

namespace fs = std::filesystem;

constexpr size_t kFlushBytes = 1 << 20;
constexpr size_t kBlockBytes = kFlushBytes + (64 << 10);  // a block is handed on once it passes kFlushBytes
constexpr const char* kStepPrefix = "ProfilerStep#";

// The interned name of the modules domain: a range's domain is compared by identity.
const Name& modules_domain() {
  static const Name name(kModulesDomain);
  return name;
}
// Cycles of one process whose files are open at once; another one's first event closes
// the one used least lately (it is opened again, to append, if more of it comes).
constexpr size_t kMaxOpenCycles = 8;

class PlainFile : public OutputFile {
 public:
  PlainFile(const std::string& path, int fd, bool append) : path_(path), file_(::fdopen(fd, append ? "ab" : "wb")) {
    if (!file_) {
      ::close(fd);
      throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
    }
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

// A file opened again to append gets a gzip member of its own: readers take the
// members as one stream.
class GzipFile : public OutputFile {
 public:
  // Level 3: most of level 6's ratio on JSON at several times its speed.
  GzipFile(const std::string& path, int fd, bool append) : path_(path), file_(gzdopen(fd, append ? "ab3" : "wb3")) {
    if (!file_) {
      ::close(fd);
      throw std::runtime_error("cannot write " + path);
    }
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

std::string basename_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A worker name becomes a file name inside traces/: no directory separators, and no
// leading dot (no "..", no hidden files).
std::string sanitize(std::string name) {
  for (char& c : name) {
    if (c == '/' || c == '\0') c = '_';
  }
  if (!name.empty() && name[0] == '.') name[0] = '_';
  return name.empty() ? "worker" : name;
}

struct CycleSpan {
  int64_t start = std::numeric_limits<int64_t>::max();
  int64_t end = std::numeric_limits<int64_t>::min();
};

CycleSpan span_of(const std::vector<Step>& steps, int cycle) {
  CycleSpan span;
  for (const Step& s : steps) {
    if (s.cycle != cycle) continue;
    span.start = std::min(span.start, s.start_ns);
    span.end = std::max(span.end, s.start_ns + s.dur_ns);
  }
  return span;
}

}  // namespace

// The traces of several runs (a merged report's inputs, analysed side by side) go into
// one folder: their partial files are told apart by the set they belong to, and the
// folder is made once.
std::atomic<uint64_t> g_trace_sets{0};
std::mutex g_traces_dir_mutex;

struct KinetoTraces::State {
  explicit State(TraceOptions o) : options(std::move(o)) {}
  TraceOptions options;
  const uint64_t set = g_trace_sets.fetch_add(1);
  WriteBehind behind{4, kBlockBytes};
  DirHandle dir;  // options.dir, once the first trace is made
  uint64_t next_partial = 0;
  std::set<std::string> used;  // final names given out
  struct Pending {
    std::string partial;
    TraceFile file;
    std::string suffix;  // after the worker: ".<unix_ns>.pt.trace.json[.gz]"
  };
  std::vector<Pending> pending;

  std::string partial_path(int pid, int cycle) {
    if (!dir.valid()) {
      const std::lock_guard<std::mutex> lock(g_traces_dir_mutex);
      dir = open_traces_dir();
    }
    return (fs::path(options.dir) / ("." + std::to_string(set) + "." + std::to_string(pid) + "." +
                                     std::to_string(cycle) + "." + std::to_string(next_partial++) + ".partial"))
        .string();
  }

  // A name no other trace has: the time stamp is bumped until it is free.
  std::string final_name(const std::string& worker, int64_t unix_ns, std::string& suffix) {
    const char* ext = options.gzip ? ".pt.trace.json.gz" : ".pt.trace.json";
    std::string path;
    do {
      suffix = "." + std::to_string(unix_ns++) + ext;
      path = (fs::path(options.dir) / (worker + suffix)).string();
    } while (used.count(path) || exists_at(dir, basename_of(path)));
    used.insert(path);
    return path;
  }

  std::shared_ptr<OutputFile> open(const std::string& path, bool append) {
    const int fd = open_file_at(dir, basename_of(path), append, path);
    if (options.gzip) return std::make_shared<GzipFile>(path, fd, append);
    return std::make_shared<PlainFile>(path, fd, append);
  }

  // Made inside the held parent by name (or opened by path), and ours alone: no one
  // else can put a link where a trace is about to be written.
  DirHandle open_traces_dir() const {
    if (options.parent.valid()) {
      return sub_dir(options.parent, fs::path(options.dir).filename().string(), options.dir);
    }
    DirHandle d = open_dir_safely(options.dir, /*create=*/true);
    if (const std::string why = unsafe_dir_reason(d, options.dir); !why.empty()) throw InputError(why);
    return d;
  }
};

namespace {

// One cycle's trace of one process, written as its events come.
class CycleWriter {
 public:
  CycleWriter(KinetoTraces::State& state, const Process& proc, int cycle, int64_t base)
      : state_(state), pid_(proc.pid), cycle_(cycle), base_(base), partial_(state.partial_path(proc.pid, cycle)),
        world_size_(proc.world_size.value_or(0)) {
    file_ = state_.open(partial_, /*append=*/false);
    out_ += "{\n  \"schemaVersion\": 1,\n  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": ";
    json::append_int(out_, base_);
    out_ += ",\n  \"traceEvents\": [";
  }

  bool is_open() const { return file_ != nullptr; }

  // Hands its bytes on and closes its file; resume() opens it again to append.
  void suspend() {
    if (!file_) return;
    state_.behind.write(file_, out_);
    state_.behind.close(file_);
    file_.reset();
  }
  void resume() {
    if (!file_) file_ = state_.open(partial_, /*append=*/true);
  }

  void discard() {
    if (file_) state_.behind.close(file_);
    file_.reset();
    out_.clear();
    links_.clear();
    ::unlinkat(state_.dir.fd(), basename_of(partial_).c_str(), 0);
  }

  void event(const Event& e, const EventIds& ids) {
    extent_.start = std::min(extent_.start, e.start_ns);
    extent_.end = std::max(extent_.end, e.end_ns);
    begin_event();
    max_external_id_ = std::max(max_external_id_, ids.external_id);
    if (e.kind == EventKind::kMark) {
      mark(e, ids.external_id);
    } else if (is_cuda_api(e.kind)) {
      api_call(e, ids.enclosing_id);
    } else if (e.domain() == modules_domain()) {
      module_call(e, ids);
    } else {
      range(e, ids.external_id);
    }
    flush();
  }

  void gpu(const GpuEvent& g, const LaunchIds& launch, const GpuDevice* device) {
    extent_.start = std::min(extent_.start, g.start_ns);
    extent_.end = std::max(extent_.end, g.end_ns);
    if (launch.first) {
      begin_value();
      kineto::append_flow(out_, /*start=*/true, g.correlation, pid_, launch.tid, launch.start_ns, base_);
    }
    begin_value();
    kineto::append_gpu_event(out_, g, base_, launch.known ? launch.enclosing_id : 0, device);
    gpu_threads_.insert({g.device, kineto::gpu_tid(g)});
    if (g.kind == GpuKind::kKernel && backend_.empty() && g.name.str().find("nccl") != std::string::npos) {
      backend_ = "nccl";  // NCCL's kernels (ncclDevKernel_AllReduce_…): the process group's backend
    }
    if (launch.known && g.kind != GpuKind::kSync) {
      begin_value();
      kineto::append_flow(out_, /*start=*/false, g.correlation, g.device, kineto::gpu_tid(g), g.start_ns, base_);
    }
    flush();
  }

  // The rest of the trace, its name, and the file's close. `proc` is complete.
  void finish(const Run& run, const Process& proc) {
    resume();
    CycleSpan span = span_of(proc.steps, cycle_);
    // What lies outside every step is in the first cycle's trace: its span holds it.
    const bool outside = proc.outside_steps_counted && cycle_ == 0;
    const uint32_t main_tid = proc.threads.empty() ? static_cast<uint32_t>(proc.pid) : proc.threads.front().tid;
    // Device memory (CUPTI), then torch's tensors (--profile-memory): [memory] instants.
    for (const std::vector<MemoryEvent>* events : {&proc.memory_events, &proc.tensor_memory}) {
      for (const MemoryEvent& m : *events) {
        const bool in_cycle = m.step < 0 ? outside
                                         : static_cast<size_t>(m.step) < proc.steps.size() &&
                                               proc.steps[m.step].cycle == cycle_;
        if (!in_cycle) continue;
        extent_.start = std::min(extent_.start, m.ts_ns);
        extent_.end = std::max(extent_.end, m.ts_ns);
        begin_value();
        kineto::append_memory_event(out_, m, proc.pid, m.tid != 0 ? m.tid : main_tid, base_);
        flush();
      }
    }
    for (const Step& s : proc.steps) {
      if (s.cycle == cycle_ && needs_synthetic_step(s)) synthetic_step(s);
    }
    if (outside && !proc.steps.empty()) {
      span.start = std::min(span.start, extent_.start);
      span.end = std::max(span.end, extent_.end);
    }
    fwdbwd_flows();
    metadata(proc, span);
    const std::string worker = sanitize(proc.worker);
    KinetoTraces::State::Pending pending;
    pending.partial = partial_;
    pending.file = {proc.pid, cycle_, "", worker};
    const int64_t name_ns = span.end == std::numeric_limits<int64_t>::min() ? proc.end_ns : span.end;
    pending.file.path = state_.final_name(worker, name_ns, pending.suffix);
    out_ += "\n  ],\n  \"deviceProperties\": ";
    // Every device this trace has rows on: one without a device record keeps its id only.
    std::vector<GpuDevice> devices = proc.devices;
    for (const auto& [device, tid] : gpu_threads_) {
      if (std::none_of(devices.begin(), devices.end(), [&](const GpuDevice& d) { return d.id == device; })) {
        GpuDevice unknown;
        unknown.id = device;
        devices.push_back(unknown);
      }
    }
    std::sort(devices.begin(), devices.end(), [](const GpuDevice& a, const GpuDevice& b) { return a.id < b.id; });
    kineto::append_device_properties(out_, devices);
    if (proc.rank) {
      // HTA reads the rank with a regex that expects the space after the colon.
      out_ += ",\n  \"distributedInfo\": {\"backend\": ";
      json::append_string(out_, backend_);
      out_ += ", \"rank\": ";
      json::append_int(out_, *proc.rank);
      const int world = world_size(run, proc);
      out_ += ", \"world_size\": ";
      json::append_int(out_, world);
      if (!backend_.empty()) {
        // The default group, as torch >= 2.1 describes it (torch 1.13 records no other).
        out_ += ", \"pg_count\": 1, \"pg_config\": [{\"pg_name\": \"0\", \"pg_desc\": \"default_pg\", "
                "\"backend_config\": ";
        json::append_string(out_, (backend_ == "nccl" ? "cuda:" : "cpu:") + backend_);
        out_ += ", \"pg_size\": ";
        json::append_int(out_, world);
        out_ += ", \"ranks\": [";
        for (int r = 0; r < world; ++r) {
          if (r) out_ += ", ";
          json::append_int(out_, r);
        }
        out_ += "]}]";
      }
      out_ += "}";
    }
    out_ += ",\n  \"traceName\": ";
    json::append_string(out_, pending.file.path);
    out_ += "\n}\n";
    state_.behind.write(file_, out_);
    state_.behind.close(file_);
    file_.reset();
    state_.pending.push_back(std::move(pending));
  }

 private:
  void flush() {
    if (out_.size() >= kFlushBytes) state_.behind.write(file_, out_);
  }

  // Each forward op to its backward op, as Kineto links them: "s" at the forward op's
  // start, "f" ("bp": "e") at the backward op's, ids from 1 in each trace.
  void fwdbwd_flows() {
    uint64_t id = 0;
    for (const kineto::FwdBwdLink& link : links_.links()) {
      ++id;
      begin_value();
      kineto::append_flow(out_, /*start=*/true, id, pid_, link.forward.tid, link.forward.ts_ns, base_, "fwdbwd");
      begin_value();
      kineto::append_flow(out_, /*start=*/false, id, pid_, link.backward.tid, link.backward.ts_ns, base_, "fwdbwd");
      flush();
    }
    links_.clear();
  }

  void begin_value() {
    out_ += first_ ? std::string_view("\n  ") : std::string_view(",\n  ");
    first_ = false;
  }
  void begin_event() {
    begin_value();
    out_ += '{';
  }

  void ts(int64_t ns) { json::append_us(out_, ns - base_); }

  static int world_size(const Run& run, const Process& proc) {
    if (proc.world_size) return *proc.world_size;
    int size = 1;
    for (const Process& p : run.processes) {
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
    json::append_int(out, pid_);
    out += ", \"tid\": ";
    json::append_uint(out, tid);
    out += ", \"ts\": ";
  }

  void common(std::string_view ph, std::string_view cat, std::string_view name, uint32_t tid, int64_t start) {
    common_prefix(out_, ph, cat, name, tid);
    ts(start);
  }

  // The same for an interned name: the prefix is the same bytes for every event of a
  // (phase, category, name, thread), so it is built once and copied (`ph` and `cat` are
  // string literals, known by address).
  void common_named(std::string_view ph, std::string_view cat, const Name& name, uint32_t tid, int64_t start) {
    const uintptr_t h = (reinterpret_cast<uintptr_t>(name.id()) >> 4) ^ (uintptr_t{tid} * 0x9E3779B1u) ^
                        (reinterpret_cast<uintptr_t>(cat.data()) >> 2);
    Prefix& p = prefixes_[h & (kPrefixes - 1)];
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

  void api_call(const Event& e, uint32_t enclosing_id) {
    const std::string_view cat =
        e.kind == EventKind::kCudaRuntime ? std::string_view("cuda_runtime") : std::string_view("cuda_driver");
    common_named("X", cat, e.name, e.tid, e.start_ns);
    out_ += ", \"dur\": ";
    json::append_us(out_, e.dur_ns());
    out_ += ",\n    \"args\": {";
    if (enclosing_id != 0) {
      out_ += "\"External id\": ";
      json::append_uint(out_, enclosing_id);
      out_ += ", ";
    }
    out_ += "\"cbid\": ";
    json::append_uint(out_, e.cbid());
    out_ += ", \"correlation\": ";
    json::append_uint(out_, e.correlation);
    out_ += "}}";
  }

  void range(const Event& e, uint32_t external_id) {
    // c10d's ops are named after their backend ("nccl:all_reduce", "gloo:broadcast").
    if (backend_.empty()) {
      const std::string& n = e.name.str();
      if (n.starts_with("nccl:")) backend_ = "nccl";
      else if (n.starts_with("gloo:")) backend_ = "gloo";
    }
    const OpInfo* op = e.op();
    // torch's record_function ranges (RecordScope::USER_SCOPE) are user_annotation in
    // Kineto's traces, as NVTX ranges are.
    const bool user_scope = e.op_call && wire::op_word_scope(e.op_word) == wire::kOpScopeUser;
    const std::string_view cat =
        op != nullptr && !user_scope ? std::string_view("cpu_op") : std::string_view("user_annotation");
    common_named("X", cat, e.name, e.tid, e.start_ns);
    if (e.op_call) links_.add(e.tid, e.start_ns, e.end_ns, e.op_word);
    char* out = json::put(out_.reserve(48), ", \"dur\": ");
    out_.commit(json::format_us(out, e.dur_ns()));
    annotation_ids(external_id, e.op_call ? e.payload : 0);
    if (op != nullptr) {
      op_args(*op, e);
    } else {
      args(e);
    }
    out_ += "}";
  }

  // An nn.Module call (--with-modules) as torch's Python tracer writes it: a
  // python_function event with its Python id, the Python id of the module call around it
  // (null at the top) and the module's id, the number its name ends with.
  void module_call(const Event& e, const EventIds& ids) {
    common_named("X", "python_function", e.name, e.tid, e.start_ns);
    char* out = json::put(out_.reserve(48), ", \"dur\": ");
    out_.commit(json::format_us(out, e.dur_ns()));
    out_ += ", \"args\": {\"Python id\": ";
    json::append_uint(out_, ids.external_id);
    out_ += ", \"Python parent id\": ";
    if (ids.enclosing_id != 0) {
      json::append_uint(out_, ids.enclosing_id);
    } else {
      out_ += "null";
    }
    const std::string& name = e.name.str();
    const size_t digits = name.find_last_not_of("0123456789");
    if (digits != std::string::npos && digits + 1 < name.size() && name[digits] == '_') {
      out_ += ", \"Python module id\": ";
      out_.append(name.data() + digits + 1, name.size() - digits - 1);
    }
    out_ += "}}";
  }

  // Kineto's cpu_op args: Sequence number (with Fwd thread id, 0 as in torch's traces
  // for ops run on their own thread), Input Dims (emit_nvtx's sizes, JSON as they
  // are: the parser let only nested integer lists through), Call stack (frames
  // innermost first, ';'-separated).
  // An op from torch's RecordFunction callbacks carries its own sequence number and
  // forward thread id (Kineto writes both whenever the sequence number is >= 0).
  void op_args(const OpInfo& op, const Event& e) {
    if (e.op_call) {
      const int64_t sequence = wire::op_word_sequence(e.op_word);
      if (sequence >= 0) {
        out_ += ", \"Sequence number\": ";
        json::append_int(out_, sequence);
        out_ += ", \"Fwd thread id\": ";
        json::append_uint(out_, wire::op_word_fwd_thread(e.op_word));
      }
    } else if (op.sequence >= 0) {
      out_ += ", \"Sequence number\": ";
      json::append_int(out_, op.sequence);
      out_ += ", \"Fwd thread id\": 0";
    }
    if (!op.input_shapes.empty()) {
      out_ += ", \"Input Dims\": ";
      out_ += op.input_shapes;
    }
    if (!op.input_types.empty()) {  // checked by the parser: JSON as it is
      out_ += ", \"Input type\": ";
      out_ += op.input_types;
    }
    if (op.flops > 0) {  // --with-flops: torch's count of this call
      out_ += ", \"flops\": ";
      json::append_uint(out_, op.flops);
    }
    if (!op.stack.empty()) {
      out_ += ", \"Call stack\": ";
      json::append_string(out_, joined_frames(op.stack));
    }
    if (const std::string coll = kineto_collective_name(op.name); !coll.empty()) collective_args(op, coll);
    out_ += "}";
  }

  // Kineto's args of a collective (torch 2.x writes them on record_param_comms). torch
  // 1.13 records no process group per collective: the default group's are given (name
  // "0", ranks 0 to world size - 1). The element counts come from the recorded input
  // shapes (--record-shapes): a backend's record has its tensors as inputs; c10d's op
  // has a tensor list, whose sizes torch 1.13 does not show.
  void collective_args(const OpInfo& op, const std::string& name) {
    out_ += ", \"Collective name\": ";
    json::append_string(out_, name);
    if (const int64_t elems = shape_elements(op.input_shapes); elems >= 0) {
      int64_t out_elems = elems;
      if (world_size_ > 0 && (name == "allgather" || name == "_allgather_base")) out_elems = elems * world_size_;
      if (world_size_ > 0 && (name == "reduce_scatter" || name == "_reduce_scatter_base")) out_elems = elems / world_size_;
      out_ += ", \"In msg nelems\": ";
      json::append_int(out_, elems);
      out_ += ", \"Out msg nelems\": ";
      json::append_int(out_, out_elems);
    }
    if (world_size_ > 0) {
      out_ += ", \"Group size\": ";
      json::append_int(out_, world_size_);
    }
    if (const std::string dtype = collective_dtype(op.input_types); !dtype.empty()) {
      out_ += ", \"dtype\": ";
      json::append_string(out_, dtype);
    }
    out_ += ", \"In split size\": \"[]\", \"Out split size\": \"[]\", \"Process Group Name\": \"0\"";
    if (world_size_ > 0) {
      std::string ranks = "[";
      for (int r = 0; r < world_size_; ++r) ranks += (r ? ", " : "") + std::to_string(r);
      out_ += ", \"Process Group Ranks\": ";
      json::append_string(out_, ranks + "]");
    }
  }

  void mark(const Event& e, uint32_t external_id) {
    common_named("i", "user_annotation", e.name, e.tid, e.start_ns);
    out_ += ", \"s\": \"t\"";
    annotation_ids(external_id);
    args(e);
    out_ += "}";
  }

  // Kineto's user_annotation args: its External id, the RecordFunction handle (0
  // outside torch) and the event's index in the profiler's event list.
  void annotation_ids(uint32_t external_id, uint64_t record_function_id = 0) {
    out_ += ",\n    \"args\": {\"External id\": ";
    json::append_uint(out_, external_id);
    out_ += ", \"Record function id\": ";
    json::append_uint(out_, record_function_id);
    out_ += ", \"Ev Idx\": ";
    json::append_uint(out_, external_id - 1);
  }

  void args(const Event& e) {
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
      case PayloadType::kU64: json::append_uint(out_, e.payload); break;
      case PayloadType::kI64: json::append_int(out_, static_cast<int64_t>(e.payload)); break;
      case PayloadType::kDouble: json::append_double(out_, std::bit_cast<double>(e.payload)); break;
      case PayloadType::kU32: json::append_uint(out_, static_cast<uint32_t>(e.payload)); break;
      case PayloadType::kI32: json::append_int(out_, static_cast<int32_t>(static_cast<uint32_t>(e.payload))); break;
      case PayloadType::kFloat:
        json::append_double(out_, std::bit_cast<float>(static_cast<uint32_t>(e.payload)));
        break;
      default: out_ += "null"; break;
    }
  }

  // TensorBoard and HTA find iterations by ProfilerStep#N ranges; give them one when
  // the marker is a mark or has another name. The implicit whole-run step gets none.
  static bool needs_synthetic_step(const Step& s) {
    return s.marker && (s.marker_is_mark || !s.name.starts_with(kStepPrefix));
  }

  void synthetic_step(const Step& s) {
    begin_event();
    std::string name = kStepPrefix + std::to_string(s.index);
    common("X", "user_annotation", name, s.marker_tid, s.start_ns);
    out_ += ", \"dur\": ";
    json::append_us(out_, s.dur_ns);
    annotation_ids(++max_external_id_);
    out_ += ", \"marker\": ";
    json::append_string(out_, s.name);
    out_ += "}}";
    flush();
  }

  void meta(const char* name, uint32_t tid, const char* key, const std::string* text, int64_t number) {
    gpu_meta(name, pid_, tid, key, text, number);
  }

  void metadata(const Process& proc, const CycleSpan& span) {
    const std::string process_name = proc.exe.empty() ? proc.worker : basename_of(proc.exe);
    const std::string labels = proc.rank ? "CPU, rank " + std::to_string(*proc.rank) : "CPU";
    meta("process_name", 0, "name", &process_name, 0);
    meta("process_labels", 0, "labels", &labels, 0);
    meta("process_sort_index", 0, "sort_index", nullptr, proc.pid);
    int64_t order = 0;
    for (const ThreadInfo& t : proc.threads) {
      std::string name =
          t.name.empty() ? "thread " + std::to_string(t.tid) + " (" + process_name + ")" : t.name;
      meta("thread_name", t.tid, "name", &name, 0);
      // Threads are listed main thread first, then by tid.
      meta("thread_sort_index", t.tid, "sort_index", nullptr, order++);
    }
    gpu_metadata(process_name);
    profiler_span(proc, span);
  }

  // Kineto names device pids after the process, labels them "GPU N" and sorts them
  // after the CPU rows; streams are "stream N " threads.
  void gpu_metadata(const std::string& process_name) {
    std::set<uint32_t> devices;
    for (const auto& [device, tid] : gpu_threads_) devices.insert(device);
    for (uint32_t d : devices) {
      const std::string label = "GPU " + std::to_string(d);
      gpu_meta("process_name", d, 0, "name", &process_name, 0);
      gpu_meta("process_labels", d, 0, "labels", &label, 0);
      gpu_meta("process_sort_index", d, 0, "sort_index", nullptr, 5000000 + int64_t{d});
    }
    for (const auto& [device, tid] : gpu_threads_) {
      const std::string name = tid < 0 ? "Device " + std::to_string(device) : "stream " + std::to_string(tid) + " ";
      gpu_meta("thread_name", device, tid, "name", &name, 0);
      gpu_meta("thread_sort_index", device, tid, "sort_index", nullptr, tid);
    }
  }

  // A metadata ("M") event on any pid/tid: CPU rows use the OS pid, GPU rows the device.
  void gpu_meta(const char* name, int64_t pid, int64_t tid, const char* key, const std::string* text,
                int64_t number) {
    begin_event();
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
    flush();
  }

  // Kineto closes every trace with these; some viewers use them for the window.
  void profiler_span(const Process& proc, const CycleSpan& span) {
    const int64_t start = span.start == std::numeric_limits<int64_t>::max() ? base_ : span.start;
    const int64_t end = span.end == std::numeric_limits<int64_t>::min() ? proc.end_ns : span.end;
    begin_event();
    out_ += "\"ph\": \"X\", \"cat\": \"Trace\", \"ts\": ";
    ts(start);
    out_ += ", \"dur\": ";
    json::append_us(out_, std::max<int64_t>(0, end - start));
    out_ += ", \"pid\": \"Spans\", \"tid\": \"PyTorch Profiler\", \"name\": \"PyTorch Profiler (";
    json::append_int(out_, cycle_);
    out_ += ")\",\n    \"args\": {\"Op count\": 0}}";
    begin_event();
    out_ += "\"name\": \"process_sort_index\", \"ph\": \"M\", \"ts\": ";
    ts(start);
    out_ += ", \"pid\": \"Spans\", \"tid\": 0, \"args\": {\"sort_index\": 536870912}}";
    begin_event();
    out_ += "\"name\": \"Iteration Start: PyTorch Profiler\", \"ph\": \"i\", \"s\": \"g\", "
            "\"pid\": \"Traces\", \"tid\": \"Trace PyTorch Profiler\", \"ts\": ";
    ts(start);
    out_ += "}";
    begin_event();
    out_ += "\"name\": \"Record Window End\", \"ph\": \"i\", \"s\": \"g\", \"pid\": \"\", "
            "\"tid\": \"\", \"ts\": ";
    ts(end);
    out_ += "}";
  }

  struct Prefix {
    const void* name = nullptr;
    uint32_t tid = 0;
    const char* ph = nullptr;  // nullptr: empty
    const char* cat = nullptr;
    std::string text;
  };
  static constexpr size_t kPrefixes = 1024;  // power of two

  KinetoTraces::State& state_;
  int pid_;
  int cycle_;
  int64_t base_;
  std::string partial_;
  std::shared_ptr<OutputFile> file_;
  json::Buffer out_{kBlockBytes};  // filled to kFlushBytes, then handed on
  bool first_ = true;
  uint32_t max_external_id_ = 0;
  CycleSpan extent_;  // of the events written
  std::vector<Prefix> prefixes_ = std::vector<Prefix>(kPrefixes);
  std::set<std::pair<uint32_t, int64_t>> gpu_threads_;  // (device, stream) rows written
  std::string backend_;  // the process group's backend, from NCCL kernels or c10d op names
  int world_size_ = 0;   // the process's WORLD_SIZE (or SLURM's, Open MPI's); 0 unknown
  kineto::FwdBwdLinks links_;  // its ops with sequence numbers, linked at the end
};

class ProcessTraces : public ProcessTraceSink {
 public:
  ProcessTraces(KinetoTraces::State& state, const Process& proc, const std::vector<Step>& steps, int64_t base_ns)
      : state_(state), proc_(proc), steps_(steps), base_ns_(base_ns) {}

  void event(const Event& e, const EventIds& ids) override { writer(ids.cycle).event(e, ids); }
  void gpu(const GpuEvent& g, int cycle, const LaunchIds& launch, const GpuDevice* device) override {
    writer(cycle).gpu(g, launch, device);
  }
  void finish(const Run& run, const Process& proc) override {
    // Cycles whose steps hold nothing yet still get a trace, as every cycle has one.
    for (const Step& s : proc.steps) {
      if (s.cycle >= 0 && proc.cpu_events > 0) writer(s.cycle);
    }
    for (auto& [cycle, w] : writers_) w->finish(run, proc);
    writers_.clear();
  }
  void discard() override {
    for (auto& [cycle, w] : writers_) w->discard();
    writers_.clear();
  }

 private:
  CycleWriter& writer(int cycle) {
    auto it = writers_.find(cycle);
    if (it == writers_.end()) {
      int64_t base = base_ns_;
      if (!steps_.empty()) {
        const CycleSpan span = span_of(steps_, cycle);
        base = span.start != std::numeric_limits<int64_t>::max() ? span.start : proc_.start_ns;
        // Events outside every step are in the first cycle: it begins with the process.
        if (base_ns_ != 0 && cycle == 0) base = std::min(base, base_ns_);
      }
      make_room();
      it = writers_.emplace(cycle, std::make_unique<CycleWriter>(state_, proc_, cycle, base)).first;
    } else if (!it->second->is_open()) {
      make_room();
      it->second->resume();
    }
    touch(cycle);
    return *it->second;
  }

  void touch(int cycle) {
    if (!recent_.empty() && recent_.back() == cycle) return;
    recent_.erase(std::remove(recent_.begin(), recent_.end(), cycle), recent_.end());
    recent_.push_back(cycle);
  }

  void make_room() {
    while (recent_.size() >= kMaxOpenCycles) {
      writers_.at(recent_.front())->suspend();
      recent_.erase(recent_.begin());
    }
  }

  KinetoTraces::State& state_;
  Process proc_;  // its identity
  std::vector<Step> steps_;
  int64_t base_ns_;
  std::map<int, std::unique_ptr<CycleWriter>> writers_;
  std::vector<int> recent_;  // open cycles, the one used last at the back
};

}  // namespace

KinetoTraces::KinetoTraces(TraceOptions options) : state_(std::make_unique<State>(std::move(options))) {}

KinetoTraces::~KinetoTraces() = default;

TraceSinkFactory KinetoTraces::factory() {
  State* state = state_.get();
  return [state](const Process& proc, const std::vector<Step>& steps, int64_t base_ns) {
    return std::make_unique<ProcessTraces>(*state, proc, steps, base_ns);
  };
}

std::vector<TraceFile> KinetoTraces::finish(const WorkerOf& worker_of) {
  state_->behind.finish();
  std::vector<TraceFile> files;
  for (State::Pending& p : state_->pending) {
    TraceFile file = p.file;
    if (worker_of) {
      const std::string worker = sanitize(worker_of(file));
      if (worker != file.worker) {
        state_->used.erase(file.path);
        std::string suffix;
        const int64_t ns = std::stoll(p.suffix.substr(1));
        file.path = state_->final_name(worker, ns, suffix);
        file.worker = worker;
      }
    }
    if (::renameat(state_->dir.fd(), basename_of(p.partial).c_str(), state_->dir.fd(),
                   basename_of(file.path).c_str()) != 0) {
      throw std::runtime_error("cannot write " + file.path + ": " + std::strerror(errno));
    }
    files.push_back(std::move(file));
  }
  state_->pending.clear();
  return files;
}

std::string trace_worker_name(const Run& run, const Process& proc, const std::string& override) {
  if (override.empty()) return sanitize(proc.worker);
  size_t traced = 0;
  for (const Process& p : run.processes) traced += p.cpu_events == 0 ? 0 : 1;
  if (traced <= 1) return sanitize(override);
  return sanitize(override + "_" + std::to_string(proc.pid));
}

}  // namespace torchprof
