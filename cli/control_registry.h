// How `torchprof start|stop|trigger` finds a running torchprof-run: DIR/.control, and
// an entry per run in a per-user directory ($XDG_RUNTIME_DIR/torchprof, else
// /tmp/torchprof-UID, mode 0700), each holding lines "socket=…", "dir=…",
// "launcher=PID" and "target=PID". Both are removed when the run ends.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "common/safe_dir.h"

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
  // `held`: DIR as the launcher holds it open; .control is made inside it by name.
  ControlRegistration(const std::string& dir, const std::string& socket, const DirHandle& held = {});
  ~ControlRegistration();
  ControlRegistration(const ControlRegistration&) = delete;
  ControlRegistration& operator=(const ControlRegistration&) = delete;
  void set_target(pid_t target);  // rewrites both files with the target's pid

 private:
  void write_all();
  ControlEntry entry_;
  std::string dot_control_;
  DirHandle held_;
  std::string registry_file_;
};

std::string registry_dir();
// "key=value" lines; nullopt when unreadable (errno set). `why_untrusted` is set (and
// nullopt returned) when the file is a link, not a regular file, not ours, or writable
// by group or others: anyone could then name a socket of theirs in it.
std::optional<ControlEntry> read_control_file(const std::string& path, std::string* why_untrusted = nullptr);
// Why the socket `path` names cannot be trusted to be a run of ours: its directory is not
// a private (0700) directory of ours, or the socket is someone else's. "" when it can.
std::string untrusted_socket_reason(const std::string& path);
// The registry's entries whose launcher still runs (stale ones are removed). Throws
// std::runtime_error when the registry directory is not a private directory of ours
// (a link, another user's, or open to group or others): it is not read then.
std::vector<ControlEntry> running_entries();

}  // namespace torchprof::cli
