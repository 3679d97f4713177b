#include "pipeline/outputs.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>

#include "analysis/analysis.h"
#include "reading/capture_reader.h"
#include "reading/capture_scan.h"
#include "analysis/decode.h"
#include "analysis/overview.h"
#include "analysis/rank_steps.h"
#include "analysis/stream_table.h"
#include "formats/advice.h"
#include "formats/empty_result.h"
#include "formats/folded_stacks.h"
#include "formats/html_report.h"
#include "formats/kineto_trace.h"
#include "formats/rank_table.h"
#include "formats/stats.h"
#include "formats/summary_json.h"
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

// The schedule's warning (warmup=0) goes to `warnings`, once however many runs are analysed.
AnalysisOptions analysis_options(const OutputOptions& options, std::vector<std::string>& warnings) {
  AnalysisOptions analysis;
  analysis.step_marker = options.step_marker;
  analysis.group_by_input_shape = options.group_by_input_shape;
  if (!options.schedule.empty()) {
    std::string error;
    std::string warning;
    analysis.schedule = parse_schedule(options.schedule, &error, &warning);
    if (!analysis.schedule) throw InputError("invalid schedule '" + options.schedule + "': " + error);
    if (!warning.empty()) warnings.push_back(warning);
  }
  std::string error;
  const std::optional<CaptureRange> range = parse_capture_range(options.capture_range, &error);
  if (!range) throw InputError("--capture-range: " + error);
  analysis.capture_range = *range;
  return analysis;
}

Run decode_run(const std::string& capture, const OutputOptions& options) {
  const DecodeProgress progress = progress_line(capture, options);
  Run run = decode_capture_file(capture, progress);
  if (progress) std::cerr << "\r\033[K" << std::flush;  // the line is gone once decoding is done
  return run;
}

void rename_workers(Run& run, const std::string& worker_name) {
  if (worker_name.empty()) return;
  std::vector<std::string> workers;
  for (const Process& p : run.processes) workers.push_back(trace_worker_name(run, p, worker_name));
  for (size_t i = 0; i < workers.size(); ++i) run.processes[i].worker = workers[i];
}

std::string render(const TableRows& rows, const std::string& format) {
  if (format == "table") return render_table(rows);
  if (format == "csv") return render_csv(rows);
  if (format == "json") return render_json(rows);
  if (format == "markdown") return render_markdown(rows);
  throw InputError("unknown format '" + format + "' (valid: table, csv, json, markdown, folded)");
}

// A merged report: the op table, then the per-rank step table in the same format.
std::string render(const TableRows& rows, const RankReport& ranks, const std::string& format, int step_rows) {
  if (format == "table") return render_table(rows) + "\n" + render_rank_text(ranks, step_rows);
  if (format == "csv") return render_csv(rows) + "\n" + render_rank_csv(ranks);
  if (format == "markdown") return render_markdown(rows) + "\n" + render_rank_markdown(ranks, step_rows);
  if (format == "json") {
    nlohmann::ordered_json j = table_rows_json(rows);
    j["ranks"] = rank_report_json(ranks);
    return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  }
  throw InputError("unknown format '" + format + "' (valid: table, csv, json, markdown)");
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) throw std::runtime_error("cannot write " + path.string() + ": " + std::strerror(errno));
}

EmptyResultContext empty_result_context(const OutputOptions& options) {
  return {options.schedule, options.capture_range};
}

void print_notes(const Run& run, const OutputOptions& options, std::ostream& out) {
  for (const std::string& line : explain_empty_result(run, empty_result_context(options))) {
    out << "torchprof: " << line << "\n";
  }
  if (run.dropped_events > 0) {
    out << "torchprof: " << run.dropped_events << " events lost\n";
  }
  if (run.cupti_dropped > 0) {
    out << "torchprof: " << run.cupti_dropped << " GPU activity records lost (dropped by CUPTI)\n";
  }
  if (run.truncated && run.inputs.empty()) {  // merged: a warning names the input
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
    const std::string tag = run.inputs.empty() ? std::string() : run.inputs[p.input].label + ": ";
    for (const std::string& w : p.warnings) warn(tag + "pid " + std::to_string(p.pid) + ": " + w);
  }
  if (total > kMaxPrintedWarnings) {
    out << "torchprof: " << total - kMaxPrintedWarnings << " more warnings in summary.json\n";
  }
}

OutputResult result_of(const Run& run, const OutputOptions& options) {
  OutputResult result;
  result.target_exit_code = run.exit_code;
  result.truncated = run.truncated;
  result.out_dir = options.out_dir;
  return result;
}

// The output directory, made when it does not exist yet.
fs::path made_out_dir(const OutputOptions& options) {
  fs::path dir(options.out_dir.empty() ? "." : options.out_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw InputError("cannot create " + dir.string() + ": " + ec.message());
  return dir;
}

// Everything a run leaves behind, from an analysed run: `ranks` only for merged reports.
OutputResult emit(const Run& run, const OutputOptions& options, std::ostream& out, const RankReport* ranks) {
  // Everything that can reject the options runs before any file is written.
  TableRows rows = make_table_rows(run.ops, run.has_gpu, {options.sort, options.row_limit});
  auto rendered = [&](const std::string& format) {
    return ranks ? render(rows, *ranks, format, options.row_limit) : render(rows, format);
  };
  const std::string folded = render_folded_stacks(run);
  std::string printed;
  if (!options.quiet && options.format == "folded") {
    printed = folded;
    if (folded.empty()) {
      std::cerr << "torchprof: no op in this capture has a Python stack "
                   "(record with torchprof-run --with-stack)\n";
    }
  } else if (!options.quiet) {
    printed = rendered(options.format);
  }

  const Overview overview = compute_overview(run);
  const std::string advice = options.advice ? render_advice(overview, options.row_limit) : std::string();
  const OutputResult result = result_of(run, options);
  if (options.write_files) {
    const fs::path dir = made_out_dir(options);
    std::vector<std::string> traces;
    for (const TraceFile& f : write_kineto_traces(
             run, {(dir / "traces").string(), options.gzip, /*worker_name=*/""})) {
      traces.push_back(f.path);
    }
    write_text(dir / "summary.json", render_summary_json(run, traces, dir.string(), ranks, &overview));
    write_text(dir / "table.txt", rendered("table"));
    HtmlReportOptions html;
    html.overview = &overview;
    html.empty_result = explain_empty_result(run, empty_result_context(options));
    for (const std::string& t : traces) html.traces.push_back(fs::path(t).lexically_relative(dir).generic_string());
    write_text(dir / "report.html", render_html_report(run, rows, html));
    if (!folded.empty()) write_text(dir / "stacks.folded", folded);
    if (options.advice) write_text(dir / "advice.txt", advice);
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
    if (options.advice) out << "\n" << advice;
    print_notes(run, options, out);
    out.flush();
  }
  return result;
}

// `report --table-only`: the table and the notes, nothing else.
OutputResult emit_table(const Run& run, const OutputOptions& options, std::ostream& out) {
  if (options.format == "folded") throw InputError("--format folded needs the whole report, not --table-only");
  const TableRows rows = make_table_rows(run.ops, run.has_gpu, {options.sort, options.row_limit});
  const std::string printed = options.quiet ? std::string() : render(rows, options.format);
  const OutputResult result = result_of(run, options);
  if (options.write_files) {
    const bool same = options.format == "table" && !options.quiet;
    write_text(made_out_dir(options) / "table.txt", same ? printed : render_table(rows));
  }
  if (!options.quiet) {
    out << printed;
    print_notes(run, options, out);
    out.flush();
  }
  return result;
}

// Memory the full analysis takes per record slot of a capture: an NVTX range (two
// slots) becomes a 64-byte Event and so does a CUDA API call (one slot); the vectors'
// slack and the GPU records come on top.
constexpr uint64_t kAnalysisBytesPerSlot = 64;
// A capture holds at least this many bytes per slot (repetitive NVTX traffic, delta frames).
constexpr double kMinCaptureBytesPerSlot = 0.25;

// MemAvailable, capped by the cgroup's limit (cgroup v2); 0 when unknown.
uint64_t available_memory() {
  uint64_t available = 0;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    uint64_t kib = 0;
    meminfo >> kib;
    if (key == "MemAvailable:") {
      available = kib * 1024;
      break;
    }
    meminfo.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  uint64_t limit = 0;
  uint64_t current = 0;
  if ((std::ifstream("/sys/fs/cgroup/memory.max") >> limit) && (std::ifstream("/sys/fs/cgroup/memory.current") >> current)) {
    const uint64_t room = limit > current ? limit - current : 0;
    if (available == 0 || room < available) available = room;
  }
  return available;
}

std::string size_text(double bytes) {
  char text[32];
  if (bytes >= 1024.0 * 1024.0 * 1024.0) {
    std::snprintf(text, sizeof text, "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  } else {
    std::snprintf(text, sizeof text, "%.1f MiB", bytes / (1024.0 * 1024.0));
  }
  return text;
}

// Why the full analysis of `capture` would not fit in memory ("" when it would, or when
// that is not known).
std::string too_big_to_analyse(const std::string& capture, const OutputOptions& options) {
  if (options.max_analysis_bytes == 0) return {};
  const uint64_t budget = options.max_analysis_bytes > 0 ? static_cast<uint64_t>(options.max_analysis_bytes)
                                                         : available_memory();
  std::error_code ec;
  const uintmax_t size = fs::file_size(capture, ec);
  if (budget == 0 || ec) return {};
  if (static_cast<double>(size) / kMinCaptureBytesPerSlot * kAnalysisBytesPerSlot < static_cast<double>(budget)) {
    return {};  // fits whatever its frames hold
  }
  CaptureReader reader(capture);
  uint64_t slots = 0;
  for (const auto& conn : scan_capture(reader).conns) {
    for (const FrameRef& ref : conn->frames) slots += ref.slots;
  }
  const double need = static_cast<double>(slots) * kAnalysisBytesPerSlot;
  if (need <= static_cast<double>(budget)) return {};
  return "its full analysis would need about " + size_text(need) + " of memory (" + std::to_string(slots) +
         " records), more than the " + size_text(static_cast<double>(budget)) +
         (options.max_analysis_bytes > 0 ? " of --max-analysis-memory" : " available");
}

// The streamed table's output, when stream_table() takes the capture (else `why` says
// why not).
std::optional<OutputResult> emit_streamed_table(const std::string& capture, const OutputOptions& options,
                                                std::ostream& out, std::string* why) {
  std::vector<std::string> warnings;
  const AnalysisOptions analysis = analysis_options(options, warnings);
  std::optional<StreamedTable> streamed = stream_table(capture, analysis, why);
  if (!streamed) return std::nullopt;
  Run& run = streamed->run;
  run.warnings.insert(run.warnings.end(), warnings.begin(), warnings.end());
  OutputResult result = emit_table(run, options, out);
  result.streamed = true;
  return result;
}

// The capture decoded and analysed whole; `note`, when not empty, comes before the
// analysis options' warnings.
Run analysed_run(const std::string& capture, const OutputOptions& options, const std::string& note = {}) {
  Run run = decode_run(capture, options);
  if (!note.empty()) run.warnings.push_back(note);
  analyse(run, analysis_options(options, run.warnings));
  return run;
}

OutputResult write_table_only(const std::string& capture, const OutputOptions& options, std::ostream& out) {
  std::string why;
  if (std::optional<OutputResult> result = emit_streamed_table(capture, options, out, &why)) return *result;
  OutputResult result = emit_table(analysed_run(capture, options), options, out);
  result.not_streamed_because = why;
  return result;
}

}  // namespace

OutputResult write_outputs(const std::string& capture_path, const OutputOptions& options,
                           std::ostream& out) {
  const std::string capture = capture_file(capture_path);
  if (options.table_only) return write_table_only(capture, options, out);
  std::string memory_warning;
  if (std::string why = too_big_to_analyse(capture, options); !why.empty()) {
    // The streamed table fits in any memory; a capture it does not take is analysed
    // whole all the same.
    std::string not_streamed;
    if (std::optional<OutputResult> result = emit_streamed_table(capture, options, out, &not_streamed)) {
      result->only_table_because = why;
      return *result;
    }
    memory_warning = why + "; analysed whole all the same, since the streamed table does not take it (" +
                     not_streamed + ")";
  }
  Run run = analysed_run(capture, options, memory_warning);
  rename_workers(run, options.worker_name);
  return emit(run, options, out, /*ranks=*/nullptr);
}

OutputResult write_merged_outputs(const std::vector<MergeSource>& inputs, const OutputOptions& options,
                                  std::ostream& out) {
  std::vector<std::string> warnings;
  const AnalysisOptions analysis = analysis_options(options, warnings);
  std::vector<Run> runs;
  for (const MergeSource& in : inputs) {
    runs.push_back(decode_run(capture_file(in.capture), options));
    analyse(runs.back(), analysis);
  }
  Run run = merge_runs(std::move(runs), inputs);
  run.warnings.insert(run.warnings.begin(), warnings.begin(), warnings.end());
  rename_workers(run, options.worker_name);
  const RankReport ranks = compute_rank_report(run, options.straggler_threshold_pct);
  run.warnings.insert(run.warnings.end(), ranks.warnings.begin(), ranks.warnings.end());
  return emit(run, options, out, &ranks);
}

}  // namespace torchprof
