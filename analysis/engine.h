// The analysis of a capture: one engine for every output. Each process is read in one
// pass over its connections' frames, in capture order, with state that grows only with
// what is open at once (each thread's open ranges, GPU records waiting for their API
// call), with the number of distinct names and with the steps — never with the number of
// events. The pass counts each event in its row of the table as it completes and hands
// it to what else asked for it: the trace sink (formats/kineto_trace.h writes the traces
// as it goes), the overview's intervals, report.html's longest slices, --stats' series,
// the folded stacks. What it keeps of GPU records (Process::gpu_records) and device memory
// events serves the overview, summary.json's utilisation and memory figures.
//
// A process is first read as one step (which it is when it has no step marker). When the
// pass meets what makes steps (a step marker, a start/end range, a capture window), or a
// name used before the frame that defines it, it starts again with two passes: the first
// (analysis/process_scan.h) learns the steps and the definitions, the second counts.
// Everything the first attempt handed on is dropped (ProcessTraceSink::discard()).
//
// Nesting (analysis/conn_pass.h): a pop closes the last open range of its NVTX domain on
// its thread; a range's self time is its duration minus its direct children's; an API call
// is a child of the innermost range open around it and holds the API calls read before it
// that lie inside it; a range that ends while ranges opened inside it are open leaves them
// to the range around it. GPU time goes to the ranges around the API call that launched it
// (correlation id), as Self CUDA for the innermost and CUDA total for each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "analysis/analysis.h"
#include "analysis/model.h"
#include "analysis/trace_sink.h"
#include "reading/capture_reader.h"

namespace torchprof {

// What the engine feeds beside the table, each only when asked for.
struct EngineOutputs {
  bool records = true;      // Process::gpu_records, memory_events, cpu_roles (summary.json, overview)
  size_t timeline = 0;      // Run::timeline: the longest this many slices (0: none)
  bool stats = false;       // Run::stats
  bool folded = false;      // Run::folded
  // Process::memory_history of CUDA tensors (--memory-snapshot), the last this many entries.
  bool memory_snapshot = false;
  size_t memory_snapshot_entries = 0;
  TraceSinkFactory traces;  // empty: no traces
  // Called with the frame bytes read so far and the total, at most once per percent.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

// The outputs the table alone needs.
inline EngineOutputs table_only_outputs() {
  EngineOutputs o;
  o.records = false;
  return o;
}

// Reads the capture the reader is on. Throws InputError when the step-marker regex is not
// one; a damaged tail is reported (Run::truncated) and what came before it analysed.
Run analyse_capture(CaptureReader& reader, const AnalysisOptions& options, const EngineOutputs& outputs = {});

// Opens `path`; throws InputError when it is not a readable capture.
Run analyse_capture_file(const std::string& path, const AnalysisOptions& options,
                         const EngineOutputs& outputs = {});

}  // namespace torchprof
