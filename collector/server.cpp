#include "collector/server.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "collector/capture_writer.h"
#include "collector/control_state.h"
#include "collector/shared_arena.h"
#include "common/wire/wire.h"

namespace torchprof {
namespace {

constexpr const char* kSocketName = "collector.sock";
constexpr size_t kReadBlock = 256u << 10;
// Bytes read from one connection per wakeup, so one busy process cannot starve the rest.
constexpr size_t kReadBudget = 4u << 20;
// Bytes read from one connection while stopping, so stop() stays bounded.
constexpr size_t kDrainBudget = 64u << 20;

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto existing = spdlog::get("torchprof.collector");
    return existing ? existing : spdlog::stderr_color_mt("torchprof.collector");
  }();
  return *logger;
}

std::system_error sys_error(const std::string& what) {
  return std::system_error(errno, std::generic_category(), what);
}

// The reply is a message like any other: MsgHeader{kHelloAck} + HelloAck, in one send.
bool send_ack(int fd, wire::AckStatus status) {
  struct {
    wire::MsgHeader header;
    wire::HelloAck ack;
  } reply{{static_cast<uint32_t>(wire::MsgType::kHelloAck), sizeof(wire::HelloAck)},
          {wire::kProtocolVersion, static_cast<uint32_t>(status)}};
  static_assert(sizeof(reply) == sizeof(wire::MsgHeader) + sizeof(wire::HelloAck));
  return ::send(fd, &reply, sizeof(reply), MSG_NOSIGNAL | MSG_DONTWAIT) ==
         static_cast<ssize_t>(sizeof(reply));
}

// A message of the collector's: MsgHeader{kControl} + Control.
std::string control_message(const wire::Control& c) {
  const wire::MsgHeader header{static_cast<uint32_t>(wire::MsgType::kControl), sizeof(c)};
  std::string message(sizeof(header) + sizeof(c), '\0');
  std::memcpy(message.data(), &header, sizeof(header));
  std::memcpy(message.data() + sizeof(header), &c, sizeof(c));
  return message;
}

// A private directory for the socket: $TMPDIR unless the path would not fit in sun_path.
std::string make_socket_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string base = (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp";
  const size_t limit = sizeof(sockaddr_un{}.sun_path) - 1;
  if (base.size() + std::strlen("/torchprof-XXXXXX/") + std::strlen(kSocketName) > limit) {
    base = "/tmp";
  }
  std::string pattern = base + "/torchprof-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) throw sys_error("cannot create a directory in " + base);
  return pattern;  // mkdtemp creates it with mode 0700
}

// Bytes read from a connection and not handled yet: [begin_, end_) of data_. Reads
// go straight into the spare room (no zero-filling), handled messages are dropped by
// moving begin_, and the rest moves to the front only when a read needs the room.
class InBuffer {
 public:
  size_t size() const { return end_ - begin_; }
  bool empty() const { return begin_ == end_; }
  const char* data() const { return data_.get() + begin_; }
  // At least `n` writable bytes at the end.
  char* room(size_t n) {
    if (cap_ - end_ >= n) return data_.get() + end_;
    const size_t used = size();
    if (begin_ > 0 && used > 0) std::memmove(data_.get(), data_.get() + begin_, used);
    begin_ = 0;
    end_ = used;
    if (cap_ - end_ < n) {
      const size_t cap = std::max(cap_ * 2, end_ + n);
      std::unique_ptr<char[]> bigger(new char[cap]);
      if (used > 0) std::memcpy(bigger.get(), data_.get(), used);
      data_ = std::move(bigger);
      cap_ = cap;
    }
    return data_.get() + end_;
  }
  void grow(size_t n) { end_ += n; }
  void consume(size_t n) {
    begin_ += n;
    if (begin_ == end_) begin_ = end_ = 0;
  }

 private:
  std::unique_ptr<char[]> data_;
  size_t cap_ = 0;
  size_t begin_ = 0;
  size_t end_ = 0;
};

}  // namespace

struct Server::Connection {
  ~Connection() {
    for (int passed : passed_fds) ::close(passed);
  }
  int fd = -1;
  uint32_t conn = 0;  // 0 until the Hello is accepted
  int pid = 0;        // the peer's, from SO_PEERCRED until the Hello says
  int peer_pid = 0;   // from SO_PEERCRED: in our pid namespace
  std::vector<int> passed_fds;  // descriptors received and not yet claimed by a message
  SharedArena arena;            // the process's shared buffers, once handed over
  std::map<uint32_t, uint32_t> next_seq;  // per tid: one past the highest frame number seen
  InBuffer buffer;  // bytes of messages not complete yet
  uint64_t frames = 0;
  uint64_t bytes = 0;
  bool bye = false;
};

Server::Server(CaptureWriter& writer) : writer_(writer) { log(); }

Server::~Server() { stop(); }

void Server::start() {
  dir_ = make_socket_dir();
  socket_path_ = dir_ + "/" + kSocketName;
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw sys_error("socket");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path_.c_str(), socket_path_.size() + 1);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    throw sys_error("bind " + socket_path_);
  }
  if (::listen(listen_fd_, SOMAXCONN) != 0) throw sys_error("listen " + socket_path_);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) throw sys_error("epoll_create1");
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw sys_error("eventfd");
  control_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (control_fd_ < 0) throw sys_error("eventfd");
  for (int fd : {listen_fd_, wake_fd_, control_fd_}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) throw sys_error("epoll_ctl");
  }
  thread_ = std::thread(&Server::loop, this);
  log().debug("listening on {}", socket_path_);
}

void Server::loop() {
  epoll_event events[64];
  bool stopping = false;
  while (!stopping) {
    const int n = ::epoll_wait(epoll_fd_, events, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      log().error("epoll_wait failed: {}", std::strerror(errno));
      break;
    }
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        accept_all();
      } else if (fd == wake_fd_) {
        stopping = true;
      } else if (fd == control_fd_) {
        send_queued_controls();
      } else if (auto it = connections_.find(fd); it != connections_.end()) {
        on_readable(*it->second, /*draining=*/false);
      }
    }
  }
  // Stopping: take what the peers already sent, then close whatever is left.
  std::vector<int> fds;
  for (const auto& [fd, c] : connections_) fds.push_back(fd);
  for (int fd : fds) on_readable(*connections_.at(fd), /*draining=*/true);
  timespec cpu{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
  log().debug("collector loop: {} bytes received, {:.3f} s CPU", received_.load(),
              static_cast<double>(cpu.tv_sec) + static_cast<double>(cpu.tv_nsec) / 1e9);
}

void Server::accept_all() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        log().warn("accept failed: {}", std::strerror(errno));
        // Out of descriptors: the listening socket stays readable; do not spin on it.
        if (errno == EMFILE || errno == ENFILE) ::usleep(10000);
      }
      return;
    }
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != ::geteuid()) {
      send_ack(fd, wire::AckStatus::kRefused);
      note(0, "refused a connection from pid " + std::to_string(cred.pid) + " with uid " +
                  std::to_string(cred.uid));
      ::close(fd);
      continue;
    }
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->pid = cred.pid;
    c->peer_pid = cred.pid;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      log().warn("epoll_ctl failed: {}", std::strerror(errno));
      ::close(fd);
      continue;
    }
    connections_.emplace(fd, std::move(c));
    open_.fetch_add(1);
  }
}

void Server::on_readable(Connection& c, bool draining) {
  bool eof = false;
  const std::string read_problem = read_available(c, draining, &eof);
  std::string problem = process_buffer(c);
  if (problem.empty()) problem = read_problem;
  if (problem.empty() && !eof && !draining) return;
  if (problem.empty() && !c.buffer.empty()) {
    problem = "closed with " + std::to_string(c.buffer.size()) +
              " bytes of an incomplete message";
  }
  if (problem.empty() && !eof) problem = "still open when the collector stopped";
  close_connection(c.fd, problem);
}

std::string Server::read_available(Connection& c, bool draining, bool* eof) {
  const size_t budget = draining ? kDrainBudget : kReadBudget;
  size_t total = 0;
  while (total < budget) {
    // recvmsg: a message may bring a descriptor (the Arena message's memfd).
    iovec iov{c.buffer.room(kReadBlock), kReadBlock};
    alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = ::recvmsg(c.fd, &msg, MSG_CMSG_CLOEXEC);
    if (n >= 0 && msg.msg_controllen > 0) take_fds(c, msg);
    if (n > 0) {
      c.buffer.grow(static_cast<size_t>(n));
      total += static_cast<size_t>(n);
      received_.fetch_add(static_cast<uint64_t>(n));
      continue;
    }
    if (n == 0) {
      *eof = true;
      return "";
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return "";
    *eof = true;
    return std::string("read failed: ") + std::strerror(errno);
  }
  return "";
}

void Server::take_fds(Connection& c, msghdr& msg) {
  for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
      // One is all a process ever passes: more are closed at once.
      if (c.passed_fds.size() < 2) {
        c.passed_fds.push_back(fd);
      } else {
        ::close(fd);
      }
    }
  }
}

std::string Server::process_buffer(Connection& c) {
  size_t pos = 0;
  std::string problem;
  while (c.buffer.size() - pos >= sizeof(wire::MsgHeader)) {
    wire::MsgHeader header{};
    std::memcpy(&header, c.buffer.data() + pos, sizeof(header));
    if (header.size > wire::kMaxMessageBody) {
      problem = "message body of " + std::to_string(header.size) + " bytes exceeds the limit of " +
                std::to_string(wire::kMaxMessageBody);
      break;
    }
    if (c.buffer.size() - pos < sizeof(header) + header.size) break;
    problem = handle_message(c, header.type, c.buffer.data() + pos + sizeof(header), header.size);
    if (!problem.empty()) break;
    pos += sizeof(header) + header.size;
  }
  c.buffer.consume(pos);
  return problem;
}

std::string Server::handle_message(Connection& c, uint32_t type, const char* body,
                                   uint32_t size) {
  c.bytes += sizeof(wire::MsgHeader) + size;
  if (c.conn == 0) {
    if (type != static_cast<uint32_t>(wire::MsgType::kHello)) {
      send_ack(c.fd, wire::AckStatus::kBadMagic);
      return "first message has type " + std::to_string(type) + ", not Hello";
    }
    return handle_hello(c, body, size);
  }
  switch (static_cast<wire::MsgType>(type)) {
    case wire::MsgType::kFrame:
      if (size < sizeof(wire::FrameHeader)) return "frame shorter than its header";
      ++c.frames;
      {
        wire::FrameHeader fh{};
        std::memcpy(&fh, body, sizeof(fh));
        uint32_t& next = c.next_seq[fh.tid];
        if (fh.seq + 1 > next) next = fh.seq + 1;
      }
      writer_.append(capture::ChunkType::kFrame, c.conn, body, size);
      return "";
    case wire::MsgType::kArena: {
      if (size != sizeof(wire::arena::ArenaInfo)) return "arena message of " + std::to_string(size) + " bytes";
      if (c.passed_fds.empty()) {
        note(c.conn, "connection " + std::to_string(c.conn) + " (pid " + std::to_string(c.pid) +
                         "): its shared buffers came without their descriptor; they cannot be read after a kill");
        return "";
      }
      wire::arena::ArenaInfo info{};
      std::memcpy(&info, body, sizeof(info));
      const int fd = c.passed_fds.front();
      c.passed_fds.erase(c.passed_fds.begin());
      const std::string why = c.arena.open(fd, info);
      if (!why.empty()) {
        note(c.conn, "connection " + std::to_string(c.conn) + " (pid " + std::to_string(c.pid) + "): " + why +
                         "; they cannot be read after a kill");
      }
      return "";
    }
    case wire::MsgType::kBye:
      c.bye = true;
      writer_.append(capture::ChunkType::kBye, c.conn, body, size);
      return "";
    case wire::MsgType::kHello:
      return "second Hello on one connection";
    case wire::MsgType::kWindowEvent: {
      if (size != sizeof(wire::WindowEvent)) return "window event of " + std::to_string(size) + " bytes";
      wire::WindowEvent e{};
      std::memcpy(&e, body, sizeof(e));
      log().debug("connection {}: window {} {}", c.conn, e.window, e.open ? "opened" : "closed");
      if (control_ != nullptr) {
        if (std::optional<wire::Control> follow = control_->on_window_event(e)) {
          send_control_to_all(control_message(*follow), c.conn);
        }
      }
      return "";
    }
    default:
      return "unknown message type " + std::to_string(type);
  }
}

std::string Server::handle_hello(Connection& c, const char* body, uint32_t size) {
  wire::Hello hello{};
  if (size < sizeof(hello)) {
    send_ack(c.fd, wire::AckStatus::kBadMagic);
    return "Hello of " + std::to_string(size) + " bytes is too short";
  }
  std::memcpy(&hello, body, sizeof(hello));
  if (std::memcmp(hello.magic, wire::kHelloMagic, sizeof(hello.magic)) != 0) {
    send_ack(c.fd, wire::AckStatus::kBadMagic);
    return "Hello has a foreign magic";
  }
  if (hello.version < wire::kMinProtocolVersion || hello.version > wire::kProtocolVersion ||
      hello.slot_size != wire::kSlotSize) {
    send_ack(c.fd, wire::AckStatus::kBadVersion);
    return "Hello speaks protocol " + std::to_string(hello.version) + " with " +
           std::to_string(hello.slot_size) + "-byte slots; expected protocol " +
           std::to_string(wire::kProtocolVersion) + " with " + std::to_string(wire::kSlotSize);
  }
  const uint64_t strings = uint64_t{hello.exe_len} + hello.cmdline_len + hello.host_len +
                           hello.env_len;
  if (sizeof(hello) + strings > size) {
    send_ack(c.fd, wire::AckStatus::kBadMagic);
    return "Hello's string lengths exceed its body";
  }
  c.conn = next_conn_++;
  c.pid = hello.pid;
  writer_.append(capture::ChunkType::kHello, c.conn, body, size);
  if (!send_ack(c.fd, wire::AckStatus::kOk)) return "could not send the Hello reply";
  if (control_ != nullptr) {
    if (std::optional<wire::Control> state = control_->state_for_new_process()) {
      const std::string message = control_message(*state);
      ::send(c.fd, message.data(), message.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
  }
  log().debug("connection {}: pid {} connected", c.conn, c.pid);
  return "";
}

void Server::close_connection(int fd, const std::string& reason) {
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  Connection& c = *it->second;
  if (!reason.empty()) {
    const std::string who = c.conn != 0 ? "connection " + std::to_string(c.conn) + " (pid " +
                                              std::to_string(c.pid) + ")"
                                        : "connection from pid " + std::to_string(c.pid);
    note(c.conn, who + ": " + reason);
  }
  if (c.conn != 0 && !c.bye && c.arena.mapped()) recover_unsent(c);
  if (c.conn != 0) {
    writer_.append(capture::ChunkType::kConnClosed, c.conn, nullptr, 0);
    log().debug("connection {}: pid {} closed after {} frames, {} bytes{}", c.conn, c.pid,
                c.frames, c.bytes, c.bye ? "" : ", no Bye");
  }
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (c.conn != 0) stats_.push_back({c.conn, c.pid, c.frames, c.bytes, c.bye});
    connections_.erase(it);
    open_.fetch_sub(1);
  }
  // Closed only now, so a peer that sees the end of its connection also sees the count drop.
  ::close(fd);
  idle_cv_.notify_all();
}

// A process that died without its goodbye (SIGKILL, the OOM killer) left in its shared
// buffers what it had recorded and not sent: read there now, as the frames it would have
// sent. Only once it has ended: a live process whose connection closed sends what it
// holds on its next one.
void Server::recover_unsent(Connection& c) {
  const std::string who = "connection " + std::to_string(c.conn) + " (pid " + std::to_string(c.pid) + ")";
  if (!process_ended(c.peer_pid, 500)) {
    log().debug("{}: closed without a goodbye while the process still runs; its shared buffers are not read", who);
    return;
  }
  const SharedArena::Recovery r = c.arena.recover(c.next_seq, [&](const std::string& body) {
    writer_.append(capture::ChunkType::kFrame, c.conn, body.data(), static_cast<uint32_t>(body.size()));
  });
  log().debug("{}: {} records of {} threads read from its shared buffers after it ended ({} slots unreadable)", who,
              r.heads, r.threads, r.unreadable_slots);
}

void Server::broadcast(const wire::Control& c) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queued_.push_back(control_message(c));
  }
  const uint64_t one = 1;
  if (control_fd_ < 0 || ::write(control_fd_, &one, sizeof(one)) != static_cast<ssize_t>(sizeof(one))) {
    log().warn("cannot wake the collector loop for a control message");
  }
}

void Server::send_queued_controls() {
  uint64_t count = 0;
  while (::read(control_fd_, &count, sizeof(count)) > 0) {
  }
  std::vector<std::string> messages;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    messages.swap(queued_);
  }
  for (const std::string& m : messages) send_control_to_all(m, 0);
}

// A process too busy to read 24 bytes in its socket's buffer is not waited for; it is
// named in the log.
void Server::send_control_to_all(const std::string& message, uint32_t except_conn) {
  for (const auto& [fd, c] : connections_) {
    if (c->conn == 0 || c->conn == except_conn || c->bye) continue;
    if (::send(fd, message.data(), message.size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
        static_cast<ssize_t>(message.size())) {
      log().warn("connection {} (pid {}): could not send a capture control message", c->conn, c->pid);
    }
  }
}

void Server::note(uint32_t conn, const std::string& text) {
  log().warn("{}", text);
  writer_.append_text(capture::ChunkType::kNote, conn, text);
}

bool Server::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return idle_cv_.wait_for(lock, timeout, [this] { return open_.load() == 0; });
}

void Server::stop() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    if (::write(wake_fd_, &one, sizeof(one)) != static_cast<ssize_t>(sizeof(one))) {
      log().error("cannot wake the collector loop: {}", std::strerror(errno));
    }
    thread_.join();
  }
  for (int* fd : {&listen_fd_, &epoll_fd_, &wake_fd_, &control_fd_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
  cleanup_files();
}

void Server::cleanup_files() {
  if (!socket_path_.empty()) ::unlink(socket_path_.c_str());
  if (!dir_.empty()) ::rmdir(dir_.c_str());
  dir_.clear();
}

std::vector<ConnectionStats> Server::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<ConnectionStats> out = stats_;
  std::sort(out.begin(), out.end(),
            [](const ConnectionStats& a, const ConnectionStats& b) { return a.conn < b.conn; });
  return out;
}

}  // namespace torchprof
