#include "cli/stale_sockets.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "cli/log.h"

namespace torchprof::cli {
namespace {

constexpr const char* kPrefix = "torchprof-";
constexpr size_t kRandomChars = 6;  // mkdtemp's XXXXXX

// The Unix sockets some process has open (bound), from /proc/net/unix, as DIR/SOCKET.
std::set<std::string> open_socket_paths(bool* readable) {
  std::set<std::string> paths;
  std::ifstream in("/proc/net/unix");
  *readable = static_cast<bool>(in);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string field, path;
    for (int i = 0; i < 7 && fields >> field; ++i) {
    }
    if (!(fields >> path) || path.empty() || path[0] != '/') continue;
    // Kept as DIR/SOCKET, its last two names: the directory's name is unique to its run,
    // and $TMPDIR may have been spelt differently by the run that made it.
    const size_t last = path.rfind('/');
    const size_t before = last == 0 ? std::string::npos : path.rfind('/', last - 1);
    paths.insert(before == std::string::npos ? path.substr(1) : path.substr(before + 1));
  }
  return paths;
}

std::vector<std::string> entries_of(int dir_fd) {
  std::vector<std::string> names;
  const int fd = ::dup(dir_fd);
  if (fd < 0) return names;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return names;
  }
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  return names;
}

bool is_socket_dir_name(const std::string& name) {
  if (name.size() != std::strlen(kPrefix) + kRandomChars || name.rfind(kPrefix, 0) != 0) return false;
  // A registry directory (torchprof-UID) holds regular files; it is skipped below anyway.
  return true;
}

// Removes base/name when it is a stale socket directory of ours.
bool remove_if_stale(int base_fd, const std::string& base, const std::string& name) {
  const int fd = ::openat(base_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st{};
  const bool ours = ::fstat(fd, &st) == 0 && st.st_uid == ::geteuid() && (st.st_mode & 07777) == 0700;
  std::vector<std::string> sockets = ours ? entries_of(fd) : std::vector<std::string>{};
  // The open sockets read after the directory was: a socket it holds was bound before,
  // so a live run's (another launcher starting at this moment) is among them.
  bool readable = false;
  const std::set<std::string> open_sockets =
      sockets.empty() ? std::set<std::string>{} : open_socket_paths(&readable);
  bool stale = !sockets.empty() && readable;
  for (const std::string& s : sockets) {
    struct stat sst{};
    const std::string path = name + "/" + s;
    if (::fstatat(fd, s.c_str(), &sst, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISSOCK(sst.st_mode) ||
        sst.st_uid != ::geteuid() || open_sockets.count(path) != 0) {
      stale = false;
      break;
    }
  }
  if (stale) {
    for (const std::string& s : sockets) ::unlinkat(fd, s.c_str(), 0);
  }
  ::close(fd);
  if (!stale || ::unlinkat(base_fd, name.c_str(), AT_REMOVEDIR) != 0) return false;
  log().debug("removed {}/{}, left behind by a launcher that was killed", base, name);
  return true;
}

}  // namespace

int remove_stale_socket_dirs(const std::vector<std::string>& bases) {
  bool readable = false;
  open_socket_paths(&readable);
  if (!readable) return 0;  // no way to tell a live run's socket from a dead one's
  int removed = 0;
  for (const std::string& base : bases) {
    const int base_fd = ::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (base_fd < 0) continue;
    for (const std::string& name : entries_of(base_fd)) {
      if (is_socket_dir_name(name) && remove_if_stale(base_fd, base, name)) ++removed;
    }
    ::close(base_fd);
  }
  return removed;
}

std::vector<std::string> socket_dir_bases() {
  std::vector<std::string> bases;
  const char* tmp = std::getenv("TMPDIR");
  if (tmp != nullptr && *tmp == '/' && std::string(tmp) != "/tmp") bases.emplace_back(tmp);
  bases.emplace_back("/tmp");
  return bases;
}

}  // namespace torchprof::cli
