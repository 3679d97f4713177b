#include "inject/connection.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/wire/env.h"
#include "inject/arena.h"
#include "inject/clock.h"

namespace torchprof::inject {
namespace {

constexpr uint64_t kRetryNs = 1000000000ull;
// Our socket lives at or above this descriptor number, away from the low numbers a
// program reuses (and may dup2 onto) without asking.
constexpr int kHighFd = 900;
constexpr size_t kMaxCmdline = 1u << 20;
// Rank, local rank and world size as torchrun, Slurm and Open MPI set them, and the worker name.
constexpr const char* kHelloEnv[] = {"RANK",         "LOCAL_RANK",          "WORLD_SIZE",
                                     "SLURM_PROCID", "SLURM_LOCALID",       "SLURM_NTASKS",
                                     "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                     "OMPI_COMM_WORLD_SIZE", "TORCHPROF_WORKER_NAME"};

void set_timeout(int fd, int option, int seconds) {
  timeval tv{seconds, 0};
  setsockopt(fd, SOL_SOCKET, option, &tv, sizeof(tv));
}

void read_file(const char* path, std::vector<char>& out, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    size_t take = out.size() + static_cast<size_t>(n) > cap ? cap - out.size() : static_cast<size_t>(n);
    out.insert(out.end(), buf, buf + take);
    if (out.size() >= cap) break;
  }
  close(fd);
}

// The Hello body: fixed part, then exe, argv, host and the env entries the
// analysis needs (rank and worker name).
std::vector<char> build_hello() {
  char exe[4096];
  ssize_t exe_len = readlink("/proc/self/exe", exe, sizeof(exe));
  if (exe_len < 0) exe_len = 0;
  std::vector<char> cmdline;
  read_file("/proc/self/cmdline", cmdline, kMaxCmdline);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::vector<char> env;
  for (const char* key : kHelloEnv) {
    const char* v = getenv(key);
    if (v == nullptr) continue;
    env.insert(env.end(), key, key + strlen(key));
    env.push_back('=');
    env.insert(env.end(), v, v + strlen(v));
    env.push_back('\0');
  }
  wire::Hello h{};
  memcpy(h.magic, wire::kHelloMagic, sizeof(h.magic));
  h.version = wire::kProtocolVersion;
  h.slot_size = wire::kSlotSize;
  h.pid = getpid();
  h.ppid = getppid();
  timespec real;
  h.mono_ns = now_ns();  // read back to back: the pair converts record times
  clock_gettime(CLOCK_REALTIME, &real);
  h.real_ns = static_cast<uint64_t>(real.tv_sec) * 1000000000ull + static_cast<uint64_t>(real.tv_nsec);
  if (const char* shift = getenv(env::kTestClockShiftNs); shift != nullptr && *shift != '\0') {
    h.real_ns += static_cast<uint64_t>(strtoll(shift, nullptr, 10));
  }
  h.exe_len = static_cast<uint32_t>(exe_len);
  h.cmdline_len = static_cast<uint32_t>(cmdline.size());
  h.host_len = static_cast<uint32_t>(strlen(host));
  h.env_len = static_cast<uint32_t>(env.size());
  std::vector<char> body(sizeof(h));
  memcpy(body.data(), &h, sizeof(h));
  body.insert(body.end(), exe, exe + exe_len);
  body.insert(body.end(), cmdline.begin(), cmdline.end());
  body.insert(body.end(), host, host + h.host_len);
  body.insert(body.end(), env.begin(), env.end());
  return body;
}

bool recv_exact(int fd, void* dst, size_t n) {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

bool Connection::ensure(const Config& cfg, uint64_t now) {
  if (state_ == State::kUp) {
    if (still_ours()) return true;
    notice(LogLevel::kInfo, "the program closed the collector connection's descriptor; connecting again");
    fd_ = -1;  // no longer ours to close
    state_ = State::kIdle;
  }
  if (state_ == State::kRefused || state_ == State::kGone) return false;
  if (state_ == State::kFailed && now - last_attempt_ns_ < kRetryNs) return false;
  last_attempt_ns_ = now;
  if (!connect_socket(cfg.socket_path)) {
    if (state_ != State::kFailed) notice(LogLevel::kWarn, "cannot reach the collector at %s: %s", cfg.socket_path, strerror(errno));
    state_ = State::kFailed;
    return false;
  }
  if (!handshake()) {
    // The program closed our descriptor mid-handshake (a daemon closing every fd):
    // one immediate second try, on a descriptor it has not seen.
    if (state_ != State::kIdle || !connect_socket(cfg.socket_path) || !handshake()) return false;
  }
  state_ = State::kUp;
  ++epoch_;
  send_arena();
  return true;
}

void Connection::send_arena() {
  Arena& a = arena();
  if (peer_version_ < 3 || !a.ready() || !check_before_send()) return;
  wire::MsgHeader mh{static_cast<uint32_t>(wire::MsgType::kArena), sizeof(wire::arena::ArenaInfo)};
  wire::arena::ArenaInfo info{a.size(), a.base(), wire::arena::kVersion,
                              static_cast<uint32_t>(sizeof(wire::arena::ThreadSlot))};
  iovec iov[2] = {{&mh, sizeof(mh)}, {&info, sizeof(info)}};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  cmsghdr* cm = reinterpret_cast<cmsghdr*>(control);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  const int fd = a.fd();
  memcpy(CMSG_DATA(cm), &fd, sizeof(fd));
  send_all(iov, 2, control, sizeof(control));
}

bool Connection::connect_socket(const char* path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path == nullptr || strlen(path) >= sizeof(addr.sun_path)) {
    errno = ENAMETOOLONG;
    return false;
  }
  strcpy(addr.sun_path, path);
  // A full listen backlog answers EAGAIN: many processes may start at once.
  for (int attempt = 0; attempt < 20; ++attempt) {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return false;
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      set_timeout(fd_, SO_SNDTIMEO, 1);
      set_timeout(fd_, SO_RCVTIMEO, 1);
      settle_fd();
      return true;
    }
    int err = errno;
    close(fd_);
    fd_ = -1;
    errno = err;
    if (err != EAGAIN && err != EINTR) return false;
    timespec pause{0, 10 * 1000000L};
    nanosleep(&pause, nullptr);
  }
  return false;
}

void Connection::settle_fd() {
  int high = fcntl(fd_, F_DUPFD_CLOEXEC, kHighFd);
  if (high >= 0) {
    close(fd_);
    fd_ = high;
  }
  struct stat st{};
  if (fstat(fd_, &st) == 0) {
    dev_ = static_cast<uint64_t>(st.st_dev);
    ino_ = static_cast<uint64_t>(st.st_ino);
  }
}

bool Connection::still_ours() {
  struct stat st{};
  return fd_ >= 0 && fstat(fd_, &st) == 0 && S_ISSOCK(st.st_mode) && static_cast<uint64_t>(st.st_dev) == dev_ &&
         static_cast<uint64_t>(st.st_ino) == ino_;
}

// Checked before every message: a write into a descriptor the program now owns
// would corrupt its files or sockets.
bool Connection::check_before_send() {
  if (state_ != State::kUp) return false;
  if (still_ours()) return true;
  notice(LogLevel::kInfo, "the program closed the collector connection's descriptor");
  fd_ = -1;
  state_ = State::kIdle;
  return false;
}

bool Connection::handshake() {
  std::vector<char> body = build_hello();
  wire::MsgHeader mh{static_cast<uint32_t>(wire::MsgType::kHello), static_cast<uint32_t>(body.size())};
  iovec iov[2] = {{&mh, sizeof(mh)}, {body.data(), body.size()}};
  if (!still_ours()) {  // closed (and maybe reused) by the program since connect()
    fd_ = -1;
    state_ = State::kIdle;
    return false;
  }
  if (!send_all(iov, 2)) {
    if (fd_ >= 0) fail();  // a collector too busy to take a Hello: try again later
    return false;
  }
  wire::MsgHeader reply{};
  wire::HelloAck ack{};
  errno = 0;  // an orderly close leaves errno alone
  if (!recv_exact(fd_, &reply, sizeof(reply)) || reply.type != static_cast<uint32_t>(wire::MsgType::kHelloAck) ||
      reply.size != sizeof(ack) || !recv_exact(fd_, &ack, sizeof(ack))) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      fail();  // no answer within the timeout: a stalled collector; try again later
      return false;
    }
    if (errno == EBADF || errno == ENOTSOCK || !still_ours()) {
      fd_ = -1;  // closed under us by the program: not a refusal
      state_ = State::kIdle;
      return false;
    }
    notice(LogLevel::kWarn, "the collector did not answer; events of this process are dropped");
    fail();
    state_ = State::kRefused;
    return false;
  }
  peer_version_ = ack.version;
  if (ack.status != static_cast<uint32_t>(wire::AckStatus::kOk)) {
    notice(LogLevel::kWarn, "the collector refused this process (status %u, collector protocol %u, ours %u)",
           ack.status, ack.version, wire::kProtocolVersion);
    fail();
    state_ = State::kRefused;
    return false;
  }
  return true;
}

bool Connection::send_all(iovec* iov, int count, void* control, size_t control_len) {
  bool started = false;
  while (count > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    if (!started) {
      msg.msg_control = control;
      msg.msg_controllen = control_len;
    }
    ssize_t n = sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // The send timed out: the collector is not reading (stopped, swamped).
      // Before the first byte the message is dropped (the caller counts it) and the
      // stream stays intact; inside a message it must be finished. Only this thread
      // waits: the program's threads drop into their full rings meanwhile.
      if (!started) return false;
      continue;
    }
    if (n < 0 && (errno == EBADF || errno == ENOTSOCK)) {
      fd_ = -1;  // the program closed it under us: connect again next time
      state_ = State::kIdle;
      return false;
    }
    if (n < 0) {
      // Peer gone; a partial message leaves the stream unusable.
      if (state_ == State::kUp) notice(LogLevel::kWarn, "lost the collector (%s); events of this process are dropped", strerror(errno));
      fail();
      state_ = State::kGone;
      return false;
    }
    started = true;
    auto left = static_cast<size_t>(n);
    while (count > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --count;
    }
    if (count > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return true;
}

bool Connection::send_frame(const wire::FrameHeader& header, const void* data, uint32_t size) {
  if (!check_before_send()) return false;
  wire::MsgHeader mh{static_cast<uint32_t>(wire::MsgType::kFrame), static_cast<uint32_t>(sizeof(header) + size)};
  wire::FrameHeader fh = header;
  iovec iov[3] = {{&mh, sizeof(mh)}, {&fh, sizeof(fh)}, {const_cast<void*>(data), size}};
  return send_all(iov, 3);
}

bool Connection::send_bye(const wire::Bye& bye) {
  if (!check_before_send()) return false;
  wire::MsgHeader mh{static_cast<uint32_t>(wire::MsgType::kBye), sizeof(bye)};
  wire::Bye copy = bye;
  iovec iov[2] = {{&mh, sizeof(mh)}, {&copy, sizeof(copy)}};
  return send_all(iov, 2);
}

bool Connection::send_window_event(const wire::WindowEvent& event) {
  if (!check_before_send()) return false;
  wire::MsgHeader mh{static_cast<uint32_t>(wire::MsgType::kWindowEvent), sizeof(event)};
  wire::WindowEvent copy = event;
  iovec iov[2] = {{&mh, sizeof(mh)}, {&copy, sizeof(copy)}};
  return send_all(iov, 2);
}

int Connection::poll_control(wire::Control* out, int max) {
  int n = 0;
  while (n < max && state_ == State::kUp) {
    ssize_t got = recv(fd_, in_ + in_len_, sizeof(in_) - in_len_, MSG_DONTWAIT);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // nothing more now (or the peer closed: the next send tells)
    in_len_ += static_cast<uint32_t>(got);
    uint32_t pos = 0;
    for (;;) {
      if (skip_ != 0) {
        const uint32_t take = in_len_ - pos < skip_ ? in_len_ - pos : skip_;
        pos += take;
        skip_ -= take;
        if (skip_ != 0) break;
      }
      wire::MsgHeader mh{};
      if (in_len_ - pos < sizeof(mh)) break;
      memcpy(&mh, in_ + pos, sizeof(mh));
      if (mh.type != static_cast<uint32_t>(wire::MsgType::kControl) || mh.size != sizeof(wire::Control)) {
        pos += sizeof(mh);
        skip_ = mh.size;
        continue;
      }
      if (in_len_ - pos < sizeof(mh) + sizeof(wire::Control) || n >= max) break;
      memcpy(&out[n++], in_ + pos + sizeof(mh), sizeof(wire::Control));
      pos += sizeof(mh) + sizeof(wire::Control);
    }
    memmove(in_, in_ + pos, in_len_ - pos);
    in_len_ -= pos;
  }
  return n;
}

void Connection::fail() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  state_ = State::kFailed;
}

void Connection::reset() {
  if (fd_ >= 0) {
    shutdown(fd_, SHUT_WR);
    close(fd_);
  }
  fd_ = -1;
  state_ = State::kIdle;
}

}  // namespace torchprof::inject
