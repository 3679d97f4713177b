// The launcher's control socket: `torchprof start|stop|trigger` from another shell.
//
// A Unix socket (control.sock) in the collector's private 0700 directory; a peer whose
// uid (SO_PEERCRED) is not ours is answered "refused" and closed. One request line per
// connection ("start", "stop", "trigger N", "status W"), one reply line
// (collector/control_state.h). The run is found through DIR/.control and a per-user
// registry entry (cli/control_registry.h), both written by the launcher.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "common/wire/wire.h"

namespace torchprof {

class ControlState;

class ControlServer {
 public:
  // `send` passes a Control on to every process (Server::broadcast).
  ControlServer(ControlState& state, std::function<void(const wire::Control&)> send);
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Listens on DIR/control.sock and starts the thread. Throws std::system_error.
  void start(const std::string& dir);
  const std::string& socket_path() const { return path_; }
  // Joins the thread and removes the socket. Idempotent.
  void stop();

 private:
  void loop();
  void serve(int fd);

  ControlState& state_;
  std::function<void(const wire::Control&)> send_;
  std::string path_;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace torchprof
