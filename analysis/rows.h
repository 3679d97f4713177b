// What the engine (analysis/engine.h) adds up per row of the table, and how the rows of
// its passes merge into the run's, in the order they were first used.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/model.h"

namespace torchprof {

// Where a row was first added to: rows come in the order of their first use, a
// process's events in (thread, start, longer first) order, ties in the order they were
// read, then its GPU records by start time (section 1), ties likewise.
struct FirstUse {
  size_t process = std::numeric_limits<size_t>::max();
  int section = 0;
  uint32_t tid = 0;
  int64_t start = 0;
  int64_t neg_end = 0;
  uint64_t seq = 0;
  auto key() const { return std::tie(process, section, tid, start, neg_end, seq); }
};

// What one row of a pass adds up.
struct RowStats {
  uint64_t calls = 0;
  int64_t self_ns = 0;
  int64_t total_ns = 0;
  int64_t self_cuda_ns = 0;
  int64_t cuda_total_ns = 0;
  int64_t mem_self[2] = {0, 0};   // tensor memory, CPU and CUDA (OpStats' *_memory)
  int64_t mem_total[2] = {0, 0};
  FirstUse first;
  uint32_t mangled = 0;  // kernels: the string id of the first counted record's name

  [[gnu::always_inline]] void add_use(const FirstUse& here) {
    if (calls == 0 || here.key() < first.key()) first = here;
  }
};

inline void add_memory(OpStats& to, const OpStats& from) {
  to.flops += from.flops;
  to.cpu_memory += from.cpu_memory;
  to.self_cpu_memory += from.self_cpu_memory;
  to.cuda_memory += from.cuda_memory;
  to.self_cuda_memory += from.self_cuda_memory;
}

struct Row {
  OpStats stats;
  FirstUse first;
};

// The rows of a run, keyed by op_row_key().
class Rows {
 public:
  void add(const char* kind, const std::string& name, const RowStats& st, const std::string& mangled = {}) {
    OpStats row;
    row.name = name;
    row.kind = kind;
    add(std::move(row), st, mangled);
  }

  // `row` holds the row's name, kind, and for cpu_op rows its shapes and stack.
  void add(OpStats row, const RowStats& st, const std::string& mangled = {}) {
    // A kind with no calls left may still hold GPU time or memory: that of an op that is
    // its same-named parent's only child (conn_pass.cpp), which counts in its parent's row.
    if (st.calls == 0 && st.self_ns == 0 && st.total_ns == 0 && st.self_cuda_ns == 0 && st.cuda_total_ns == 0 &&
        st.mem_self[0] == 0 && st.mem_total[0] == 0 && st.mem_self[1] == 0 && st.mem_total[1] == 0) {
      return;
    }
    auto [it, fresh] = index_.try_emplace(op_row_key(row, row.name), rows_.size());
    const uint64_t flops = row.flops;
    if (fresh) {
      Row& r = rows_.emplace_back();
      r.stats = std::move(row);
      r.stats.mangled = mangled;
      r.stats.flops = 0;
      r.first = st.first;
    }
    Row& r = rows_[it->second];
    r.stats.flops += flops;
    r.stats.calls += st.calls;
    r.stats.self_cpu_ns += st.self_ns;
    r.stats.cpu_total_ns += st.total_ns;
    r.stats.self_cuda_ns += st.self_cuda_ns;
    r.stats.cuda_total_ns += st.cuda_total_ns;
    r.stats.self_cpu_memory += st.mem_self[0];
    r.stats.cpu_memory += st.mem_total[0];
    r.stats.self_cuda_memory += st.mem_self[1];
    r.stats.cuda_memory += st.mem_total[1];
    if (st.first.key() < r.first.key()) {
      r.first = st.first;
      if (!mangled.empty()) r.stats.mangled = mangled;
    }
  }

  // Adds another pass's rows (of another process) to these.
  void merge(Rows&& other) {
    for (Row& o : other.rows_) {
      auto [it, fresh] = index_.try_emplace(op_row_key(o.stats, o.stats.name), rows_.size());
      if (fresh) {
        rows_.push_back(std::move(o));
        continue;
      }
      Row& r = rows_[it->second];
      r.stats.calls += o.stats.calls;
      r.stats.self_cpu_ns += o.stats.self_cpu_ns;
      r.stats.cpu_total_ns += o.stats.cpu_total_ns;
      r.stats.self_cuda_ns += o.stats.self_cuda_ns;
      r.stats.cuda_total_ns += o.stats.cuda_total_ns;
      add_memory(r.stats, o.stats);
      if (o.first.key() < r.first.key()) {
        r.first = o.first;
        if (!o.stats.mangled.empty()) r.stats.mangled = o.stats.mangled;
      }
    }
    other = Rows();
  }

  // The rows in the order of their first use.
  std::vector<OpStats> take() {
    std::stable_sort(rows_.begin(), rows_.end(),
                     [](const Row& x, const Row& y) { return x.first.key() < y.first.key(); });
    std::vector<OpStats> out;
    for (Row& row : rows_) out.push_back(std::move(row.stats));
    return out;
  }

 private:
  std::unordered_map<std::string, size_t> index_;
  std::vector<Row> rows_;
};

}  // namespace torchprof
