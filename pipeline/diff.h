// Before/after comparison of two runs (`torchprof diff`): one row per op or kernel
// (name + kind) found in either run, with before, after and delta of one metric,
// judged against a threshold so CI can fail on regressions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/model.h"
#include "pipeline/diff_breakdown.h"

namespace torchprof {

// What diff and check read of a run: the fields of summary.json they use.
struct RunData {
  std::string source;                   // the path it came from, as given
  std::vector<std::string> command;
  int exit_code = 0;
  uint64_t dropped_events = 0;
  uint64_t events = 0;                  // over every process
  uint64_t processes = 0;
  bool has_gpu = false;                 // GPU devices or GPU rows were recorded
  int64_t gpu_busy_ns = 0;
  int64_t gpu_idle_ns = 0;
  int64_t peak_memory_bytes = 0;        // highest memory.peak_bytes_per_device
  // --profile-memory: the highest tensor peak (memory.tensors[].peak_bytes) and the leak
  // finding's bytes a step (0 without one); -1 when tensor memory was not recorded.
  int64_t tensor_peak_bytes = -1;
  int64_t leak_bytes_per_step = -1;
  std::vector<OpStats> ops;             // as summary.json lists them (not folded)
  std::vector<int64_t> step_dur_ns;     // recorded steps of every process, the implicit one too
  uint64_t marked_steps = 0;            // recorded steps that came from step markers
  BreakdownAverage breakdown;           // overview.breakdown's average per step
};

// Reads a run directory (its summary.json, else its capture.tprof analysed with
// default options), a summary.json or a capture file. Throws InputError with a
// one-line reason for anything missing, malformed or of another schema.
RunData load_run(const std::string& path);

// Parses summary.json text; `source` names it in errors. Throws InputError.
RunData parse_summary(const std::string& text, const std::string& source);

struct DiffOptions {
  std::string metric;          // "" = cuda_time_total when both runs have GPU data, else cpu_time_total
  double threshold_pct = 10.0; // a judged row or the total regresses when it grows by more
  int64_t min_time_ns = 0;     // rows with before and after both below this are not judged
};

enum class DiffStatus : uint8_t {
  kSame,       // within the threshold
  kRegressed,  // grew by more than the threshold
  kImproved,   // shrank by more than the threshold
  kNew,        // only in AFTER
  kGone,       // only in BEFORE
  kNotJudged,  // below --min-time in both runs
};

struct DiffRow {
  std::string name;
  std::string kind;  // nvtx | cpu_op | cuda_api | kernel | memcpy | memset | step | total
  double before = 0; // per step when DiffResult::per_step
  double after = 0;
  DiffStatus status = DiffStatus::kSame;

  double delta() const { return after - before; }
  // Percentage change; nullopt when `before` is 0.
  std::optional<double> delta_pct() const;
};

struct DiffResult {
  std::string metric;
  bool time_metric = true;       // values are nanoseconds (else counts, or bytes:)
  bool memory_metric = false;    // a *_memory_usage metric: values are bytes
  bool per_step = false;         // values are divided by each run's recorded step count
  uint64_t before_steps = 0;
  uint64_t after_steps = 0;
  std::string before_source;
  std::string after_source;
  double threshold_pct = 10.0;
  int64_t min_time_ns = 0;
  std::vector<DiffRow> rows;     // sorted by absolute delta, largest first
  DiffRow total;                 // kind "total"
  std::string total_label;       // what the total sums, e.g. "Self CPU time total"
  std::vector<std::string> regressions;  // one line each, the total first when it regressed
  BreakdownAverage before_breakdown;     // shown side by side after the rows (not judged)
  BreakdownAverage after_breakdown;
};

// The metrics --metric accepts.
const std::vector<std::string>& diff_metrics();

// Throws InputError when the runs cannot be compared on the metric (unknown metric,
// a GPU metric without GPU data in one run, step_time without steps).
DiffResult compute_diff(const RunData& before, const RunData& after, const DiffOptions& options);

// table | markdown | csv | json; `row_limit` <= 0 shows every row. Throws InputError
// for an unknown format.
std::string render_diff(const DiffResult& diff, const std::string& format, int row_limit);

// Statistics of step durations (non-empty): the mean, and the q-quantile (0..1) with
// linear interpolation, as numpy's default.
double mean_ns(const std::vector<int64_t>& v);
double quantile_ns(std::vector<int64_t> v, double q);

// "100us", "2ms", "1.5s", "300ns"; a plain number is nanoseconds. nullopt when malformed.
std::optional<int64_t> parse_duration_ns(std::string_view text);

// format_time_us with a sign: "+1.500ms", "-20.000us", "0.000us".
std::string format_signed_time_ns(double ns);

}  // namespace torchprof
