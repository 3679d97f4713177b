// Starting the target and living alongside it: signal forwarding, reaping, exit status.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace torchprof::cli {

struct TargetStatus {
  int exit_code = 0;          // the exit code, or 128+N when killed by signal N
  std::optional<int> signal;  // N when killed by a signal
};

// Why nothing inside `path` can be traced, or "" when it can: a statically linked
// ELF (no PT_INTERP: LD_PRELOAD never applies) or a setuid/setgid file owned by
// someone else (the loader runs it in secure mode and ignores LD_PRELOAD). Scripts
// and unreadable files give "" (their interpreter decides).
std::string untraceable_reason(const std::string& path);

// While alive, SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGCHLD are blocked in the calling
// thread and in every thread started after it (construct it before the collector's
// thread), and collected synchronously. It also makes this process a child subreaper,
// so orphaned descendants of the target are reaped here rather than by init.
//
// With `on_usr2`, SIGUSR2 is blocked and collected too, and calls it (on the thread
// that waits) instead of being passed on: --capture-range signal.
class TargetProcess {
 public:
  explicit TargetProcess(std::function<void()> on_usr2 = {});
  ~TargetProcess();  // restores the signal mask
  TargetProcess(const TargetProcess&) = delete;
  TargetProcess& operator=(const TargetProcess&) = delete;

  // fork + execve. The target stays in our process group, so it keeps the terminal's
  // foreground and can read stdin. Returns 0, or the errno of a failed execve (the
  // child reports it through a close-on-exec pipe; the status is then 127 or 126).
  int spawn(const std::string& path, const std::vector<std::string>& argv,
            const std::vector<std::string>& env);

  // Blocks until the target exits. Signals sent to us by another process are passed
  // on to the target; those the terminal sent already reached it (same group).
  TargetStatus wait();

  // Sleeps up to `timeout` or until a signal, reaping any child. Returns true when
  // SIGINT, SIGTERM, SIGHUP or SIGQUIT arrived: the user asks us to stop waiting.
  bool pause(std::chrono::milliseconds timeout);

  pid_t pid() const { return pid_; }
  // Whether any child is still running: the target, or one of its orphaned
  // descendants that were handed to us. Accurate as of the last wait() or pause().
  bool children_left() const { return children_left_; }

 private:
  void reap();

  std::function<void()> on_usr2_;
  sigset_t blocked_{};
  sigset_t old_mask_{};
  pid_t pid_ = -1;
  std::optional<TargetStatus> status_;
  bool children_left_ = false;
  int interrupts_ = 0;  // SIGINTs while the program runs
};

}  // namespace torchprof::cli
