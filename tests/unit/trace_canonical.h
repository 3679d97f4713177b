// A Kineto trace in a form that two writers of the same events agree on: the engine
// writes events as they complete, so their order, the time base and the numbering of
// External ids depend on the order the capture was read in, not on what the trace says.
// The canonical form has every ts in absolute nanoseconds, the events sorted, External
// ids renumbered in that order (and Ev Idx with them), no baseTimeNanoseconds and no
// traceName.
#pragma once

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

namespace torchprof::test {

inline std::string canonical_trace(const std::string& text) {
  nlohmann::ordered_json d = nlohmann::ordered_json::parse(text);
  const int64_t base = d.value("baseTimeNanoseconds", int64_t{0});
  auto& events = d["traceEvents"];
  for (auto& e : events) {
    if (e.contains("ts")) e["ts"] = static_cast<int64_t>(std::llround(e["ts"].get<double>() * 1000.0)) + base;
  }
  auto key = [](const nlohmann::ordered_json& e) {
    auto s = [&](const char* k) { return e.contains(k) ? e[k].dump() : std::string(); };
    return std::make_tuple(s("ph"), s("pid"), s("tid"), e.value("ts", int64_t{0}), s("name"), s("dur"), s("cat"),
                           s("id"), e.dump());
  };
  std::vector<nlohmann::ordered_json> sorted(events.begin(), events.end());
  std::sort(sorted.begin(), sorted.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
  std::map<int64_t, int64_t> ids;
  for (const auto& e : sorted) {
    const std::string cat = e.value("cat", "");
    if ((cat == "user_annotation" || cat == "cpu_op") && e.contains("args") && e["args"].contains("External id")) {
      ids.emplace(e["args"]["External id"].get<int64_t>(), static_cast<int64_t>(ids.size()) + 1);
    }
  }
  for (auto& e : sorted) {
    if (!e.contains("args")) continue;
    auto& a = e["args"];
    if (a.contains("External id") && a["External id"].is_number()) {
      auto it = ids.find(a["External id"].get<int64_t>());
      a["External id"] = it != ids.end() ? it->second : -1;
      if (a.contains("Ev Idx")) a["Ev Idx"] = a["External id"].get<int64_t>() - 1;
    }
  }
  d["traceEvents"] = sorted;
  d.erase("baseTimeNanoseconds");
  d.erase("traceName");
  // Keys in one order: writers may put deviceProperties and distributedInfo anywhere.
  nlohmann::json plain = d;  // std::map-ordered keys
  return plain.dump(1);
}

}  // namespace torchprof::test
