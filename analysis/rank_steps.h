// Step time per rank: which rank (or worker, for processes without a rank) of a
// distributed job is the straggler, overall and step by step. Computed from the
// analysed steps (analysis/analysis.h) of a run, usually one merged from the runs
// of every node (analysis/merge.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/collectives.h"
#include "analysis/model.h"

namespace torchprof {

// One rank's recorded steps. Processes of the same rank and input (a rank's helper
// processes) share a row; the same rank in two inputs gets two rows.
struct RankStepRow {
  std::optional<int> rank;
  int input = 0;               // Process::input of its processes
  std::string label;           // "3", or "3@<worker>" when rank 3 is in several inputs, or the worker
  std::string worker;          // worker of its first process with steps
  std::string host;
  std::vector<int> pids;
  uint64_t steps = 0;
  int64_t total_ns = 0;
  int64_t mean_ns = 0;
  int64_t median_ns = 0;
  int64_t min_ns = 0;
  int64_t max_ns = 0;
  double vs_fastest = 0;       // mean / the lowest mean of any row
  double vs_median = 0;        // mean / the median of the rows' means
  uint64_t slowest_steps = 0;  // steps (by index) in which this row was the slowest
  bool slowest = false;        // highest mean of all rows (none when all means are equal)
  // By step time: mean more than threshold_pct above the median of the means. By
  // collective waits (RankReport::straggler_by): it started its collectives after the
  // median rank by more than threshold_pct of the median step, per step (so half the
  // ranks or more waited that long for it).
  bool straggler = false;
  std::optional<RankCollectives> collectives;  // when two or more rows have collectives
};

// One step index across the rows that have it.
struct StepSpread {
  int index = 0;                          // Step::index
  size_t rows = 0;                        // rows with this step
  int64_t fastest_ns = 0;
  int64_t median_ns = 0;
  int64_t slowest_ns = 0;
  size_t slowest_row = 0;                 // index into RankReport::rows
  double vs_median = 0;                   // slowest / median
  std::vector<std::optional<int64_t>> dur_ns;  // per row of RankReport::rows
};

struct RankReport {
  std::vector<RankStepRow> rows;   // ranked rows by (rank, input), then the others by (input, worker)
  std::vector<StepSpread> steps;   // indices that at least two rows have, ascending
  int64_t median_mean_ns = 0;      // median of the rows' means
  double threshold_pct = 10.0;
  bool by_rank = false;            // every row has a rank
  std::string straggler_by = "step time";  // or "collective waits"
  std::vector<std::string> warnings;  // world sizes that disagree, missing or repeated ranks
};

// Rows come from the recorded steps (StepAction record / record_and_save) of every
// process. When some process of a row has step markers, only marked steps count (a
// helper process's implicit whole-run step would be no training step). A step's time is
// Step::dur_ns; where one row has several steps of one index (two processes), the
// per-step view takes the longest. Rows without recorded steps are left out.
RankReport compute_rank_report(const Run& run, double straggler_threshold_pct);

// Median of `values` (mean of the middle two for an even count); 0 when empty.
int64_t median_ns(std::vector<int64_t> values);

}  // namespace torchprof
