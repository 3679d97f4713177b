#include "formats/html_report.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/engine.h"
#include "process_capture.h"

namespace torchprof {

namespace {

// `n` ranges one after another on one thread; range i lasts (i % 5 + 1) * 100 ns, so
// durations repeat and the timeline's cut falls among equally long ranges. The engine
// keeps the `kept` longest slices (Run::timeline).
Run ranges(int n, size_t kept) {
  test::Slots s;
  s.str(1, "r");
  uint64_t t = 0;
  for (int i = 0; i < n; ++i) {
    s.push(1, t).pop(t + static_cast<uint64_t>(i % 5 + 1) * 100);
    t += 1000;
  }
  const std::string path = test::Captures().process(7).frame(7, s).save("html_ranges.tprof");
  EngineOutputs outputs;
  outputs.timeline = kept;
  return analyse_capture_file(path, AnalysisOptions{}, outputs);
}

struct Kept {
  int64_t start;
  int64_t dur;
  bool operator<(const Kept& o) const { return start < o.start; }
};

std::vector<Kept> timeline(const Run& run, size_t max_events, uint64_t& omitted) {
  TableRows rows = make_table_rows(run.ops, run.has_gpu, {"", 100});
  HtmlReportOptions options;
  options.max_events = max_events;
  const nlohmann::json data = nlohmann::json::parse(render_html_report_data(run, rows, options));
  omitted = data["omitted_slices"].get<uint64_t>();
  std::vector<Kept> kept;
  const auto& s = data["slices"];
  for (size_t i = 0; i + 5 < s.size(); i += 6) kept.push_back({s[i + 4].get<int64_t>(), s[i + 5].get<int64_t>()});
  std::sort(kept.begin(), kept.end());
  return kept;
}

}  // namespace

TEST_CASE("report.html: the timeline keeps the longest events, the earliest among equals") {
  const int n = 5000;
  const Run run = ranges(n, n);
  for (size_t limit : {size_t{12}, size_t{1001}, size_t{3}}) {
    CAPTURE(limit);
    uint64_t omitted = 0;
    const std::vector<Kept> kept = timeline(run, limit, omitted);
    REQUIRE(kept.size() == limit);
    CHECK(omitted == n - limit);
    // The engine keeping only `limit` slices keeps the same ones, and counts the rest.
    uint64_t omitted_by_engine = 0;
    const std::vector<Kept> engine_kept = timeline(ranges(n, limit), n, omitted_by_engine);
    REQUIRE(engine_kept.size() == limit);
    CHECK(omitted_by_engine == n - limit);
    // Ranges of 500 ns are i % 5 == 4 (1000 of them); below them, 400 ns (i % 5 == 3).
    // The longest `limit`, ties to the earliest: range i starts at i * 1000 ns.
    std::vector<Kept> want;
    for (int64_t dur = 500; dur > 0 && want.size() < limit; dur -= 100) {
      for (int i = 0; i < n && want.size() < limit; ++i) {
        if ((i % 5 + 1) * 100 == dur) want.push_back({int64_t{i} * 1000, dur});
      }
    }
    std::sort(want.begin(), want.end());
    REQUIRE(want.size() == limit);
    for (size_t k = 0; k < limit; ++k) {
      CHECK(kept[k].start == want[k].start);
      CHECK(kept[k].dur == want[k].dur);
      CHECK(engine_kept[k].start == want[k].start);
      CHECK(engine_kept[k].dur == want[k].dur);
    }
  }
  uint64_t omitted = 1;
  CHECK(timeline(run, n, omitted).size() == n);  // all fit: none dropped
  CHECK(omitted == 0);
  CHECK(timeline(run, 0, omitted).empty());
  CHECK(omitted == n);
}

}  // namespace torchprof
