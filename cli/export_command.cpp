#include "cli/export_command.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "analysis/engine.h"
#include "cli/completion.h"
#include "cli/errors.h"
#include "cli/log.h"
#include "cli/report_command.h"
#include "common/errors.h"
#include "common/safe_dir.h"
#include "formats/sqlite_export.h"

namespace torchprof::cli {

namespace {

namespace fs = std::filesystem;

// nsys's file name: the extension is added when the name lacks it.
std::string output_path(const ExportOptions& options, const std::string& capture) {
  std::string path = options.output;
  if (path.empty()) {
    const std::string dir = fs::path(capture).parent_path().string();
    return (dir.empty() ? std::string(".") : dir) + "/capture.sqlite";
  }
  if (!path.ends_with(".sqlite")) path += ".sqlite";
  return path;
}

// The temporary file the database is written to, removed unless it was renamed.
struct PartialFile {
  DirHandle dir;
  std::string name;
  bool done = false;
  ~PartialFile() {
    if (!done && !name.empty()) ::unlinkat(dir.fd(), name.c_str(), 0);
  }
};

}  // namespace

CommandAction setup_export_command(CLI::App& app, const CommandLine& /*line*/) {
  auto options = std::make_shared<ExportOptions>();
  with_hint(app.add_option("RUN", options->input, "A run's directory or its capture.tprof")->required(),
            ValueHint::kRun);
  add_common_options(app, options->common);
  with_choices(app.add_option("-t,--type", options->type, "What to export to")->capture_default_str(), {"sqlite"});
  app.add_option("-o,--output", options->output,
                 "The database (.sqlite is added when missing; default: capture.sqlite beside the capture)");
  with_choices(app.add_option("-f,--force-overwrite", options->force_overwrite,
                              "Replace FILE when it exists (else it is kept and the export refused)")
                   ->capture_default_str(),
               {"true", "false"});
  app.add_option("--step-marker", options->step_marker,
                 "Regex on range names that marks a step (TORCH_STEPS)")
      ->capture_default_str();
  return [options] { return export_command(*options); };
}

int export_command(const ExportOptions& options) {
  configure_logging(options.common.log_level, options.common.quiet);
  const std::string capture = capture_path_of(options.input);
  const std::string path = output_path(options, capture);
  const bool force = options.force_overwrite == "true";
  const fs::path target(path);
  const std::string name = target.filename().string();
  if (name.empty() || name == "." || name == "..") throw UsageError("-o " + path + ": not a file name");
  DirHandle dir = open_dir_safely(target.has_parent_path() ? target.parent_path().string() : ".", /*create=*/false);
  if (exists_at(dir, name) && !force) {
    throw UsageError(path + " exists; --force-overwrite true replaces it");
  }
  AnalysisOptions analysis;
  analysis.step_marker = options.step_marker;

  // Written under a private name, then renamed: a failed export leaves nothing, and a
  // link someone put at PATH is replaced, never followed.
  PartialFile partial{dir, "." + name + "." + std::to_string(::getpid()) + ".partial"};
  ::close(open_file_at(dir, partial.name, /*append=*/false, path));
  SqliteExportCounts counts;
  Run run;
  {
    SqliteExport db("/proc/self/fd/" + std::to_string(dir.fd()) + "/" + partial.name, TORCHPROF_VERSION);
    EngineOutputs eo;
    eo.records = true;
    eo.traces = db.factory();
    run = analyse_capture_file(capture, analysis, eo);
    counts = db.finish(run);
  }
  const unsigned flags = force ? 0 : RENAME_NOREPLACE;
  if (::renameat2(dir.fd(), partial.name.c_str(), dir.fd(), name.c_str(), flags) != 0) {
    if (errno == EEXIST) throw UsageError(path + " exists; --force-overwrite true replaces it");
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  }
  partial.done = true;
  if (run.truncated) log().warn("{} ends early; exported what it holds", capture);
  if (run.corrupted) log().warn("{}: {}", capture, corruption_text(run));
  if (run.dropped_events > 0) log().warn("{} events were lost while recording (dropped)", run.dropped_events);
  log().info("{}: {} rows ({} NVTX, {} CUDA API, {} GPU, {} torch ops)", path, counts.rows, counts.nvtx, counts.api,
             counts.gpu, counts.ops);
  return 0;
}

}  // namespace torchprof::cli
