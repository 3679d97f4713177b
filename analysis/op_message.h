// PyTorch operator ranges: the messages torch's emit_nvtx writes for each op, and
// the same format from the Python bootstrap's op capture (python/torchprof/_pytorch_ops.py):
//
//   <name>[, seq = <n>][, op_id = <id>][, sizes = [[2, 3], [3, 4], []]][, input_op_ids = [(7,0), …]]
//   [, stack = <frame>; <frame>; …]
//
// torch writes seq only when >= 0, op_id when > 0 (torch >= 1.13), sizes and input_op_ids
// only with record_shapes. `stack` is torchprof's own: the program's Python frames,
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

// Turns the process's op ranges into cpu_op events: the name becomes the op name and
// Event::op holds what the message said. Each distinct message is parsed once.
void classify_pytorch_ops(Process& proc);

}  // namespace torchprof
