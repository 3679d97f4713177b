#include "common/safe_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <stdexcept>

#include "common/errors.h"

namespace torchprof {
namespace {

constexpr int kMaxLinks = 40;  // as the kernel's own limit on links in one lookup

std::deque<std::string> components(const std::string& path) {
  std::deque<std::string> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    if (slash > start) out.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

int open_root(bool absolute) {
  return ::open(absolute ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
}

std::string link_target(int dir, const std::string& name) {
  char buf[4096];
  const ssize_t n = ::readlinkat(dir, name.c_str(), buf, sizeof buf);
  if (n < 0 || static_cast<size_t>(n) >= sizeof buf) return "";
  return std::string(buf, static_cast<size_t>(n));
}

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

DirHandle::DirHandle(int fd)
    : fd_(new int(fd), [](int* p) {
        ::close(*p);
        delete p;
      }) {}

DirHandle open_dir_safely(const std::string& path, bool create) {
  auto failure = [&](const std::string& why) { return InputError("cannot open " + path + ": " + why); };
  if (path.empty()) throw InputError("the directory name is empty");
  std::deque<std::string> rest = components(path);
  int cur = open_root(path[0] == '/');
  if (cur < 0) throw failure(errno_text(errno));
  DirHandle held(cur);  // closes each directory once the next one is open
  int links = 0;
  while (!rest.empty()) {
    const std::string name = rest.front();
    rest.pop_front();
    if (name == ".") continue;
    int next = ::openat(held.fd(), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0 && errno == ENOENT && create) {
      if (::mkdirat(held.fd(), name.c_str(), 0755) != 0 && errno != EEXIST) throw failure(errno_text(errno));
      next = ::openat(held.fd(), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (next >= 0) {
      held = DirHandle(next);
      continue;
    }
    const int err = errno;
    struct stat st{};
    if ((err != ENOTDIR && err != ELOOP) || ::fstatat(held.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      throw failure(errno_text(err));
    }
    if (!S_ISLNK(st.st_mode)) throw failure(name + " is not a directory");
    if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
      throw failure(name + " is a symbolic link of another user (uid " + std::to_string(st.st_uid) +
                    "), which is not followed");
    }
    if (++links > kMaxLinks) throw failure(errno_text(ELOOP));
    const std::string target = link_target(held.fd(), name);
    if (target.empty()) throw failure("cannot read the link " + name);
    std::deque<std::string> more = components(target);
    rest.insert(rest.begin(), more.begin(), more.end());
    if (target[0] == '/') {
      const int root = open_root(true);
      if (root < 0) throw failure(errno_text(errno));
      held = DirHandle(root);
    }
  }
  // Opened for reading: its entries can be listed.
  const int fd = ::openat(held.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw failure(errno_text(errno));
  return DirHandle(fd);
}

std::string unsafe_dir_reason(const DirHandle& dir, const std::string& shown) {
  struct stat st{};
  if (::fstat(dir.fd(), &st) != 0) return shown + ": " + errno_text(errno);
  if (st.st_uid != ::geteuid()) {
    return shown + " belongs to another user (uid " + std::to_string(st.st_uid) + ")";
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
    return shown + " can be written by " + ((st.st_mode & S_IWOTH) != 0 ? "others" : "its group") +
           " (chmod go-w " + shown + ", or use another directory)";
  }
  return "";
}

DirHandle sub_dir(const DirHandle& parent, const std::string& name, const std::string& shown) {
  if (::mkdirat(parent.fd(), name.c_str(), 0755) != 0 && errno != EEXIST) {
    throw InputError("cannot create " + shown + ": " + errno_text(errno));
  }
  const int fd = ::openat(parent.fd(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw InputError("cannot open " + shown + ": " +
                     (err == ELOOP || err == ENOTDIR ? "a link or not a directory" : errno_text(err)));
  }
  DirHandle dir(fd);
  if (const std::string why = unsafe_dir_reason(dir, shown); !why.empty()) throw InputError(why);
  return dir;
}

void write_file_at(const DirHandle& dir, const std::string& name, std::string_view text,
                   const std::string& shown, unsigned mode) {
  static std::atomic<unsigned> counter{0};
  const std::string tmp = "." + name + "." + std::to_string(::getpid()) + "." + std::to_string(counter++) + ".tmp";
  auto fail = [&](int err) {
    ::unlinkat(dir.fd(), tmp.c_str(), 0);
    throw std::runtime_error("cannot write " + shown + ": " + errno_text(err));
  };
  const int fd = ::openat(dir.fd(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) throw std::runtime_error("cannot write " + shown + ": " + errno_text(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      fail(err);
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) fail(errno);
  if (::renameat(dir.fd(), tmp.c_str(), dir.fd(), name.c_str()) != 0) fail(errno);
}

int open_file_at(const DirHandle& dir, const std::string& name, bool append, const std::string& shown) {
  const int flags = O_WRONLY | O_NOFOLLOW | O_CLOEXEC | (append ? O_APPEND : O_CREAT | O_TRUNC);
  const int fd = ::openat(dir.fd(), name.c_str(), flags, 0644);
  if (fd < 0) throw std::runtime_error("cannot write " + shown + ": " + errno_text(errno));
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::runtime_error("cannot write " + shown + ": not a regular file");
  }
  return fd;
}

bool exists_at(const DirHandle& dir, const std::string& name) {
  struct stat st{};
  return ::fstatat(dir.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT;
}

}  // namespace torchprof
