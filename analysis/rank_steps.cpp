#include "analysis/rank_steps.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "analysis/analysis.h"

namespace torchprof {

namespace {

constexpr size_t kMaxListedRanks = 10;

// Ranked processes group by (rank, input); the others by (input, worker). The leading
// flag puts ranked rows first.
using GroupKey = std::tuple<int, int, int, std::string>;

GroupKey group_key(const Process& p) {
  if (p.rank) return {0, *p.rank, p.input, std::string()};
  return {1, p.input, 0, p.worker};
}

double ratio(int64_t value, int64_t reference) {
  return reference > 0 ? static_cast<double>(value) / static_cast<double>(reference) : 0.0;
}

// A row of processes: its step durations and, per step index, the longest of them.
struct RowSteps {
  RankStepRow row;
  std::vector<int64_t> durations;
  std::map<int, int64_t> by_index;
};

bool fill_row(const std::vector<const Process*>& procs, RowSteps& out) {
  bool marked = false;
  for (const Process* p : procs) {
    for (const Step& s : p->steps) marked = marked || (s.marker && recorded(s.action));
  }
  for (const Process* p : procs) {
    bool used = false;
    for (const Step& s : p->steps) {
      if (!recorded(s.action) || (marked && !s.marker)) continue;
      out.durations.push_back(s.dur_ns);
      int64_t& longest = out.by_index.try_emplace(s.index, s.dur_ns).first->second;
      longest = std::max(longest, s.dur_ns);
      used = true;
    }
    if (!used) continue;
    if (out.row.worker.empty()) {
      out.row.worker = p->worker;
      out.row.host = p->host;
    }
    out.row.pids.push_back(p->pid);
  }
  if (out.durations.empty()) return false;
  RankStepRow& r = out.row;
  r.rank = procs.front()->rank;
  r.input = procs.front()->input;
  r.steps = out.durations.size();
  for (int64_t d : out.durations) r.total_ns += d;
  r.mean_ns = r.total_ns / static_cast<int64_t>(r.steps);
  r.median_ns = median_ns(out.durations);
  r.min_ns = *std::min_element(out.durations.begin(), out.durations.end());
  r.max_ns = *std::max_element(out.durations.begin(), out.durations.end());
  return true;
}

void set_labels(std::vector<RowSteps>& rows) {
  std::map<int, int> per_rank;
  for (const RowSteps& r : rows) {
    if (r.row.rank) ++per_rank[*r.row.rank];
  }
  for (RowSteps& r : rows) {
    RankStepRow& row = r.row;
    if (!row.rank) {
      row.label = row.worker;
    } else {
      row.label = std::to_string(*row.rank);
      if (per_rank[*row.rank] > 1) row.label += "@" + row.worker;
    }
  }
}

void judge_rows(RankReport& report) {
  std::vector<RankStepRow>& rows = report.rows;
  std::vector<int64_t> means;
  for (const RankStepRow& r : rows) means.push_back(r.mean_ns);
  if (means.empty()) return;
  report.median_mean_ns = median_ns(means);
  const int64_t fastest = *std::min_element(means.begin(), means.end());
  const int64_t slowest = *std::max_element(means.begin(), means.end());
  const double limit = static_cast<double>(report.median_mean_ns) * (1.0 + report.threshold_pct / 100.0);
  for (RankStepRow& r : rows) {
    r.vs_fastest = ratio(r.mean_ns, fastest);
    r.vs_median = ratio(r.mean_ns, report.median_mean_ns);
    // One row, or all alike: nobody to call slow.
    if (rows.size() < 2 || slowest == fastest) continue;
    r.slowest = r.mean_ns == slowest;
    r.straggler = static_cast<double>(r.mean_ns) > limit;
  }
}

// Where the rows have collectives in common, the straggler is the rank the others wait for.
void judge_by_waits(std::vector<RankCollectives> collectives, RankReport& report) {
  if (collectives.size() != report.rows.size()) return;
  uint64_t matched = 0;
  for (const RankCollectives& c : collectives) matched += c.matched;
  if (matched == 0) return;
  report.straggler_by = "collective waits";
  for (size_t i = 0; i < report.rows.size(); ++i) {
    RankStepRow& row = report.rows[i];
    const RankCollectives& c = collectives[i];
    // Late after the median rank: at least half the ranks waited that long for it.
    const double per_step = static_cast<double>(c.late_ns) / static_cast<double>(std::max<uint64_t>(1, row.steps));
    row.straggler = per_step > static_cast<double>(report.median_mean_ns) * report.threshold_pct / 100.0;
    row.collectives = std::move(collectives[i]);
  }
}

std::vector<StepSpread> spread_steps(std::vector<RowSteps>& rows) {
  std::set<int> indices;
  for (const RowSteps& r : rows) {
    for (const auto& [index, dur] : r.by_index) indices.insert(index);
  }
  std::vector<StepSpread> out;
  for (int index : indices) {
    StepSpread s;
    s.index = index;
    std::vector<int64_t> values;
    for (size_t i = 0; i < rows.size(); ++i) {
      auto it = rows[i].by_index.find(index);
      s.dur_ns.push_back(it == rows[i].by_index.end() ? std::nullopt : std::optional<int64_t>(it->second));
      if (it == rows[i].by_index.end()) continue;
      if (values.empty() || it->second > s.slowest_ns) {
        s.slowest_ns = it->second;
        s.slowest_row = i;
      }
      values.push_back(it->second);
    }
    if (values.size() < 2) continue;
    s.rows = values.size();
    s.fastest_ns = *std::min_element(values.begin(), values.end());
    s.median_ns = median_ns(values);
    s.vs_median = ratio(s.slowest_ns, s.median_ns);
    if (s.slowest_ns > s.fastest_ns) ++rows[s.slowest_row].row.slowest_steps;
    out.push_back(std::move(s));
  }
  return out;
}

std::string input_name(const Run& run, int input) {
  if (input >= 0 && static_cast<size_t>(input) < run.inputs.size()) return run.inputs[input].label;
  return "input " + std::to_string(input);
}

std::string join_ints(const std::vector<int>& values) {
  std::string out;
  for (size_t i = 0; i < values.size() && i < kMaxListedRanks; ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  if (values.size() > kMaxListedRanks) out += ", … (" + std::to_string(values.size()) + " in all)";
  return out;
}

// What does not add up about the ranks: repeated ranks, world sizes that disagree,
// ranks of the world that have no row, rows without a rank among ranked ones.
void check_ranks(const Run& run, RankReport& report) {
  std::map<int, std::vector<int>> inputs_of_rank;
  std::set<int> world_sizes;
  for (const Process& p : run.processes) {
    if (p.rank && p.world_size) world_sizes.insert(*p.world_size);
  }
  size_t unranked = 0;
  for (const RankStepRow& r : report.rows) {
    if (r.rank) {
      inputs_of_rank[*r.rank].push_back(r.input);
    } else {
      ++unranked;
    }
  }
  for (const auto& [rank, inputs] : inputs_of_rank) {
    if (inputs.size() < 2) continue;
    std::string names;
    for (int in : inputs) names += (names.empty() ? "" : ", ") + input_name(run, in);
    report.warnings.push_back("rank " + std::to_string(rank) + " is in " + std::to_string(inputs.size()) +
                              " inputs (" + names + "); each keeps a row of its own");
  }
  if (world_sizes.size() > 1) {
    report.warnings.push_back("the processes disagree on the world size (" +
                              join_ints({world_sizes.begin(), world_sizes.end()}) + ")");
  } else if (world_sizes.size() == 1) {
    const int world = *world_sizes.begin();
    std::vector<int> missing;
    for (int rank = 0; rank < world; ++rank) {
      if (!inputs_of_rank.count(rank)) missing.push_back(rank);
    }
    if (!missing.empty()) {
      report.warnings.push_back("no recorded steps from rank" + std::string(missing.size() > 1 ? "s " : " ") +
                                join_ints(missing) + " of world size " + std::to_string(world));
    }
  }
  if (unranked > 0 && !inputs_of_rank.empty()) {
    report.warnings.push_back(std::to_string(unranked) +
                              " worker(s) have no rank (no RANK, SLURM_PROCID or OMPI_COMM_WORLD_RANK) "
                              "and are listed by worker name");
  }
}

}  // namespace

int64_t median_ns(std::vector<int64_t> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  const int64_t upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const int64_t lower = *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
  return lower + (upper - lower) / 2;
}

RankReport compute_rank_report(const Run& run, double straggler_threshold_pct) {
  RankReport report;
  report.threshold_pct = straggler_threshold_pct;
  std::map<GroupKey, std::vector<const Process*>> groups;
  for (const Process& p : run.processes) groups[group_key(p)].push_back(&p);
  std::vector<RowSteps> rows;
  std::vector<std::vector<const Process*>> row_procs;
  for (const auto& [key, procs] : groups) {
    RowSteps r;
    if (!fill_row(procs, r)) continue;
    rows.push_back(std::move(r));
    row_procs.push_back(procs);
  }
  set_labels(rows);
  report.steps = spread_steps(rows);
  for (RowSteps& r : rows) report.rows.push_back(std::move(r.row));
  report.by_rank = !report.rows.empty() &&
                   std::all_of(report.rows.begin(), report.rows.end(), [](const RankStepRow& r) { return r.rank; });
  judge_rows(report);
  judge_by_waits(compute_rank_collectives(row_procs), report);
  check_ranks(run, report);
  return report;
}

}  // namespace torchprof
