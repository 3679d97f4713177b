// The step time breakdown of two runs side by side, for `torchprof diff`: each run's
// average per step from its summary.json (overview.breakdown, analysis/overview.h).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "analysis/overview.h"

namespace torchprof {

struct BreakdownAverage {
  bool present = false;   // the summary had an overview with steps
  uint64_t steps = 0;
  int64_t dur_ns = 0;     // average step time
  std::array<int64_t, kBreakdownParts> parts{};
};

// From a summary.json document; absent (present = false) for older summaries.
BreakdownAverage parse_breakdown(const nlohmann::json& summary);

// Empty when either side lacks a breakdown.
std::string render_breakdown_text(const BreakdownAverage& before, const BreakdownAverage& after);
std::string render_breakdown_markdown(const BreakdownAverage& before, const BreakdownAverage& after);
// null when either side lacks a breakdown.
nlohmann::ordered_json breakdown_diff_json(const BreakdownAverage& before, const BreakdownAverage& after);

}  // namespace torchprof
