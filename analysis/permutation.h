// Putting a list in an order computed beside it, without a second copy of the list.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace torchprof {

// Moves the elements of `v` so that position j holds the one that was at order[j]
// (`order` is a permutation of 0..v.size()-1, and is used up). Each cycle of the
// permutation is followed once: every element is moved once, a cycle's first twice.
template <typename T>
void apply_order(std::vector<T>& v, std::vector<uint32_t>& order) {
  constexpr uint32_t kPlaced = ~uint32_t{0};
  for (uint32_t i = 0; i < order.size(); ++i) {
    if (order[i] == kPlaced) continue;
    if (order[i] == i) {
      order[i] = kPlaced;
      continue;
    }
    T held = std::move(v[i]);
    uint32_t j = i;
    for (;;) {
      const uint32_t from = std::exchange(order[j], kPlaced);
      if (from == i) {
        v[j] = std::move(held);
        break;
      }
      v[j] = std::move(v[from]);
      j = from;
    }
  }
}

}  // namespace torchprof
