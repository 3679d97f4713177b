#include "cli/control_registry.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <fstream>
#include <sstream>

#include "cli/log.h"

namespace torchprof::cli {
namespace {

std::string entry_text(const ControlEntry& e) {
  std::ostringstream out;
  out << "socket=" << e.socket << "\ndir=" << e.dir << "\nlauncher=" << e.launcher << "\ntarget=" << e.target
      << "\n";
  return out.str();
}

// Written whole under a temporary name, then renamed: a reader sees all or nothing.
bool write_private(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok && ::rename(tmp.c_str(), path.c_str()) == 0;
}

// The directory, created 0700 when missing; "" when it is not ours or not private.
std::string ensure_registry_dir() {
  const std::string dir = registry_dir();
  ::mkdir(dir.c_str(), 0700);
  struct stat st{};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & 077) != 0) {
    return "";
  }
  return dir;
}

bool alive(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

}  // namespace

std::string registry_dir() {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  if (runtime != nullptr && *runtime == '/') return std::string(runtime) + "/torchprof";
  return "/tmp/torchprof-" + std::to_string(::geteuid());
}

ControlRegistration::ControlRegistration(const std::string& dir, const std::string& socket, const DirHandle& held)
    : held_(held) {
  entry_.socket = socket;
  entry_.dir = dir;
  entry_.launcher = ::getpid();
  dot_control_ = dir + "/.control";
  if (const std::string reg = ensure_registry_dir(); !reg.empty()) {
    registry_file_ = reg + "/" + std::to_string(entry_.launcher);
  } else {
    log().warn("{} is not a private directory of ours: `torchprof start` finds this run only by its DIR",
               registry_dir());
  }
  write_all();
}

ControlRegistration::~ControlRegistration() {
  if (held_.valid()) {
    ::unlinkat(held_.fd(), ".control", 0);
  } else {
    ::unlink(dot_control_.c_str());
  }
  if (!registry_file_.empty()) ::unlink(registry_file_.c_str());
}

void ControlRegistration::set_target(pid_t target) {
  entry_.target = target;
  write_all();
}

void ControlRegistration::write_all() {
  const std::string text = entry_text(entry_);
  bool written = false;
  if (held_.valid()) {
    try {
      write_file_at(held_, ".control", text, dot_control_, 0600);
      written = true;
    } catch (const std::exception&) {
    }
  } else {
    written = write_private(dot_control_, text);
  }
  if (!written) log().warn("cannot write {}: capture control by DIR is off", dot_control_);
  if (!registry_file_.empty()) write_private(registry_file_, text);
}

std::optional<ControlEntry> read_control_file(const std::string& path, std::string* why_untrusted) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ELOOP && why_untrusted != nullptr) *why_untrusted = path + " is a symbolic link";
    return std::nullopt;
  }
  struct stat st{};
  std::string why;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    why = path + " is not a regular file";
  } else if (st.st_uid != ::geteuid()) {
    why = path + " belongs to another user (uid " + std::to_string(st.st_uid) + ")";
  } else if ((st.st_mode & 022) != 0) {
    why = path + " can be written by group or others";
  }
  if (!why.empty()) {
    ::close(fd);
    if (why_untrusted != nullptr) *why_untrusted = why;
    errno = EACCES;
    return std::nullopt;
  }
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0 && text.size() < (1u << 16);) text.append(buf, size_t(n));
  ::close(fd);
  std::istringstream in(text);
  ControlEntry e;
  std::string line;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq);
    const std::string value = line.substr(eq + 1);
    if (key == "socket") e.socket = value;
    if (key == "dir") e.dir = value;
    if (key == "launcher") e.launcher = static_cast<pid_t>(std::atoi(value.c_str()));
    if (key == "target") e.target = static_cast<pid_t>(std::atoi(value.c_str()));
  }
  if (e.socket.empty()) {
    errno = ENOENT;
    return std::nullopt;
  }
  return e;
}

std::string untrusted_socket_reason(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos || slash == 0) return path + " is not in a directory of its own";
  const std::string dir = path.substr(0, slash);
  struct stat st{};
  if (::lstat(dir.c_str(), &st) != 0) return "";  // gone: connecting says the run has finished
  if (!S_ISDIR(st.st_mode)) return "the socket's directory " + dir + " is a link or not a directory";
  if (st.st_uid != ::geteuid()) return "the socket's directory " + dir + " belongs to another user (uid " + std::to_string(st.st_uid) + ")";
  if ((st.st_mode & 077) != 0) return "the socket's directory " + dir + " is not private (mode 0700)";
  if (::lstat(path.c_str(), &st) == 0 && (!S_ISSOCK(st.st_mode) || st.st_uid != ::geteuid())) {
    return path + " is not a socket of ours";
  }
  return "";
}

std::vector<ControlEntry> running_entries() {
  std::vector<ControlEntry> out;
  const std::string dir = registry_dir();
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) {
    if (errno == ENOENT) return out;
    throw std::runtime_error(dir + (errno == ELOOP || errno == ENOTDIR ? " is a link or not a directory"
                                                                        : ": " + std::string(std::strerror(errno))));
  }
  struct stat st{};
  if (::fstat(dfd, &st) != 0 || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) {
    ::close(dfd);
    throw std::runtime_error(dir + (st.st_uid != ::geteuid()
                                        ? " belongs to another user (uid " + std::to_string(st.st_uid) + ")"
                                        : " is open to group or others (it must be mode 0700)"));
  }
  DIR* d = ::fdopendir(dfd);
  if (d == nullptr) {
    ::close(dfd);
    return out;
  }
  while (dirent* ent = ::readdir(d)) {
    const std::string name = ent->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string path = dir + "/" + name;
    std::string why;
    std::optional<ControlEntry> e = read_control_file(path, &why);
    if (!e) {
      if (!why.empty()) log().warn("ignoring {}", why);
      continue;
    }
    if (!alive(e->launcher)) {
      ::unlink(path.c_str());  // a launcher killed before it could clean up
      continue;
    }
    out.push_back(*e);
  }
  ::closedir(d);
  return out;
}

}  // namespace torchprof::cli
