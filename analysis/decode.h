// Decoding: capture chunks → processes, threads and timeline events (analysis/model.h).
//
// Per connection (one process image): the Hello gives the process's identity and
// clock pair; its frames are read once, in file order. A thread may use a string,
// domain or category another thread defined in a frame written later: such uses get
// a stand-in that is replaced once every frame has been read. Connections of the same pid (a fork copy that
// then exec'd) merge into one Process. Nesting, steps and aggregates come later
// (analysis/analysis.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "reading/capture_reader.h"
#include "analysis/model.h"

namespace torchprof {

// How a kThreadName record's name was obtained, carried in Record::b. NVTX names
// (nvtxNameOsThread) win over names read from the OS, whatever their order.
enum class ThreadNameSource : uint64_t { kNvtx = 0, kOs = 1 };

// Reads every chunk the reader yields. Run::truncated is set when the reader
// stopped at a damaged tail; everything before it is decoded.
Run decode_capture(CaptureReader& reader);

// Called while frames are decoded with the bytes done and the total (both passes),
// at most once per percent; may be empty.
using DecodeProgress = std::function<void(uint64_t done, uint64_t total)>;
Run decode_capture(CaptureReader& reader, const DecodeProgress& progress);

// Opens and decodes `path`; throws InputError when it is not a readable capture.
Run decode_capture_file(const std::string& path);
Run decode_capture_file(const std::string& path, const DecodeProgress& progress);

}  // namespace torchprof
