// PyTorch operator ranges: the messages torch's emit_nvtx writes for each op, and
// the same format from the Python bootstrap's op capture (python/torchprof/_pytorch_ops.py):
//
//   <name>[, seq = <n>][, op_id = <id>][, sizes = [[2, 3], [3, 4], []]][, input_op_ids = [(7,0), …]]
//   [, types = ["float", "Scalar", …]][, flops = <n>][, stack = <frame>; <frame>; …]
//
// torch writes seq only when >= 0, op_id when > 0 (torch >= 1.13), sizes and input_op_ids
// only with record_shapes. `types` is torchprof's own (--record-shapes on the op
// observer's path): each input's dtype as torch's inputTypes() and dtypesToStr() give it,
// Kineto's "Input type". `flops` is torchprof's own (--with-flops): torch's FLOP count
// of the op, as computeFlops gives it. `stack` is too: the program's Python frames,
// innermost first, each `file(line): function` as torch names stack entries; it is
// always the last field and runs to the end of the message.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/model.h"

namespace torchprof {

// NVTX domain of the Python bootstrap's op ranges: every range in it is an op, even
// one whose message has no fields.
constexpr std::string_view kPytorchOpsDomain = "torchprof.ops";

// Parses `message`. With `require_fields`, a message with no field at all (a plain
// range name) is not an op. Anything malformed (unknown key, repeated key, bad
// number, unbalanced brackets, empty name) gives nullopt: the caller keeps the raw
// message as the range's name. Never throws on any input.
std::optional<OpInfo> parse_op_message(std::string_view message, bool require_fields = true);

// What a range with this message in the domain of this name ("" for the default one)
// is: a PyTorch op (any range of the ops domain; in the default domain, a message with
// fields), or nothing.
std::optional<OpInfo> op_of_range(std::string_view message, std::string_view domain_name);

}  // namespace torchprof
