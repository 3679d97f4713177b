#include "cli/report_command.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/completion.h"
#include "cli/errors.h"
#include "cli/log.h"
#include "cli/output_dir.h"
#include "collector/capture_writer.h"
#include "pipeline/check.h"

namespace torchprof::cli {

namespace {

namespace fs = std::filesystem;

// The one-input report: a directory of its own, by default `report` inside the run's;
// a directory that holds something (the run itself, an earlier report) is never written
// over: DIR-1, DIR-2, … is taken instead, and said.
int report_one(const ReportOptions& options, OutputOptions out) {
  const std::string capture = capture_path_of(options.inputs.front());
  std::string wanted = options.out_dir;
  if (wanted.empty()) {
    const std::string run_dir = fs::path(capture).parent_path().string();
    wanted = (run_dir.empty() ? std::string(".") : run_dir) + "/report";
  }
  const OutputDir dir = create_output_dir(wanted);
  say_redirect(wanted, dir);
  out.out_dir = dir.path;
  out.out_dir_handle = dir.handle;
  const OutputResult result = write_outputs(capture, out, std::cout);
  if (result.truncated) log().warn("{} ends early; reported what it holds", capture);
  if (result.corrupted) log().warn("{}: {}", capture, result.corruption);
  if (options.out_dir.empty()) {
    log().info("results in {}", result.out_dir);
  } else {
    log().debug("results in {}", result.out_dir);
  }
  return 0;
}

// Every input names a readable capture, and no capture is named twice.
std::vector<MergeSource> merge_sources(const std::vector<std::string>& inputs) {
  std::vector<MergeSource> sources;
  for (const std::string& input : inputs) {
    const std::string capture = capture_path_of(input);
    for (const MergeSource& earlier : sources) {
      std::error_code ec;
      if (fs::equivalent(earlier.capture, capture, ec)) {
        throw UsageError(earlier.label + " and " + input + " are the same capture: give each run once");
      }
    }
    sources.push_back({input, capture});
  }
  return sources;
}

// A merged report's summary.json lists its inputs.
bool is_merged_report(const fs::path& summary) {
  std::ifstream in(summary);
  if (!in) return false;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("inputs");
}

// A merged report never lands in a run's directory: its summary.json would replace the run's.
void check_merged_out_dir(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(fs::path(dir) / CaptureWriter::kFileName, ec)) {
    throw UsageError("-o " + dir + " holds a run (" + CaptureWriter::kFileName +
                     "); a merged report goes to a directory of its own");
  }
}

int report_merged(const ReportOptions& options, OutputOptions out) {
  const std::vector<MergeSource> sources = merge_sources(options.inputs);
  out.out_dir = options.out_dir;
  out.write_files = !out.out_dir.empty();
  // The directory is made once every input has been read (write_merged_outputs).
  if (out.write_files) check_merged_out_dir(out.out_dir);
  const OutputResult result = write_merged_outputs(sources, out, std::cout);
  if (result.truncated) log().warn("an input ends early; reported what it holds");
  if (result.corrupted) log().warn("an input is damaged; reported what could be read of it");
  if (out.write_files) {
    log().debug("results in {}", result.out_dir);
  } else {
    log().info("merged report of {} runs printed only; -o DIR writes its files", sources.size());
  }
  return 0;
}

}  // namespace

CommandAction setup_report_command(CLI::App& app, const CommandLine& /*line*/) {
  auto options = std::make_shared<ReportOptions>();
  app.add_option("CAPTURE", options->inputs,
                 "A capture.tprof, or the directory of a run; several are merged into one report")
      ->required();
  add_common_options(app, options->common);
  with_hint(app.add_option("-o,--output", options->out_dir,
                           "Where summary.json, table.txt and traces/ go (default: beside the capture; "
                           "with several inputs, nothing is written without -o)"),
            ValueHint::kDirectory);
  add_analysis_options(app, options->output);
  with_choices(app.add_option("--format", options->output.format, "What is printed on stdout")->capture_default_str(),
               {"table", "csv", "json", "markdown", "folded"});
  app.add_option("--worker-name", options->output.worker_name,
                 "Worker name of every process's traces instead of <host>_<pid>");
  app.add_flag("--gzip", options->output.gzip, "Write traces as .pt.trace.json.gz");
  app.add_flag("--table-only", options->output.table_only,
               "Print and write only the table (table.txt): the analysis feeds nothing else");
  app.add_option("--straggler-threshold", options->straggler_threshold,
                 "Several inputs: a rank whose mean step time is more than this many percent "
                 "above the median rank's is flagged as a straggler")
      ->capture_default_str();
  return [options] { return report_command(*options); };
}

std::string capture_path_of(const std::string& input) {
  std::error_code ec;
  fs::path path = input;
  const bool dir = fs::is_directory(path, ec);
  if (dir) path /= CaptureWriter::kFileName;
  if (!fs::is_regular_file(path, ec)) {
    const bool merged = dir && is_merged_report(fs::path(input) / "summary.json");
    throw InputError("cannot read " + path.string() + ": " +
                     (fs::exists(path, ec) ? "not a regular file" : "no such file") +
                     (merged ? " (" + input + " is a merged report, which keeps no capture: report its inputs)"
                             : ""));
  }
  return path.string();
}

int report_command(const ReportOptions& options) {
  configure_logging(options.common.log_level, options.common.quiet);
  validate_analysis_options(options.output);
  OutputOptions out = options.output;
  const std::optional<Quantity> pct = parse_quantity(options.straggler_threshold);
  if (!pct || (pct->unit != Unit::kNone && pct->unit != Unit::kPercent) || pct->value < 0) {
    throw UsageError("--straggler-threshold " + options.straggler_threshold +
                     ": not a percentage, 0 or more (e.g. 10 or 2.5%)");
  }
  out.straggler_threshold_pct = pct->value;
  out.quiet = options.common.quiet;
  out.write_files = true;
  if (out.table_only) {
    if (options.inputs.size() > 1) throw UsageError("--table-only takes one capture, not a merged report");
    if (out.format == "folded") throw UsageError("--format folded needs the whole report, not --table-only");
  }
  if (options.inputs.size() == 1) return report_one(options, out);
  return report_merged(options, out);
}

}  // namespace torchprof::cli
