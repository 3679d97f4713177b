#include "formats/rank_table.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "formats/table.h"

namespace torchprof {

namespace {

using Json = nlohmann::ordered_json;

struct Grid {
  std::vector<std::string> headers;
  std::vector<bool> left;  // left-aligned columns (the rest are right-aligned)
  std::vector<std::vector<std::string>> rows;
};

std::string time_text(int64_t ns) { return format_time_us(static_cast<double>(ns) / 1000.0); }

std::string us_text(int64_t ns) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ns) / 1000.0);
  return buf;
}

std::string noun(const RankReport& r) { return r.by_rank ? "rank" : "worker"; }

bool by_waits(const RankReport& r) {
  return r.straggler_by == "collective waits" &&
         std::all_of(r.rows.begin(), r.rows.end(), [](const RankStepRow& row) { return row.collectives.has_value(); });
}

std::string flag_text(const RankStepRow& row) {
  if (row.slowest && row.straggler) return "<< slowest, straggler";
  if (row.slowest) return "<< slowest";
  if (row.straggler) return "<< straggler";
  return "";
}

std::string pct_text(double pct) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g%%", pct);
  return buf;
}

Grid rank_grid(const RankReport& r) {
  Grid g{{"Rank", "Worker", "Steps", "Mean", "Median", "Min", "Max", "vs fastest", "vs median",
          "Slowest in", "Flag"},
         {false, false, false, false, false, false, false, false, false, false, true},
         {}};
  const bool waits = by_waits(r);
  if (waits) {
    const std::vector<std::string> more = {"In collectives", "Waited", "Late per step", "Others waited on it", "Last in"};
    g.headers.insert(g.headers.end() - 1, more.begin(), more.end());
    g.left.insert(g.left.end() - 1, more.size(), false);
  }
  for (const RankStepRow& row : r.rows) {
    std::vector<std::string> cells = {row.rank ? std::to_string(*row.rank) : "-", row.worker, std::to_string(row.steps),
                                      time_text(row.mean_ns), time_text(row.median_ns), time_text(row.min_ns),
                                      time_text(row.max_ns), format_ratio(row.vs_fastest), format_ratio(row.vs_median),
                                      std::to_string(row.slowest_steps) + " steps"};
    if (waits) {
      const RankCollectives& c = *row.collectives;
      cells.push_back(time_text(c.time_ns));
      cells.push_back(time_text(c.wait_ns));
      cells.push_back(time_text(c.late_ns / static_cast<int64_t>(std::max<uint64_t>(1, row.steps))));
      cells.push_back(time_text(c.waited_on_ns));
      cells.push_back(std::to_string(c.last_arrivals) + " of " + std::to_string(row.collectives->matched));
    }
    cells.push_back(flag_text(row));
    g.rows.push_back(std::move(cells));
  }
  return g;
}

Grid step_grid(const RankReport& r, int step_rows) {
  Grid g{{"Step", "Rows", "Fastest", "Median", "Slowest", "Slowest " + noun(r), "vs median"},
         {false, false, false, false, false, false, false},
         {}};
  for (const StepSpread& s : r.steps) {
    if (step_rows > 0 && g.rows.size() >= static_cast<size_t>(step_rows)) break;
    g.rows.push_back({std::to_string(s.index), std::to_string(s.rows), time_text(s.fastest_ns),
                      time_text(s.median_ns), time_text(s.slowest_ns), r.rows[s.slowest_row].label,
                      format_ratio(s.vs_median)});
  }
  g.headers[1] = r.by_rank ? "Ranks" : "Workers";
  return g;
}

void pad(std::string& out, const std::string& text, size_t width, bool left) {
  const size_t len = utf8_length(text);
  if (!left) out.append(width > len ? width - len : 0, ' ');
  out += text;
  if (left) out.append(width > len ? width - len : 0, ' ');
}

std::string render_grid(const Grid& g) {
  std::vector<size_t> widths;
  for (size_t c = 0; c < g.headers.size(); ++c) {
    size_t w = utf8_length(g.headers[c]);
    for (const auto& row : g.rows) w = std::max(w, utf8_length(row[c]));
    widths.push_back(w);
  }
  std::string rule;
  for (size_t w : widths) rule += std::string(w, '-') + "  ";
  rule += '\n';
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < cells.size(); ++c) {
      pad(out, cells[c], widths[c], g.left[c]);
      out += "  ";
    }
    return out + "\n";
  };
  std::string out = rule + line(g.headers) + rule;
  for (const auto& row : g.rows) out += line(row);
  return out + rule;
}

std::string markdown_grid(const Grid& g) {
  std::string out = "|";
  std::string align = "|";
  for (size_t c = 0; c < g.headers.size(); ++c) {
    out += " " + g.headers[c] + " |";
    align += g.left[c] ? ":---|" : "---:|";
  }
  out += "\n" + align + "\n";
  for (const auto& row : g.rows) {
    out += "|";
    for (const std::string& cell : row) {
      std::string escaped;
      for (char ch : cell) escaped += ch == '|' ? std::string("\\|") : std::string(1, ch);
      out += " " + escaped + " |";
    }
    out += "\n";
  }
  return out;
}

std::string title(const RankReport& r) {
  const std::string n = noun(r);
  if (by_waits(r)) {
    return "Step time per " + n + " (" + std::to_string(r.rows.size()) + " " + n + (r.rows.size() == 1 ? "" : "s") +
           ", recorded steps; straggler: the " + n + " the others wait for in collectives (" +
           r.rows.front().collectives->source + "), later than the median " + n + " by more than " +
           pct_text(r.threshold_pct) + " of the median step per step)\n";
  }
  return "Step time per " + n + " (" + std::to_string(r.rows.size()) + " " + n + (r.rows.size() == 1 ? "" : "s") +
         ", recorded steps; straggler: mean more than " + pct_text(r.threshold_pct) + " above the median " + n +
         "'s)\n";
}

// The verdict under the table: who is slowest, by how much, and who the stragglers are.
std::string verdict(const RankReport& r) {
  const std::string n = noun(r);
  std::string out;
  std::vector<std::string> stragglers;
  for (const RankStepRow& row : r.rows) {
    if (row.straggler) stragglers.push_back(row.label);
    if (!row.slowest) continue;
    out += "Slowest " + n + ": " + row.label + (r.by_rank ? " (" + row.worker + ")" : "") + ", mean step " +
           time_text(row.mean_ns) + ", " + format_ratio(row.vs_fastest) + " the fastest " + n + ", " +
           format_ratio(row.vs_median) + " the median\n";
  }
  if (r.rows.size() < 2) return out;
  if (out.empty()) out += "All " + n + "s have the same mean step time\n";
  if (by_waits(r)) {
    int64_t total = 0;
    for (const RankStepRow& row : r.rows) total += row.collectives->waited_on_ns;
    if (stragglers.empty()) {
      return out + "No straggler: no " + n + " came to the collectives later than the median " + n + " by more than " +
             pct_text(r.threshold_pct) + " of the median step (" + time_text(r.median_mean_ns) + ") per step\n";
    }
    for (const RankStepRow& row : r.rows) {
      if (!row.straggler) continue;
      const int64_t late = row.collectives->late_ns / static_cast<int64_t>(std::max<uint64_t>(1, row.steps));
      out += "Straggler: " + n + " " + row.label + (r.by_rank ? " (" + row.worker + ")" : "") + ": " +
             time_text(late) + " per step later than the median " + n + " at the collectives; the others waited " +
             time_text(row.collectives->waited_on_ns) + " on it (" +
             std::to_string(static_cast<int>(100.0 * static_cast<double>(row.collectives->waited_on_ns) /
                                             static_cast<double>(std::max<int64_t>(1, total)) + 0.5)) +
             "% of all waits); it arrived last in " + std::to_string(row.collectives->last_arrivals) + " of " +
             std::to_string(row.collectives->matched) + "\n";
    }
    return out;
  }
  if (stragglers.empty()) {
    out += "No straggler: no " + n + "'s mean step is more than " + pct_text(r.threshold_pct) +
           " above the median (" + time_text(r.median_mean_ns) + ")\n";
  } else {
    std::string names;
    for (const std::string& s : stragglers) names += (names.empty() ? "" : ", ") + s;
    out += "Stragglers (mean step more than " + pct_text(r.threshold_pct) + " above the median " +
           time_text(r.median_mean_ns) + "): " + names + "\n";
  }
  return out;
}

std::string step_tail(const RankReport& r, int step_rows) {
  if (step_rows <= 0 || r.steps.size() <= static_cast<size_t>(step_rows)) return "";
  return std::to_string(r.steps.size() - static_cast<size_t>(step_rows)) + " more steps in summary.json\n";
}

}  // namespace

std::string format_ratio(double ratio) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2fx", ratio);
  return buf;
}

std::string render_rank_text(const RankReport& r, int step_rows) {
  if (r.rows.empty()) return "Step time per rank: no recorded steps in any input\n";
  std::string out = title(r) + render_grid(rank_grid(r)) + verdict(r);
  if (r.steps.empty()) return out;
  out += "\nSlowest " + noun(r) + " per step\n" + render_grid(step_grid(r, step_rows)) + step_tail(r, step_rows);
  return out;
}

std::string render_rank_markdown(const RankReport& r, int step_rows) {
  if (r.rows.empty()) return "Step time per rank: no recorded steps in any input\n";
  std::string out = "**" + title(r).substr(0, title(r).size() - 1) + "**\n\n" + markdown_grid(rank_grid(r)) +
                    "\n" + verdict(r);
  if (r.steps.empty()) return out;
  out += "\n**Slowest " + noun(r) + " per step**\n\n" + markdown_grid(step_grid(r, step_rows)) +
         step_tail(r, step_rows);
  return out;
}

std::string render_rank_csv(const RankReport& r) {
  std::string out =
      "Rank,Worker,Host,Input,Steps,Mean (us),Median (us),Min (us),Max (us),vs fastest,vs median,"
      "Slowest steps,Slowest,Straggler\n";
  for (const RankStepRow& row : r.rows) {
    char ratios[64];
    std::snprintf(ratios, sizeof ratios, "%.4f,%.4f", row.vs_fastest, row.vs_median);
    out += (row.rank ? std::to_string(*row.rank) : "") + "," + row.worker + "," + row.host + "," +
           std::to_string(row.input) + "," + std::to_string(row.steps) + "," + us_text(row.mean_ns) + "," +
           us_text(row.median_ns) + "," + us_text(row.min_ns) + "," + us_text(row.max_ns) + "," + ratios + "," +
           std::to_string(row.slowest_steps) + "," + (row.slowest ? "1" : "0") + "," + (row.straggler ? "1" : "0") +
           "\n";
  }
  return out;
}

static Json collectives_json(const RankStepRow& row) {
  if (!row.collectives) return nullptr;
  const RankCollectives& c = *row.collectives;
  Json names = Json::array();
  for (const CollectiveStat& s : c.by_name) {
    names.push_back({{"name", s.name},
                     {"calls", s.calls},
                     {"in_elems", s.in_elems >= 0 ? Json(s.in_elems) : Json(nullptr)},
                     {"time_ns", s.time_ns},
                     {"wait_ns", s.wait_ns}});
  }
  return {{"source", c.source},
          {"calls", c.calls},
          {"matched", c.matched},
          {"time_ns", c.time_ns},
          {"wait_ns", c.wait_ns},
          {"waited_on_ns", c.waited_on_ns},
          {"last_arrivals", c.last_arrivals},
          {"late_ns", c.late_ns},
          {"clock_offset_ns", c.clock_offset_ns},
          {"by_name", std::move(names)}};
}

Json rank_report_json(const RankReport& r) {
  Json rows = Json::array();
  for (const RankStepRow& row : r.rows) {
    rows.push_back({{"rank", row.rank ? Json(*row.rank) : Json(nullptr)},
                    {"label", row.label},
                    {"worker", row.worker},
                    {"host", row.host},
                    {"input", row.input},
                    {"pids", row.pids},
                    {"steps", row.steps},
                    {"total_ns", row.total_ns},
                    {"mean_ns", row.mean_ns},
                    {"median_ns", row.median_ns},
                    {"min_ns", row.min_ns},
                    {"max_ns", row.max_ns},
                    {"vs_fastest", row.vs_fastest},
                    {"vs_median", row.vs_median},
                    {"slowest_steps", row.slowest_steps},
                    {"slowest", row.slowest},
                    {"straggler", row.straggler},
                    {"collectives", collectives_json(row)}});
  }
  Json steps = Json::array();
  for (const StepSpread& s : r.steps) {
    Json durations = Json::array();
    for (const auto& d : s.dur_ns) durations.push_back(d ? Json(*d) : Json(nullptr));
    const RankStepRow& slow = r.rows[s.slowest_row];
    steps.push_back({{"index", s.index},
                     {"rows", s.rows},
                     {"fastest_ns", s.fastest_ns},
                     {"median_ns", s.median_ns},
                     {"slowest_ns", s.slowest_ns},
                     {"slowest", slow.label},
                     {"slowest_rank", slow.rank ? Json(*slow.rank) : Json(nullptr)},
                     {"vs_median", s.vs_median},
                     {"dur_ns", std::move(durations)}});
  }
  Json slowest = Json::array();
  Json stragglers = Json::array();
  for (const RankStepRow& row : r.rows) {
    if (row.slowest) slowest.push_back(row.label);
    if (row.straggler) stragglers.push_back(row.label);
  }
  return {{"by", noun(r)},
          {"straggler_by", r.straggler_by},
          {"threshold_pct", r.threshold_pct},
          {"median_mean_ns", r.median_mean_ns},
          {"slowest", std::move(slowest)},
          {"stragglers", std::move(stragglers)},
          {"rows", std::move(rows)},
          {"steps", std::move(steps)},
          {"warnings", r.warnings}};
}

}  // namespace torchprof
