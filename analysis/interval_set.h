// A union of intervals built as they come (nested ranges closing after what they hold,
// threads interleaved), kept merged, in memory that does not grow past a bound: past
// kMaxIntervals the shortest gaps are filled in, and filled_ns() says how much time
// that added to the union.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "analysis/model.h"

namespace torchprof {

class IntervalSet {
 public:
  static constexpr size_t kMaxIntervals = size_t{1} << 18;

  // Adds [s, e); intervals that overlap or touch are merged (an empty one is ignored).
  void add(int64_t s, int64_t e) {
    if (e <= s) return;
    if (v_.empty() || s > v_.back().second) {
      v_.emplace_back(s, e);
      if (v_.size() > kMaxIntervals) fill_gaps();
      return;
    }
    add_inside(s, e);
  }

  const Intervals& intervals() const { return v_; }
  Intervals take() { return std::move(v_); }
  int64_t filled_ns() const { return filled_ns_; }

 private:
  void add_inside(int64_t s, int64_t e) {
    // The first interval that ends at or after s: it and those after it that start
    // at or before e merge with [s, e).
    auto it = std::lower_bound(v_.begin(), v_.end(), s,
                               [](const std::pair<int64_t, int64_t>& iv, int64_t t) { return iv.second < t; });
    if (it->first > e) {
      v_.insert(it, {s, e});
      if (v_.size() > kMaxIntervals) fill_gaps();
      return;
    }
    it->first = std::min(it->first, s);
    it->second = std::max(it->second, e);
    auto next = it + 1;
    auto last = next;
    while (last != v_.end() && last->first <= it->second) {
      it->second = std::max(it->second, last->second);
      ++last;
    }
    v_.erase(next, last);
  }

  // Fills the shorter half of the gaps, halving the intervals.
  void fill_gaps() {
    std::vector<int64_t> gaps;
    gaps.reserve(v_.size() - 1);
    for (size_t i = 1; i < v_.size(); ++i) gaps.push_back(v_[i].first - v_[i - 1].second);
    auto mid = gaps.begin() + static_cast<std::ptrdiff_t>(gaps.size() / 2);
    std::nth_element(gaps.begin(), mid, gaps.end());
    const int64_t limit = *mid;
    Intervals out;
    out.reserve(v_.size() / 2 + 1);
    for (const auto& iv : v_) {
      if (!out.empty() && iv.first - out.back().second <= limit) {
        filled_ns_ += iv.first - out.back().second;
        out.back().second = iv.second;
      } else {
        out.push_back(iv);
      }
    }
    v_ = std::move(out);
  }

  Intervals v_;
  int64_t filled_ns_ = 0;
};

}  // namespace torchprof
