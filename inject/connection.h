// The process's one stream connection to the collector: connect, Hello /
// HelloAck handshake, frames and Bye. Used only by the flusher thread (and by
// nothing while it runs), so it needs no lock.
#pragma once

#include <sys/uio.h>

#include <cstdint>

#include "common/wire/wire.h"
#include "inject/config.h"

namespace torchprof::inject {

class Connection {
 public:
  // kFailed: could not connect, retried. kRefused / kGone: the collector said no
  // or a send failed mid-stream; never retried (a second Hello would look like a
  // second process).
  enum class State { kIdle, kUp, kFailed, kRefused, kGone };

  // Connects and says Hello when idle; after a failure retries at most once a
  // second. Never retries once the collector refused us. True when up.
  bool ensure(const Config& cfg, uint64_t now);
  bool up() const { return state_ == State::kUp; }
  // Bumped at every successful handshake: frame numbers restart per connection.
  uint32_t epoch() const { return epoch_; }

  // On failure the connection is closed (State::kGone) and false returned.
  bool send_frame(const wire::FrameHeader& header, const void* data, uint32_t size);
  bool send_bye(const wire::Bye& bye);
  bool send_window_event(const wire::WindowEvent& event);
  // The Control messages the collector has sent, without waiting: up to `max` into
  // `out`, their number returned. Other message types are skipped.
  int poll_control(wire::Control* out, int max);

  // Closes cleanly; the next ensure() connects again (after Bye(kExec), in case
  // the exec fails and the image goes on).
  void reset();

 private:
  bool connect_socket(const char* path);
  // Moves the socket to a high descriptor number and notes its identity.
  void settle_fd();
  // False when the program closed our descriptor (a daemon closing every fd), or
  // closed it and got the number back for a file of its own: then nothing may be
  // written to it, and the next ensure() connects again.
  bool still_ours();
  // `control` (ancillary data, e.g. a descriptor) goes with the message's first byte.
  bool send_all(iovec* iov, int count, void* control = nullptr, size_t control_len = 0);
  // The shared arena's descriptor and where it lies (protocol 3 collectors only); a
  // failure changes nothing else: the arena is then just not read after a kill.
  void send_arena();
  bool handshake();
  bool check_before_send();
  void fail();

  int fd_ = -1;
  uint64_t dev_ = 0;  // st_dev and st_ino of our socket
  uint64_t ino_ = 0;
  State state_ = State::kIdle;
  uint64_t last_attempt_ns_ = 0;
  uint32_t epoch_ = 0;
  uint32_t peer_version_ = 0;  // the collector's protocol, from its HelloAck
  char in_[64];          // bytes of a message from the collector not complete yet
  uint32_t in_len_ = 0;
  uint32_t skip_ = 0;    // body bytes of a message of another type still to skip
};

}  // namespace torchprof::inject
