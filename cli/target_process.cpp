#include "cli/target_process.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <system_error>

#include "cli/errors.h"
#include "cli/log.h"

namespace torchprof::cli {
namespace {

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

TargetStatus status_from_wait(int wstatus) {
  if (WIFSIGNALED(wstatus)) return {128 + WTERMSIG(wstatus), WTERMSIG(wstatus)};
  return {WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : kExitInternal, std::nullopt};
}

// Runs in the forked child, so only async-signal-safe calls.
// The program gets SIGTERM when the launcher dies (killed with SIGKILL, say), rather
// than running on unobserved under init; if it died already, before the prctl, now.
[[noreturn]] void exec_child(const char* path, char* const* argv, char* const* envp,
                             const sigset_t& mask, int report_fd, pid_t launcher) {
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != launcher) ::_exit(128 + SIGTERM);
  ::sigprocmask(SIG_SETMASK, &mask, nullptr);
  ::execve(path, argv, envp);
  const int err = errno;
  ssize_t ignored = ::write(report_fd, &err, sizeof(err));
  (void)ignored;
  ::_exit(err == ENOENT ? kExitNotFound : kExitCannotExecute);
}

// Whether the ELF file behind `fd` asks for a program interpreter (ld.so). Ehdr and
// Phdr are the 32- or 64-bit header types; nullopt when the file is not such an ELF.
template <typename Ehdr, typename Phdr>
std::optional<bool> has_interpreter(int fd) {
  Ehdr eh{};
  if (::pread(fd, &eh, sizeof eh, 0) != static_cast<ssize_t>(sizeof eh)) return std::nullopt;
  if (eh.e_phentsize != sizeof(Phdr) || eh.e_phnum == 0 || eh.e_phnum > 4096) return std::nullopt;
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Phdr ph{};
    const off_t at = static_cast<off_t>(eh.e_phoff + uint64_t{i} * sizeof(Phdr));
    if (::pread(fd, &ph, sizeof ph, at) != static_cast<ssize_t>(sizeof ph)) return std::nullopt;
    if (ph.p_type == PT_INTERP) return true;
  }
  return false;
}

std::optional<bool> elf_has_interpreter(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  unsigned char ident[EI_NIDENT] = {};
  std::optional<bool> result;
  if (::pread(fd, ident, sizeof ident, 0) == static_cast<ssize_t>(sizeof ident) &&
      std::memcmp(ident, ELFMAG, SELFMAG) == 0) {
    if (ident[EI_CLASS] == ELFCLASS64) result = has_interpreter<Elf64_Ehdr, Elf64_Phdr>(fd);
    if (ident[EI_CLASS] == ELFCLASS32) result = has_interpreter<Elf32_Ehdr, Elf32_Phdr>(fd);
  }
  ::close(fd);
  return result;
}

}  // namespace

std::string untraceable_reason(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0 &&
      (((st.st_mode & S_ISUID) && st.st_uid != ::geteuid()) ||
       ((st.st_mode & S_ISGID) && st.st_gid != ::getegid()))) {
    return "is setuid/setgid, so the loader ignores LD_PRELOAD for it; nothing inside it can be traced";
  }
  if (elf_has_interpreter(path) == std::optional<bool>(false)) {
    return "is statically linked; nothing inside it can be traced";
  }
  return "";
}

TargetProcess::TargetProcess(std::function<void()> on_usr2) : on_usr2_(std::move(on_usr2)) {
  sigemptyset(&blocked_);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) sigaddset(&blocked_, sig);
  if (on_usr2_) sigaddset(&blocked_, SIGUSR2);
  ::pthread_sigmask(SIG_BLOCK, &blocked_, &old_mask_);
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    log().debug("PR_SET_CHILD_SUBREAPER failed: {}", std::strerror(errno));
  }
}

TargetProcess::~TargetProcess() { ::pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr); }

int TargetProcess::spawn(const std::string& path, const std::vector<std::string>& argv,
                         const std::vector<std::string>& env) {
  std::vector<char*> c_argv = c_strings(argv);
  std::vector<char*> c_env = c_strings(env);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw std::system_error(errno, std::generic_category(), "pipe2");
  }
  const pid_t launcher = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::system_error(err, std::generic_category(), "fork");
  }
  if (pid_ == 0) {
    ::close(fds[0]);
    exec_child(path.c_str(), c_argv.data(), c_env.data(), old_mask_, fds[1], launcher);
  }
  ::close(fds[1]);
  int exec_errno = 0;
  ssize_t n;
  do {
    n = ::read(fds[0], &exec_errno, sizeof(exec_errno));
  } while (n < 0 && errno == EINTR);
  ::close(fds[0]);
  if (n != static_cast<ssize_t>(sizeof(exec_errno))) return 0;  // EOF: execve succeeded
  reap();
  return exec_errno;
}

TargetStatus TargetProcess::wait() {
  while (!status_) {
    siginfo_t info{};
    const timespec tick{0, 200 * 1000 * 1000};
    const int sig = ::sigtimedwait(&blocked_, &info, &tick);
    reap();
    if (sig <= 0 || sig == SIGCHLD || status_) continue;
    if (sig == SIGUSR2 && on_usr2_) {
      on_usr2_();
      continue;
    }
    // A program that ignores Ctrl-C: the second sends it SIGTERM, the third SIGKILL. The
    // capture is finished as after any other end of the program.
    if (sig == SIGINT && ++interrupts_ >= 2) {
      const int escalated = interrupts_ == 2 ? SIGTERM : SIGKILL;
      std::cerr << "torchprof: interrupted again: sending " << (escalated == SIGTERM ? "SIGTERM" : "SIGKILL")
                << " to pid " << pid_ << (escalated == SIGTERM ? " (once more: SIGKILL)" : "") << "\n";
      ::kill(pid_, escalated);
      continue;
    }
    // si_code <= 0: sent with kill()/sigqueue()/tgkill() by some process. A terminal's
    // SIGINT (si_code SI_KERNEL) already went to the whole foreground group.
    if (info.si_code <= 0 && info.si_pid != pid_) {
      log().debug("passing signal {} on to pid {}", sig, pid_);
      ::kill(pid_, sig);
    }
  }
  return *status_;
}

bool TargetProcess::pause(std::chrono::milliseconds timeout) {
  siginfo_t info{};
  const timespec tick{static_cast<time_t>(timeout.count() / 1000),
                      static_cast<long>((timeout.count() % 1000) * 1000 * 1000)};
  const int sig = ::sigtimedwait(&blocked_, &info, &tick);
  reap();
  if (sig == SIGUSR2 && on_usr2_) return false;  // the run is ending: a toggle changes nothing now
  return sig > 0 && sig != SIGCHLD;
}

void TargetProcess::reap() {
  for (;;) {
    int wstatus = 0;
    const pid_t done = ::waitpid(-1, &wstatus, WNOHANG);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) {
      children_left_ = done == 0;  // 0: children exist, none has exited; -1: ECHILD
      return;
    }
    if (done == pid_) {
      status_ = status_from_wait(wstatus);
    } else {
      log().debug("reaped orphaned descendant {}", done);
    }
  }
}

}  // namespace torchprof::cli
