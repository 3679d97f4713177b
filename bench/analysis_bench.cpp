// The analysis side, in process, on a saved capture: the engine (analysis/engine.h) run
// three ways, each in a process of its own so that each has its own peak RSS:
//
//   analysis_bench CAPTURE|RUN_DIR OUT_DIR --table       the table alone (report --table-only)
//   analysis_bench CAPTURE|RUN_DIR OUT_DIR --no-traces   every output but the traces: the
//                                                        table, summary.json (with the
//                                                        overview), report.html, stacks
//   analysis_bench CAPTURE|RUN_DIR OUT_DIR               the same with the Kineto traces
//
// and, with the traces, the time to write as many bytes of text and nothing else (the
// ceiling any trace writer has on the machine: write_floor). Times are process CPU time,
// which a loaded machine does not inflate the way it does wall time; frames are read and
// decompressed, and the traces' bytes written, by threads of their own. "Events" are
// CPU events (an NVTX range is one, as in torch's profiler) plus GPU records.
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>

#include "analysis/engine.h"
#include "analysis/overview.h"
#include "formats/html_report.h"
#include "formats/kineto_trace.h"
#include "formats/summary_json.h"
#include "formats/table.h"
#include "formats/folded_stacks.h"

namespace {

double seconds_of(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Clock {
  using time_point = double;
  static double now() { return seconds_of(CLOCK_PROCESS_CPUTIME_ID); }
};

double seconds_since(Clock::time_point t0) { return Clock::now() - t0; }

double wall_now() { return seconds_of(CLOCK_MONOTONIC); }

void figure(const char* name, double value, const char* unit) { std::printf("%s %.6g %s\n", name, value, unit); }

double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // KiB on Linux
}

// Process CPU time (user and system) to write `bytes` of constant JSON-like text to
// `path` as the trace writer hands them on (fwrite, 1 MiB at a time), closed and
// removed again.
double write_floor_s(const std::filesystem::path& path, double bytes) {
  std::string block(1 << 20, ' ');
  for (size_t i = 63; i < block.size(); i += 64) block[i] = '\n';
  auto t0 = Clock::now();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("cannot write " + path.string());
  for (double left = bytes; left > 0; left -= static_cast<double>(block.size())) {
    const size_t n = left < static_cast<double>(block.size()) ? static_cast<size_t>(left) : block.size();
    if (std::fwrite(block.data(), 1, n, f) != n) break;
  }
  std::fclose(f);
  const double s = seconds_since(t0);
  std::filesystem::remove(path);
  return s;
}

enum class Mode { kTable, kNoTraces, kTraces };

int run(const std::string& input, const std::string& out_dir, Mode mode) {
  namespace fs = std::filesystem;
  const std::string capture = fs::is_directory(input) ? (fs::path(input) / "capture.tprof").string() : input;
  const double capture_bytes = static_cast<double>(fs::file_size(capture));
  fs::create_directories(out_dir);

  torchprof::EngineOutputs outputs = torchprof::table_only_outputs();
  std::optional<torchprof::KinetoTraces> traces;
  if (mode != Mode::kTable) {
    outputs.records = true;
    outputs.timeline = torchprof::HtmlReportOptions{}.max_events;
    outputs.folded = true;
  }
  if (mode == Mode::kTraces) {
    traces.emplace(torchprof::TraceOptions{(fs::path(out_dir) / "traces").string(), false});
    outputs.traces = traces->factory();
  }
  const double wall0 = wall_now();
  auto t0 = Clock::now();
  torchprof::Run run = torchprof::analyse_capture_file(capture, torchprof::AnalysisOptions{}, outputs);
  const double engine_s = seconds_since(t0);
  t0 = Clock::now();
  std::vector<std::string> trace_paths;
  double trace_bytes = 0;
  if (traces) {
    for (const torchprof::TraceFile& f : traces->finish()) {
      trace_paths.push_back(f.path);
      trace_bytes += static_cast<double>(fs::file_size(f.path));
    }
  }
  const double finish_s = seconds_since(t0);
  t0 = Clock::now();
  const torchprof::TableRows rows = torchprof::make_table_rows(run.ops, run.has_gpu, {"", 100});
  const std::string table = torchprof::render_table(rows);
  std::string summary;
  if (mode != Mode::kTable) {
    const torchprof::Overview overview = torchprof::compute_overview(run);
    summary = torchprof::render_summary_json(run, trace_paths, out_dir, nullptr, &overview);
    torchprof::HtmlReportOptions html;
    html.overview = &overview;
    const std::string page = torchprof::render_html_report(run, rows, html);
    const std::string folded = torchprof::render_folded_stacks(run);
    std::ofstream(fs::path(out_dir) / "summary.json") << summary;
    std::ofstream(fs::path(out_dir) / "report.html") << page;
    std::ofstream(fs::path(out_dir) / "stacks.folded") << folded;
  }
  const double outputs_s = seconds_since(t0);
  const double wall_s = wall_now() - wall0;
  const double floor_s = traces ? write_floor_s(fs::path(out_dir) / "write_floor.tmp", trace_bytes) : 0;

  double events = 0;
  for (const auto& p : run.processes) events += static_cast<double>(p.events);
  if (events == 0 || table.empty()) {
    std::fprintf(stderr, "analysis_bench: no events in %s\n", capture.c_str());
    return 1;
  }
  const double total_s = engine_s + finish_s + outputs_s;
  figure("events", events, "events");
  figure("engine_s", engine_s, "s");
  figure("outputs_s", outputs_s, "s");
  figure("total_s", total_s, "s");
  figure("wall_s", wall_s, "s");
  figure("ns_per_event", total_s / events * 1e9, "ns/event");
  figure("events_per_s", events / total_s, "events/s");
  figure("capture_bytes_per_event", capture_bytes / events, "B/event");
  if (traces) {
    figure("kineto_bytes_per_event", trace_bytes / events, "B/event");
    // What writing the traces' bytes costs by itself here, formatted by nobody.
    figure("write_floor_s", floor_s, "s");
    figure("vs_write_floor", total_s / floor_s, "x");
  }
  figure("peak_rss", peak_rss_mib(), "MiB");
  figure("peak_rss_per_event", peak_rss_mib() * 1048576.0 / events, "B/event");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Mode mode = Mode::kTraces;
  if (argc == 4 && std::string(argv[3]) == "--no-traces") mode = Mode::kNoTraces;
  if (argc == 4 && std::string(argv[3]) == "--table") mode = Mode::kTable;
  if (argc != 3 && !(argc == 4 && mode != Mode::kTraces)) {
    std::fprintf(stderr, "usage: analysis_bench CAPTURE|RUN_DIR OUT_DIR [--table | --no-traces]\n");
    return 2;
  }
  try {
    return run(argv[1], argv[2], mode);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "analysis_bench: %s\n", e.what());
    return 1;
  }
}
