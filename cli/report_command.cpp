#include "cli/report_command.h"

#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/log.h"
#include "collector/capture_writer.h"

namespace torchprof::cli {

CommandAction setup_report_command(CLI::App& app, const CommandLine& /*line*/) {
  auto options = std::make_shared<ReportOptions>();
  app.add_option("CAPTURE", options->input, "A capture.tprof, or the directory of a run")
      ->required();
  add_common_options(app, options->common);
  app.add_option("-o,--output", options->out_dir,
                 "Where summary.json, table.txt and traces/ go (default: beside the capture)");
  add_analysis_options(app, options->output);
  app.add_option("--format", options->output.format, "What is printed on stdout")
      ->check(CLI::IsMember({"table", "csv", "json", "markdown", "folded"}))
      ->capture_default_str();
  app.add_option("--worker-name", options->output.worker_name,
                 "Worker name of every process's traces instead of <host>_<pid>");
  app.add_flag("--gzip", options->output.gzip, "Write traces as .pt.trace.json.gz");
  return [options] { return report_command(*options); };
}

std::string capture_path_of(const std::string& input) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path path = input;
  if (fs::is_directory(path, ec)) path /= CaptureWriter::kFileName;
  if (!fs::is_regular_file(path, ec)) {
    throw InputError("cannot read " + path.string() + ": " +
                     (fs::exists(path, ec) ? "not a regular file" : "no such file"));
  }
  return path.string();
}

int report_command(const ReportOptions& options) {
  configure_logging(options.common.log_level, options.common.quiet);
  validate_analysis_options(options.output);
  const std::string capture = capture_path_of(options.input);
  OutputOptions out = options.output;
  out.quiet = options.common.quiet;
  out.write_files = true;
  out.out_dir = options.out_dir;
  if (out.out_dir.empty()) {
    out.out_dir = std::filesystem::path(capture).parent_path().string();
    if (out.out_dir.empty()) out.out_dir = ".";
  }
  std::error_code ec;
  std::filesystem::create_directories(out.out_dir, ec);
  if (ec) throw InputError("cannot create " + out.out_dir + ": " + ec.message());
  const OutputResult result = write_outputs(capture, out, std::cout);
  if (result.truncated) log().warn("{} ends early; reported what it holds", capture);
  log().debug("results in {}", result.out_dir);
  return 0;
}

}  // namespace torchprof::cli
