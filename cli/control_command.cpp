#include "cli/control_command.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>
#include <memory>
#include <thread>

#include "cli/control_registry.h"
#include "cli/errors.h"
#include "cli/validators.h"

namespace torchprof::cli {
namespace {

struct ControlOptions {
  std::string target;  // DIR, PID or "" (the only run going)
  uint32_t steps = 0;
  double wait_s = -1;  // < 0: do not wait
};

// A failure with its exit code and one line.
struct ControlFailure {
  int code;
  std::string message;
};

bool all_digits(const std::string& s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos; }

ControlEntry find_run(const std::string& target) {
  if (target.empty() || all_digits(target)) {
    std::vector<ControlEntry> runs;
    try {
      runs = running_entries();
    } catch (const std::runtime_error& e) {
      throw ControlFailure{kExitControlRefused, std::string("refused: ") + e.what()};
    }
    if (!target.empty()) {
      const pid_t pid = static_cast<pid_t>(std::stol(target));
      for (const ControlEntry& e : runs) {
        if (e.launcher == pid || e.target == pid) return e;
      }
      throw ControlFailure{kExitUsage, "no running capture of yours with pid " + target};
    }
    if (runs.empty()) throw ControlFailure{kExitUsage, "no running capture of yours (start one with torchprof-run)"};
    if (runs.size() > 1) {
      throw ControlFailure{kExitUsage, std::to_string(runs.size()) + " captures are running: name one by DIR or PID"};
    }
    return runs.front();
  }
  std::string why;
  std::optional<ControlEntry> e = read_control_file(target + "/.control", &why);
  if (!e) {
    if (!why.empty()) throw ControlFailure{kExitControlRefused, target + ": refused: " + why};
    if (errno == EACCES) throw ControlFailure{kExitControlRefused, target + ": refused: the run belongs to another user"};
    throw ControlFailure{kExitUsage, target + ": no running capture (the run has finished, or it is not a torchprof-run output directory)"};
  }
  return *e;
}

// The server must be a process of ours: another user's could answer anything.
void check_server_uid(int fd, const ControlEntry& run) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    const int err = errno;
    ::close(fd);
    throw ControlFailure{kExitControlRefused, run.dir + ": refused: the server's uid is unknown (" +
                                                  std::strerror(err) + ")"};
  }
  if (cred.uid != ::geteuid()) {
    ::close(fd);
    throw ControlFailure{kExitControlRefused, run.dir + ": refused: " + run.socket + " is served by uid " +
                                                  std::to_string(cred.uid) + ", not by you"};
  }
}

// One request, one reply line.
std::string ask(const ControlEntry& run, const std::string& request) {
  if (const std::string why = untrusted_socket_reason(run.socket); !why.empty()) {
    throw ControlFailure{kExitControlRefused, run.dir + ": refused: " + why};
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (run.socket.size() >= sizeof(addr.sun_path)) throw ControlFailure{kExitUsage, "bad control socket path"};
  std::memcpy(addr.sun_path, run.socket.c_str(), run.socket.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw ControlFailure{kExitUsage, std::string("socket: ") + std::strerror(errno)};
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EACCES || err == EPERM) {
      throw ControlFailure{kExitControlRefused, run.dir + ": refused: the run belongs to another user"};
    }
    throw ControlFailure{kExitUsage, run.dir + ": no running capture (the run has finished)"};
  }
  check_server_uid(fd, run);
  const std::string line = request + "\n";
  // A refusal may come (and the socket close) before the request is sent: the reply is
  // read all the same.
  ssize_t sent = ::send(fd, line.data(), line.size(), MSG_NOSIGNAL);
  (void)sent;
  std::string answer;
  char buf[256];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    answer.append(buf, static_cast<size_t>(n));
    if (answer.find('\n') != std::string::npos) break;
  }
  ::close(fd);
  if (const size_t nl = answer.find('\n'); nl != std::string::npos) answer.resize(nl);
  if (answer.starts_with("refused")) throw ControlFailure{kExitControlRefused, run.dir + ": " + answer};
  if (answer.empty()) throw ControlFailure{kExitUsage, run.dir + ": no running capture (the run has finished)"};
  return answer;
}

uint32_t window_of(const std::string& answer) {
  const size_t at = answer.find("window=");
  return at == std::string::npos ? 0 : static_cast<uint32_t>(std::stoul(answer.substr(at + 7)));
}

int wait_closed(const ControlEntry& run, uint32_t window, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    std::string status;
    try {
      status = ask(run, "status " + std::to_string(window));
    } catch (const ControlFailure&) {
      std::cerr << "torchprof: the run ended before window " << window << " closed\n";
      return kExitControlWaitFailed;
    }
    if (status == "closed") {
      std::cout << "window " << window << " closed\n";
      return 0;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      std::cerr << "torchprof: window " << window << " is still " << status << " after " << seconds << " s\n";
      return kExitControlWaitFailed;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

int run_control(const std::string& request, const ControlOptions& options) {
  try {
    const ControlEntry run = find_run(options.target);
    const std::string answer = ask(run, request);
    if (!answer.starts_with("ok")) {
      std::cerr << "torchprof: " << run.dir << ": " << (answer.starts_with("error ") ? answer.substr(6) : answer)
                << "\n";
      return kExitUsage;
    }
    const uint32_t window = window_of(answer);
    std::cout << request.substr(0, request.find(' ')) << ": " << run.dir << " window " << window << "\n";
    if (options.wait_s >= 0) return wait_closed(run, window, options.wait_s);
    return 0;
  } catch (const ControlFailure& f) {
    std::cerr << "torchprof: " << f.message << "\n";
    return f.code;
  }
}

void add_target(CLI::App& app, ControlOptions& options) {
  app.add_option("target", options.target,
                 "The run: its output DIR, the pid of torchprof-run or of its program "
                 "(default: the only run of yours going)");
}

}  // namespace

CommandAction setup_start_command(CLI::App& app, const CommandLine&) {
  auto options = std::make_shared<ControlOptions>();
  add_target(app, *options);
  return [options] { return run_control("start", *options); };
}

CommandAction setup_stop_command(CLI::App& app, const CommandLine&) {
  auto options = std::make_shared<ControlOptions>();
  add_target(app, *options);
  return [options] { return run_control("stop", *options); };
}

CommandAction setup_trigger_command(CLI::App& app, const CommandLine&) {
  auto options = std::make_shared<ControlOptions>();
  add_target(app, *options);
  app.add_option("--steps", options->steps, "Steps to record from the next step boundary")
      ->required()
      ->check(CLI::Range(1u, 1000000000u));
  app.add_option("--wait", options->wait_s, "Wait until the window has closed, at most W seconds")
      ->check(seconds());
  return [options] { return run_control("trigger " + std::to_string(options->steps), *options); };
}

}  // namespace torchprof::cli
