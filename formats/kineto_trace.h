// Kineto-compatible Chrome trace JSON: one file per process per cycle, named like
// torch's tensorboard_trace_handler (<worker>.<unix_ns>.pt.trace.json[.gz]) so
// TensorBoard, HTA and Perfetto read the folder as it is.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "analysis/model.h"
#include "formats/json_writer.h"

namespace torchprof {

class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void write(std::string_view bytes) = 0;
  // Takes `block`'s bytes and leaves it empty; a sink that keeps them may swap the
  // buffer for another instead of copying.
  virtual void take(json::Buffer& block) {
    write(block.view());
    block.clear();
  }
};

struct TraceOptions {
  std::string dir;          // traces go here (created if missing)
  bool gzip = false;
  std::string worker_name;  // "" = each process's worker; with several processes, "<name>_<pid>"
};

struct TraceFile {
  int pid = 0;
  int cycle = 0;
  std::string path;
};

// File-name worker of `proc`: its own worker, or `override` (suffixed "_<pid>" when
// several processes have traces, so their files stay apart).
std::string trace_worker_name(const Run& run, const Process& proc, const std::string& override);

// Streams the trace of `proc`'s cycle `cycle` (Step::cycle) into `sink`.
void render_kineto_trace(const Run& run, const Process& proc, int cycle,
                         const std::string& trace_name, TraceSink& sink);

// Writes every trace of the run; throws std::runtime_error when a file cannot be written.
std::vector<TraceFile> write_kineto_traces(const Run& run, const TraceOptions& options);

}  // namespace torchprof
