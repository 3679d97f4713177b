// A series of values (durations, sizes) summarised as nsys summarises them: count,
// total, mean, median, min, max and sample standard deviation, in memory that does not
// grow with the series. The first kExact values are kept, so that the median of a
// series up to that length is exact; past it, values go into buckets 1/64 of a
// power of two wide (the median is then the centre of the median's bucket, within
// 1.1% of it) and median_exact() turns false.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace torchprof {

class Series {
 public:
  static constexpr size_t kExact = 4096;

  void add(double v);
  // Adds every value of `other`, as if they had been added here.
  void merge(const Series& other);

  uint64_t count() const { return count_; }
  double total() const { return total_; }
  double min() const { return min_; }
  double max() const { return max_; }
  double mean() const { return count_ > 0 ? total_ / static_cast<double>(count_) : 0.0; }
  double stddev() const;  // sample standard deviation (n - 1), 0 for fewer than two values
  double median() const;
  bool median_exact() const { return buckets_.empty(); }

 private:
  void to_buckets();
  void bucket(double v);

  uint64_t count_ = 0;
  double total_ = 0;
  double min_ = 0;
  double max_ = 0;
  double mean_ = 0;  // Welford's running mean and sum of squared deviations
  double m2_ = 0;
  std::vector<double> values_;         // while count_ <= kExact
  std::vector<uint64_t> buckets_;      // afterwards: counts by bucket_of()
  uint64_t negative_ = 0;              // values below zero (counted, placed at 0 for the median)
};

}  // namespace torchprof
