#include "pipeline/check.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "analysis/rows.h"
#include "common/errors.h"

namespace torchprof {

namespace {

struct Suffix {
  const char* text;
  double scale;
  Unit unit;
};

// Longest suffixes first, so "ms" is not read as "s" and "KiB" not as "B".
const Suffix kSuffixes[] = {
    {"KiB", 1024.0, Unit::kBytes}, {"MiB", 1048576.0, Unit::kBytes},
    {"GiB", 1073741824.0, Unit::kBytes}, {"TiB", 1099511627776.0, Unit::kBytes},
    {"KB", 1024.0, Unit::kBytes},  {"MB", 1048576.0, Unit::kBytes},
    {"GB", 1073741824.0, Unit::kBytes}, {"TB", 1099511627776.0, Unit::kBytes},
    {"ns", 1.0, Unit::kTime},      {"us", 1e3, Unit::kTime},
    {"ms", 1e6, Unit::kTime},      {"s", 1e9, Unit::kTime},
    {"B", 1.0, Unit::kBytes},      {"%", 1.0, Unit::kPercent},
};

const char* unit_name(Unit u) {
  switch (u) {
    case Unit::kNone: return "a count";
    case Unit::kTime: return "a time";
    case Unit::kBytes: return "a size in bytes";
    case Unit::kPercent: return "a percentage";
  }
  return "";
}

using Getter = std::function<MetricValue(const RunData&)>;

MetricValue count(double v) { return {v, Unit::kNone}; }

const std::vector<int64_t>& steps_of(const RunData& run) {
  if (run.step_dur_ns.empty()) throw InputError(run.source + " has no recorded steps");
  return run.step_dur_ns;
}

double idle_pct(const RunData& run) {
  const double window = static_cast<double>(run.gpu_busy_ns + run.gpu_idle_ns);
  return window > 0 ? static_cast<double>(run.gpu_idle_ns) * 100.0 / window : 0.0;
}

const RunData& with_gpu(const RunData& run) {
  if (!run.has_gpu) throw InputError(run.source + " has no GPU data");
  return run;
}

const RunData& with_tensors(const RunData& run) {
  if (run.tensor_peak_bytes < 0) throw InputError(run.source + " has no tensor memory (record it with --profile-memory)");
  return run;
}

const std::map<std::string, Getter>& getters() {
  static const std::map<std::string, Getter> kGetters = {
      {"step_time_avg", [](const RunData& r) { return MetricValue{mean_ns(steps_of(r)), Unit::kTime}; }},
      {"step_time_max", [](const RunData& r) { return MetricValue{quantile_ns(steps_of(r), 1.0), Unit::kTime}; }},
      {"step_time_min", [](const RunData& r) { return MetricValue{quantile_ns(steps_of(r), 0.0), Unit::kTime}; }},
      {"step_time_p50", [](const RunData& r) { return MetricValue{quantile_ns(steps_of(r), 0.5), Unit::kTime}; }},
      {"step_time_p90", [](const RunData& r) { return MetricValue{quantile_ns(steps_of(r), 0.9), Unit::kTime}; }},
      {"steps", [](const RunData& r) { return count(static_cast<double>(r.step_dur_ns.size())); }},
      {"events", [](const RunData& r) { return count(static_cast<double>(r.events)); }},
      {"dropped_events", [](const RunData& r) { return count(static_cast<double>(r.dropped_events)); }},
      {"processes", [](const RunData& r) { return count(static_cast<double>(r.processes)); }},
      {"exit_code", [](const RunData& r) { return count(r.exit_code); }},
      {"gpu_busy_ns", [](const RunData& r) {
         return MetricValue{static_cast<double>(with_gpu(r).gpu_busy_ns), Unit::kTime}; }},
      {"gpu_idle_ns", [](const RunData& r) {
         return MetricValue{static_cast<double>(with_gpu(r).gpu_idle_ns), Unit::kTime}; }},
      {"gpu_idle_pct", [](const RunData& r) { return MetricValue{idle_pct(with_gpu(r)), Unit::kPercent}; }},
      {"gpu_busy_pct", [](const RunData& r) { return MetricValue{100.0 - idle_pct(with_gpu(r)), Unit::kPercent}; }},
      {"peak_memory_bytes", [](const RunData& r) {
         return MetricValue{static_cast<double>(r.peak_memory_bytes), Unit::kBytes}; }},
      {"memory.peak_bytes", [](const RunData& r) {
         return MetricValue{static_cast<double>(r.peak_memory_bytes), Unit::kBytes}; }},
      {"peak_memory", [](const RunData& r) {
         return MetricValue{static_cast<double>(std::max(r.peak_memory_bytes, with_tensors(r).tensor_peak_bytes)),
                            Unit::kBytes}; }},
      {"tensor_peak_bytes", [](const RunData& r) {
         return MetricValue{static_cast<double>(with_tensors(r).tensor_peak_bytes), Unit::kBytes}; }},
      {"leak_bytes_per_step", [](const RunData& r) {
         return MetricValue{static_cast<double>(with_tensors(r).leak_bytes_per_step), Unit::kBytes}; }},
  };
  return kGetters;
}

// An op gate on an op the run does not have: the gate fails (the op was not recorded at
// all, whatever the bound), it is not a usage error.
struct AbsentOp : InputError {
  using InputError::InputError;
};

const std::vector<std::string> kOpFields = {"calls",        "count",         "self_cpu_ns", "cpu_total_ns",
                                            "self_cuda_ns", "cuda_total_ns", "cpu_avg_ns",  "cuda_avg_ns",
                                            "cpu_memory_usage", "self_cpu_memory_usage", "cuda_memory_usage",
                                            "self_cuda_memory_usage", "flops"};

// op:<name>:<field>; the name may hold colons itself (aten::mm), the field never does.
MetricValue op_metric(const RunData& run, const std::string& metric) {
  const size_t colon = metric.rfind(':');
  const std::string name = colon > 3 ? metric.substr(3, colon - 3) : "";
  const std::string field = metric.substr(colon + 1);
  if (name.empty() || std::find(kOpFields.begin(), kOpFields.end(), field) == kOpFields.end()) {
    std::string valid;
    for (const std::string& f : kOpFields) valid += (valid.empty() ? "" : "|") + f;
    throw InputError("bad op metric '" + metric + "' (form: op:<name>:<" + valid + ">)");
  }
  // Folded as the table shows them (ProfilerStep#N as ProfilerStep*); rows of one name
  // with different kinds add up.
  const TableRows folded = make_table_rows(run.ops, run.has_gpu, {/*sort=*/"", /*row_limit=*/0});
  OpStats sum;
  bool found = false;
  for (const OpStats& op : folded.rows) {
    if (op.name != name) continue;
    found = true;
    sum.calls += op.calls;
    sum.self_cpu_ns += op.self_cpu_ns;
    sum.cpu_total_ns += op.cpu_total_ns;
    sum.self_cuda_ns += op.self_cuda_ns;
    sum.cuda_total_ns += op.cuda_total_ns;
    add_memory(sum, op);
  }
  if (!found) throw AbsentOp(run.source + " has no op named '" + name + "'");
  const double calls = static_cast<double>(sum.calls);
  if (field == "calls" || field == "count") return count(calls);
  if (field == "flops") return count(static_cast<double>(sum.flops));
  if (field == "cpu_memory_usage") return {static_cast<double>(sum.cpu_memory), Unit::kBytes};
  if (field == "self_cpu_memory_usage") return {static_cast<double>(sum.self_cpu_memory), Unit::kBytes};
  if (field == "cuda_memory_usage") return {static_cast<double>(sum.cuda_memory), Unit::kBytes};
  if (field == "self_cuda_memory_usage") return {static_cast<double>(sum.self_cuda_memory), Unit::kBytes};
  double ns = 0;
  if (field == "self_cpu_ns") ns = static_cast<double>(sum.self_cpu_ns);
  if (field == "cpu_total_ns") ns = static_cast<double>(sum.cpu_total_ns);
  if (field == "self_cuda_ns") ns = static_cast<double>(sum.self_cuda_ns);
  if (field == "cuda_total_ns") ns = static_cast<double>(sum.cuda_total_ns);
  if (field == "cpu_avg_ns") ns = calls > 0 ? static_cast<double>(sum.cpu_total_ns) / calls : 0.0;
  if (field == "cuda_avg_ns") ns = calls > 0 ? static_cast<double>(sum.cuda_total_ns) / calls : 0.0;
  return {ns, Unit::kTime};
}

std::string trimmed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

std::string md_cell(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

}  // namespace

std::optional<Quantity> parse_quantity(std::string_view text) {
  std::string s(text);
  Quantity q;
  double scale = 1.0;
  for (const Suffix& suffix : kSuffixes) {
    const std::string_view sv(suffix.text);
    if (s.size() > sv.size() && std::string_view(s).ends_with(sv)) {
      s.resize(s.size() - sv.size());
      scale = suffix.scale;
      q.unit = suffix.unit;
      break;
    }
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  if (s.empty() || s.find_first_not_of("+-0123456789.eE") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  q.value = v * scale;
  return q;
}

CheckBound parse_bound(const std::string& text, bool is_max) {
  const char* option = is_max ? "--max" : "--min";
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    throw InputError(std::string(option) + " " + text + ": expected METRIC=VALUE");
  }
  CheckBound b;
  b.metric = text.substr(0, eq);
  b.is_max = is_max;
  b.limit_text = text.substr(eq + 1);
  const std::optional<Quantity> q = parse_quantity(b.limit_text);
  if (!q) {
    throw InputError(std::string(option) + " " + text + ": '" + b.limit_text +
                     "' is not a number (units: ns us ms s, B KB MB GB, %)");
  }
  b.limit = *q;
  return b;
}

const std::vector<std::string>& check_metrics() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& [name, getter] : getters()) out.push_back(name);
    return out;
  }();
  return names;
}

MetricValue metric_value(const RunData& run, const std::string& metric) {
  if (metric.starts_with("op:")) return op_metric(run, metric);
  auto it = getters().find(metric);
  if (it == getters().end()) {
    std::string valid;
    for (const std::string& m : check_metrics()) valid += (valid.empty() ? "" : ", ") + m;
    throw InputError("unknown metric '" + metric + "' (known: " + valid + ", op:<name>:<field>)");
  }
  return it->second(run);
}

std::vector<CheckResult> run_checks(const RunData& run, const std::vector<CheckBound>& bounds) {
  std::vector<CheckResult> results;
  for (const CheckBound& b : bounds) {
    CheckResult r;
    r.bound = b;
    const std::string what = std::string(b.is_max ? "--max " : "--min ") + b.metric + "=" + b.limit_text;
    try {
      r.actual = metric_value(run, b.metric);
    } catch (const AbsentOp& e) {
      r.actual = {0.0, b.limit.unit};
      r.passed = false;
      r.message = b.metric + ": " + e.what() + " (nothing to compare with " + b.limit_text + ")";
      results.push_back(std::move(r));
      continue;
    } catch (const InputError& e) {
      throw InputError(what + ": " + e.what());
    }
    if (b.limit.unit != Unit::kNone && b.limit.unit != r.actual.unit) {
      throw InputError(what + ": " + b.metric + " is " + unit_name(r.actual.unit) + ", not " +
                       unit_name(b.limit.unit));
    }
    r.passed = b.is_max ? r.actual.value <= b.limit.value : r.actual.value >= b.limit.value;
    const char* op = r.passed ? (b.is_max ? "<=" : ">=") : (b.is_max ? ">" : "<");
    r.message = b.metric + " " + format_quantity(r.actual.value, r.actual.unit) + " " + op + " " + b.limit_text;
    results.push_back(std::move(r));
  }
  return results;
}

std::string format_quantity(double value, Unit unit) {
  switch (unit) {
    case Unit::kTime: return format_time_us(value / 1000.0);
    case Unit::kPercent: return trimmed(value, 2) + "%";
    case Unit::kBytes: {
      const char* names[] = {"B", "KB", "MB", "GB", "TB"};
      size_t i = 0;
      while (std::fabs(value) >= 1024.0 && i + 1 < std::size(names)) {
        value /= 1024.0;
        ++i;
      }
      return trimmed(value, 2) + names[i];
    }
    case Unit::kNone: return trimmed(value, 3);
  }
  return "";
}

std::string render_checks(const RunData& run, const std::vector<CheckResult>& results,
                          const std::string& format) {
  size_t failed = 0;
  for (const CheckResult& r : results) failed += r.passed ? 0 : 1;
  const std::string verdict = failed == 0 ? "all " + std::to_string(results.size()) + " checks passed"
                                          : std::to_string(failed) + " of " + std::to_string(results.size()) +
                                                " checks failed";
  if (format == "json") {
    nlohmann::ordered_json j;
    j["schema"] = "torchprof.check/1";
    j["source"] = run.source;
    j["passed"] = failed == 0;
    j["checks"] = nlohmann::ordered_json::array();
    for (const CheckResult& r : results) {
      j["checks"].push_back({{"metric", r.bound.metric}, {"bound", r.bound.is_max ? "max" : "min"},
                             {"limit", r.bound.limit.value}, {"limit_text", r.bound.limit_text},
                             {"value", r.actual.value}, {"passed", r.passed}, {"message", r.message}});
    }
    return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  }
  if (format == "markdown") {
    std::string out = "### torchprof check: `" + md_cell(run.source) + "`\n\n**" + verdict + "**\n\n";
    out += "| Check | Value | Limit | Result |\n|:---|---:|---:|:---|\n";
    for (const CheckResult& r : results) {
      out += "| `" + md_cell(r.bound.metric) + "` | " + format_quantity(r.actual.value, r.actual.unit) + " | " +
             (r.bound.is_max ? "max " : "min ") + md_cell(r.bound.limit_text) + " | " +
             (r.passed ? "pass" : "**FAIL**") + " |\n";
    }
    return out;
  }
  if (format != "table") throw InputError("unknown format '" + format + "' (valid: table, markdown, json)");
  std::string out;
  for (const CheckResult& r : results) out += (r.passed ? "pass  " : "FAIL  ") + r.message + "\n";
  return out + "torchprof check: " + verdict + "\n";
}

std::string render_run_markdown(const RunData& run, const TableOptions& options) {
  std::string command;
  for (const std::string& arg : run.command) command += (command.empty() ? "" : " ") + arg;
  std::string out = "### torchprof: `" + md_cell(command.empty() ? run.source : command) + "`\n\n";
  out += "Exit code " + std::to_string(run.exit_code) + ", " + std::to_string(run.events) + " events";
  if (run.dropped_events > 0) out += ", " + std::to_string(run.dropped_events) + " lost";
  if (!run.step_dur_ns.empty()) {
    out += ", " + std::to_string(run.step_dur_ns.size()) + " recorded steps (avg " +
           format_time_us(mean_ns(run.step_dur_ns) / 1000.0) + ")";
  }
  out += ". Results in `" + md_cell(run.source) + "`.\n\n";
  return out + render_markdown(make_table_rows(run.ops, run.has_gpu, options)) + "\n";
}

std::string append_github_step_summary(const std::string& markdown) {
  const char* path = std::getenv("GITHUB_STEP_SUMMARY");
  if (path == nullptr || *path == '\0') return "";
  std::ofstream file(path, std::ios::binary | std::ios::app);
  file << markdown << "\n";
  file.close();
  if (!file) return std::string("cannot append to ") + path + ": " + std::strerror(errno);
  return "";
}

std::string append_run_step_summary(const std::string& run_dir, const std::string& sort, int row_limit) {
  constexpr int kMaxRows = 20;  // a job summary is read at a glance
  const char* path = std::getenv("GITHUB_STEP_SUMMARY");
  if (path == nullptr || *path == '\0') return "";
  try {
    const RunData run = load_run(run_dir);
    const int rows = row_limit > 0 ? std::min(row_limit, kMaxRows) : kMaxRows;
    return append_github_step_summary(render_run_markdown(run, {sort, rows}));
  } catch (const InputError& e) {
    return std::string("no job summary: ") + e.what();
  }
}

}  // namespace torchprof
