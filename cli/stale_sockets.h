// Socket directories that launchers of ours left behind when they were killed
// (SIGKILL leaves no time to remove them): found and removed by the next run.
#pragma once

#include <string>
#include <vector>

namespace torchprof::cli {

// Removes every `torchprof-XXXXXX` directory in `bases` that is ours (our uid, mode
// 0700, not a link) and holds nothing but sockets of ours that no process has open any
// more (none listed in /proc/net/unix). Anything else is left as it is. Returns how many
// directories were removed.
int remove_stale_socket_dirs(const std::vector<std::string>& bases);

// $TMPDIR and /tmp, where the collector makes its socket directory.
std::vector<std::string> socket_dir_bases();

}  // namespace torchprof::cli
