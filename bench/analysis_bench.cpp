// The analysis side, in process and phase by phase, on a saved capture: decode,
// analyse (nesting, steps, aggregates), the key_averages-style table, the Kineto
// traces and summary.json, each timed; then events/s for capture -> table and
// capture -> Kineto JSON, and the peak RSS of the whole analysis. Beside the traces,
// the time to write as many bytes of text and nothing else: the ceiling any trace
// writer has on the machine; and the time to format them alone, into a sink that
// counts the bytes and drops them (the fastest of three renders).
//
//   analysis_bench CAPTURE|RUN_DIR OUT_DIR [--no-traces | --streamed]
//
// --no-traces skips the Kineto traces (a 100M-event capture makes ~20 GB of them):
// the table, summary.json and peak RSS figures remain. --streamed times the table
// made in one streamed pass over the capture (analysis/stream_table.h, what
// `torchprof report --table-only` does) instead, with its peak RSS.
//
// "Events" are timeline events after decoding (an NVTX range is one event, as in
// torch's profiler) plus GPU activity records. Phases are timed in process CPU
// time, which a loaded machine does not inflate the way it does wall time; the
// analysis is single-threaded (events/s is per core) except that frames are read
// and decompressed, and the traces' bytes written, by threads of their own: decoding,
// the streamed table and capture -> Kineto JSON are also given in wall time.
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "analysis/analysis.h"
#include "analysis/decode.h"
#include "analysis/overview.h"
#include "analysis/stream_table.h"
#include "formats/kineto_trace.h"
#include "formats/summary_json.h"
#include "formats/table.h"

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

// Counts the bytes rendered into it and keeps none.
class CountingSink : public torchprof::TraceSink {
 public:
  void write(std::string_view bytes) override { bytes_ += static_cast<double>(bytes.size()); }
  double bytes() const { return bytes_; }

 private:
  double bytes_ = 0;
};

// Process CPU time to format every trace of `run` (as write_kineto_traces would make
// them) into a CountingSink; `bytes` gets how many bytes that made.
double format_only_s(const torchprof::Run& run, double* bytes) {
  CountingSink sink;
  auto t0 = Clock::now();
  for (const torchprof::Process& proc : run.processes) {
    if (proc.events_list.empty()) continue;
    const int cycles = torchprof::cycle_count(proc);
    for (int cycle = 0; cycle < cycles; ++cycle) torchprof::render_kineto_trace(run, proc, cycle, "trace", sink);
  }
  *bytes = sink.bytes();
  return seconds_since(t0);
}

int run(const std::string& input, const std::string& out_dir, bool traces_too) {
  namespace fs = std::filesystem;
  std::string capture = fs::is_directory(input) ? (fs::path(input) / "capture.tprof").string() : input;
  double capture_bytes = static_cast<double>(fs::file_size(capture));

  const double wall0 = wall_now();
  auto t0 = Clock::now();
  torchprof::Run run = torchprof::decode_capture_file(capture);
  double decode_s = seconds_since(t0);
  const double decode_wall_s = wall_now() - wall0;
  t0 = Clock::now();
  torchprof::analyse(run, torchprof::AnalysisOptions{});
  double analyse_s = seconds_since(t0);
  const double wall_front = wall_now() - wall0;  // decode + analyse, as `front` below
  t0 = Clock::now();
  torchprof::TableRows rows = torchprof::make_table_rows(run.ops, run.has_gpu, {"", 100});
  std::string table = torchprof::render_table(rows);
  double table_s = seconds_since(t0);
  t0 = Clock::now();
  const double wall1 = wall_now();
  std::vector<torchprof::TraceFile> traces;
  if (traces_too) traces = torchprof::write_kineto_traces(run, {(fs::path(out_dir) / "traces").string(), false, ""});
  double kineto_s = seconds_since(t0);
  const double kineto_wall_s = wall_now() - wall1;
  t0 = Clock::now();
  std::vector<std::string> trace_paths;
  double trace_bytes = 0;
  for (const auto& t : traces) {
    trace_paths.push_back(t.path);
    trace_bytes += static_cast<double>(fs::file_size(t.path));
  }
  double summary_s = seconds_since(t0);
  t0 = Clock::now();
  const torchprof::Overview overview = torchprof::compute_overview(run);
  const double overview_s = seconds_since(t0);
  t0 = Clock::now();
  std::string summary = torchprof::render_summary_json(run, trace_paths, out_dir, nullptr, &overview);
  summary_s += seconds_since(t0);
  const double floor_s = traces_too ? write_floor_s(fs::path(out_dir) / "write_floor.tmp", trace_bytes) : 0;
  // The fastest of three: formatting alone is short, and a shared machine's noise is
  // one-sided.
  double formatted_bytes = 0;
  double format_s = 0;
  for (int i = 0; traces_too && i < 3; ++i) {
    const double s = format_only_s(run, &formatted_bytes);
    format_s = i == 0 ? s : std::min(format_s, s);
  }

  double events = 0;
  for (const auto& p : run.processes) events += static_cast<double>(p.events_list.size() + p.gpu_events.size());
  if (events == 0 || table.empty() || summary.empty()) {
    std::fprintf(stderr, "analysis_bench: no events in %s\n", capture.c_str());
    return 1;
  }
  double front = decode_s + analyse_s;
  figure("events", events, "events");
  figure("decode_s", decode_s, "s");
  figure("decode_wall_s", decode_wall_s, "s");
  figure("analyse_s", analyse_s, "s");
  figure("overview_s", overview_s, "s");  // compute_overview() alone; summary_s renders it
  figure("table_s", table_s, "s");
  figure("kineto_s", kineto_s, "s");
  figure("summary_s", summary_s, "s");
  figure("to_table_events_per_s", events / (front + table_s), "events/s");
  figure("to_table_us_per_event", (front + table_s) / events * 1e6, "us/event");
  if (traces_too) {
    figure("to_kineto_events_per_s", events / (front + kineto_s), "events/s");
    // The traces are formatted on one thread and written on another: their wall time
    // is what a user waits for; on a busy machine it exceeds CPU time.
    figure("kineto_wall_s", kineto_wall_s, "s");
    figure("to_kineto_events_per_s_wall", events / (wall_front + kineto_wall_s), "events/s");
  }
  figure("capture_bytes_per_event", capture_bytes / events, "B/event");
  if (traces_too) {
    figure("kineto_bytes_per_event", trace_bytes / events, "B/event");
    // What writing the traces' bytes costs by itself here, formatted by nobody: no
    // trace writer on this machine gets past this rate.
    figure("write_floor_s", floor_s, "s");
    figure("write_floor_events_per_s", events / floor_s, "events/s");
    // Formatting alone, on one core (the fastest of three renders): the formatting
    // thread's share of kineto_s.
    figure("format_s", format_s, "s");
    figure("format_ns_per_event", format_s / events * 1e9, "ns/event");
    figure("formatted_bytes_per_event", formatted_bytes / events, "B/event");
  }
  figure("peak_rss", peak_rss_mib(), "MiB");
  figure("peak_rss_per_event", peak_rss_mib() * 1048576.0 / events, "B/event");
  return 0;
}

int run_streamed(const std::string& input) {
  namespace fs = std::filesystem;
  std::string capture = fs::is_directory(input) ? (fs::path(input) / "capture.tprof").string() : input;
  double capture_bytes = static_cast<double>(fs::file_size(capture));
  auto t0 = Clock::now();
  const double wall0 = wall_now();
  std::string why;
  std::optional<torchprof::StreamedTable> streamed = torchprof::stream_table(capture, torchprof::AnalysisOptions{}, &why);
  if (!streamed) {
    std::fprintf(stderr, "analysis_bench: the streamed table does not take this capture: %s\n", why.c_str());
    return 1;
  }
  torchprof::TableRows rows = torchprof::make_table_rows(streamed->run.ops, streamed->run.has_gpu, {"", 100});
  std::string table = torchprof::render_table(rows);
  double stream_s = seconds_since(t0);
  const double stream_wall_s = wall_now() - wall0;
  const auto events = static_cast<double>(streamed->events + streamed->gpu_records);
  if (events == 0 || table.empty()) {
    std::fprintf(stderr, "analysis_bench: no events in %s\n", capture.c_str());
    return 1;
  }
  figure("events", events, "events");
  figure("passes", streamed->passes, "passes");
  figure("streamed_s", stream_s, "s");
  figure("streamed_wall_s", stream_wall_s, "s");
  figure("to_table_events_per_s", events / stream_s, "events/s");
  figure("to_table_us_per_event", stream_s / events * 1e6, "us/event");
  figure("capture_bytes_per_event", capture_bytes / events, "B/event");
  figure("peak_rss", peak_rss_mib(), "MiB");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool no_traces = argc == 4 && std::string(argv[3]) == "--no-traces";
  const bool streamed = argc == 4 && std::string(argv[3]) == "--streamed";
  if (argc != 3 && !no_traces && !streamed) {
    std::fprintf(stderr, "usage: analysis_bench CAPTURE|RUN_DIR OUT_DIR [--no-traces | --streamed]\n");
    return 2;
  }
  try {
    if (streamed) return run_streamed(argv[1]);
    return run(argv[1], argv[2], !no_traces);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "analysis_bench: %s\n", e.what());
    return 1;
  }
}
