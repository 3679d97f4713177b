// Kineto-compatible Chrome trace JSON: one file per process per cycle, named like
// torch's tensorboard_trace_handler (<worker>.<unix_ns>.pt.trace.json[.gz]) so
// TensorBoard, HTA and Perfetto read the folder as it is.
//
// The traces are written as the engine reads the capture (analysis/trace_sink.h): each
// event goes into its cycle's file when it completes, in that order, not sorted by time
// (the consumers sort). A file is written under a hidden name until its process is done,
// then named after its worker and the end of its cycle's steps. deviceProperties and
// traceName come after traceEvents, once every device of the process has been read.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/model.h"
#include "analysis/trace_sink.h"
#include "common/safe_dir.h"
#include "formats/json_writer.h"

namespace torchprof {

struct TraceOptions {
  std::string dir;  // traces go here (created if missing); as shown in paths and messages
  bool gzip = false;
  DirHandle parent;  // the held directory `dir` is made in, by its last name; empty: `dir`
                     // is opened by path (open_dir_safely). Either way it must be ours alone.
};

struct TraceFile {
  int pid = 0;
  int cycle = 0;
  std::string path;
  std::string worker;  // the worker its name begins with
};

// The traces of one run: the sinks the engine writes them through, and the files they made.
class KinetoTraces {
 public:
  explicit KinetoTraces(TraceOptions options);
  ~KinetoTraces();
  KinetoTraces(const KinetoTraces&) = delete;
  KinetoTraces& operator=(const KinetoTraces&) = delete;

  // The engine's factory of the sinks (EngineOutputs::traces).
  TraceSinkFactory factory();

  // Waits until every file is written and names each after the worker `worker_of` gives
  // it (trace_worker_name(), or a merged report's renamed worker); empty: as written.
  // Throws std::runtime_error when a file could not be written or renamed.
  using WorkerOf = std::function<std::string(const TraceFile&)>;
  std::vector<TraceFile> finish(const WorkerOf& worker_of = {});

  struct State;

 private:
  std::unique_ptr<State> state_;
};

// File-name worker of `proc`: its own worker, or `override` (suffixed "_<pid>" when
// several processes have traces, so their files stay apart).
std::string trace_worker_name(const Run& run, const Process& proc, const std::string& override);

}  // namespace torchprof
