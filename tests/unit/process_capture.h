// A capture of a few processes written in a few lines, for the tests that run the engine
// on what used to be a hand-built Process: each process's hello (monotonic 0 is kEpoch,
// so a record at monotonic t is at kEpoch + t), its threads' frames in the order given
// (each thread's frames numbered from 0), and its goodbye.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analysis_capture_builder.h"

namespace torchprof::test {

constexpr int64_t kEpoch = 1'700'000'000'000'000'000;  // epoch ns of monotonic 0

class Captures {
 public:
  Captures() = default;
  // Run information as the collector writes it (command, host).
  Captures& run_info(const std::string& json) {
    b_.chunk(capture::ChunkType::kRunInfo, 0, json);
    return *this;
  }
  // Starts a process (a connection): the frames and goodbye that follow are its own.
  Captures& process(int pid, const std::vector<std::string>& env = {}, const std::string& host = "h",
                    const std::string& exe = "/bin/app", int ppid = 1) {
    ++conn_;
    seq_.clear();
    b_.chunk(capture::ChunkType::kHello, conn_,
             hello_body(pid, ppid, 0, static_cast<uint64_t>(kEpoch), exe, {exe}, host, env));
    return *this;
  }
  Captures& frame(uint32_t tid, const Slots& slots) {
    b_.chunk(capture::ChunkType::kFrame, conn_, frame_body(tid, seq_[tid]++, slots));
    return *this;
  }
  Captures& bye(uint64_t mono_ns, wire::ExitKind kind = wire::ExitKind::kExit, int32_t status = 0,
                uint64_t dropped = 0) {
    b_.chunk(capture::ChunkType::kBye, conn_, bye_body(kind, status, 0, dropped, mono_ns));
    return *this;
  }
  std::string save(const std::string& file) const { return b_.save(file); }
  CaptureBuilder& builder() { return b_; }

 private:
  CaptureBuilder b_;
  uint32_t conn_ = 0;
  std::map<uint32_t, uint32_t> seq_;
};

}  // namespace torchprof::test
