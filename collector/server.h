// The collector's event loop: accepts the injected library's connections on a private
// Unix socket and appends every message body to the capture, verbatim.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sys/socket.h>

#include "common/wire/wire.h"

namespace torchprof {

class CaptureWriter;
class ControlState;

// What one accepted process sent, for the launcher's log.
struct ConnectionStats {
  uint32_t conn = 0;  // capture connection number, from 1
  int pid = 0;        // from the Hello
  uint64_t frames = 0;
  uint64_t bytes = 0;  // message headers and bodies
  bool bye = false;
};

// One thread runs an epoll loop over the listening socket and every connection.
// A connection is numbered when its Hello is accepted; a peer that misbehaves (other
// uid, bad Hello, oversized body, unknown message type) loses only its own
// connection, with a kNote chunk saying why.
class Server {
 public:
  explicit Server(CaptureWriter& writer);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Creates the socket directory (mode 0700, under $TMPDIR or /tmp), listens and starts
  // the loop thread. Throws std::system_error.
  void start();
  const std::string& socket_path() const { return socket_path_; }
  // The private (0700) directory the socket is in.
  const std::string& socket_dir() const { return dir_; }

  // On-demand capture (collector/control_state.h): each process is sent the state after
  // its HelloAck, and window events from processes are answered. Set before start().
  void set_control(ControlState* control) { control_ = control; }
  // Sends `c` to every process connected now, from the loop thread.
  void broadcast(const wire::Control& c);

  // Connections accepted and not yet closed (including those still before their Hello).
  int connections_open() const { return open_.load(); }
  // Bytes read from every connection so far; grows while data keeps arriving.
  uint64_t bytes_received() const { return received_.load(); }
  // Waits until no connection is open; false on timeout.
  bool wait_idle(std::chrono::milliseconds timeout);
  // Reads what is still readable, records kConnClosed for every remaining connection,
  // joins the loop and removes the socket directory. Idempotent.
  void stop();
  // Per-connection counts, in connection order (complete after stop()).
  std::vector<ConnectionStats> stats() const;

 private:
  struct Connection;

  void loop();
  void accept_all();
  void on_readable(Connection& c, bool draining);
  // Each returns "" when the connection may go on, else why it must be closed.
  std::string read_available(Connection& c, bool draining, bool* eof);
  std::string process_buffer(Connection& c);
  std::string handle_message(Connection& c, uint32_t type, const char* body, uint32_t size);
  std::string handle_hello(Connection& c, const char* body, uint32_t size);
  void close_connection(int fd, const std::string& reason);
  void take_fds(Connection& c, msghdr& msg);
  void recover_unsent(Connection& c);
  void note(uint32_t conn, const std::string& text);
  void cleanup_files();
  void send_control_to_all(const std::string& message, uint32_t except_conn);
  void send_queued_controls();

  CaptureWriter& writer_;
  std::string dir_;
  std::string socket_path_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int control_fd_ = -1;  // eventfd: broadcasts are queued
  ControlState* control_ = nullptr;
  std::vector<std::string> queued_;  // guarded by mutex_
  std::thread thread_;
  std::map<int, std::unique_ptr<Connection>> connections_;  // loop thread only
  uint32_t next_conn_ = 1;
  std::atomic<int> open_{0};
  std::atomic<uint64_t> received_{0};
  mutable std::mutex mutex_;  // guards stats_ and pairs with idle_cv_
  std::condition_variable idle_cv_;
  std::vector<ConnectionStats> stats_;
};

}  // namespace torchprof
