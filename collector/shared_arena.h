// A process's shared buffer arena as the collector holds it (common/wire/arena.h): mapped
// read-only when the process hands it over, read only if the process died without its
// goodbye. Reading it turns what each thread had recorded and not sent into frames like
// the ones the process would have sent, checked at every step: a process that wrote
// nonsense there costs only its own records.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "common/wire/arena.h"

namespace torchprof {

class SharedArena {
 public:
  SharedArena() = default;
  ~SharedArena();
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;

  // Takes `fd` (closed on failure too) and maps it as `info` says: "" when it is usable,
  // else why not. The memfd must be sealed against shrinking and growing.
  std::string open(int fd, const wire::arena::ArenaInfo& info);
  bool mapped() const { return map_ != nullptr; }

  struct Recovery {
    uint32_t frames = 0;
    uint32_t threads = 0;             // threads with records left unsent
    uint64_t heads = 0;               // record heads read
    uint64_t unreadable_slots = 0;    // slots that could not be read
  };
  // Each Frame message body (FrameHeader + zstd of the slots), one thread's at a time.
  using FrameSink = std::function<void(const std::string& body)>;
  // `next_seq`: per tid, one past the highest frame number that arrived from the process.
  Recovery recover(const std::map<uint32_t, uint32_t>& next_seq, const FrameSink& sink) const;

  // For tests: reads an arena already in memory (not owned).
  static Recovery recover_from(const char* map, uint64_t size, const std::map<uint32_t, uint32_t>& next_seq,
                               const FrameSink& sink);

 private:
  void close_map();
  char* map_ = nullptr;
  uint64_t size_ = 0;
  int fd_ = -1;
};

// True when process `pid` has ended (a zombie or gone), waiting up to `wait_ms` for it:
// its connection closes a moment before it becomes a zombie.
bool process_ended(int pid, int wait_ms);

}  // namespace torchprof
