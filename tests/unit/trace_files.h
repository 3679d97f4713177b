// The Kineto traces of a capture, as the engine writes them (formats/kineto_trace.h),
// read back for the trace tests.
#pragma once

#include <doctest/doctest.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/engine.h"
#include "formats/kineto_trace.h"

namespace torchprof::test {

struct Traced {
  Run run;
  std::vector<TraceFile> files;  // by pid, then cycle
};

// The engine on `capture` with every output, its traces written into `options.dir`
// (emptied first) and named after the processes' workers.
inline Traced traced(const std::string& capture, const AnalysisOptions& analysis, const TraceOptions& options,
                     bool clear_dir = true) {
  if (clear_dir) std::filesystem::remove_all(options.dir);
  KinetoTraces traces(options);
  EngineOutputs outputs;
  outputs.timeline = 1000;
  outputs.stats = true;
  outputs.folded = true;
  outputs.traces = traces.factory();
  Traced t;
  t.run = analyse_capture_file(capture, analysis, outputs);
  t.files = traces.finish();
  std::sort(t.files.begin(), t.files.end(), [](const TraceFile& a, const TraceFile& b) {
    return std::tie(a.pid, a.cycle) < std::tie(b.pid, b.cycle);
  });
  return t;
}

// A trace directory under the test folder.
inline std::string trace_dir(const std::string& name) {
  return (std::filesystem::temp_directory_path() / "torchprof_unit" / name).string();
}

// A trace file's text (gunzipped when its name ends in .gz).
inline std::string trace_text(const std::string& path) {
  if (!path.ends_with(".gz")) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  gzFile in = gzopen(path.c_str(), "rb");
  REQUIRE(in);
  std::string text;
  char buf[4096];
  for (int n; (n = gzread(in, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  gzclose(in);
  return text;
}

inline nlohmann::json trace_json(const std::string& path) { return nlohmann::json::parse(trace_text(path)); }

}  // namespace torchprof::test
