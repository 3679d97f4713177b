#include "analysis/module_view.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace torchprof {

namespace {

constexpr std::string_view kPrefix = "nn.Module: ";

std::string shown(const Name& name) {
  const std::string& s = name.str();
  return s.starts_with(kPrefix) ? s.substr(kPrefix.size()) : s;
}

// The calls' GPU time: each GPU record to the innermost call open around its launch on
// the launching thread, and to each call around that one.
void add_device_time(const Process& p, std::vector<int64_t>& device, std::vector<int64_t>& self_device,
                     const std::unordered_map<uint32_t, size_t>& by_id) {
  std::map<uint32_t, std::vector<size_t>> by_thread;  // calls by start
  for (size_t i = 0; i < p.module_calls.size(); ++i) by_thread[p.module_calls[i].tid].push_back(i);
  for (auto& [tid, calls] : by_thread) {
    std::sort(calls.begin(), calls.end(),
              [&](size_t a, size_t b) { return p.module_calls[a].start_ns < p.module_calls[b].start_ns; });
  }
  for (const GpuRecord& g : p.gpu_records) {
    if (!g.api_known || g.kind == GpuKind::kSync) continue;
    auto it = by_thread.find(g.api_tid);
    if (it == by_thread.end()) continue;
    const std::vector<size_t>& calls = it->second;
    const int64_t t = g.api_start_ns;
    auto after = std::upper_bound(calls.begin(), calls.end(), t,
                                  [&](int64_t v, size_t c) { return v < p.module_calls[c].start_ns; });
    if (after == calls.begin()) continue;
    // The last call to start before the launch, or the call around it that holds it.
    size_t c = *(after - 1);
    while (true) {
      const ModuleCall& m = p.module_calls[c];
      if (m.start_ns <= t && t <= m.end_ns) break;
      auto parent = by_id.find(m.parent);
      if (m.parent == 0 || parent == by_id.end()) {
        c = SIZE_MAX;
        break;
      }
      c = parent->second;
    }
    if (c == SIZE_MAX) continue;
    self_device[c] += g.dur_ns();
    for (size_t k = c; k != SIZE_MAX;) {
      device[k] += g.dur_ns();
      auto parent = by_id.find(p.module_calls[k].parent);
      k = p.module_calls[k].parent != 0 && parent != by_id.end() ? parent->second : SIZE_MAX;
    }
  }
}

}  // namespace

std::vector<ModuleRow> module_view(const Run& run) {
  std::vector<ModuleRow> out;
  for (const Process& p : run.processes) {
    if (p.module_calls.empty()) continue;
    std::unordered_map<uint32_t, size_t> by_id;
    for (size_t i = 0; i < p.module_calls.size(); ++i) by_id.emplace(p.module_calls[i].id, i);
    std::vector<int64_t> device(p.module_calls.size(), 0), self_device(p.module_calls.size(), 0);
    add_device_time(p, device, self_device, by_id);

    // One row per instance (name), its parent the instance its first call ran in.
    struct Instance {
      ModuleRow row;
      int64_t first = 0;
      std::string parent;
      bool has_parent = false;
      std::vector<std::string> children;
    };
    std::map<std::string, Instance> instances;
    for (size_t i = 0; i < p.module_calls.size(); ++i) {
      const ModuleCall& m = p.module_calls[i];
      const std::string name = shown(m.name);
      auto [it, fresh] = instances.try_emplace(name);
      Instance& in = it->second;
      if (fresh || m.start_ns < in.first) {
        in.first = m.start_ns;
        auto parent = by_id.find(m.parent);
        in.has_parent = m.parent != 0 && parent != by_id.end();
        if (in.has_parent) in.parent = shown(p.module_calls[parent->second].name);
      }
      ModuleRow& r = in.row;
      r.pid = p.pid;
      r.name = name;
      ++r.occurrences;
      r.operators += m.ops;
      r.host_ns += m.end_ns - m.start_ns;
      r.self_host_ns += m.self_ns;
      r.device_ns += device[i];
      r.self_device_ns += self_device[i];
    }
    std::vector<std::string> roots;
    for (auto& [name, in] : instances) {
      if (in.has_parent && instances.count(in.parent) != 0 && in.parent != name) {
        instances[in.parent].children.push_back(name);
      } else {
        roots.push_back(name);
      }
    }
    auto by_first = [&](const std::string& a, const std::string& b) {
      return instances[a].first < instances[b].first;
    };
    std::sort(roots.begin(), roots.end(), by_first);
    for (auto& [name, in] : instances) std::sort(in.children.begin(), in.children.end(), by_first);
    // Depth first; a name is written once even if the parents its calls name loop.
    std::map<std::string, bool> written;
    auto walk = [&](auto&& self, const std::string& name, int parent, int depth) -> void {
      if (written[name]) return;
      written[name] = true;
      Instance& in = instances[name];
      in.row.parent = parent;
      in.row.depth = depth;
      const int index = static_cast<int>(out.size());
      out.push_back(in.row);
      for (const std::string& child : in.children) self(self, child, index, depth + 1);
    };
    for (const std::string& root : roots) walk(walk, root, -1, 0);
  }
  return out;
}

}  // namespace torchprof
