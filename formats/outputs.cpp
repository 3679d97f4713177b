#include "formats/outputs.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "collector/analysis.h"
#include "collector/decode.h"
#include "formats/folded_stacks.h"
#include "formats/html_report.h"
#include "formats/kineto_trace.h"
#include "formats/summary_json.h"
#include "formats/stats.h"
#include "formats/table.h"

namespace torchprof {

namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxPrintedWarnings = 10;
// Captures smaller than this decode in a moment: no progress line for them.
constexpr uintmax_t kProgressMinBytes = 50u << 20;

// A "\r"-updated line on stderr while a large capture decodes, only on a terminal.
// Returns an empty callback when there is to be none.
DecodeProgress progress_line(const std::string& path, const OutputOptions& options) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (options.quiet || ec || size < kProgressMinBytes || !::isatty(STDERR_FILENO)) return {};
  const std::string name = fs::path(path).filename().string();
  return [name](uint64_t done, uint64_t total) {
    std::cerr << "\rtorchprof: decoding " << name << ": " << done * 100 / total << "%" << std::flush;
  };
}

// `report` accepts the output folder of a run as well as the capture itself.
std::string capture_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return (fs::path(path) / "capture.tprof").string();
  return path;
}

AnalysisOptions analysis_options(const OutputOptions& options, Run& run) {
  AnalysisOptions analysis;
  analysis.step_marker = options.step_marker;
  analysis.group_by_input_shape = options.group_by_input_shape;
  if (!options.schedule.empty()) {
    std::string error;
    std::string warning;
    analysis.schedule = parse_schedule(options.schedule, &error, &warning);
    if (!analysis.schedule) throw InputError("invalid schedule '" + options.schedule + "': " + error);
    if (!warning.empty()) run.warnings.push_back(warning);
  }
  std::string error;
  const std::optional<CaptureRange> range = parse_capture_range(options.capture_range, &error);
  if (!range) throw InputError("--capture-range: " + error);
  analysis.capture_range = *range;
  return analysis;
}

std::string render(const TableRows& rows, const std::string& format) {
  if (format == "table") return render_table(rows);
  if (format == "csv") return render_csv(rows);
  if (format == "json") return render_json(rows);
  if (format == "markdown") return render_markdown(rows);
  throw InputError("unknown format '" + format + "' (valid: table, csv, json, markdown, folded)");
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) throw std::runtime_error("cannot write " + path.string() + ": " + std::strerror(errno));
}

void print_notes(const Run& run, std::ostream& out) {
  if (run.dropped_events > 0) {
    out << "torchprof: " << run.dropped_events << " events lost\n";
  }
  if (run.cupti_dropped > 0) {
    out << "torchprof: " << run.cupti_dropped << " GPU activity records lost (dropped by CUPTI)\n";
  }
  if (run.truncated) {
    out << "torchprof: capture truncated at byte " << run.truncated_at
        << "; results cover what was written before it\n";
  }
  size_t printed = 0;
  size_t total = run.warnings.size();
  for (const Process& p : run.processes) total += p.warnings.size();
  auto warn = [&](const std::string& text) {
    if (printed++ < kMaxPrintedWarnings) out << "torchprof: warning: " << text << "\n";
  };
  for (const std::string& w : run.warnings) warn(w);
  for (const Process& p : run.processes) {
    for (const std::string& w : p.warnings) warn("pid " + std::to_string(p.pid) + ": " + w);
  }
  if (total > kMaxPrintedWarnings) {
    out << "torchprof: " << total - kMaxPrintedWarnings << " more warnings in summary.json\n";
  }
}

}  // namespace

OutputResult write_outputs(const std::string& capture_path, const OutputOptions& options,
                           std::ostream& out) {
  const std::string capture = capture_file(capture_path);
  const DecodeProgress progress = progress_line(capture, options);
  Run run = decode_capture_file(capture, progress);
  if (progress) std::cerr << "\r\033[K" << std::flush;  // the line is gone once decoding is done
  analyse(run, analysis_options(options, run));
  if (!options.worker_name.empty()) {
    std::vector<std::string> workers;
    for (const Process& p : run.processes) workers.push_back(trace_worker_name(run, p, options.worker_name));
    for (size_t i = 0; i < workers.size(); ++i) run.processes[i].worker = workers[i];
  }

  // Everything that can reject the options runs before any file is written.
  TableRows rows = make_table_rows(run.ops, run.has_gpu, {options.sort, options.row_limit});
  const std::string folded = render_folded_stacks(run);
  std::string printed;
  if (!options.quiet && options.format == "folded") {
    printed = folded;
    if (folded.empty()) {
      std::cerr << "torchprof: no op in this capture has a Python stack "
                   "(record with torchprof-run --with-stack)\n";
    }
  } else if (!options.quiet) {
    printed = render(rows, options.format);
  }

  OutputResult result;
  result.target_exit_code = run.exit_code;
  result.truncated = run.truncated;
  result.out_dir = options.out_dir;
  if (options.write_files) {
    fs::path dir(options.out_dir.empty() ? "." : options.out_dir);
    fs::create_directories(dir);
    std::vector<std::string> traces;
    for (const TraceFile& f : write_kineto_traces(
             run, {(dir / "traces").string(), options.gzip, /*worker_name=*/""})) {
      traces.push_back(f.path);
    }
    write_text(dir / "summary.json", render_summary_json(run, traces, dir.string()));
    write_text(dir / "table.txt", render_table(rows));
    write_text(dir / "report.html", render_html_report(run, rows));
    if (!folded.empty()) write_text(dir / "stacks.folded", folded);
    if (options.stats) {
      std::ostringstream stats;
      render_stats(run, stats);
      write_text(dir / "stats.txt", stats.str());
    }
  }
  if (!options.quiet) {
    out << printed;
    if (options.stats) {
      out << "\n";
      render_stats(run, out);
    }
    print_notes(run, out);
    out.flush();
  }
  return result;
}

}  // namespace torchprof
