#include "formats/fwdbwd.h"

#include <algorithm>

#include "common/wire/wire.h"

namespace torchprof::kineto {

void FwdBwdLinks::add(uint32_t tid, int64_t start_ns, int64_t end_ns, uint64_t op_word) {
  const int64_t sequence = wire::op_word_sequence(op_word);
  if (sequence < 0) return;
  const uint32_t fwd_thread = wire::op_word_fwd_thread(op_word);
  const uint32_t thread = fwd_thread != 0 ? fwd_thread : wire::op_word_thread(op_word);
  if (thread == 0) return;
  if (ops_.size() >= kMaxOps) {
    ++dropped_;
    return;
  }
  const uint64_t key = uint64_t{thread} << 48 | (static_cast<uint64_t>(sequence) & ((uint64_t{1} << 48) - 1));
  ops_.push_back({start_ns, end_ns, key, tid, fwd_thread != 0});
}

std::vector<FwdBwdLink> FwdBwdLinks::links() {
  std::stable_sort(ops_.begin(), ops_.end(), [](const Op& a, const Op& b) { return a.end_ns < b.end_ns; });
  std::vector<FwdBwdLink> out;
  std::unordered_map<uint64_t, size_t> candidate;  // key -> index into ops_
  for (size_t i = 0; i < ops_.size(); ++i) {
    const Op& op = ops_[i];
    auto it = candidate.find(op.key);
    if (op.backward) {
      if (it == candidate.end()) continue;
      const Op& fwd = ops_[it->second];
      out.push_back({{fwd.tid, fwd.start_ns}, {op.tid, op.start_ns}});
      candidate.erase(it);
    } else if (it == candidate.end()) {
      candidate.emplace(op.key, i);
    } else if (op.start_ns >= ops_[it->second].start_ns) {
      it->second = i;
    }
  }
  return out;
}

void FwdBwdLinks::clear() {
  ops_.clear();
  ops_.shrink_to_fit();
  dropped_ = 0;
}

}  // namespace torchprof::kineto
