#include "formats/table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "analysis/rows.h"
#include "common/errors.h"

namespace torchprof {

namespace {

constexpr size_t kMaxNameWidth = 55;  // torch's max_name_column_width
constexpr size_t kColumnWidth = 12;
constexpr size_t kMaxShapesWidth = 150;  // torch's cap on the Input Shapes column
constexpr size_t kMaxSourceWidth = 75;   // torch's max_src_column_width
constexpr const char* kStepPrefix = "ProfilerStep#";

double us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

double avg_us(int64_t total_ns, uint64_t calls) {
  return calls == 0 ? 0.0 : us(total_ns) / static_cast<double>(calls);
}

// Value a sort key orders by (descending, ties keep first-appearance order).
double sort_value(const OpStats& op, const std::string& key) {
  if (key == "cpu_time_total") return static_cast<double>(op.cpu_total_ns);
  if (key == "cuda_time_total") return static_cast<double>(op.cuda_total_ns);
  if (key == "self_cpu_time_total") return static_cast<double>(op.self_cpu_ns);
  if (key == "self_cuda_time_total") return static_cast<double>(op.self_cuda_ns);
  if (key == "cpu_time") return avg_us(op.cpu_total_ns, op.calls);
  if (key == "cuda_time") return avg_us(op.cuda_total_ns, op.calls);
  if (key == "count") return static_cast<double>(op.calls);
  if (key == "cpu_memory_usage") return static_cast<double>(op.cpu_memory);
  if (key == "self_cpu_memory_usage") return static_cast<double>(op.self_cpu_memory);
  if (key == "cuda_memory_usage") return static_cast<double>(op.cuda_memory);
  if (key == "self_cuda_memory_usage") return static_cast<double>(op.self_cuda_memory);
  return 0.0;
}

std::string resolve_sort_key(const std::string& sort, bool has_gpu) {
  if (sort.empty()) return has_gpu ? "cuda_time_total" : "cpu_time_total";
  const auto& keys = table_sort_keys();
  if (std::find(keys.begin(), keys.end(), sort) != keys.end()) return sort;
  std::string valid;
  for (const std::string& k : keys) valid += (valid.empty() ? "" : ", ") + k;
  throw InputError("unknown sort key '" + sort + "' (valid: " + valid + ")");
}

std::vector<OpStats> fold_steps(const std::vector<OpStats>& ops) {
  std::vector<OpStats> folded;
  std::unordered_map<std::string, size_t> index;
  for (const OpStats& op : ops) {
    std::string name = op.name.starts_with(kStepPrefix) ? "ProfilerStep*" : op.name;
    auto [it, fresh] = index.try_emplace(op_row_key(op, name), folded.size());
    if (fresh) {
      folded.push_back(op);
      folded.back().name = name;
      continue;
    }
    OpStats& row = folded[it->second];
    row.calls += op.calls;
    row.self_cpu_ns += op.self_cpu_ns;
    row.cpu_total_ns += op.cpu_total_ns;
    row.self_cuda_ns += op.self_cuda_ns;
    row.cuda_total_ns += op.cuda_total_ns;
    add_memory(row, op);
  }
  return folded;
}

struct Column {
  std::string header;
  std::function<std::string(const OpStats&)> cell;
  size_t width = kColumnWidth;
};

std::string shapes_cell(const OpStats& o) { return o.input_shapes.empty() ? "[]" : o.input_shapes; }

// torch's trim_path: the last `width` characters of a long frame, the first three of
// them turned into "...".
std::string trim_frame(const std::string& frame, size_t width) {
  const size_t len = utf8_length(frame);
  if (len <= width) return frame;
  std::string tail = frame.substr(utf8_prefix(frame, len - width).size());
  if (utf8_length(tail) > 3) tail = "..." + tail.substr(utf8_prefix(tail, 3).size());
  return tail;
}

std::vector<Column> columns(const TableRows& t) {
  const double cpu_total = us(t.self_cpu_total_ns);
  const double cuda_total = us(t.self_cuda_total_ns);
  std::vector<Column> cols = {
      {"Self CPU %", [=](const OpStats& o) { return format_share(us(o.self_cpu_ns), cpu_total); }},
      {"Self CPU", [](const OpStats& o) { return format_time_us(us(o.self_cpu_ns)); }},
      {"CPU total %",
       [=](const OpStats& o) { return format_share(us(o.cpu_total_ns), cpu_total); }},
      {"CPU total", [](const OpStats& o) { return format_time_us(us(o.cpu_total_ns)); }},
      {"CPU time avg",
       [](const OpStats& o) { return format_time_us(avg_us(o.cpu_total_ns, o.calls)); }},
  };
  if (t.has_gpu) {
    cols.push_back({"Self CUDA", [](const OpStats& o) { return format_time_us(us(o.self_cuda_ns)); }});
    cols.push_back({"Self CUDA %", [=](const OpStats& o) {
                      return format_share(us(o.self_cuda_ns), cuda_total);
                    }});
    cols.push_back({"CUDA total", [](const OpStats& o) { return format_time_us(us(o.cuda_total_ns)); }});
    cols.push_back({"CUDA time avg", [](const OpStats& o) {
                      return format_time_us(avg_us(o.cuda_total_ns, o.calls));
                    }});
  }
  if (t.profile_memory) {
    cols.push_back({"CPU Mem", [](const OpStats& o) { return format_memory(o.cpu_memory); }});
    cols.push_back({"Self CPU Mem", [](const OpStats& o) { return format_memory(o.self_cpu_memory); }});
    if (t.has_cuda_mem) {
      cols.push_back({"CUDA Mem", [](const OpStats& o) { return format_memory(o.cuda_memory); }});
      cols.push_back({"Self CUDA Mem", [](const OpStats& o) { return format_memory(o.self_cuda_memory); }});
    }
  }
  cols.push_back({"# of Calls", [](const OpStats& o) { return std::to_string(o.calls); }});
  if (t.shapes_width > 0) {
    cols.push_back({"Input Shapes",
                    [w = t.shapes_width](const OpStats& o) { return utf8_prefix(shapes_cell(o), w); },
                    t.shapes_width});
  }
  if (!t.flops_header.empty()) {
    cols.push_back({t.flops_header, [scale = t.flops_scale](const OpStats& o) {
                      return o.flops == 0 ? std::string("--") : format_flops(o.flops, scale);
                    }});
  }
  return cols;
}

// torch's auto_scale_flops: the unit of the smallest count, FLOPs to PFLOPs.
std::pair<double, std::string> flops_unit(uint64_t smallest) {
  static constexpr const char* kUnits[] = {"FLOPs", "KFLOPs", "MFLOPs", "GFLOPs", "TFLOPs", "PFLOPs"};
  const double level = std::clamp(std::log10(static_cast<double>(smallest)) / 3.0, 0.0, 5.0);
  const int k = static_cast<int>(std::floor(level));
  return {std::pow(10.0, -3.0 * k), kUnits[k]};
}

void pad_left(std::string& out, std::string_view text, size_t width) {
  size_t len = utf8_length(text);
  if (len < width) out.append(width - len, ' ');
  out.append(text);
}

void pad_right(std::string& out, std::string_view text, size_t width) {
  out.append(text);
  size_t len = utf8_length(text);
  if (len < width) out.append(width - len, ' ');
}

std::string display_name(const std::string& name) {
  if (utf8_length(name) >= kMaxNameWidth - 3) return utf8_prefix(name, kMaxNameWidth - 3) + "...";
  return name;
}

std::string csv_quote(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

const std::vector<std::string>& table_sort_keys() {
  static const std::vector<std::string> keys = {
      "cpu_time",          "cuda_time",          "cpu_time_total",
      "cuda_time_total",   "self_cpu_time_total", "self_cuda_time_total",
      "cpu_memory_usage",  "cuda_memory_usage",  "self_cpu_memory_usage",
      "self_cuda_memory_usage", "count"};
  return keys;
}

TableRows make_table_rows(const std::vector<OpStats>& ops, bool has_gpu,
                          const TableOptions& options) {
  TableRows t;
  t.rows = fold_steps(ops);
  t.has_gpu = has_gpu;
  // As torch with Kineto: the Self CUDA total sums the device-side rows (kernels,
  // copies, sets) only, so GPU time that is also an op's Self CUDA counts once.
  const auto is_device_row = [](const OpStats& op) {
    return op.kind == "kernel" || op.kind == "memcpy" || op.kind == "memset";
  };
  const bool any_device_row = std::any_of(t.rows.begin(), t.rows.end(), is_device_row);
  size_t longest = 0;
  for (const OpStats& op : t.rows) {
    t.self_cpu_total_ns += op.self_cpu_ns;
    if (!any_device_row || is_device_row(op)) t.self_cuda_total_ns += op.self_cuda_ns;
    if (op.self_cuda_ns != 0 || op.cuda_total_ns != 0) t.has_gpu = true;
    longest = std::max(longest, utf8_length(op.name));
    t.profile_memory |= op.cpu_memory != 0 || op.self_cpu_memory != 0 || op.cuda_memory != 0 || op.self_cuda_memory != 0;
    t.has_cuda_mem |= op.self_cuda_memory > 0;
  }
  t.sort_key = resolve_sort_key(options.sort, t.has_gpu);
  std::stable_sort(t.rows.begin(), t.rows.end(), [&](const OpStats& x, const OpStats& y) {
    return sort_value(x, t.sort_key) > sort_value(y, t.sort_key);
  });
  t.name_width = std::min(longest + 4, kMaxNameWidth);
  size_t longest_shapes = 0;
  size_t longest_frame = 0;
  bool any_shapes = false;
  for (const OpStats& op : t.rows) {
    any_shapes |= !op.input_shapes.empty();
    longest_shapes = std::max(longest_shapes, utf8_length(shapes_cell(op)));
    for (const std::string& frame : op.stack) longest_frame = std::max(longest_frame, utf8_length(frame));
  }
  if (any_shapes) t.shapes_width = std::min(longest_shapes + 4, kMaxShapesWidth);
  uint64_t smallest_flops = 0;
  for (const OpStats& op : t.rows) {
    if (op.flops > 0 && (smallest_flops == 0 || op.flops < smallest_flops)) smallest_flops = op.flops;
  }
  if (smallest_flops > 0) {
    auto [scale, unit] = flops_unit(smallest_flops);
    t.flops_scale = scale;
    t.flops_header = "Total " + unit;
  }
  if (longest_frame > 0) t.source_width = std::min(longest_frame + 4, kMaxSourceWidth);
  if (options.row_limit > 0 && t.rows.size() > static_cast<size_t>(options.row_limit)) {
    t.rows.resize(static_cast<size_t>(options.row_limit));
  }
  return t;
}

std::string left_out_line(const TableRows& t) {
  const uint64_t total = t.left_out_in_steps + t.left_out_outside_steps;
  if (total == 0) return {};
  return "Not in the table: " + std::to_string(total) + " ranges, API calls and GPU records outside the recorded steps (" +
         std::to_string(t.left_out_in_steps) + " in steps not recorded, " + std::to_string(t.left_out_outside_steps) +
         " outside every step)\n";
}

std::string render_table(const TableRows& t) {
  const std::vector<Column> cols = columns(t);
  std::string rule(t.name_width, '-');
  rule += "  ";
  for (const Column& c : cols) rule += std::string(c.width, '-') + "  ";
  if (t.source_width > 0) rule += std::string(t.source_width, '-') + "  ";
  rule += '\n';

  // One line: the name and the cells right-aligned, the source location left-aligned.
  auto line = [&](std::string& out, std::string_view name, const OpStats* op, std::string_view source) {
    pad_left(out, name, t.name_width);
    out += "  ";
    for (const Column& c : cols) {
      pad_left(out, op != nullptr ? c.cell(*op) : std::string(), c.width);
      out += "  ";
    }
    if (t.source_width > 0) {
      pad_right(out, source, t.source_width);
      out += "  ";
    }
    out += '\n';
  };

  std::string out = rule;
  pad_left(out, "Name", t.name_width);
  out += "  ";
  for (const Column& c : cols) {
    pad_left(out, c.header, c.width);
    out += "  ";
  }
  if (t.source_width > 0) {
    pad_right(out, "Source Location", t.source_width);
    out += "  ";
  }
  out += '\n';
  out += rule;
  for (const OpStats& op : t.rows) {
    const std::string first = op.stack.empty() ? std::string() : trim_frame(op.stack[0], t.source_width);
    line(out, display_name(op.name), &op, first);
    if (t.source_width == 0 || op.stack.empty()) continue;
    // As torch: the further frames on lines of their own, then an empty line.
    for (size_t i = 1; i < op.stack.size() && i < kOpStackFrames; ++i) {
      line(out, "", nullptr, trim_frame(op.stack[i], t.source_width));
    }
    line(out, "", nullptr, "");
  }
  out += rule;
  out += "Self CPU time total: " + format_time_us(us(t.self_cpu_total_ns)) + "\n";
  if (t.has_gpu) out += "Self CUDA time total: " + format_time_us(us(t.self_cuda_total_ns)) + "\n";
  out += left_out_line(t);
  return out;
}

std::string render_csv(const TableRows& t) {
  std::string out = "Name,Self CPU %,Self CPU (us),CPU total %,CPU total (us),CPU time avg (us)";
  if (t.has_gpu) out += ",Self CUDA (us),Self CUDA %,CUDA total (us),CUDA time avg (us)";
  if (t.profile_memory) out += ",CPU Mem (B),Self CPU Mem (B)";
  if (t.profile_memory && t.has_cuda_mem) out += ",CUDA Mem (B),Self CUDA Mem (B)";
  out += ",# of Calls";
  if (t.shapes_width > 0) out += ",Input Shapes";
  if (!t.flops_header.empty()) out += ",Total FLOPs";
  if (t.source_width > 0) out += ",Source Location";
  out += "\n";
  const double cpu_total = us(t.self_cpu_total_ns);
  const double cuda_total = us(t.self_cuda_total_ns);
  auto share = [](double part, double total) { return total == 0 ? 0.0 : part * 100.0 / total; };
  for (const OpStats& o : t.rows) {
    out += csv_quote(o.name);
    out += "," + fixed(share(us(o.self_cpu_ns), cpu_total), 2) + "," + fixed(us(o.self_cpu_ns), 3);
    out += "," + fixed(share(us(o.cpu_total_ns), cpu_total), 2) + "," + fixed(us(o.cpu_total_ns), 3);
    out += "," + fixed(avg_us(o.cpu_total_ns, o.calls), 3);
    if (t.has_gpu) {
      out += "," + fixed(us(o.self_cuda_ns), 3) + "," + fixed(share(us(o.self_cuda_ns), cuda_total), 2);
      out += "," + fixed(us(o.cuda_total_ns), 3) + "," + fixed(avg_us(o.cuda_total_ns, o.calls), 3);
    }
    if (t.profile_memory) out += "," + std::to_string(o.cpu_memory) + "," + std::to_string(o.self_cpu_memory);
    if (t.profile_memory && t.has_cuda_mem) {
      out += "," + std::to_string(o.cuda_memory) + "," + std::to_string(o.self_cuda_memory);
    }
    out += "," + std::to_string(o.calls);
    if (t.shapes_width > 0) out += "," + csv_quote(shapes_cell(o));
    if (!t.flops_header.empty()) out += "," + std::to_string(o.flops);
    if (t.source_width > 0) out += "," + csv_quote(joined_frames(o.stack));
    out += "\n";
  }
  return out;
}

std::string render_markdown(const TableRows& t) {
  const std::vector<Column> cols = columns(t);
  std::string out = "| Name |";
  std::string align = "|:---|";
  for (const Column& c : cols) {
    out += " " + c.header + " |";
    align += "---:|";
  }
  if (t.source_width > 0) {
    out += " Source Location |";
    align += ":---|";
  }
  out += "\n" + align + "\n";
  for (const OpStats& o : t.rows) {
    std::string name;
    for (char ch : o.name) name += ch == '|' ? std::string("\\|") : std::string(1, ch);
    out += "| " + name + " |";
    for (const Column& c : cols) out += " " + c.cell(o) + " |";
    if (t.source_width > 0) out += " " + (o.stack.empty() ? std::string() : o.stack[0]) + " |";
    out += "\n";
  }
  out += "\nSelf CPU time total: " + format_time_us(us(t.self_cpu_total_ns)) + "\n";
  if (t.has_gpu) out += "Self CUDA time total: " + format_time_us(us(t.self_cuda_total_ns)) + "\n";
  out += left_out_line(t);
  return out;
}

std::string render_json(const TableRows& t) {
  return table_rows_json(t).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

nlohmann::ordered_json table_rows_json(const TableRows& t) {
  nlohmann::ordered_json j;
  j["sort_by"] = t.sort_key;
  j["self_cpu_time_total_ns"] = t.self_cpu_total_ns;
  j["self_cuda_time_total_ns"] = t.self_cuda_total_ns;
  j["left_out_in_steps"] = t.left_out_in_steps;
  j["left_out_outside_steps"] = t.left_out_outside_steps;
  j["rows"] = nlohmann::ordered_json::array();
  for (const OpStats& o : t.rows) {
    j["rows"].push_back({{"name", o.name},
                         {"kind", o.kind},
                         {"calls", o.calls},
                         {"self_cpu_ns", o.self_cpu_ns},
                         {"cpu_total_ns", o.cpu_total_ns},
                         {"self_cuda_ns", o.self_cuda_ns},
                         {"cuda_total_ns", o.cuda_total_ns}});
    if (t.profile_memory) {
      auto& row = j["rows"].back();
      row["cpu_memory_usage"] = o.cpu_memory;
      row["self_cpu_memory_usage"] = o.self_cpu_memory;
      row["cuda_memory_usage"] = o.cuda_memory;
      row["self_cuda_memory_usage"] = o.self_cuda_memory;
    }
    if (!o.input_shapes.empty()) j["rows"].back()["input_shapes"] = o.input_shapes;
    if (o.flops > 0) j["rows"].back()["flops"] = o.flops;
    if (!o.stack.empty()) j["rows"].back()["stack"] = o.stack;
  }
  return j;
}

std::string format_time_us(double time_us) {
  char buf[64];
  if (time_us >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.3fs", time_us / 1e6);
  } else if (time_us >= 1e3) {
    std::snprintf(buf, sizeof buf, "%.3fms", time_us / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.3fus", time_us);
  }
  return buf;
}

std::string format_flops(uint64_t flops, double scale) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%8.3f", static_cast<double>(flops) * scale);
  return buf;
}

std::string format_memory(int64_t bytes) {
  constexpr double kKb = 1024.0, kMb = 1024.0 * kKb, kGb = 1024.0 * kMb;
  const double v = static_cast<double>(bytes);
  const double mag = v < 0 ? -v : v;
  char buf[64];
  if (mag >= kGb) {
    std::snprintf(buf, sizeof buf, "%.2f Gb", v / kGb);
  } else if (mag >= kMb) {
    std::snprintf(buf, sizeof buf, "%.2f Mb", v / kMb);
  } else if (mag >= kKb) {
    std::snprintf(buf, sizeof buf, "%.2f Kb", v / kKb);
  } else {
    std::snprintf(buf, sizeof buf, "%lld b", static_cast<long long>(bytes));
  }
  return buf;
}

std::string format_share(double part, double total) {
  if (total == 0) return "NaN";  // torch prints NaN when nothing was timed
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f%%", part * 100.0 / total);
  return buf;
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string utf8_prefix(std::string_view s, size_t n) {
  size_t count = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (count == n) return std::string(s.substr(0, i));
      ++count;
    }
  }
  return std::string(s);
}

}  // namespace torchprof
