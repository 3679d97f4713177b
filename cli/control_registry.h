// How `torchprof start|stop|trigger` finds a running torchprof-run: DIR/.control, and
// an entry per run in a per-user directory ($XDG_RUNTIME_DIR/torchprof, else
// /tmp/torchprof-UID, mode 0700), each holding lines "socket=…", "dir=…",
// "launcher=PID" and "target=PID". Both are removed when the run ends.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace torchprof::cli {

struct ControlEntry {
  std::string socket;
  std::string dir;
  pid_t launcher = 0;
  pid_t target = 0;
};

// Writes DIR/.control and the registry entry; removes both when destroyed.
class ControlRegistration {
 public:
  ControlRegistration(const std::string& dir, const std::string& socket);
  ~ControlRegistration();
  ControlRegistration(const ControlRegistration&) = delete;
  ControlRegistration& operator=(const ControlRegistration&) = delete;
  void set_target(pid_t target);  // rewrites both files with the target's pid

 private:
  void write_all();
  ControlEntry entry_;
  std::string dot_control_;
  std::string registry_file_;
};

std::string registry_dir();
// "key=value" lines; nullopt when unreadable (errno set).
std::optional<ControlEntry> read_control_file(const std::string& path);
// The registry's entries whose launcher still runs (stale ones are removed).
std::vector<ControlEntry> running_entries();

}  // namespace torchprof::cli
