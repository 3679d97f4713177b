// What a process of the analysed run takes from the capture's sweep (reading/capture_scan.h):
// its identity and end from its images' Hellos and Byes, the launcher's account of a
// target that died without a goodbye, its buffers' report and the warnings about what
// reading an image could not use.
#pragma once

#include <cstdint>

#include "analysis/model.h"
#include "common/wire/wire.h"
#include "reading/capture_scan.h"

namespace torchprof {

// The run information and notes of the sweep into `run`.
void apply_run_info(const ScanResult& scan, Run& run);

// What decoding one image could not use, counted; add_decode_warnings() words them.
struct DecodeLosses {
  uint64_t bad_frames = 0;
  uint64_t cut_records = 0;
  uint64_t lost_frames = 0;
  uint64_t unmatched_pops = 0;
  uint64_t pending_ends = 0;
  uint64_t unterminated = 0;
  uint64_t gap_closed = 0;       // ranges open when frames went missing, closed before the gap
  uint64_t unknown_strings = 0;
};

// What an image's flusher said of the process's buffers (kBufferUsage, kBufferRefused).
struct BufferReport {
  uint64_t peak_bytes = 0;
  uint64_t cap_bytes = 0;
  int64_t refused_ns = 0;         // Unix-epoch ns of the first refusal that lost records; 0: none
  uint64_t refused_after_ns = 0;  // the same, from the image's first event (its Hello)
  uint16_t refusal = 0;           // wire::BufferRefusal
  uint64_t held_bytes = 0;        // what the buffers held then

  // Takes `r` when it is one of the two kinds (true), of the image whose Hello is `hello`.
  bool take(const wire::Record& r, const wire::Hello& hello);
  // Into the process's buffer fields (several images: the highest peak, the first refusal).
  void apply(Process& proc) const;
};

// Process::loss_note (and a warning saying it) from the buffer fields, once the process's
// dropped counts are known: why its events (or CUPTI's records) were lost, when the
// buffers are the reason.
void note_buffer_losses(Process& proc);

// The process's warnings about an image's losses, and about its missing goodbye.
void add_decode_warnings(const ConnInput& conn, const DecodeLosses& losses, Process& proc);

// The process's identity from its image's Hello and environment (rank, worker name, …).
void apply_identity(const ConnInput& conn, Process& proc);
// Exit code or signal from a Bye.
void apply_bye(const wire::Bye& bye, Process& proc);
// A target that died without a Bye (SIGKILL, OOM killer) still has the launcher's
// account of its end; without the launcher's account (no RunEnd), the run's exit code
// is the first process's.
void apply_launcher_view(Run& run, const ScanResult& scan);
// A target the launcher saw die of a signal before anything of it reached the collector
// (no Hello: killed before its first flush) is listed from the launcher's account alone.
void list_unheard_target(Run& run, const ScanResult& scan);
// Each process's role (Process::role) from its program, its command line and its parent's.
void assign_roles(Run& run);

}  // namespace torchprof
