#include "analysis/series.h"

#include <algorithm>
#include <cmath>

namespace torchprof {

namespace {

constexpr int kSubBuckets = 64;  // per power of two
constexpr int kMaxExponent = 64;

// Bucket 0 holds [0, 1); then 64 buckets per octave [2^e, 2^(e+1)).
size_t bucket_of(double v) {
  if (v < 1.0) return 0;
  int e = 0;
  const double m = std::frexp(v, &e);  // v = m * 2^e, m in [0.5, 1)
  const int octave = std::min(e - 1, kMaxExponent - 1);
  const int sub = std::min(kSubBuckets - 1, static_cast<int>((m * 2.0 - 1.0) * kSubBuckets));
  return 1 + static_cast<size_t>(octave) * kSubBuckets + static_cast<size_t>(sub);
}

double bucket_centre(size_t b) {
  if (b == 0) return 0.5;
  const size_t octave = (b - 1) / kSubBuckets;
  const size_t sub = (b - 1) % kSubBuckets;
  const double low = std::ldexp(1.0 + static_cast<double>(sub) / kSubBuckets, static_cast<int>(octave));
  const double high = std::ldexp(1.0 + static_cast<double>(sub + 1) / kSubBuckets, static_cast<int>(octave));
  return (low + high) / 2;
}

}  // namespace

void Series::add(double v) {
  if (count_ == 0) {
    min_ = max_ = v;
  } else {
    min_ = std::min(min_, v);
    max_ = std::max(max_, v);
  }
  ++count_;
  total_ += v;
  const double delta = v - mean_;
  mean_ += delta / static_cast<double>(count_);
  m2_ += delta * (v - mean_);
  if (buckets_.empty()) {
    values_.push_back(v);
    if (values_.size() > kExact) to_buckets();
  } else {
    bucket(v);
  }
}

void Series::merge(const Series& other) {
  if (other.count_ == 0) return;
  if (other.buckets_.empty()) {
    for (double v : other.values_) add(v);
    return;
  }
  // Both summaries combine exactly; the values go into buckets.
  if (count_ == 0) {
    *this = other;
    return;
  }
  to_buckets();
  const double n = static_cast<double>(count_);
  const double m = static_cast<double>(other.count_);
  const double delta = other.mean_ - mean_;
  m2_ += other.m2_ + delta * delta * n * m / (n + m);
  mean_ += delta * m / (n + m);
  count_ += other.count_;
  total_ += other.total_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  negative_ += other.negative_;
  if (buckets_.size() < other.buckets_.size()) buckets_.resize(other.buckets_.size(), 0);
  for (size_t b = 0; b < other.buckets_.size(); ++b) buckets_[b] += other.buckets_[b];
}

void Series::to_buckets() {
  if (!buckets_.empty()) return;
  buckets_.assign(1, 0);
  for (double v : values_) bucket(v);
  values_.clear();
  values_.shrink_to_fit();
}

void Series::bucket(double v) {
  if (v < 0) {
    ++negative_;
    v = 0;
  }
  const size_t b = bucket_of(v);
  if (b >= buckets_.size()) buckets_.resize(b + 1, 0);
  ++buckets_[b];
}

double Series::stddev() const {
  return count_ > 1 ? std::sqrt(m2_ / static_cast<double>(count_ - 1)) : 0.0;
}

double Series::median() const {
  if (count_ == 0) return 0;
  if (buckets_.empty()) {
    std::vector<double> v = values_;
    const size_t n = v.size();
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2), v.end());
    const double upper = v[n / 2];
    if (n % 2 == 1) return upper;
    const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2));
    return (lower + upper) / 2;
  }
  // The value at rank (count - 1) / 2: the bucket that holds it.
  const uint64_t rank = (count_ - 1) / 2;
  uint64_t seen = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    seen += buckets_[b];
    if (seen > rank) return std::clamp(bucket_centre(b), min_, max_);
  }
  return max_;
}

}  // namespace torchprof
