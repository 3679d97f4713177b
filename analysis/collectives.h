// The collectives of a distributed job, rank by rank: calls, elements, time and wait per
// collective, and the rank the others wait for. Step times cannot find that rank: the
// collectives line the ranks up, so every rank's steps take as long as the slowest's.
// What tells is where each rank spends its time inside a collective before the last
// rank arrives.
//
// The same collective is the k-th call of the same name on each rank (ranks of one
// process group run the same collectives in the same order). Its ends line up across
// ranks, since none can finish before the last has arrived; the median difference of
// the ends against the first rank's is taken as that rank's clock offset (hosts' clocks
// differ), and removed before the starts are compared. A rank's wait in one collective
// is the time from its start to the last rank's start (at most its own end); the rank
// that arrived last is charged the others' waits, and each rank's lateness is how long
// after the median rank it started: the straggler is the rank that is late by more than
// the threshold per step (analysis/rank_steps.h).
//
// Where the wait sits depends on the backend: on gloo, c10d::allreduce_ returns at once
// and the time is in the backend's gloo:all_reduce record (gloo's worker thread); on
// NCCL it is in the kernel. So the kernels (ncclDevKernel_*, ncclKernel_*) are used when
// every rank has them, else the backend's records, else c10d's ops. Only the calls inside
// a rank's recorded steps count (where it has step markers).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/model.h"

namespace torchprof {

struct CollectiveStat {
  std::string name;
  uint64_t calls = 0;
  int64_t in_elems = -1;   // elements of its inputs over all calls; -1 when no shapes were recorded
  int64_t time_ns = 0;     // inside it
  int64_t wait_ns = 0;     // of that, before the last rank arrived (matched calls only)
};

struct RankCollectives {
  std::string source;           // "nccl kernels" | "backend records" | "c10d ops"
  std::vector<CollectiveStat> by_name;  // the most time first
  uint64_t calls = 0;
  uint64_t matched = 0;         // calls that every rank made (the k-th of a name)
  int64_t time_ns = 0;
  int64_t wait_ns = 0;          // this rank waited on the others
  int64_t waited_on_ns = 0;     // the others waited on this rank (it arrived last)
  uint64_t last_arrivals = 0;   // matched calls in which it arrived last
  int64_t late_ns = 0;          // summed over the matched calls: how long after the median
                                // rank's start it started (0 when earlier)
  int64_t clock_offset_ns = 0;  // its clock minus the first rank's, estimated from the ends
};

// The name Kineto gives a collective (its "Collective name" arg, as torch's
// record_param_comms names them: allreduce, broadcast, allgather, _allgather_base,
// reduce_scatter, alltoall, barrier, send, recv, ...) from a c10d op's or a backend
// record's name; "" when the range is no collective's.
std::string kineto_collective_name(std::string_view recorded);

// Elements of the tensors in an op's input shapes as torch prints them ("[[9610], [3, 4]]"):
// the sum over its tensors of the product of their sizes; -1 when none is shown.
int64_t shape_elements(std::string_view shapes);

// Kineto's "dtype" of a collective (c10's ScalarType name: "Float", "BFloat16", "Long")
// from an op's Input type ("[\"float\", \"Scalar\"]", --record-shapes): its first tensor's
// dtype; "" when it has none.
std::string collective_dtype(std::string_view input_types);

// Whether a GPU kernel is NCCL's (communication, not compute).
bool is_nccl_kernel(std::string_view name);

// One entry per group of processes (a rank's), in the order given; empty when fewer
// than two groups have collectives.
std::vector<RankCollectives> compute_rank_collectives(const std::vector<std::vector<const Process*>>& groups);

}  // namespace torchprof
