// Running the engine (analysis/engine.h) in unit tests: on a capture built in memory
// (analysis_capture_builder.h) or on disk, with a trace sink that keeps every event the
// engine hands on, so that tests can look at each event's times, self time, step and
// ids, and at each GPU record with its launch.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "analysis/engine.h"
#include "analysis_capture_builder.h"

namespace torchprof::test {

// What a CollectingSink was handed, in the order it was handed.
struct Collected {
  struct GpuCall {
    GpuEvent gpu;
    int cycle = 0;
    LaunchIds launch;
  };
  std::vector<Event> events;       // ranges, marks, API calls of recorded steps
  std::vector<EventIds> ids;       // one per event
  std::vector<GpuCall> gpu;        // GPU records of recorded steps
  int finished = 0;                // finish() calls
  int discarded = 0;               // discard() calls

  // The events named `name`, in the order handed on.
  std::vector<const Event*> named(const std::string& name) const {
    std::vector<const Event*> out;
    for (const Event& e : events) {
      if (e.name == name) out.push_back(&e);
    }
    return out;
  }
};

class CollectingSink : public ProcessTraceSink {
 public:
  explicit CollectingSink(Collected& into) : into_(into) {}
  void event(const Event& e, const EventIds& ids) override {
    into_.events.push_back(e);
    into_.ids.push_back(ids);
  }
  void gpu(const GpuEvent& g, int cycle, const LaunchIds& launch, const GpuDevice*) override {
    into_.gpu.push_back({g, cycle, launch});
  }
  void finish(const Run&, const Process&) override { ++into_.finished; }
  void discard() override {
    ++into_.discarded;
    into_.events.clear();
    into_.ids.clear();
    into_.gpu.clear();
  }

 private:
  Collected& into_;
};

// Sinks that put each process's events into collected[pid] (a pass that starts again
// discards what its first attempt handed on).
inline TraceSinkFactory collecting(std::map<int, Collected>& collected) {
  return [&collected](const Process& proc, const std::vector<Step>&, int64_t) {
    return std::make_unique<CollectingSink>(collected[proc.pid]);
  };
}

// A row as one line of text ("KIND NAME calls=… self=… total=… cuda=SELF/TOTAL", with
// its shapes and mangled name when it has them), and a table as its rows in order: what
// tests compare tables by.
inline std::string row_text(const OpStats& op) {
  return op.kind + " " + op.name + " calls=" + std::to_string(op.calls) + " self=" + std::to_string(op.self_cpu_ns) +
         " total=" + std::to_string(op.cpu_total_ns) + " cuda=" + std::to_string(op.self_cuda_ns) + "/" +
         std::to_string(op.cuda_total_ns) + (op.input_shapes.empty() ? "" : " shapes=" + op.input_shapes) +
         (op.mangled.empty() ? "" : " mangled=" + op.mangled);
}

inline std::vector<std::string> table_text(const std::vector<OpStats>& ops) {
  std::vector<std::string> out;
  for (const OpStats& op : ops) out.push_back(row_text(op));
  return out;
}

// A run's rows by "KIND NAME".
inline std::map<std::string, OpStats> rows_by_kind_and_name(const Run& run) {
  std::map<std::string, OpStats> out;
  for (const OpStats& op : run.ops) out[op.kind + " " + op.name] = op;
  return out;
}

// Writes `bytes` (a CaptureBuilder's) to a file under the test directory; returns its path.
inline std::string write_capture(const std::string& bytes, const std::string& name) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "torchprof_unit";
  std::filesystem::create_directories(dir);
  const std::filesystem::path path = dir / name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path.string();
}

// The engine on a capture file, with every output it can feed (and the events collected
// into `collected` when given).
inline Run analyse(const std::string& path, const AnalysisOptions& options = {},
                   std::map<int, Collected>* collected = nullptr) {
  EngineOutputs outputs;
  outputs.timeline = 1000;
  outputs.stats = true;
  outputs.folded = true;
  if (collected != nullptr) outputs.traces = collecting(*collected);
  return analyse_capture_file(path, options, outputs);
}

}  // namespace torchprof::test
