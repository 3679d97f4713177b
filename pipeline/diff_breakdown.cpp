#include "pipeline/diff_breakdown.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "formats/table.h"
#include "pipeline/diff.h"

namespace torchprof {

namespace {

struct Row {
  std::string label;
  int64_t before = 0;
  int64_t after = 0;
};

std::vector<Row> rows_of(const BreakdownAverage& b, const BreakdownAverage& a) {
  std::vector<Row> rows;
  for (int r = 0; r < kBreakdownParts; ++r) rows.push_back({breakdown_part_label(r), b.parts[r], a.parts[r]});
  rows.push_back({"Step", b.dur_ns, a.dur_ns});
  return rows;
}

std::string share(int64_t part, int64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return buf;
}

std::string delta_pct(int64_t before, int64_t after) {
  if (before == 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.2f%%", 100.0 * static_cast<double>(after - before) / static_cast<double>(before));
  return buf;
}

std::vector<std::string> cells(const Row& r, const BreakdownAverage& b, const BreakdownAverage& a) {
  return {r.label,
          format_time_us(static_cast<double>(r.before) / 1000.0),
          share(r.before, b.dur_ns),
          format_time_us(static_cast<double>(r.after) / 1000.0),
          share(r.after, a.dur_ns),
          format_signed_time_ns(static_cast<double>(r.after - r.before)),
          delta_pct(r.before, r.after)};
}

const std::vector<std::string> kHeader = {"Part", "Before", "Share", "After", "Share", "Delta", "Delta %"};

}  // namespace

BreakdownAverage parse_breakdown(const nlohmann::json& summary) {
  BreakdownAverage out;
  auto overview = summary.find("overview");
  if (overview == summary.end() || !overview->is_object()) return out;
  auto breakdown = overview->find("breakdown");
  if (breakdown == overview->end() || !breakdown->is_object()) return out;
  auto avg = breakdown->find("avg");
  auto steps = overview->find("steps");
  if (avg == breakdown->end() || !avg->is_object() || steps == overview->end() || !steps->is_number()) return out;
  out.steps = steps->get<uint64_t>();
  if (out.steps == 0) return out;
  out.dur_ns = avg->value("dur_ns", int64_t{0});
  for (int r = 0; r < kBreakdownParts; ++r) out.parts[r] = avg->value(std::string(breakdown_part_key(r)) + "_ns", int64_t{0});
  out.present = true;
  return out;
}

std::string render_breakdown_text(const BreakdownAverage& b, const BreakdownAverage& a) {
  if (!b.present || !a.present) return {};
  std::vector<std::vector<std::string>> table = {kHeader};
  for (const Row& r : rows_of(b, a)) table.push_back(cells(r, b, a));
  std::vector<size_t> widths(kHeader.size(), 0);
  for (const auto& row : table) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], utf8_length(row[c]));
  }
  std::string out = "\nStep time breakdown, average per step (before: " + std::to_string(b.steps) +
                    " steps, after: " + std::to_string(a.steps) + " steps)\n";
  for (const auto& row : table) {
    for (size_t c = 0; c < row.size(); ++c) {
      const size_t pad = widths[c] - utf8_length(row[c]);
      out += c == 0 ? row[c] + std::string(pad, ' ') : std::string(pad, ' ') + row[c];
      out += "  ";
    }
    out += "\n";
  }
  return out;
}

std::string render_breakdown_markdown(const BreakdownAverage& b, const BreakdownAverage& a) {
  if (!b.present || !a.present) return {};
  std::string out = "\n#### Step time breakdown, average per step\n\n| Part | Before | Share | After | Share | Delta | Delta % |\n";
  out += "|:---|---:|---:|---:|---:|---:|---:|\n";
  for (const Row& r : rows_of(b, a)) {
    out += "|";
    for (const std::string& c : cells(r, b, a)) out += " " + c + " |";
    out += "\n";
  }
  return out;
}

nlohmann::ordered_json breakdown_diff_json(const BreakdownAverage& b, const BreakdownAverage& a) {
  if (!b.present || !a.present) return nullptr;
  auto side = [](const BreakdownAverage& x) {
    nlohmann::ordered_json j = {{"steps", x.steps}, {"dur_ns", x.dur_ns}};
    for (int r = 0; r < kBreakdownParts; ++r) j[std::string(breakdown_part_key(r)) + "_ns"] = x.parts[r];
    return j;
  };
  return {{"before", side(b)}, {"after", side(a)}};
}

}  // namespace torchprof
