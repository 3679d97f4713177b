// From a capture file to everything a run leaves behind: analysis, the printed
// table, summary.json, table.txt and the traces. Used by `run` after the target
// exits and by `report` on a saved capture.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "analysis/merge.h"
#include "common/errors.h"
#include "common/safe_dir.h"

namespace torchprof {

struct OutputOptions {
  std::string out_dir;                        // summary.json, table.txt, traces/ go here
  DirHandle out_dir_handle;                   // out_dir as the caller opened and checked it;
                                              // empty: opened here (open_dir_safely)
  std::string sort;                           // torch sort key; "" = cuda_time_total or cpu_time_total
  int row_limit = 100;                        // as key_averages().table(); <= 0 = all rows
  std::string schedule;                       // "wait=…,warmup=…,active=…"; "" = every step, one cycle
  std::string step_marker = "^ProfilerStep#"; // ECMAScript regex on NVTX range and mark names
  std::string worker_name;                    // "" = each process's own (<host>_<pid>)
  bool gzip = false;                          // traces as .pt.trace.json.gz
  std::string format = "table";               // what goes to `out`: table|csv|json|markdown|folded
  bool write_files = true;                    // false: print only
  bool quiet = false;                         // nothing on `out`
  bool stats = false;                         // also print nsys-style summaries (formats/stats.h)
  bool advice = false;                        // also print the overview and its recommendations
                                              // (formats/advice.h; written to advice.txt)
  std::string capture_range;                  // none | cudaProfilerApi | nvtx:NAME[@DOMAIN]; "" = none
  double straggler_threshold_pct = 10.0;      // merged reports: a rank whose mean step is this much
                                              // above the median rank's is a straggler
  bool group_by_input_shape = false;          // PyTorch op rows keyed by (name, input shapes)
  int group_by_stack_n = 5;                   // and by their first N Python frames (0: not)
  bool table_only = false;                    // only the table (table.txt): the engine feeds
                                              // nothing else
  bool memory_snapshot = false;               // memory_snapshot.pickle of CUDA tensors
  size_t memory_snapshot_entries = 100000;    // the most entries it keeps (the last ones)
};

struct OutputResult {
  int target_exit_code = 0;  // as recorded in the capture
  bool truncated = false;    // the capture ended early; what it held was reported
  bool corrupted = false;    // the capture is damaged inside; what could be read was reported
  std::string corruption;    // corruption_text() of the run
  std::string out_dir;
};

// Throws InputError for captures that cannot be read at all. With table_only, prints
// what the full report prints for the table (format table, csv, json or markdown) and
// its notes, and writes only table.txt.
OutputResult write_outputs(const std::string& capture_path, const OutputOptions& options,
                           std::ostream& out);

// Several runs as one (`torchprof report DIR1 DIR2 …`): every capture is decoded and
// analysed with the same options, then merged (analysis/merge.h). Prints and writes
// what write_outputs does, with the per-rank step-time table (analysis/rank_steps.h)
// after the op table and "inputs" and "ranks" in summary.json. Throws InputError naming
// the input that cannot be read before any file is written.
OutputResult write_merged_outputs(const std::vector<MergeSource>& inputs, const OutputOptions& options,
                                  std::ostream& out);

}  // namespace torchprof
