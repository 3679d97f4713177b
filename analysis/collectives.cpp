#include "analysis/collectives.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include "analysis/analysis.h"
#include "analysis/rank_steps.h"

namespace torchprof {
namespace {

struct Call {
  const std::string* name;
  int64_t start_ns;
  int64_t end_ns;
  int64_t in_elems;
};

// A rank's calls of one source, by name, each name's in order of start.
using CallsByName = std::map<std::string, std::vector<Call>>;

// Whether `t` lies in one of the process's recorded marked steps (or the process has
// none): what a rank does before its first step (the process group's set-up, DDP's
// broadcast of the parameters) is not what its steps wait for.
bool in_steps(const Process& p, int64_t t) {
  bool marked = false;
  for (const Step& s : p.steps) {
    if (!s.marker || !recorded(s.action)) continue;
    marked = true;
    if (t >= s.start_ns && t < s.start_ns + s.dur_ns) return true;
  }
  return !marked;
}

CallsByName calls_of(const std::vector<const Process*>& procs, CollectiveSource source) {
  CallsByName out;
  for (const Process* p : procs) {
    if (source == CollectiveSource::kNcclKernel) {
      for (const GpuRecord& g : p->gpu_records) {
        if (g.kind == GpuKind::kKernel && is_nccl_kernel(g.name.str()) && in_steps(*p, g.start_ns)) {
          out[g.name.str()].push_back({&g.name.str(), g.start_ns, g.end_ns, -1});
        }
      }
      continue;
    }
    for (const CollectiveCall& c : p->collectives) {
      if (c.source == source && in_steps(*p, c.start_ns)) out[c.name.str()].push_back({&c.name.str(), c.start_ns, c.end_ns, c.in_elems});
    }
  }
  for (auto& [name, calls] : out) {
    std::sort(calls.begin(), calls.end(), [](const Call& a, const Call& b) { return a.start_ns < b.start_ns; });
  }
  return out;
}

const char* source_name(CollectiveSource s) {
  switch (s) {
    case CollectiveSource::kNcclKernel: return "nccl kernels";
    case CollectiveSource::kBackend: return "backend records";
    case CollectiveSource::kC10dOp: return "c10d ops";
  }
  return "";
}

}  // namespace

std::string collective_dtype(std::string_view input_types) {
  // TypeMeta's names of the dtypes (what Input type lists) and c10's ScalarType names.
  static constexpr std::pair<std::string_view, std::string_view> kNames[] = {
      {"float", "Float"},          {"double", "Double"},      {"c10::Half", "Half"},
      {"c10::BFloat16", "BFloat16"}, {"long int", "Long"},    {"int", "Int"},
      {"short int", "Short"},      {"signed char", "Char"},   {"unsigned char", "Byte"},
      {"bool", "Bool"},            {"c10::complex<float>", "ComplexFloat"},
      {"c10::complex<double>", "ComplexDouble"}, {"c10::complex<c10::Half>", "ComplexHalf"},
  };
  size_t at = 0;
  while ((at = input_types.find('"', at)) != std::string_view::npos) {
    const size_t end = input_types.find('"', at + 1);
    if (end == std::string_view::npos) break;
    const std::string_view type = input_types.substr(at + 1, end - at - 1);
    at = end + 1;
    if (type.empty() || type == "Scalar" || type == "ScalarList" || type == "TensorList") continue;
    for (const auto& [meta, scalar] : kNames) {
      if (type == meta) return std::string(scalar);
    }
    return type.starts_with("c10::") ? std::string(type.substr(5)) : std::string(type);
  }
  return "";
}

std::string kineto_collective_name(std::string_view recorded) {
  std::string_view name;
  if (recorded.starts_with("c10d::")) {
    name = recorded.substr(6);
    if (name.ends_with("_")) name.remove_suffix(1);
  } else {
    for (std::string_view prefix : {"gloo:", "nccl:", "mpi:", "ucc:"}) {
      if (recorded.starts_with(prefix)) name = recorded.substr(prefix.size());
    }
  }
  if (name.empty()) return "";
  // The backends' records say all_reduce, all_gather, all_to_all where torch says
  // allreduce, allgather, alltoall.
  static constexpr std::pair<std::string_view, std::string_view> kRenames[] = {
      {"all_reduce", "allreduce"}, {"all_gather", "allgather"}, {"all_to_all", "alltoall"},
      {"_all_gather_base", "_allgather_base"}, {"all_reduce_coalesced", "allreduce_coalesced"}};
  for (const auto& [from, to] : kRenames) {
    if (name == from) return std::string(to);
  }
  return std::string(name);
}

// Elements of the tensors in an op's input shapes as torch prints them ("[[9610], [3, 4]]"):
// the sum over its tensors of the product of their sizes; -1 when none is shown.
int64_t shape_elements(std::string_view shapes) {
  int64_t total = 0;
  bool any = false;
  int depth = 0;
  int64_t product = 1;
  int64_t number = -1;
  bool dims = false;
  for (char c : shapes) {
    if (c == '[') {
      ++depth;
      product = 1;
      dims = false;
      number = -1;
    } else if (c >= '0' && c <= '9') {
      number = (number < 0 ? 0 : number * 10) + (c - '0');
    } else if (c == ',' || c == ']') {
      if (number >= 0) {
        product *= number;
        dims = true;
        number = -1;
      }
      if (c == ']') {
        if (depth == 2 && dims) {
          total += product;
          any = true;
        }
        dims = false;
        --depth;
      }
    }
  }
  return any ? total : -1;
}

bool is_nccl_kernel(std::string_view name) {
  return name.starts_with("ncclDevKernel_") || name.starts_with("ncclKernel_") || name.starts_with("void ncclKernel_") ||
         name.starts_with("ncclDevKernel");
}

std::vector<RankCollectives> compute_rank_collectives(const std::vector<std::vector<const Process*>>& groups) {
  if (groups.size() < 2) return {};
  // The source every rank has, kernels first.
  std::optional<CollectiveSource> chosen;
  std::vector<CallsByName> calls;
  for (CollectiveSource source :
       {CollectiveSource::kNcclKernel, CollectiveSource::kBackend, CollectiveSource::kC10dOp}) {
    std::vector<CallsByName> candidate;
    for (const auto& procs : groups) candidate.push_back(calls_of(procs, source));
    if (std::all_of(candidate.begin(), candidate.end(), [](const CallsByName& c) { return !c.empty(); })) {
      chosen = source;
      calls = std::move(candidate);
      break;
    }
  }
  if (!chosen) return {};
  const size_t n = groups.size();
  std::vector<RankCollectives> out(n);
  for (size_t r = 0; r < n; ++r) out[r].source = source_name(*chosen);

  // The names every rank has, with how many calls all of them made.
  std::map<std::string, size_t> common;
  for (const auto& [name, list] : calls[0]) {
    size_t count = list.size();
    for (size_t r = 1; r < n && count > 0; ++r) {
      auto it = calls[r].find(name);
      count = it == calls[r].end() ? 0 : std::min(count, it->second.size());
    }
    if (count > 0) common[name] = count;
  }

  // Clock offsets against the first rank, from the ends of the same calls.
  std::vector<int64_t> offset(n, 0);
  for (size_t r = 1; r < n; ++r) {
    std::vector<int64_t> diffs;
    for (const auto& [name, count] : common) {
      const std::vector<Call>& mine = calls[r].at(name);
      const std::vector<Call>& first = calls[0].at(name);
      for (size_t k = 0; k < count; ++k) diffs.push_back(mine[k].end_ns - first[k].end_ns);
    }
    offset[r] = median_ns(diffs);
    out[r].clock_offset_ns = offset[r];
  }

  std::vector<std::map<std::string, CollectiveStat>> stats(n);
  for (size_t r = 0; r < n; ++r) {
    for (const auto& [name, list] : calls[r]) {
      CollectiveStat& s = stats[r][name];
      s.name = name;
      for (const Call& c : list) {
        ++s.calls;
        s.time_ns += c.end_ns - c.start_ns;
        if (c.in_elems >= 0) s.in_elems = std::max<int64_t>(s.in_elems, 0) + c.in_elems;
      }
      out[r].calls += s.calls;
      out[r].time_ns += s.time_ns;
    }
  }
  std::vector<int64_t> start(n);
  std::vector<int64_t> end(n);
  for (const auto& [name, count] : common) {
    for (size_t k = 0; k < count; ++k) {
      size_t last = 0;
      for (size_t r = 0; r < n; ++r) {
        const Call& c = calls[r].at(name)[k];
        start[r] = c.start_ns - offset[r];
        end[r] = c.end_ns - offset[r];
        if (start[r] > start[last]) last = r;
      }
      const int64_t median_start = median_ns(start);
      int64_t caused = 0;
      for (size_t r = 0; r < n; ++r) {
        out[r].late_ns += std::max<int64_t>(0, start[r] - median_start);
        const int64_t wait = std::max<int64_t>(0, std::min(start[last], end[r]) - start[r]);
        stats[r][name].wait_ns += wait;
        out[r].wait_ns += wait;
        ++out[r].matched;
        if (r != last) caused += wait;
      }
      out[last].waited_on_ns += caused;
      ++out[last].last_arrivals;
    }
  }
  for (size_t r = 0; r < n; ++r) {
    for (auto& [name, s] : stats[r]) out[r].by_name.push_back(std::move(s));
    std::stable_sort(out[r].by_name.begin(), out[r].by_name.end(),
                     [](const CollectiveStat& a, const CollectiveStat& b) { return a.time_ns > b.time_ns; });
  }
  return out;
}

}  // namespace torchprof
