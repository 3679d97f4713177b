#include "collector/control_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include <spdlog/spdlog.h>

#include "collector/control_state.h"

namespace torchprof {
namespace {

constexpr int kPollMs = 100;
constexpr size_t kMaxRequest = 128;

// One line, within a second: a client that sends nothing holds no one up for long.
std::string read_request(int fd) {
  std::string line;
  char buf[kMaxRequest];
  for (int waited = 0; waited < 10 && line.size() < kMaxRequest;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, kPollMs) == 0) {
      ++waited;
      continue;
    }
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    line.append(buf, static_cast<size_t>(n));
    if (const size_t nl = line.find('\n'); nl != std::string::npos) {
      line.resize(nl);
      return line;
    }
  }
  return line.size() < kMaxRequest ? line : std::string();
}

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto existing = spdlog::get("torchprof.collector");
    return existing ? existing : spdlog::default_logger();
  }();
  return *logger;
}

void reply(int fd, const std::string& text) {
  const std::string line = text + "\n";
  ssize_t ignored = ::send(fd, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)ignored;
}

}  // namespace

ControlServer::ControlServer(ControlState& state, std::function<void(const wire::Control&)> send)
    : state_(state), send_(std::move(send)) {}

ControlServer::~ControlServer() { stop(); }

void ControlServer::start(const std::string& dir) {
  path_ = dir + "/control.sock";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path_.size() >= sizeof(addr.sun_path)) {
    throw std::system_error(ENAMETOOLONG, std::generic_category(), "control socket " + path_);
  }
  std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::system_error(errno, std::generic_category(), "socket");
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(listen_fd_, 16) != 0) {
    const int err = errno;
    ::close(listen_fd_);
    listen_fd_ = -1;
    throw std::system_error(err, std::generic_category(), "listen " + path_);
  }
  thread_ = std::thread(&ControlServer::loop, this);
}

void ControlServer::loop() {
  while (!stopping_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, kPollMs) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    serve(fd);
    ::close(fd);
  }
}

void ControlServer::serve(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != ::geteuid()) {
    reply(fd, "refused: this run belongs to another user");
    log().warn("control socket: refused pid {} with uid {}", cred.pid, cred.uid);
    return;
  }
  const std::string request = read_request(fd);
  std::optional<wire::Control> to_send;
  const std::string answer = handle_control_request(state_, request, &to_send);
  if (to_send) send_(*to_send);
  if (!request.starts_with("status")) log().info("capture control: {} -> {}", request, answer);
  reply(fd, answer);
}

void ControlServer::stop() {
  stopping_.store(true);
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
  if (!path_.empty()) ::unlink(path_.c_str());
  path_.clear();
}

}  // namespace torchprof
