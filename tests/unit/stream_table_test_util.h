// What the streamed table's tests share: a process's hello, the full analysis of a
// capture and the comparison of the streamed table with it.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "analysis_capture_builder.h"
#include "analysis/analysis.h"
#include "analysis/decode.h"
#include "analysis/stream_table.h"

namespace torchprof::stream_test {

inline constexpr uint64_t kMono = 1000;
inline constexpr int64_t kReal = 1'700'000'000'000'000'000;

inline std::string hello(int pid) {
  return test::hello_body(pid, 1, kMono, kReal, "/bin/app", {"app"}, "node1", {});
}

// The full analysis of the same capture, for comparison.
inline Run analysed(const std::string& path, const AnalysisOptions& options) {
  Run run = decode_capture_file(path);
  analyse(run, options);
  return run;
}

inline std::string describe(const OpStats& op) {
  return op.kind + " " + op.name + " calls=" + std::to_string(op.calls) + " self=" + std::to_string(op.self_cpu_ns) +
         " total=" + std::to_string(op.cpu_total_ns) + " cuda=" + std::to_string(op.self_cuda_ns) + "/" +
         std::to_string(op.cuda_total_ns);
}

inline std::vector<std::string> rows(const Run& run) {
  std::vector<std::string> out;
  for (const OpStats& op : run.ops) out.push_back(describe(op));
  return out;
}

inline std::vector<std::string> warnings(const Run& run) {
  std::vector<std::string> out = run.warnings;
  for (const Process& p : run.processes) {
    for (const std::string& w : p.warnings) out.push_back(std::to_string(p.pid) + ": " + w);
  }
  return out;
}

// The streamed table equals the full analysis's, row for row and in order, with the
// same notes.
inline void check_same(const std::string& path, const AnalysisOptions& options, const StreamedTable& streamed) {
  const Run full = analysed(path, options);
  CHECK(rows(streamed.run) == rows(full));
  CHECK(streamed.run.has_gpu == full.has_gpu);
  CHECK(streamed.run.dropped_events == full.dropped_events);
  CHECK(streamed.run.truncated == full.truncated);
  CHECK(warnings(streamed.run) == warnings(full));
  uint64_t events = 0;
  uint64_t gpu_records = 0;
  for (const Process& p : full.processes) {
    events += p.events_list.size();
    gpu_records += p.gpu_events.size();
  }
  CHECK(streamed.events == events);
  CHECK(streamed.gpu_records == gpu_records);
  CHECK(streamed.run.cupti_dropped == full.cupti_dropped);
  CHECK(streamed.run.gpu_notices == full.gpu_notices);
}

}  // namespace torchprof::stream_test
