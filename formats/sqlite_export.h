// `torchprof export --type sqlite`: a run as a SQLite database in Nsight Systems' export
// schema (the tables and columns of `nsys export --type sqlite`, so that queries written
// for nsys run unchanged), with torch's ops, steps and tensor memory in tables of ours
// (docs/sql.md lists them).
//
// The engine hands each process's events to the exporter as it reads them
// (analysis/trace_sink.h); a process's rows are inserted once its pass is done, all in
// one transaction. Tables are made when their first row comes, as nsys makes them; the
// ENUM tables the columns refer to are always there.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "analysis/model.h"
#include "analysis/trace_sink.h"

namespace torchprof {

// The schema's globalTid of a thread and globalPid of a process, as nsys encodes them
// (<hardware id:8><VM id:8><pid:24><tid:24>, VM id 1): pid = (globalTid >> 24) & 0xFFFFFF,
// tid = globalTid & 0xFFFFFF, and globalPid is globalTid with the tid bits cleared.
int64_t sqlite_global_pid(int pid);
int64_t sqlite_global_tid(int pid, uint32_t tid);

// A kernel's short name as nsys gives it (shortName): the demangled name without its
// return type, scopes, template arguments and parameters ("void at::native::k<4>(int)" -> "k").
std::string kernel_short_name(const std::string& demangled);

struct SqliteExportCounts {
  uint64_t nvtx = 0;     // NVTX_EVENTS rows (domains and categories included)
  uint64_t api = 0;      // CUPTI_ACTIVITY_KIND_RUNTIME rows
  uint64_t gpu = 0;      // kernel, memcpy, memset and synchronization rows
  uint64_t ops = 0;      // TORCH_OPS rows
  uint64_t rows = 0;     // every row of every table
};

class SqliteExport {
 public:
  // Opens (creates) the database at `path`, which must not hold one already. Throws
  // std::runtime_error "cannot write PATH: reason".
  // `version` goes in META_DATA_EXPORT's EXPORT_PRODUCT_VERSION.
  SqliteExport(const std::string& path, const std::string& version);
  ~SqliteExport();
  SqliteExport(const SqliteExport&) = delete;
  SqliteExport& operator=(const SqliteExport&) = delete;

  // The engine's factory of the per-process sinks (EngineOutputs::traces).
  TraceSinkFactory factory();

  // Writes the run's own tables (processes, threads, GPUs, session and export metadata),
  // the indexes, and commits. Throws std::runtime_error.
  SqliteExportCounts finish(const Run& run);

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace torchprof
