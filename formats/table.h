// The operator table of key_averages().table(), and the same rows as CSV, JSON and
// Markdown. Layout rules follow torch (tests/fixtures/torch_tables): right-aligned
// columns each followed by two spaces, Name width min(longest + 4, 55), other
// columns 12, `%.3f` + us|ms|s times, `%.2f%%` shares, ProfilerStep#N folded.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/model.h"

namespace torchprof {

struct TableOptions {
  std::string sort;     // torch sort key; "" = cuda_time_total with GPU data, else cpu_time_total
  int row_limit = 100;  // <= 0: all rows
};

struct TableRows {
  std::vector<OpStats> rows;        // sorted, cut to row_limit
  int64_t self_cpu_total_ns = 0;    // over all rows before the cut, as torch
  int64_t self_cuda_total_ns = 0;
  bool has_gpu = false;
  size_t name_width = 0;            // in code points
  std::string sort_key;
  // torch's optional last columns: Input Shapes when a row has shapes (grouped by
  // them), Source Location when a row has a Python stack. 0 = no such column.
  size_t shapes_width = 0;
  size_t source_width = 0;
  // --with-flops: "Total MFLOPs" and the like, as torch scales it by the smallest count of
  // any row; empty when no row has FLOPs.
  std::string flops_header;
  double flops_scale = 1.0;
  // Tensor memory columns (--profile-memory): CPU Mem and Self CPU Mem when a row has
  // memory, CUDA Mem and Self CUDA Mem when a row has Self CUDA memory above 0 (torch's rule).
  bool profile_memory = false;
  bool has_cuda_mem = false;
  // What the rows leave out, said under the table (Run::left_out_*): ranges, API calls
  // and GPU records of steps a schedule does not record, and those outside every step.
  uint64_t left_out_in_steps = 0;
  uint64_t left_out_outside_steps = 0;
};

// The line under the table that says what it leaves out; "" when nothing is.
std::string left_out_line(const TableRows& rows);

// The sort keys torch accepts, in the order they are listed to the user.
const std::vector<std::string>& table_sort_keys();

// Folds, sorts and cuts `ops`. Throws InputError for an unknown sort key.
TableRows make_table_rows(const std::vector<OpStats>& ops, bool has_gpu,
                          const TableOptions& options);

std::string render_table(const TableRows& rows);
std::string render_csv(const TableRows& rows);
std::string render_markdown(const TableRows& rows);
std::string render_json(const TableRows& rows);
// What render_json prints, as an object others can add to (a merged report adds "ranks").
nlohmann::ordered_json table_rows_json(const TableRows& rows);

// torch's _format_time / _format_time_share, on microseconds.
std::string format_time_us(double us);
// A FLOP count in the table's unit, as torch prints it: '{0:8.3f}' of flops * scale.
std::string format_flops(uint64_t flops, double scale);

// Bytes as torch's _format_memory prints them: "1.50 Mb", "-213.00 Kb", "512 b".
std::string format_memory(int64_t bytes);
std::string format_share(double part, double total);

// Length in code points (Python's len(str)) and the first n code points.
size_t utf8_length(std::string_view s);
std::string utf8_prefix(std::string_view s, size_t n);

}  // namespace torchprof
