// Kineto's forward-backward links ("fwdbwd" flow events): each backward op (an op torch
// gives a forward thread id) points back at the forward op that made its autograd node,
// the op of the same sequence number on that thread. As torch pairs them
// (generateForwardBackwardLinks in torch/csrc/profiler/collection.cpp): the trace's ops
// in the order of their ends; a forward op becomes its (thread, sequence) pair's
// candidate unless one that started later holds it; a backward op takes its pair's
// candidate, and the pair is free again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace torchprof::kineto {

struct FlowEnd {
  uint32_t tid = 0;  // the trace's thread
  int64_t ts_ns = 0; // the op's start
};

struct FwdBwdLink {
  FlowEnd forward;
  FlowEnd backward;
};

class FwdBwdLinks {
 public:
  // More ops than this in one trace are not linked (each waits here until the trace's
  // end, 32 bytes apiece); dropped() counts them.
  static constexpr size_t kMaxOps = size_t{1} << 23;

  // An op of the trace, in any order: `op_word` as wire::op_word writes it. Ops without
  // a sequence number, and forward ops whose own thread was not recorded, link nothing.
  void add(uint32_t tid, int64_t start_ns, int64_t end_ns, uint64_t op_word);
  // The links, in the order Kineto numbers them (flow ids from 1).
  std::vector<FwdBwdLink> links();
  uint64_t dropped() const { return dropped_; }
  void clear();

 private:
  struct Op {
    int64_t start_ns;
    int64_t end_ns;
    uint64_t key;  // (thread << 48) | sequence, as Kineto keys them
    uint32_t tid;
    bool backward;
  };
  std::vector<Op> ops_;
  uint64_t dropped_ = 0;
};

}  // namespace torchprof::kineto
