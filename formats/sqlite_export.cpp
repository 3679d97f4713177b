#include "formats/sqlite_export.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <map>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/analysis.h"
#include "formats/sqlite_schema.h"
#include "common/wire/wire.h"

namespace torchprof {

using namespace sqlite_schema;  // NOLINT(google-build-using-namespace): the tables' names

namespace {

// One prepared statement, bound and stepped row by row.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql) : db_(db) {
    if (sqlite3_prepare_v3(db, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr) != SQLITE_OK) {
      throw std::runtime_error(std::string(sqlite3_errmsg(db)) + " in: " + sql);
    }
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Statement& bind_null(int i) {
    sqlite3_bind_null(stmt_, i);
    return *this;
  }
  // A copy of `s` is bound; bind_static binds text that outlives the row's insert.
  Statement& bind_text(int i, const std::string& s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& bind_static(int i, const std::string& s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_STATIC);
    return *this;
  }
  Statement& bind_double(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  Statement& bind_opt(int i, int64_t v, bool present) { return present ? bind(i, v) : bind_null(i); }
  void run() {
    const int rc = sqlite3_step(stmt_);
    sqlite3_reset(stmt_);
    if (rc != SQLITE_DONE) throw std::runtime_error(sqlite3_errmsg(db_));
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

std::string placeholders(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += i == 0 ? "?" : ",?";
  return s;
}

int column_count(const Table& t) {
  int n = 1;
  int depth = 0;
  for (const char* c = t.columns; *c != '\0'; ++c) {
    if (*c == '(') ++depth;
    if (*c == ')') --depth;
    if (*c == ',' && depth == 0) ++n;
  }
  return n;
}

// A row of NVTX_EVENTS, kept until its process is done.
struct NvtxRow {
  int64_t start;
  int64_t end;          // marks: none
  uint32_t text;        // string index
  uint32_t tid;
  uint32_t end_tid;
  uint32_t domain;      // 0: the default domain
  uint32_t category;
  uint64_t payload;
  uint8_t payload_type;
  uint8_t type;         // kNvtx*
};

struct ApiRow {
  int64_t start;
  int64_t end;
  uint64_t correlation;
  uint32_t name;
  uint32_t tid;
  bool driver;
};

struct OpRow {
  int64_t start;
  int64_t end;
  const OpInfo* op;
  uint32_t tid;
  int32_t step;
  int32_t parent = -1;  // index into the process's ops
  int cycle;
  uint32_t external_id;
};

struct LaunchRow {
  int cycle;
  uint32_t enclosing_id;
  uint64_t correlation;
};

}  // namespace

int64_t sqlite_global_pid(int pid) {
  // <hardware id:8><VM id:8><pid:24><tid:24>, the VM id 1 as nsys writes it for a local run.
  return static_cast<int64_t>((uint64_t{1} << 48) | (static_cast<uint64_t>(pid & 0xFFFFFF) << 24));
}

int64_t sqlite_global_tid(int pid, uint32_t tid) { return sqlite_global_pid(pid) | (tid & 0xFFFFFF); }

std::string kernel_short_name(const std::string& demangled) {
  // The parameter list: the last top-level "(...)" (an operator() keeps its own).
  std::string s = demangled;
  int depth = 0;
  size_t cut = std::string::npos;
  for (size_t i = s.size(); i-- > 0;) {
    const char c = s[i];
    if (c == ')') ++depth;
    if (c == '(' && --depth == 0) {
      cut = i;
      break;
    }
    if (depth == 0 && c != ' ' && c != ')') break;  // no trailing parameter list
  }
  if (cut != std::string::npos && cut > 0) s.resize(cut);
  // Template arguments at the end of the name.
  while (!s.empty() && s.back() == '>') {
    int d = 0;
    size_t i = s.size();
    while (i-- > 0) {
      if (s[i] == '>') ++d;
      if (s[i] == '<' && --d == 0) break;
    }
    if (i == std::string::npos || i == 0) break;
    s.resize(i);
  }
  // The return type and scopes: what follows the last top-level space or "::".
  depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '<' || c == '(') ++depth;
    if (c == '>' || c == ')') --depth;
    if (depth != 0) continue;
    if (c == ' ') start = i + 1;
    if (c == ':' && i + 1 < s.size() && s[i + 1] == ':') start = i + 2;
  }
  s = s.substr(start);
  return s.empty() ? demangled : s;
}

struct SqliteExport::State {
  sqlite3* db = nullptr;
  std::string path;
  std::string version;
  std::map<std::string, bool> made;  // tables made so far
  std::unordered_map<std::string, int64_t> strings;
  std::vector<const std::string*> string_order;
  int64_t next_step_id = 1;
  int64_t next_op_id = 1;
  SqliteExportCounts counts;
  std::map<std::string, std::unique_ptr<Statement>> inserts;

  void exec(const std::string& sql) {
    char* error = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
      const std::string what = error != nullptr ? error : "error";
      sqlite3_free(error);
      throw std::runtime_error(what + " in: " + sql);
    }
  }

  // The insert of `t`, made with the table the first time.
  Statement& insert(const Table& t) {
    auto it = inserts.find(t.name);
    if (it != inserts.end()) return *it->second;
    exec(std::string("CREATE TABLE ") + t.name + " (" + t.columns + ")");
    auto stmt = std::make_unique<Statement>(
        db, std::string("INSERT INTO ") + t.name + " VALUES (" + placeholders(column_count(t)) + ")");
    Statement& s = *stmt;
    inserts.emplace(t.name, std::move(stmt));
    return s;
  }

  void row(Statement& s) {
    s.run();
    ++counts.rows;
  }

  int64_t string_id(const std::string& text) {
    auto [it, fresh] = strings.emplace(text, static_cast<int64_t>(strings.size()));
    if (fresh) string_order.push_back(&it->first);
    return it->second;
  }

  void enum_table(const char* name, const std::vector<EnumRow>& rows) {
    exec(std::string("CREATE TABLE ") + name + " (id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, label TEXT)");
    Statement s(db, std::string("INSERT INTO ") + name + " VALUES (?,?,?)");
    for (const EnumRow& r : rows) {
      s.bind(1, r.id).bind_text(2, r.name).bind_text(3, r.label);
      s.run();
      ++counts.rows;
    }
  }
};

namespace {

// One process's rows, held until its pass is done (a pass that starts again throws them away).
class ProcessRows : public ProcessTraceSink {
 public:
  explicit ProcessRows(SqliteExport::State& state) : state_(state) {}

  void event(const Event& e, const EventIds& ids) override {
    if (e.kind == EventKind::kCudaRuntime || e.kind == EventKind::kCudaDriver) {
      api_.push_back({e.start_ns, e.end_ns, e.correlation, local(e.name), e.tid, e.kind == EventKind::kCudaDriver});
      if (ids.enclosing_id != 0 && e.correlation != 0) launches_.push_back({ids.cycle, ids.enclosing_id, e.correlation});
      return;
    }
    const OpInfo* op = e.op();
    if (op != nullptr && e.kind == EventKind::kRange) {
      OpRow r{e.start_ns, e.end_ns, op, e.tid, e.step, -1, ids.cycle, ids.external_id};
      adopt(r);
      if (e.op_call) return;  // torch's own callbacks: no NVTX range
    }
    NvtxRow r{};
    r.start = e.start_ns;
    r.end = e.end_ns;
    r.text = local(e.name);
    r.tid = e.tid;
    r.end_tid = e.end_tid();
    r.domain = domain_of(e.domain());
    r.category = e.category();
    if (r.category != 0 && !e.category_name().empty()) category_of(r.domain, r.category, e.category_name());
    r.payload = e.payload;
    r.payload_type = e.payload_type;
    r.type = e.kind == EventKind::kMark ? kNvtxMark : e.push_pop ? kNvtxPushPop : kNvtxStartEnd;
    nvtx_.push_back(r);
  }

  void gpu(const GpuEvent& g, int /*cycle*/, const LaunchIds& /*launch*/, const GpuDevice* /*device*/) override {
    gpu_.push_back(g);
  }

  void discard() override {
    nvtx_.clear();
    api_.clear();
    gpu_.clear();
    ops_.clear();
    open_.clear();
    launches_.clear();
    local_.clear();
    local_names_.clear();
    domains_.clear();
    categories_.clear();
  }

  void finish(const Run& /*run*/, const Process& proc) override {
    std::vector<int64_t> ids(local_names_.size());
    for (size_t i = 0; i < local_names_.size(); ++i) ids[i] = state_.string_id(*local_names_[i]);
    const int64_t gpid = sqlite_global_pid(proc.pid);
    auto gtid = [&](uint32_t tid) { return sqlite_global_tid(proc.pid, tid); };

    // Steps first: the ops and memory rows refer to them. Only those a step marker made
    // (a process without one is no step of torch's).
    std::vector<int64_t> step_ids(proc.steps.size(), -1);
    for (size_t i = 0; i < proc.steps.size(); ++i) {
      const Step& st = proc.steps[i];
      if (!st.marker) continue;
      Statement& s = state_.insert(kTorchSteps);
      step_ids[i] = state_.next_step_id++;
      s.bind(1, step_ids[i]).bind(2, gpid).bind(3, st.index).bind(4, state_.string_id(st.name));
      s.bind(5, st.start_ns).bind(6, st.start_ns + st.dur_ns).bind_text(7, step_action_name(st.action));
      s.bind(8, gtid(st.marker_tid));
      state_.row(s);
    }
    auto step_id = [&](int32_t step) {
      return step >= 0 && static_cast<size_t>(step) < step_ids.size() ? step_ids[static_cast<size_t>(step)] : -1;
    };

    if (!domains_.empty() || !nvtx_.empty()) {
      Statement& s = state_.insert(kNvtx);
      for (size_t d = 0; d < domains_.size(); ++d) {
        // A domain's name as nsys gives it: an eventType 75 row, domainId its id.
        s.bind(1, proc.start_ns).bind_null(2).bind(3, kNvtxDomainCreate);
        for (int c = 4; c <= 20; ++c) s.bind_null(c);
        s.bind_text(7, domains_[d].str()).bind(8, gtid(proc.threads.empty() ? 0 : proc.threads.front().tid));
        s.bind(11, static_cast<int64_t>(d + 1));
        state_.row(s);
        ++state_.counts.nvtx;
      }
      for (const auto& [key, name] : categories_) {
        s.bind(1, proc.start_ns).bind_null(2).bind(3, kNvtxCategory);
        for (int c = 4; c <= 20; ++c) s.bind_null(c);
        s.bind(5, key.second).bind_text(7, name.str());
        s.bind(8, gtid(proc.threads.empty() ? 0 : proc.threads.front().tid)).bind(11, key.first);
        state_.row(s);
        ++state_.counts.nvtx;
      }
      for (const NvtxRow& r : nvtx_) {
        s.bind(1, r.start).bind_opt(2, r.end, r.type != kNvtxMark).bind(3, r.type).bind_null(4);
        s.bind_opt(5, r.category, r.category != 0).bind_null(6);
        s.bind_static(7, *local_names_[r.text]).bind(8, gtid(r.tid));
        s.bind_opt(9, gtid(r.end_tid), r.end_tid != r.tid).bind_null(10).bind(11, r.domain);
        for (int c = 12; c <= 20; ++c) s.bind_null(c);
        switch (static_cast<wire::PayloadType>(r.payload_type)) {
          case wire::PayloadType::kU64: s.bind(12, static_cast<int64_t>(r.payload)); break;
          case wire::PayloadType::kI64: s.bind(13, static_cast<int64_t>(r.payload)); break;
          case wire::PayloadType::kDouble: {
            double v;
            std::memcpy(&v, &r.payload, sizeof v);
            s.bind_double(14, v);
            break;
          }
          case wire::PayloadType::kU32: s.bind(15, static_cast<int64_t>(r.payload & 0xFFFFFFFFu)); break;
          case wire::PayloadType::kI32:
            s.bind(16, static_cast<int64_t>(static_cast<int32_t>(r.payload & 0xFFFFFFFFu)));
            break;
          case wire::PayloadType::kFloat: {
            float v;
            const auto bits = static_cast<uint32_t>(r.payload);
            std::memcpy(&v, &bits, sizeof v);
            s.bind_double(17, v);
            break;
          }
          case wire::PayloadType::kNone: break;
        }
        state_.row(s);
      }
      state_.counts.nvtx += nvtx_.size();
    }

    if (!api_.empty()) {
      Statement& s = state_.insert(kRuntime);
      for (const ApiRow& r : api_) {
        s.bind(1, r.start).bind(2, r.end).bind(3, r.driver ? kClassCudaDriver : kClassCudaRuntime);
        s.bind(4, gtid(r.tid)).bind(5, static_cast<int64_t>(r.correlation)).bind(6, ids[r.name]);
        s.bind(7, 0).bind_null(8);
        state_.row(s);
      }
      state_.counts.api += api_.size();
    }

    for (const GpuEvent& g : gpu_) write_gpu(g, gpid);
    state_.counts.gpu += gpu_.size();

    if (!ops_.empty()) write_ops(proc, gtid, step_id);
    if (!proc.tensor_memory.empty()) {
      Statement& s = state_.insert(kTorchMemory);
      for (const MemoryEvent& m : proc.tensor_memory) {
        s.bind(1, m.ts_ns).bind(2, gpid).bind_opt(3, gtid(m.tid), m.tid != 0).bind(4, m.device_type);
        s.bind(5, m.device).bind(6, static_cast<int64_t>(m.address));
        s.bind(7, m.alloc ? static_cast<int64_t>(m.bytes) : -static_cast<int64_t>(m.bytes));
        s.bind_opt(8, m.total_allocated, m.total_allocated >= 0).bind_opt(9, m.total_reserved, m.total_reserved >= 0);
        s.bind_opt(10, step_id(m.step), step_id(m.step) >= 0);
        state_.row(s);
      }
    }
    discard();
  }

 private:
  uint32_t local(Name name) {
    auto [it, fresh] = local_.emplace(name.id(), static_cast<uint32_t>(local_names_.size()));
    if (fresh) local_names_.push_back(&name.str());
    return it->second;
  }

  uint32_t domain_of(Name domain) {
    if (domain.empty()) return 0;
    for (size_t i = 0; i < domains_.size(); ++i) {
      if (domains_[i] == domain) return static_cast<uint32_t>(i + 1);
    }
    domains_.push_back(domain);
    return static_cast<uint32_t>(domains_.size());
  }

  void category_of(uint32_t domain, uint32_t category, Name name) { categories_.emplace(std::make_pair(domain, category), name); }

  // Ops come as they end: those of its thread that ended inside it, and have no parent
  // yet, are its children.
  void adopt(OpRow r) {
    const auto index = static_cast<int32_t>(ops_.size());
    std::vector<int32_t>& open = open_[r.tid];
    while (!open.empty() && ops_[static_cast<size_t>(open.back())].start >= r.start &&
           ops_[static_cast<size_t>(open.back())].end <= r.end) {
      ops_[static_cast<size_t>(open.back())].parent = index;
      open.pop_back();
    }
    open.push_back(index);
    ops_.push_back(r);
  }

  template <typename GlobalTid, typename StepId>
  void write_ops(const Process& proc, GlobalTid gtid, StepId step_id) {
    const int64_t base = state_.next_op_id;
    std::vector<int32_t> depth(ops_.size(), -1);
    // Parents end after their children: walk from the last.
    for (size_t i = ops_.size(); i-- > 0;) {
      const int32_t p = ops_[i].parent;
      depth[i] = p < 0 ? 0 : depth[static_cast<size_t>(p)] + 1;
    }
    std::map<std::pair<int, uint32_t>, int64_t> by_external;
    Statement& s = state_.insert(kTorchOps);
    for (size_t i = 0; i < ops_.size(); ++i) {
      const OpRow& r = ops_[i];
      const int64_t id = base + static_cast<int64_t>(i);
      if (r.external_id != 0) by_external[{r.cycle, r.external_id}] = id;
      s.bind(1, id).bind(2, r.start).bind(3, r.end).bind(4, gtid(r.tid)).bind(5, state_.string_id(r.op->name));
      s.bind_opt(6, base + r.parent, r.parent >= 0).bind(7, depth[i]);
      s.bind_opt(8, r.op->sequence, r.op->sequence >= 0);
      s.bind_opt(9, r.op->input_shapes.empty() ? 0 : state_.string_id(r.op->input_shapes), !r.op->input_shapes.empty());
      s.bind_opt(10, r.op->stack.empty() ? 0 : state_.string_id(joined_frames(r.op->stack)), !r.op->stack.empty());
      s.bind_opt(11, static_cast<int64_t>(r.op->flops), r.op->flops != 0);
      s.bind_opt(12, step_id(r.step), step_id(r.step) >= 0);
      s.bind_opt(13, r.op->input_types.empty() ? 0 : state_.string_id(r.op->input_types), !r.op->input_types.empty());
      state_.row(s);
    }
    state_.next_op_id += static_cast<int64_t>(ops_.size());
    state_.counts.ops += ops_.size();
    // The launches made while an op was the innermost range open on its thread.
    for (const LaunchRow& l : launches_) {
      auto it = by_external.find({l.cycle, l.enclosing_id});
      if (it == by_external.end()) continue;
      Statement& t = state_.insert(kTorchLaunches);
      t.bind(1, it->second).bind(2, sqlite_global_pid(proc.pid)).bind(3, static_cast<int64_t>(l.correlation));
      state_.row(t);
    }
  }

  void write_gpu(const GpuEvent& g, int64_t gpid) {
    const auto common = [&](Statement& s) {
      s.bind(1, g.start_ns).bind(2, g.end_ns).bind(3, g.device).bind(4, g.context).bind_null(5);
      s.bind(6, g.stream == ~0u ? 0 : g.stream).bind(7, static_cast<int64_t>(g.correlation)).bind(8, gpid);
    };
    switch (g.kind) {
      case GpuKind::kKernel: {
        Statement& s = state_.insert(kKernel);
        common(s);
        s.bind(9, state_.string_id(g.name)).bind(10, state_.string_id(kernel_short_name(g.name)));
        s.bind_opt(11, g.mangled.empty() ? 0 : state_.string_id(g.mangled), !g.mangled.empty());
        s.bind(12, 1).bind_null(13).bind(14, g.registers_per_thread);  // launchType: regular
        s.bind(15, g.grid[0]).bind(16, g.grid[1]).bind(17, g.grid[2]);
        s.bind(18, g.block[0]).bind(19, g.block[1]).bind(20, g.block[2]);
        s.bind(21, g.static_shared_memory).bind(22, g.dynamic_shared_memory).bind(23, 0).bind(24, 0);
        s.bind(25, 0).bind_null(26);
        s.bind_opt(27, static_cast<int64_t>(g.graph_node_id), g.graph_node_id != 0).bind_null(28);
        state_.row(s);
        break;
      }
      case GpuKind::kMemcpy: {
        Statement& s = state_.insert(kMemcpy);
        common(s);
        s.bind(9, static_cast<int64_t>(g.bytes)).bind(10, g.copy_kind).bind_null(11);
        s.bind(12, mem_kind(g.src_kind)).bind(13, mem_kind(g.dst_kind));
        for (int c = 14; c <= 18; ++c) s.bind_null(c);
        s.bind_opt(19, static_cast<int64_t>(g.graph_node_id), g.graph_node_id != 0).bind_null(20);
        state_.row(s);
        break;
      }
      case GpuKind::kMemset: {
        Statement& s = state_.insert(kMemset);
        common(s);
        s.bind(9, g.copy_kind).bind(10, static_cast<int64_t>(g.bytes));
        s.bind_opt(11, static_cast<int64_t>(g.graph_node_id), g.graph_node_id != 0).bind(12, mem_kind(g.dst_kind));
        state_.row(s);
        break;
      }
      case GpuKind::kSync: {
        Statement& s = state_.insert(kSync);
        common(s);
        s.bind(9, g.sync_type).bind(10, g.sync_event == ~0u ? -1 : static_cast<int64_t>(g.sync_event));
        state_.row(s);
        break;
      }
    }
  }

  SqliteExport::State& state_;
  std::vector<NvtxRow> nvtx_;
  std::vector<ApiRow> api_;
  std::vector<GpuEvent> gpu_;
  std::vector<OpRow> ops_;
  std::unordered_map<uint32_t, std::vector<int32_t>> open_;  // per thread: ops without a parent yet
  std::vector<LaunchRow> launches_;
  std::unordered_map<const void*, uint32_t> local_;  // Name id -> index
  std::vector<const std::string*> local_names_;
  std::vector<Name> domains_;
  std::map<std::pair<uint32_t, uint32_t>, Name> categories_;
};

}  // namespace

SqliteExport::SqliteExport(const std::string& path, const std::string& version)
    : state_(std::make_unique<State>()) {
  state_->path = path;
  state_->version = version;
  if (sqlite3_open_v2(path.c_str(), &state_->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK) {
    const std::string why = state_->db != nullptr ? sqlite3_errmsg(state_->db) : "out of memory";
    sqlite3_close(state_->db);
    state_->db = nullptr;
    throw std::runtime_error("cannot write " + path + ": " + why);
  }
  try {
    // One writer, one transaction: nothing to journal or sync until the end.
    state_->exec("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA locking_mode=EXCLUSIVE; "
                 "PRAGMA temp_store=MEMORY; PRAGMA cache_size=-65536");
    state_->exec("BEGIN");
    state_->enum_table("ENUM_NSYS_EVENT_TYPE", kEventTypes);
    state_->enum_table("ENUM_NSYS_EVENT_CLASS", kEventClasses);
    state_->enum_table("ENUM_CUDA_MEMCPY_OPER", kMemcpyOpers);
    state_->enum_table("ENUM_CUDA_MEM_KIND", kMemKinds);
    state_->enum_table("ENUM_CUPTI_SYNC_TYPE", kSyncTypes);
    state_->enum_table("ENUM_CUDA_KERNEL_LAUNCH_TYPE", kLaunchTypes);
    state_->enum_table("ENUM_CUDA_FUNC_CACHE_CONFIG", kCacheConfigs);
    state_->enum_table("ENUM_CUDA_SHARED_MEM_LIMIT_CONFIG", kSharedMemLimits);
    state_->enum_table("ENUM_CUDA_DEV_MEM_EVENT_OPER", kDevMemOpers);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot write " + path + ": " + e.what());
  }
}

SqliteExport::~SqliteExport() {
  state_->inserts.clear();
  if (state_->db != nullptr) sqlite3_close(state_->db);
}

TraceSinkFactory SqliteExport::factory() {
  State* state = state_.get();
  return [state](const Process&, const std::vector<Step>&, int64_t) { return std::make_unique<ProcessRows>(*state); };
}

SqliteExportCounts SqliteExport::finish(const Run& run) {
  State& st = *state_;
  {
    Statement& s = st.insert(kProcesses);
    for (const Process& p : run.processes) {
      const std::string name = !p.cmdline.empty() ? p.cmdline.front() : p.exe;
      s.bind(1, sqlite_global_pid(p.pid)).bind(2, p.pid).bind_text(3, name.substr(name.rfind('/') + 1));
      st.row(s);
    }
  }
  bool threads = false;
  for (const Process& p : run.processes) threads = threads || !p.threads.empty();
  if (threads) {
    Statement& s = st.insert(kThreadNames);
    for (const Process& p : run.processes) {
      for (const ThreadInfo& t : p.threads) {
        s.bind(1, st.string_id(t.name.empty() ? std::to_string(t.tid) : t.name)).bind(2, 0);
        s.bind(3, sqlite_global_tid(p.pid, t.tid));
        st.row(s);
      }
    }
  }
  {
    // Each GPU once, by id, as the first process that used it saw it.
    std::map<uint32_t, const GpuDevice*> gpus;
    for (const Process& p : run.processes) {
      for (const GpuDevice& d : p.devices) gpus.emplace(d.id, &d);
    }
    if (!gpus.empty()) {
      Statement& s = st.insert(kTargetGpu);
      for (const auto& [id, d] : gpus) {
        for (int c = 1; c <= kTargetGpuColumns; ++c) s.bind_null(c);
        s.bind(1, 0).bind(2, id).bind_text(3, d->name).bind(5, 1).bind(7, static_cast<int64_t>(d->total_global_mem));
        s.bind(10, d->num_sms).bind(15, id).bind(22, d->regs_per_block).bind(23, d->shared_mem_per_block);
        s.bind(24, d->shared_mem_per_block_optin).bind(25, d->shared_mem_per_multiprocessor);
        s.bind(26, d->regs_per_multiprocessor).bind(27, d->warp_size);
        if (d->warp_size > 0) s.bind(29, d->max_threads_per_multiprocessor / d->warp_size);
        s.bind(31, d->max_threads_per_block).bind(38, d->compute_major).bind(39, d->compute_minor);
        s.bind(40, d->compute_major).bind(41, d->compute_minor);
        st.row(s);
      }
      Statement& c = st.insert(kCudaDevice);
      for (const Process& p : run.processes) {
        for (const GpuDevice& d : p.devices) {
          c.bind(1, d.id).bind(2, d.id).bind(3, p.pid).bind_null(4).bind(5, d.num_sms);
          st.row(c);
        }
      }
    }
  }
  {
    Statement& s = st.insert(kSessionStart);
    const std::time_t secs = static_cast<std::time_t>(run.start_ns / 1000000000);
    char utc[64] = "";
    char local[64] = "";
    std::tm tm{};
    if (gmtime_r(&secs, &tm) != nullptr) std::strftime(utc, sizeof utc, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (localtime_r(&secs, &tm) != nullptr) std::strftime(local, sizeof local, "%Y-%m-%dT%H:%M:%S%z", &tm);
    s.bind(1, run.start_ns).bind_text(2, utc).bind_text(3, local);
    st.row(s);
  }
  {
    Statement& s = st.insert(kMetaCapture);
    std::vector<std::pair<std::string, std::string>> rows = {{"CAPTURE_EVENT_TYPE", "NvtxEvents"}};
    if (run.has_gpu) rows.emplace_back("CAPTURE_EVENT_TYPE", "Cuda");
    if (!run.command.empty()) rows.emplace_back("PROCESS_0:COMMAND", run.command.front());
    for (size_t i = 1; i < run.command.size(); ++i) {
      rows.emplace_back("PROCESS_0:ARGUMENT_" + std::to_string(i - 1), run.command[i]);
    }
    rows.emplace_back("RUN_DURATION_MS", std::to_string((run.end_ns - run.start_ns) / 1000000));
    // torchprof's own.
    rows.emplace_back("TORCHPROF_HOST", run.host);
    rows.emplace_back("TORCHPROF_EXIT_CODE", std::to_string(run.exit_code));
    rows.emplace_back("TORCHPROF_DROPPED_EVENTS", std::to_string(run.dropped_events));
    rows.emplace_back("TORCHPROF_CAPTURE_DAMAGED", run.truncated || run.corrupted ? "true" : "false");
    for (const auto& [name, value] : rows) {
      s.bind_text(1, name).bind_text(2, value);
      st.row(s);
    }
  }
  {
    Statement& s = st.insert(kMetaExport);
    const std::vector<std::pair<std::string, std::string>> rows = {
        {"EXPORT_PRODUCT_NAME", "torchprof"},
        {"EXPORT_PRODUCT_VERSION", st.version},
        {"EXPORT_SCHEMA_VERSION", kSchemaVersion},
        {"EXPORT_SCHEMA_VERSION_MAJOR", "3"},
        {"EXPORT_SCHEMA_VERSION_MINOR", "16"},
        {"EXPORT_SCHEMA_VERSION_MICRO", "1"},
        {"EXPORT_PARAM_LAZY", "true"},
        {"EXPORT_PARAM_TIME_NORMALIZE", "false"},
        {"EXPORT_PARAM_TIME_SHIFT", "0"},
    };
    for (const auto& [name, value] : rows) {
      s.bind_text(1, name).bind_text(2, value);
      st.row(s);
    }
  }
  {
    Statement& s = st.insert(kStringIds);
    for (size_t i = 0; i < st.string_order.size(); ++i) {
      s.bind(1, static_cast<int64_t>(i)).bind_text(2, *st.string_order[i]);
      st.row(s);
    }
  }
  // The joins users make: a kernel to its launch, a launch to the ranges around it.
  if (st.inserts.count(kRuntime.name) != 0) st.exec("CREATE INDEX RUNTIME_correlation ON CUPTI_ACTIVITY_KIND_RUNTIME (correlationId)");
  if (st.inserts.count(kKernel.name) != 0) st.exec("CREATE INDEX KERNEL_correlation ON CUPTI_ACTIVITY_KIND_KERNEL (correlationId)");
  if (st.inserts.count(kNvtx.name) != 0) st.exec("CREATE INDEX NVTX_EVENTS_thread_start ON NVTX_EVENTS (globalTid, start)");
  if (st.inserts.count(kTorchOps.name) != 0) st.exec("CREATE INDEX TORCH_OPS_parent ON TORCH_OPS (parentId)");
  st.inserts.clear();
  st.exec("COMMIT");
  return st.counts;
}

}  // namespace torchprof
