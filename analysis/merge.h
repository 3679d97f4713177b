// Several analysed runs as one (`torchprof report DIR1 DIR2 …`): the runs of the nodes
// or ranks of one distributed job, each written to its own directory by torchprof-run.
#pragma once

#include <string>
#include <vector>

#include "analysis/model.h"

namespace torchprof {

struct MergeSource {
  std::string label;    // the input as given on the command line
  std::string capture;  // the capture file read for it
};

// Moves the processes of `runs` (each already analysed, in the order of `sources`)
// into one Run: Process::input names the run each came from, Run::inputs describes
// the runs, rows of the same key add up (in the order of their first use), counts and
// losses add up.
// A worker name that two inputs share gets "_in<N>" appended in the later input so
// trace file names stay apart. Throws InputError when two inputs hold the same
// process (same host, pid and start time): the same run given twice.
Run merge_runs(std::vector<Run> runs, const std::vector<MergeSource>& sources);

}  // namespace torchprof
