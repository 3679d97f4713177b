#include "formats/overview_json.h"

#include <cmath>

namespace torchprof {

namespace {

using Json = nlohmann::ordered_json;

double rounded(double pct) { return std::round(pct * 100.0) / 100.0; }

Json parts_json(const std::array<int64_t, kBreakdownParts>& parts) {
  Json j = Json::object();
  for (int r = 0; r < kBreakdownParts; ++r) j[std::string(breakdown_part_key(r)) + "_ns"] = parts[r];
  return j;
}

Json idle_json(const IdleSplit& idle) {
  return {{"idle_ns", idle.total()},
          {"host_wait_ns", idle.host_wait_ns},
          {"kernel_wait_ns", idle.kernel_wait_ns},
          {"other_ns", idle.other_ns}};
}

Json breakdown_json(const Overview& o) {
  Json steps = Json::array();
  for (const StepBreakdown& s : o.steps) {
    Json j = {{"pid", s.pid}, {"index", s.index}, {"name", s.name}, {"start_ns", s.start_ns}, {"dur_ns", s.dur_ns}};
    j.update(parts_json(s.parts));
    j["warmup"] = s.warmup;
    steps.push_back(std::move(j));
  }
  const size_t n = o.steps.size();
  Json total = {{"dur_ns", o.total_ns}};
  total.update(parts_json(o.total));
  Json avg = {{"dur_ns", n ? o.total_ns / static_cast<int64_t>(n) : 0}};
  Json pct = Json::object();
  for (int r = 0; r < kBreakdownParts; ++r) {
    avg[std::string(breakdown_part_key(r)) + "_ns"] = n ? o.total[r] / static_cast<int64_t>(n) : 0;
    pct[breakdown_part_key(r)] = rounded(o.pct(o.total[r]));
  }
  Json parts = Json::array();
  for (int r = 0; r < kBreakdownParts; ++r) parts.push_back(breakdown_part_key(r));
  Json out = {{"parts", std::move(parts)}, {"steps", std::move(steps)}, {"total", std::move(total)},
              {"avg", std::move(avg)}, {"pct", std::move(pct)}};
  // The steps the advice is drawn from (all but the leading warm-up steps).
  Json steady = {{"steps", o.steady_steps}, {"dur_ns", o.steady_ns}};
  steady.update(parts_json(o.steady));
  Json steady_pct = Json::object();
  for (int r = 0; r < kBreakdownParts; ++r) steady_pct[breakdown_part_key(r)] = rounded(o.steady_pct(o.steady[r]));
  steady["pct"] = std::move(steady_pct);
  out["steady"] = std::move(steady);
  // Only when the CPU intervals outgrew what the engine keeps (analysis/interval_set.h):
  // the time their filled gaps may have moved from "other" into the CPU parts.
  if (o.cpu_gaps_filled_ns > 0) out["cpu_gaps_filled_ns"] = o.cpu_gaps_filled_ns;
  return out;
}

Json device_json(const Overview& o, const DeviceOverview& d) {
  Json j = {{"pid", d.pid},
            {"device", d.device},
            {"steps_ns", d.steps_ns},
            {"busy_ns", d.busy_ns},
            {"kernel_busy_ns", d.kernel_busy_ns},
            {"utilization_pct", rounded(d.utilization_pct())}};
  j.update(idle_json(d.idle));
  Json steps = Json::array();
  for (const DeviceStep& s : d.steps) {
    Json step = {{"index", o.steps[s.step].index}, {"busy_ns", s.busy_ns}, {"kernel_busy_ns", s.kernel_busy_ns}};
    step.update(idle_json(s.idle));
    steps.push_back(std::move(step));
  }
  j["steps"] = std::move(steps);
  Json streams = Json::array();
  for (const StreamIdle& s : d.streams) {
    Json stream = {{"stream", s.stream}, {"ops", s.ops}};
    stream.update(idle_json(s.idle));
    streams.push_back(std::move(stream));
  }
  j["streams"] = std::move(streams);
  return j;
}

Json distribution_json(const Distribution& d) {
  return {{"count", d.count}, {"mean_ns", d.mean_ns}, {"p50_ns", d.p50_ns}, {"p90_ns", d.p90_ns},
          {"p99_ns", d.p99_ns}, {"max_ns", d.max_ns}};
}

Json launches_json(const Overview& o) {
  const LaunchStats& l = o.launches;
  const double short_pct = l.kernel_ns > 0 ? 100.0 * static_cast<double>(l.short_kernel_ns) /
                                                 static_cast<double>(l.kernel_ns)
                                           : 0.0;
  return {{"kernels", l.kernels},
          {"kernel_ns", l.kernel_ns},
          {"short_kernels", l.short_kernels},
          {"short_kernel_ns", l.short_kernel_ns},
          {"short_kernel_time_pct", rounded(short_pct)},
          {"launched", l.launched},
          {"shorter_than_launch", l.shorter_than_launch},
          {"launch_outliers", l.launch_outliers},
          {"delay_outliers", l.delay_outliers},
          {"launch", distribution_json(l.launch)},
          {"duration", distribution_json(l.duration)},
          {"delay", distribution_json(l.delay)}};
}

Json copies_json(const Overview& o) {
  Json rows = Json::array();
  uint64_t calls = 0, bytes = 0;
  int64_t ns = 0;
  for (const CopyStats& c : o.copies) {
    rows.push_back({{"name", c.name}, {"direction", c.direction}, {"pageable", c.pageable}, {"calls", c.calls},
                    {"bytes", c.bytes}, {"total_ns", c.ns}, {"bandwidth_gb_per_s", c.gb_per_s()}});
    if (!c.pageable) continue;
    calls += c.calls;
    bytes += c.bytes;
    ns += c.ns;
  }
  return {{"rows", std::move(rows)},
          {"pageable", {{"calls", calls}, {"bytes", bytes}, {"total_ns", ns}, {"step_pct", rounded(o.pct(ns))}}}};
}

Json syncs_json(const Overview& o) {
  Json rows = Json::array();
  for (const SyncStats& s : o.syncs) rows.push_back({{"name", s.name}, {"calls", s.calls}, {"stall_ns", s.stall_ns}});
  const double n = static_cast<double>(o.steps.size());
  return {{"rows", std::move(rows)},
          {"calls", o.syncs_in_steps},
          {"stall_ns", o.sync_stall_ns},
          {"per_step", n > 0 ? static_cast<double>(o.syncs_in_steps) / n : 0.0},
          {"step_pct", rounded(o.pct(o.sync_stall_ns))}};
}

Json thresholds_json(const OverviewThresholds& t) {
  return {{"kernel_wait_ns", t.kernel_wait_ns},
          {"short_kernel_ns", t.short_kernel_ns},
          {"launch_outlier_ns", t.launch_outlier_ns},
          {"delay_outlier_ns", t.delay_outlier_ns},
          {"dataloader_pct", t.dataloader_pct},
          {"low_utilization_pct", t.low_utilization_pct},
          {"short_kernel_time_pct", t.short_kernel_time_pct},
          {"launch_idle_pct", t.launch_idle_pct},
          {"pageable_pct", t.pageable_pct},
          {"sync_stall_pct", t.sync_stall_pct},
          {"sync_host_wait_pct", t.sync_host_wait_pct}};
}

}  // namespace

nlohmann::ordered_json overview_json(const Overview& o) {
  Json devices = Json::array();
  for (const DeviceOverview& d : o.devices) devices.push_back(device_json(o, d));
  Json recommendations = Json::array();
  for (const Recommendation& r : o.recommendations) {
    recommendations.push_back(
        {{"id", r.id}, {"text", r.text}, {"figure", rounded(r.figure)}, {"threshold", r.threshold}});
  }
  return {{"steps", o.steps.size()},
          {"breakdown", breakdown_json(o)},
          {"devices", std::move(devices)},
          {"launches", launches_json(o)},
          {"copies", copies_json(o)},
          {"syncs", syncs_json(o)},
          {"recommendations", std::move(recommendations)},
          {"thresholds", thresholds_json(o.thresholds)}};
}

Json module_view_json(const std::vector<ModuleRow>& modules) {
  Json rows = Json::array();
  for (const ModuleRow& m : modules) {
    rows.push_back({{"pid", m.pid},
                    {"name", m.name},
                    {"parent", m.parent >= 0 ? Json(m.parent) : Json(nullptr)},
                    {"depth", m.depth},
                    {"occurrences", m.occurrences},
                    {"operators", m.operators},
                    {"host_ns", m.host_ns},
                    {"self_host_ns", m.self_host_ns},
                    {"device_ns", m.device_ns},
                    {"self_device_ns", m.self_device_ns}});
  }
  return rows;
}

}  // namespace torchprof
