#include "pipeline/diff.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "analysis/analysis.h"
#include "analysis/engine.h"
#include "common/errors.h"
#include "formats/summary_json.h"
#include "formats/table.h"

namespace torchprof {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr const char* kSchema = "torchprof.summary/1";

template <typename T>
T value_or(const Json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return it->get<T>();
}

bool is_gpu_kind(const std::string& kind) {
  return kind == "kernel" || kind == "memcpy" || kind == "memset";
}

OpStats parse_op(const Json& j) {
  OpStats op;
  op.name = j.at("name").get<std::string>();
  op.kind = value_or<std::string>(j, "kind", "");
  op.calls = value_or<uint64_t>(j, "calls", 0);
  op.self_cpu_ns = value_or<int64_t>(j, "self_cpu_ns", 0);
  op.cpu_total_ns = value_or<int64_t>(j, "cpu_total_ns", 0);
  op.self_cuda_ns = value_or<int64_t>(j, "self_cuda_ns", 0);
  op.cuda_total_ns = value_or<int64_t>(j, "cuda_total_ns", 0);
  op.cpu_memory = value_or<int64_t>(j, "cpu_memory_usage", 0);
  op.self_cpu_memory = value_or<int64_t>(j, "self_cpu_memory_usage", 0);
  op.cuda_memory = value_or<int64_t>(j, "cuda_memory_usage", 0);
  op.self_cuda_memory = value_or<int64_t>(j, "self_cuda_memory_usage", 0);
  return op;
}

void parse_steps(const Json& steps, RunData& run) {
  for (const Json& s : steps) {
    const std::string action = value_or<std::string>(s, "action", "record");
    if (action != "record" && action != "record_and_save") continue;
    run.step_dur_ns.push_back(value_or<int64_t>(s, "dur_ns", 0));
    if (!value_or<std::string>(s, "name", "").empty()) ++run.marked_steps;
  }
}

void parse_gpu_and_memory(const Json& j, RunData& run) {
  if (auto gpu = j.find("gpu"); gpu != j.end() && gpu->is_object()) {
    run.gpu_busy_ns = value_or<int64_t>(*gpu, "busy_ns", 0);
    run.gpu_idle_ns = value_or<int64_t>(*gpu, "idle_ns", 0);
    if (auto devices = gpu->find("devices"); devices != gpu->end() && devices->is_array()) {
      run.has_gpu = run.has_gpu || !devices->empty();
    }
  }
  if (auto memory = j.find("memory"); memory != j.end() && memory->is_object()) {
    if (auto peak = memory->find("peak_bytes_per_device"); peak != memory->end() && peak->is_object()) {
      for (const auto& [device, bytes] : peak->items()) {
        run.peak_memory_bytes = std::max(run.peak_memory_bytes, bytes.get<int64_t>());
      }
    }
    if (auto tensors = memory->find("tensors"); tensors != memory->end() && tensors->is_array()) {
      run.tensor_peak_bytes = 0;
      for (const Json& p : *tensors) {
        if (auto peak = p.find("peak_bytes"); peak != p.end() && peak->is_object()) {
          for (const auto& [type, bytes] : peak->items()) {
            run.tensor_peak_bytes = std::max(run.tensor_peak_bytes, bytes.get<int64_t>());
          }
        }
      }
      auto leak = memory->find("leak");
      run.leak_bytes_per_step =
          leak != memory->end() && leak->is_object() ? value_or<int64_t>(*leak, "bytes_per_step", 0) : 0;
    }
  }
}

void parse_fields(const Json& j, RunData& run) {
  run.command = value_or<std::vector<std::string>>(j, "command", {});
  run.exit_code = value_or<int>(j, "exit_code", 0);
  run.dropped_events = value_or<uint64_t>(j, "dropped_events", 0);
  for (const Json& p : value_or<Json>(j, "processes", Json::array())) {
    ++run.processes;
    run.events += value_or<uint64_t>(p, "events", 0);
  }
  const Json& ops = j.at("ops");
  if (!ops.is_array()) throw InputError("\"ops\" is not a list");
  for (const Json& o : ops) {
    run.ops.push_back(parse_op(o));
    const OpStats& op = run.ops.back();
    if (is_gpu_kind(op.kind) || op.self_cuda_ns != 0 || op.cuda_total_ns != 0) run.has_gpu = true;
  }
  parse_steps(value_or<Json>(j, "steps", Json::array()), run);
  parse_gpu_and_memory(j, run);
  run.breakdown = parse_breakdown(j);
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool looks_like_json(const fs::path& path) {
  if (path.extension() == ".json") return true;
  std::ifstream in(path, std::ios::binary);
  char c = 0;
  while (in.get(c)) {
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return c == '{';
  }
  return false;
}

RunData analyse_capture(const fs::path& capture, const std::string& source) {
  const Run run = analyse_capture_file(capture.string(), AnalysisOptions{});
  return parse_summary(render_summary_json(run), source);
}


// ---------------------------------------------------------------------------
// The comparison

const std::vector<std::string> kMetrics = {"cuda_time_total", "cpu_time_total", "self_cpu_time_total",
                                           "self_cuda_time_total", "count", "step_time",
                                           "cpu_memory_usage", "self_cpu_memory_usage",
                                           "cuda_memory_usage", "self_cuda_memory_usage"};

bool is_memory_metric(const std::string& metric) { return metric.ends_with("_memory_usage"); }
bool is_cuda_metric(const std::string& metric) {
  return metric.find("cuda") != std::string::npos && !is_memory_metric(metric);
}

double metric_of(const OpStats& op, const std::string& metric) {
  if (metric == "cuda_time_total") return static_cast<double>(op.cuda_total_ns);
  if (metric == "cpu_time_total") return static_cast<double>(op.cpu_total_ns);
  if (metric == "self_cpu_time_total") return static_cast<double>(op.self_cpu_ns);
  if (metric == "self_cuda_time_total") return static_cast<double>(op.self_cuda_ns);
  if (metric == "cpu_memory_usage") return static_cast<double>(op.cpu_memory);
  if (metric == "self_cpu_memory_usage") return static_cast<double>(op.self_cpu_memory);
  if (metric == "cuda_memory_usage") return static_cast<double>(op.cuda_memory);
  if (metric == "self_cuda_memory_usage") return static_cast<double>(op.self_cuda_memory);
  return static_cast<double>(op.calls);  // count
}

std::string resolve_metric(const RunData& before, const RunData& after, const std::string& wanted) {
  if (wanted.empty()) return before.has_gpu && after.has_gpu ? "cuda_time_total" : "cpu_time_total";
  if (std::find(kMetrics.begin(), kMetrics.end(), wanted) == kMetrics.end()) {
    std::string valid;
    for (const std::string& m : kMetrics) valid += (valid.empty() ? "" : ", ") + m;
    throw InputError("unknown metric '" + wanted + "' (valid: " + valid + ")");
  }
  for (const RunData* run : {&before, &after}) {
    if (is_cuda_metric(wanted) && !run->has_gpu) {
      throw InputError("cannot compare " + wanted + ": " + run->source + " has no GPU data");
    }
    if (is_memory_metric(wanted) && run->tensor_peak_bytes < 0) {
      throw InputError("cannot compare " + wanted + ": " + run->source + " has no tensor memory (--profile-memory)");
    }
    if (wanted == "step_time" && run->step_dur_ns.empty()) {
      throw InputError("cannot compare step_time: " + run->source + " has no recorded steps");
    }
  }
  return wanted;
}

// A row's value pair: presence matters, so a missing side is not simply zero.
struct Pair {
  std::string name, kind;
  std::optional<double> before, after;
};

void add_side(std::vector<Pair>& pairs, std::map<std::string, size_t>& index, const RunData& run,
              const std::string& metric, double divisor, bool is_after) {
  const TableRows folded = make_table_rows(run.ops, run.has_gpu, {/*sort=*/"", /*row_limit=*/0});
  for (const OpStats& op : folded.rows) {
    auto [it, fresh] = index.try_emplace(op.kind + '\0' + op.name, pairs.size());
    if (fresh) pairs.push_back({op.name, op.kind, std::nullopt, std::nullopt});
    std::optional<double>& side = is_after ? pairs[it->second].after : pairs[it->second].before;
    side = side.value_or(0.0) + metric_of(op, metric) / divisor;
  }
}

std::vector<Pair> step_pairs(const RunData& before, const RunData& after) {
  std::vector<Pair> pairs;
  auto add = [&](const char* name, auto stat) {
    pairs.push_back({name, "step", stat(before.step_dur_ns), stat(after.step_dur_ns)});
  };
  add("step time avg", [](const std::vector<int64_t>& v) { return mean_ns(v); });
  add("step time p50", [](const std::vector<int64_t>& v) { return quantile_ns(v, 0.5); });
  add("step time min", [](const std::vector<int64_t>& v) { return quantile_ns(v, 0.0); });
  add("step time max", [](const std::vector<int64_t>& v) { return quantile_ns(v, 1.0); });
  return pairs;
}

// Judges a change of a row both runs have; `judged` false keeps it out of the verdict.
DiffStatus judge(const DiffRow& row, double threshold_pct, bool judged) {
  if (!judged) return DiffStatus::kNotJudged;
  const std::optional<double> pct = row.delta_pct();
  if (!pct) return row.after > 0 ? DiffStatus::kRegressed : DiffStatus::kSame;
  if (*pct > threshold_pct) return DiffStatus::kRegressed;
  if (*pct < -threshold_pct) return DiffStatus::kImproved;
  return DiffStatus::kSame;
}

std::string format_pct(std::optional<double> pct) {
  if (!pct) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%+.2f%%", *pct);
  return buf;
}

std::string format_count(double v, bool sign) {
  char buf[64];
  const bool whole = std::fabs(v - std::round(v)) < 1e-9;
  std::snprintf(buf, sizeof buf, sign ? (whole ? "%+.0f" : "%+.2f") : (whole ? "%.0f" : "%.2f"), v);
  return buf;
}

std::string format_value(const DiffResult& d, double v) {
  if (d.memory_metric) return format_memory(std::llround(v));
  return d.time_metric ? format_time_us(v / 1000.0) : format_count(v, /*sign=*/false);
}

std::string format_delta(const DiffResult& d, double v) {
  if (d.memory_metric) return (v > 0 ? "+" : "") + format_memory(std::llround(v));
  return d.time_metric ? format_signed_time_ns(v) : format_count(v, /*sign=*/true);
}

std::string trimmed_count(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, v == std::floor(v) ? "%.0f" : "%.1f", v);
  return buf;
}

std::string regression_line(const DiffResult& d, const DiffRow& row, const std::string& what) {
  return what + ": " + format_value(d, row.before) + " -> " + format_value(d, row.after) +
         (d.per_step ? " per step" : "") + " (" + format_pct(row.delta_pct()) + ", threshold " +
         format_pct(d.threshold_pct).substr(1) + ")";
}

// The after-run recorded under half the events of the before-run (per step when both
// have steps): it recorded nearly nothing, or something else. "" when it did not.
std::string event_collapse(const RunData& before, const RunData& after, double div_before, double div_after) {
  const double b = static_cast<double>(before.events) / div_before;
  const double a = static_cast<double>(after.events) / div_after;
  if (before.events == 0 || a * 2 >= b) return "";
  const bool per_step = div_before != 1.0 || div_after != 1.0;
  return "events: " + trimmed_count(b) + " -> " + trimmed_count(a) + (per_step ? " per step" : "") +
         " (the after-run recorded less than half as many events)";
}

void fill_total(DiffResult& d, const RunData& before, const RunData& after, double div_before,
                double div_after) {
  d.total.kind = "total";
  d.total.name = d.total_label;
  if (d.metric == "step_time") {
    d.total.before = mean_ns(before.step_dur_ns);
    d.total.after = mean_ns(after.step_dur_ns);
  } else {
    auto sum = [&](const RunData& run) {
      const TableRows t = make_table_rows(run.ops, run.has_gpu, {"", 0});
      if (d.metric == "count" || d.memory_metric) {
        double rows_total = 0;
        for (const OpStats& op : t.rows) rows_total += metric_of(op, d.metric);
        return rows_total;
      }
      return static_cast<double>(is_cuda_metric(d.metric) ? t.self_cuda_total_ns : t.self_cpu_total_ns);
    };
    d.total.before = sum(before) / div_before;
    d.total.after = sum(after) / div_after;
  }
  d.total.status = judge(d.total, d.threshold_pct, /*judged=*/true);
}

const char* total_label(const std::string& metric) {
  if (metric == "step_time") return "Step time avg";
  if (metric == "count") return "Calls total";
  if (is_memory_metric(metric)) return "Memory, sum of the rows";
  return is_cuda_metric(metric) ? "Self CUDA time total" : "Self CPU time total";
}

}  // namespace

RunData parse_summary(const std::string& text, const std::string& source) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw InputError(source + ": malformed JSON");
  if (!j.is_object() || !j.contains("schema")) {
    throw InputError(source + ": not a torchprof summary (no \"schema\")");
  }
  if (!j["schema"].is_string() || j["schema"].get<std::string>() != kSchema) {
    throw InputError(source + ": schema " + j["schema"].dump() + " is not " + kSchema);
  }
  RunData run;
  run.source = source;
  try {
    parse_fields(j, run);
  } catch (const InputError& e) {
    throw InputError(source + ": malformed summary: " + e.what());
  } catch (const Json::exception& e) {
    // nlohmann's messages start with "[json.exception.…] "; the rest is the reason.
    std::string what = e.what();
    if (auto end = what.find("] "); end != std::string::npos) what = what.substr(end + 2);
    throw InputError(source + ": malformed summary: " + what);
  }
  return run;
}

RunData load_run(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  if (!fs::exists(p, ec)) throw InputError("cannot read " + path + ": no such file or directory");
  if (fs::is_directory(p, ec)) {
    if (fs::is_regular_file(p / "summary.json", ec)) return parse_summary(read_file(p / "summary.json"), path);
    if (fs::is_regular_file(p / "capture.tprof", ec)) return analyse_capture(p / "capture.tprof", path);
    throw InputError(path + " holds neither summary.json nor capture.tprof");
  }
  if (looks_like_json(p)) return parse_summary(read_file(p), path);
  return analyse_capture(p, path);
}

}  // namespace torchprof

namespace torchprof {

std::optional<double> DiffRow::delta_pct() const {
  if (before == 0) return std::nullopt;
  return (after - before) * 100.0 / before;
}

const std::vector<std::string>& diff_metrics() { return kMetrics; }

double mean_ns(const std::vector<int64_t>& v) {
  double sum = 0;
  for (int64_t x : v) sum += static_cast<double>(x);
  return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

double quantile_ns(std::vector<int64_t> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return static_cast<double>(v[lo]) + (pos - static_cast<double>(lo)) * static_cast<double>(v[hi] - v[lo]);
}

DiffResult compute_diff(const RunData& before, const RunData& after, const DiffOptions& options) {
  DiffResult d;
  d.metric = resolve_metric(before, after, options.metric);
  d.memory_metric = is_memory_metric(d.metric);
  d.time_metric = d.metric != "count" && !d.memory_metric;
  d.before_source = before.source;
  d.after_source = after.source;
  d.threshold_pct = options.threshold_pct;
  d.min_time_ns = options.min_time_ns;
  d.total_label = total_label(d.metric);
  d.before_breakdown = before.breakdown;
  d.after_breakdown = after.breakdown;
  // Runs of different lengths compare fairly only per step; step_time is per step already.
  d.per_step = d.metric == "step_time" || (before.marked_steps > 0 && after.marked_steps > 0);
  d.before_steps = d.metric == "step_time" ? before.step_dur_ns.size() : before.marked_steps;
  d.after_steps = d.metric == "step_time" ? after.step_dur_ns.size() : after.marked_steps;
  const bool divide = d.per_step && d.metric != "step_time";
  const double div_before = divide ? static_cast<double>(before.marked_steps) : 1.0;
  const double div_after = divide ? static_cast<double>(after.marked_steps) : 1.0;

  std::vector<Pair> pairs;
  if (d.metric == "step_time") {
    pairs = step_pairs(before, after);
  } else {
    std::map<std::string, size_t> index;
    add_side(pairs, index, before, d.metric, div_before, /*is_after=*/false);
    add_side(pairs, index, after, d.metric, div_after, /*is_after=*/true);
  }
  for (const Pair& p : pairs) {
    DiffRow row{p.name, p.kind, p.before.value_or(0.0), p.after.value_or(0.0), DiffStatus::kSame};
    const auto min_time = static_cast<double>(options.min_time_ns);
    const bool judged = !d.time_metric || row.before >= min_time || row.after >= min_time;
    if (!p.after) {
      row.status = DiffStatus::kGone;
    } else if (!p.before) {
      row.status = DiffStatus::kNew;
    } else {
      row.status = judge(row, d.threshold_pct, judged);
    }
    d.rows.push_back(std::move(row));
  }
  std::stable_sort(d.rows.begin(), d.rows.end(), [](const DiffRow& x, const DiffRow& y) {
    const double dx = std::fabs(x.delta()), dy = std::fabs(y.delta());
    if (dx != dy) return dx > dy;
    return std::tie(x.name, x.kind) < std::tie(y.name, y.kind);
  });
  fill_total(d, before, after, div_before, div_after);
  if (d.total.status == DiffStatus::kRegressed) d.regressions.push_back(regression_line(d, d.total, "total " + d.total_label));
  if (const std::string collapse = event_collapse(before, after, div_before, div_after); !collapse.empty()) {
    d.regressions.push_back(collapse);
  }
  const auto min_time = static_cast<double>(options.min_time_ns);
  for (const DiffRow& row : d.rows) {
    const std::string what = row.name + " (" + row.kind + ")";
    if (row.status == DiffStatus::kRegressed) d.regressions.push_back(regression_line(d, row, what));
    // An op the after-run lacks did not get faster: it was not recorded, or the run is
    // another program. Steps the after-run lacks are judged by the step times.
    const bool judged_gone = d.metric != "step_time" && (!d.time_metric || row.before >= min_time);
    if (row.status == DiffStatus::kGone && judged_gone) {
      d.regressions.push_back(what + ": " + format_value(d, row.before) + (d.per_step ? " per step" : "") +
                              " before, not in the after-run");
    }
  }
  return d;
}

std::optional<int64_t> parse_duration_ns(std::string_view text) {
  static const std::pair<const char*, double> kUnits[] = {{"ns", 1.0}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}};
  std::string s(text);
  double scale = 1.0;
  for (const auto& [suffix, factor] : kUnits) {
    const std::string_view sv(suffix);
    if (s.size() > sv.size() && std::string_view(s).ends_with(sv)) {
      s.resize(s.size() - sv.size());
      scale = factor;
      break;
    }
  }
  if (s.empty() || s.find_first_not_of("0123456789.") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return static_cast<int64_t>(std::llround(v * scale));
}

std::string format_signed_time_ns(double ns) {
  if (ns == 0) return format_time_us(0);
  return (ns > 0 ? "+" : "-") + format_time_us(std::fabs(ns) / 1000.0);
}

}  // namespace torchprof

// ---------------------------------------------------------------------------
// Rendering

namespace torchprof {

namespace {

constexpr size_t kMaxNameWidth = 55;  // as the op table
constexpr size_t kNumberWidth = 12;

const char* status_word(DiffStatus s) {
  switch (s) {
    case DiffStatus::kSame: return "";
    case DiffStatus::kRegressed: return "REGRESSED";
    case DiffStatus::kImproved: return "improved";
    case DiffStatus::kNew: return "+new";
    case DiffStatus::kGone: return "-gone";
    case DiffStatus::kNotJudged: return "small";
  }
  return "";
}

const char* status_key(DiffStatus s) {
  switch (s) {
    case DiffStatus::kSame: return "same";
    case DiffStatus::kRegressed: return "regressed";
    case DiffStatus::kImproved: return "improved";
    case DiffStatus::kNew: return "new";
    case DiffStatus::kGone: return "gone";
    case DiffStatus::kNotJudged: return "not_judged";
  }
  return "";
}

std::vector<std::string> cells(const DiffResult& d, const DiffRow& r) {
  return {r.name,
          r.kind,
          format_value(d, r.before),
          format_value(d, r.after),
          format_delta(d, r.delta()),
          format_pct(r.delta_pct()),
          status_word(r.status)};
}

size_t shown_rows(const DiffResult& d, int row_limit) {
  if (row_limit <= 0) return d.rows.size();
  return std::min(d.rows.size(), static_cast<size_t>(row_limit));
}

std::string steps_note(uint64_t steps) { return " (" + std::to_string(steps) + " steps)"; }

std::string headline(const DiffResult& d) {
  return d.metric + (d.per_step ? " per step" : "") + ", before: " + d.before_source +
         (d.per_step ? steps_note(d.before_steps) : "") + ", after: " + d.after_source +
         (d.per_step ? steps_note(d.after_steps) : "");
}

std::string criteria(const DiffResult& d) {
  std::string s = "threshold " + format_pct(d.threshold_pct).substr(1);
  if (d.time_metric && d.min_time_ns > 0) s += ", min-time " + format_time_us(static_cast<double>(d.min_time_ns) / 1000.0);
  return s;
}

std::string verdict(const DiffResult& d) {
  if (d.regressions.empty()) return "No regression beyond " + format_pct(d.threshold_pct).substr(1);
  return std::to_string(d.regressions.size()) + (d.regressions.size() == 1 ? " regression" : " regressions") +
         " beyond " + format_pct(d.threshold_pct).substr(1);
}

void pad_left(std::string& out, const std::string& text, size_t width) {
  const size_t len = utf8_length(text);
  if (len < width) out.append(width - len, ' ');
  out += text;
}

std::string cut_name(const std::string& name) {
  if (utf8_length(name) >= kMaxNameWidth - 3) return utf8_prefix(name, kMaxNameWidth - 3) + "...";
  return name;
}

std::string render_text(const DiffResult& d, int row_limit) {
  const size_t n = shown_rows(d, row_limit);
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < n; ++i) rows.push_back(cells(d, d.rows[i]));
  rows.push_back(cells(d, d.total));
  std::vector<size_t> widths = {0, 6, kNumberWidth, kNumberWidth, kNumberWidth, 10, 9};
  const std::vector<std::string> header = {"Name", "Kind", "Before", "After", "Delta", "Delta %", "Status"};
  for (auto& row : rows) {
    row[0] = cut_name(row[0]);
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], utf8_length(row[c]));
  }
  widths[0] = std::min(widths[0] + 4, kMaxNameWidth);
  std::string rule;
  for (size_t w : widths) rule += std::string(w, '-') + "  ";
  rule += "\n";
  auto line = [&](const std::vector<std::string>& r) {
    std::string out;
    for (size_t c = 0; c < r.size(); ++c) {
      pad_left(out, r[c], widths[c]);
      out += "  ";
    }
    return out + "\n";
  };
  std::string out = "torchprof diff: " + headline(d) + "\n" + "Judged: " + criteria(d) + "\n";
  out += rule + line(header) + rule;
  for (size_t i = 0; i < n; ++i) out += line(rows[i]);
  out += rule + line(rows.back());
  if (n < d.rows.size()) out += std::to_string(d.rows.size() - n) + " more rows not shown (--row-limit)\n";
  out += render_breakdown_text(d.before_breakdown, d.after_breakdown);
  return out + verdict(d) + "\n";
}

std::string md_code(const std::string& text) {
  std::string out = "`";
  for (char c : text) out += c == '|' ? std::string("\\|") : c == '`' ? std::string("'") : std::string(1, c);
  return out + "`";
}

std::string render_md(const DiffResult& d, int row_limit) {
  std::string out = "### torchprof diff: " + md_code(d.metric) + (d.per_step ? " per step" : "") + "\n\n";
  out += "Before: " + md_code(d.before_source) + (d.per_step ? steps_note(d.before_steps) : "") +
         ", after: " + md_code(d.after_source) + (d.per_step ? steps_note(d.after_steps) : "") + "; " +
         criteria(d) + ".\n\n";
  out += "**" + verdict(d) + "**\n";
  for (const std::string& r : d.regressions) out += "- " + r + "\n";
  out += "\n| Name | Kind | Before | After | Delta | Delta % | Status |\n";
  out += "|:---|:---|---:|---:|---:|---:|:---|\n";
  auto row = [&](const DiffRow& r, bool bold) {
    std::vector<std::string> c = cells(d, r);
    c[0] = bold ? "**" + c[0] + "**" : md_code(c[0]);
    std::string line = "|";
    for (const std::string& cell : c) line += " " + cell + " |";
    return line + "\n";
  };
  const size_t n = shown_rows(d, row_limit);
  for (size_t i = 0; i < n; ++i) out += row(d.rows[i], /*bold=*/false);
  out += row(d.total, /*bold=*/true);
  if (n < d.rows.size()) out += "\n" + std::to_string(d.rows.size() - n) + " more rows not shown.\n";
  return out + render_breakdown_markdown(d.before_breakdown, d.after_breakdown);
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string number(double v) {
  char buf[64];
  const bool whole = std::fabs(v - std::round(v)) < 1e-9;
  std::snprintf(buf, sizeof buf, whole ? "%.0f" : "%.3f", v);
  return buf;
}

std::string render_csv_rows(const DiffResult& d, int row_limit) {
  const std::string unit =
      std::string(d.memory_metric ? "bytes" : d.time_metric ? "ns" : "calls") + (d.per_step ? "_per_step" : "");
  std::string out = "name,kind,before_" + unit + ",after_" + unit + ",delta_" + unit + ",delta_pct,status\n";
  auto row = [&](const DiffRow& r) {
    const std::optional<double> pct = r.delta_pct();
    return csv_field(r.name) + "," + csv_field(r.kind) + "," + number(r.before) + "," + number(r.after) + "," +
           number(r.delta()) + "," + (pct ? number(*pct) : std::string()) + "," + status_key(r.status) + "\n";
  };
  const size_t n = shown_rows(d, row_limit);
  for (size_t i = 0; i < n; ++i) out += row(d.rows[i]);
  return out + row(d.total);
}

nlohmann::ordered_json row_json(const DiffRow& r) {
  const std::optional<double> pct = r.delta_pct();
  return {{"name", r.name},   {"kind", r.kind},   {"before", r.before},
          {"after", r.after}, {"delta", r.delta()}, {"delta_pct", pct ? nlohmann::ordered_json(*pct) : nullptr},
          {"status", status_key(r.status)}};
}

std::string render_json_doc(const DiffResult& d, int row_limit) {
  nlohmann::ordered_json j;
  j["schema"] = "torchprof.diff/1";
  j["metric"] = d.metric;
  j["unit"] = d.memory_metric ? "bytes" : d.time_metric ? "ns" : "calls";
  j["per_step"] = d.per_step;
  j["before"] = {{"source", d.before_source}, {"steps", d.before_steps}};
  j["after"] = {{"source", d.after_source}, {"steps", d.after_steps}};
  j["threshold_pct"] = d.threshold_pct;
  j["min_time_ns"] = d.min_time_ns;
  j["total"] = row_json(d.total);
  j["total"]["label"] = d.total_label;
  j["regressions"] = d.regressions;
  j["rows"] = nlohmann::ordered_json::array();
  const size_t n = shown_rows(d, row_limit);
  for (size_t i = 0; i < n; ++i) j["rows"].push_back(row_json(d.rows[i]));
  j["rows_not_shown"] = d.rows.size() - n;
  j["breakdown"] = breakdown_diff_json(d.before_breakdown, d.after_breakdown);
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace

std::string render_diff(const DiffResult& diff, const std::string& format, int row_limit) {
  if (format == "table") return render_text(diff, row_limit);
  if (format == "markdown") return render_md(diff, row_limit);
  if (format == "csv") return render_csv_rows(diff, row_limit);
  if (format == "json") return render_json_doc(diff, row_limit);
  throw InputError("unknown format '" + format + "' (valid: table, markdown, csv, json)");
}

}  // namespace torchprof
