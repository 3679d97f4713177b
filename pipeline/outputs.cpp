#include "pipeline/outputs.h"

#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <exception>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "analysis/analysis.h"
#include "analysis/engine.h"
#include "analysis/overview.h"
#include "analysis/rank_steps.h"
#include "formats/advice.h"
#include "formats/empty_result.h"
#include "formats/folded_stacks.h"
#include "formats/html_report.h"
#include "formats/kineto_trace.h"
#include "formats/memory_snapshot.h"
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
std::function<void(uint64_t, uint64_t)> progress_line(const std::string& path, const OutputOptions& options) {
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
  analysis.group_by_stack_n = static_cast<size_t>(std::max(0, options.group_by_stack_n));
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

// The engine's outputs for the whole report; traces into `traces` when it is given.
EngineOutputs report_outputs(const std::string& capture, const OutputOptions& options, KinetoTraces* traces) {
  EngineOutputs eo;
  eo.records = true;
  eo.timeline = HtmlReportOptions{}.max_events;
  eo.stats = options.stats;
  eo.folded = true;
  eo.memory_snapshot = options.memory_snapshot;
  eo.memory_snapshot_entries = options.memory_snapshot_entries;
  if (traces != nullptr) eo.traces = traces->factory();
  eo.progress = progress_line(capture, options);
  return eo;
}

Run analyse_run(const std::string& capture, const AnalysisOptions& analysis, const EngineOutputs& eo) {
  Run run = analyse_capture_file(capture, analysis, eo);
  if (eo.progress) std::cerr << "\r\033[K" << std::flush;  // the line is gone once decoding is done
  return run;
}

void rename_workers(Run& run, const std::string& worker_name) {
  if (worker_name.empty()) return;
  std::vector<std::string> workers;
  for (const Process& p : run.processes) workers.push_back(trace_worker_name(run, p, worker_name));
  for (size_t i = 0; i < workers.size(); ++i) run.processes[i].worker = workers[i];
}

// The worker each trace file of `run` is named after, once workers are final.
KinetoTraces::WorkerOf final_workers(const Run& run, int input) {
  return [&run, input](const TraceFile& f) {
    for (const Process& p : run.processes) {
      if (p.pid == f.pid && p.input == input) return p.worker;
    }
    return f.worker;
  };
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

// Every output is made inside the held directory by name: a link planted under that
// name is replaced, never followed.
void write_text(const DirHandle& dir, const fs::path& shown_dir, const std::string& name, const std::string& text) {
  write_file_at(dir, name, text, (shown_dir / name).string());
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
  if (run.corrupted && run.inputs.empty()) out << "torchprof: " << corruption_text(run) << "\n";
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
  result.corrupted = run.corrupted;
  if (run.corrupted) result.corruption = corruption_text(run);
  result.out_dir = options.out_dir;
  return result;
}

fs::path shown_out_dir(const OutputOptions& options) { return options.out_dir.empty() ? "." : options.out_dir; }

// The output directory as the caller holds it, else opened (made when it does not exist
// yet) and refused when someone else could write in it.
DirHandle made_out_dir(const OutputOptions& options) {
  if (options.out_dir_handle.valid()) return options.out_dir_handle;
  const std::string shown = shown_out_dir(options).string();
  DirHandle dir = open_dir_safely(shown, /*create=*/true);
  if (const std::string why = unsafe_dir_reason(dir, shown); !why.empty()) throw InputError(why);
  return dir;
}

TraceOptions trace_options(const OutputOptions& options) {
  return TraceOptions{(shown_out_dir(options) / "traces").string(), options.gzip, made_out_dir(options)};
}

// What can reject the options (the sort key, the format) is tried before the capture is
// read: the traces are written while it is.
void check_options(const OutputOptions& options) {
  make_table_rows({}, true, {options.sort, options.row_limit});
  if (options.format != "folded") render(TableRows{}, options.format);
}

// Everything a run leaves behind, from an analysed run (whose traces are written
// already: `traces`): `ranks` only for merged reports.
OutputResult emit(const Run& run, const OutputOptions& options, std::ostream& out, const RankReport* ranks,
                  const std::vector<TraceFile>& trace_files) {
  TableRows rows = make_table_rows(run.ops, run.has_gpu, {options.sort, options.row_limit});
  rows.left_out_in_steps = run.left_out_in_steps;
  rows.left_out_outside_steps = run.left_out_outside_steps;
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
  std::vector<std::pair<std::string, std::string>> snapshots;
  if (options.memory_snapshot) snapshots = render_memory_snapshots(run);
  if (options.write_files) {
    const DirHandle held = made_out_dir(options);
    const fs::path dir = shown_out_dir(options);
    for (const auto& [name, contents] : snapshots) write_text(held, dir, name, contents);
    std::vector<std::string> traces;
    for (const TraceFile& f : trace_files) traces.push_back(f.path);
    write_text(held, dir, "summary.json", render_summary_json(run, traces, dir.string(), ranks, &overview));
    write_text(held, dir, "table.txt", rendered("table"));
    HtmlReportOptions html;
    html.overview = &overview;
    html.empty_result = explain_empty_result(run, empty_result_context(options));
    for (const std::string& t : traces) html.traces.push_back(fs::path(t).lexically_relative(dir).generic_string());
    write_text(held, dir, "report.html", render_html_report(run, rows, html));
    if (!folded.empty()) write_text(held, dir, "stacks.folded", folded);
    if (options.advice) write_text(held, dir, "advice.txt", advice);
    if (options.stats) {
      std::ostringstream stats;
      render_stats(run, stats);
      write_text(held, dir, "stats.txt", stats.str());
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
    if (options.memory_snapshot && snapshots.empty()) {
      out << "torchprof: no CUDA tensor allocation was recorded: no memory snapshot written\n";
    } else if (options.memory_snapshot && options.write_files) {
      for (const auto& [name, contents] : snapshots) {
        out << "torchprof: memory snapshot in " << (shown_out_dir(options) / name).string()
            << " (open it at https://pytorch.org/memory_viz)\n";
      }
    }
    out.flush();
  }
  return result;
}

// `report --table-only`: the table and the notes, nothing else.
OutputResult emit_table(const Run& run, const OutputOptions& options, std::ostream& out) {
  if (options.format == "folded") throw InputError("--format folded needs the whole report, not --table-only");
  TableRows rows = make_table_rows(run.ops, run.has_gpu, {options.sort, options.row_limit});
  rows.left_out_in_steps = run.left_out_in_steps;
  rows.left_out_outside_steps = run.left_out_outside_steps;
  const std::string printed = options.quiet ? std::string() : render(rows, options.format);
  const OutputResult result = result_of(run, options);
  if (options.write_files) {
    const bool same = options.format == "table" && !options.quiet;
    write_text(made_out_dir(options), shown_out_dir(options), "table.txt", same ? printed : render_table(rows));
  }
  if (!options.quiet) {
    out << printed;
    print_notes(run, options, out);
    out.flush();
  }
  return result;
}

}  // namespace

OutputResult write_outputs(const std::string& capture_path, const OutputOptions& options,
                           std::ostream& out) {
  const std::string capture = capture_file(capture_path);
  std::vector<std::string> warnings;
  const AnalysisOptions analysis = analysis_options(options, warnings);
  if (options.table_only) {
    if (options.format == "folded") throw InputError("--format folded needs the whole report, not --table-only");
    check_options(options);
    EngineOutputs eo = table_only_outputs();
    eo.progress = progress_line(capture, options);
    Run run = analyse_run(capture, analysis, eo);
    run.warnings.insert(run.warnings.end(), warnings.begin(), warnings.end());
    return emit_table(run, options, out);
  }
  check_options(options);
  std::optional<KinetoTraces> traces;
  if (options.write_files) traces.emplace(trace_options(options));
  Run run = analyse_run(capture, analysis, report_outputs(capture, options, traces ? &*traces : nullptr));
  run.warnings.insert(run.warnings.end(), warnings.begin(), warnings.end());
  rename_workers(run, options.worker_name);
  std::vector<TraceFile> files;
  if (traces) files = traces->finish(final_workers(run, 0));
  // One run over a whole launch (a script starting every rank): the ranks' table too.
  std::set<int> ranks_seen;
  for (const Process& p : run.processes) {
    if (p.rank && !p.steps.empty()) ranks_seen.insert(*p.rank);
  }
  if (ranks_seen.size() < 2) return emit(run, options, out, /*ranks=*/nullptr, files);
  const RankReport ranks = compute_rank_report(run, options.straggler_threshold_pct);
  run.warnings.insert(run.warnings.end(), ranks.warnings.begin(), ranks.warnings.end());
  return emit(run, options, out, &ranks, files);
}

// How many inputs of a merged report are analysed at once: TORCHPROF_JOBS, else one per
// CPU the process may run on, at most one per input.
static size_t analysis_jobs(size_t inputs) {
  size_t jobs = std::max<unsigned>(1, std::thread::hardware_concurrency());
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) jobs = std::max(1, CPU_COUNT(&set));
  if (const char* v = std::getenv("TORCHPROF_JOBS"); v != nullptr && *v != '\0') {
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (end != v && *end == '\0' && n >= 1) jobs = static_cast<size_t>(n);
  }
  return std::min(jobs, std::max<size_t>(1, inputs));
}

// Every input analysed, side by side on `analysis_jobs` threads (the analysis of one run
// is single-threaded; names are interned under a lock). The first input's error, in input
// order, is the one raised. No progress line while several run at once.
static std::vector<Run> analyse_inputs(const std::vector<MergeSource>& inputs, const AnalysisOptions& analysis,
                                const OutputOptions& options, std::vector<std::unique_ptr<KinetoTraces>>& traces) {
  std::vector<Run> runs(inputs.size());
  std::vector<std::exception_ptr> errors(inputs.size());
  const size_t jobs = analysis_jobs(inputs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < inputs.size();) {
      try {
        const std::string capture = capture_file(inputs[i].capture);
        EngineOutputs eo = report_outputs(capture, options, traces.empty() ? nullptr : traces[i].get());
        if (jobs > 1) eo.progress = {};
        runs[i] = analyse_run(capture, analysis, eo);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 1; t < jobs; ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return runs;
}

OutputResult write_merged_outputs(const std::vector<MergeSource>& inputs, const OutputOptions& options,
                                  std::ostream& out) {
  std::vector<std::string> warnings;
  const AnalysisOptions analysis = analysis_options(options, warnings);
  check_options(options);
  std::vector<std::unique_ptr<KinetoTraces>> traces;
  if (options.write_files) {
    for (size_t i = 0; i < inputs.size(); ++i) traces.push_back(std::make_unique<KinetoTraces>(trace_options(options)));
  }
  std::vector<Run> runs = analyse_inputs(inputs, analysis, options, traces);
  Run run = merge_runs(std::move(runs), inputs);
  run.warnings.insert(run.warnings.begin(), warnings.begin(), warnings.end());
  rename_workers(run, options.worker_name);
  std::vector<TraceFile> files;
  for (size_t i = 0; i < traces.size(); ++i) {
    for (TraceFile& f : traces[i]->finish(final_workers(run, static_cast<int>(i)))) files.push_back(std::move(f));
  }
  const RankReport ranks = compute_rank_report(run, options.straggler_threshold_pct);
  run.warnings.insert(run.warnings.end(), ranks.warnings.begin(), ranks.warnings.end());
  return emit(run, options, out, &ranks, files);
}

}  // namespace torchprof
