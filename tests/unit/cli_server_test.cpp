#include <doctest/doctest.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "reading/capture_reader.h"
#include "collector/capture_writer.h"
#include "collector/server.h"
#include "common/wire/wire.h"

namespace torchprof {
namespace {

namespace fs = std::filesystem;
using capture::ChunkType;
using namespace std::chrono_literals;

struct Client {
  int fd = -1;
  explicit Client(const std::string& path) {
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  }
  ~Client() { close(); }
  void close() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  void send(const std::vector<char>& bytes) const {
    REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(bytes.size()));
  }
  // Sends one byte at a time: the collector must reassemble messages.
  void send_slowly(const std::vector<char>& bytes) const {
    for (char b : bytes) REQUIRE(::send(fd, &b, 1, MSG_NOSIGNAL) == 1);
  }
  wire::HelloAck ack() const {
    wire::MsgHeader h{};
    REQUIRE(::recv(fd, &h, sizeof(h), MSG_WAITALL) == static_cast<ssize_t>(sizeof(h)));
    CHECK(h.type == static_cast<uint32_t>(wire::MsgType::kHelloAck));
    CHECK(h.size == sizeof(wire::HelloAck));
    wire::HelloAck a{99, 99};
    REQUIRE(::recv(fd, &a, sizeof(a), MSG_WAITALL) == static_cast<ssize_t>(sizeof(a)));
    return a;
  }
  bool closed_by_peer() const {
    char c;
    return ::recv(fd, &c, 1, 0) == 0;
  }
};

template <typename T>
std::vector<char> bytes_of(const T& value) {
  std::vector<char> out(sizeof(value));
  std::memcpy(out.data(), &value, sizeof(value));
  return out;
}

std::vector<char> message(wire::MsgType type, const std::vector<char>& body) {
  std::vector<char> out =
      bytes_of(wire::MsgHeader{static_cast<uint32_t>(type), static_cast<uint32_t>(body.size())});
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

std::vector<char> hello_body(int pid, const char* magic = wire::kHelloMagic,
                             uint32_t version = wire::kProtocolVersion) {
  const std::string exe = "/bin/app";
  wire::Hello h{};
  std::memcpy(h.magic, magic, sizeof(h.magic));
  h.version = version;
  h.slot_size = wire::kSlotSize;
  h.pid = pid;
  h.exe_len = static_cast<uint32_t>(exe.size());
  std::vector<char> out(sizeof(h) + exe.size());
  std::memcpy(out.data(), &h, sizeof(h));
  std::memcpy(out.data() + sizeof(h), exe.data(), exe.size());
  return out;
}

std::vector<char> frame_body(uint32_t seq, size_t payload) {
  std::vector<char> out = bytes_of(wire::FrameHeader{77, 0, 32, seq});
  out.insert(out.end(), payload, static_cast<char>('a' + seq));
  return out;
}

std::vector<char> concat(std::vector<char> a, const std::vector<char>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct Fixture {
  fs::path dir =
      fs::temp_directory_path() / ("torchprof_server_test_" + std::to_string(::getpid()));
  Fixture() {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Fixture() { fs::remove_all(dir); }
  std::vector<Chunk> chunks() const {
    CaptureReader reader((dir / "capture.tprof").string());
    std::vector<Chunk> out;
    Chunk c;
    while (reader.next(c)) out.push_back(c);
    CHECK_FALSE(reader.truncated());
    return out;
  }
};

std::vector<Chunk> of_type(const std::vector<Chunk>& chunks, ChunkType type) {
  std::vector<Chunk> out;
  for (const Chunk& c : chunks) {
    if (c.header.type == static_cast<uint32_t>(type)) out.push_back(c);
  }
  return out;
}

bool body_is(const Chunk& c, const std::vector<char>& bytes) {
  return c.body.size() == bytes.size() &&
         std::memcmp(c.body.data(), bytes.data(), bytes.size()) == 0;
}

}  // namespace

TEST_CASE("server: messages split into single bytes are stored verbatim, in order") {
  Fixture fx;
  CaptureWriter writer(fx.dir.string());
  Server server(writer);
  server.start();
  CHECK(fs::status(fs::path(server.socket_path()).parent_path()).permissions() ==
        fs::perms::owner_all);
  const std::vector<char> hello = hello_body(4242);
  const std::vector<char> f0 = frame_body(0, 100), f1 = frame_body(1, 3000);
  const std::vector<char> bye(sizeof(wire::Bye), '\x01');
  {
    Client c(server.socket_path());
    c.send_slowly(message(wire::MsgType::kHello, hello));
    const wire::HelloAck ack = c.ack();
    CHECK(ack.status == static_cast<uint32_t>(wire::AckStatus::kOk));
    CHECK(ack.version == wire::kProtocolVersion);
    c.send_slowly(concat(message(wire::MsgType::kFrame, f0), message(wire::MsgType::kFrame, f1)));
    c.send(message(wire::MsgType::kBye, bye));
  }
  CHECK(server.wait_idle(5s));
  CHECK(server.connections_open() == 0);
  server.stop();
  writer.close();

  const std::vector<Chunk> chunks = fx.chunks();
  REQUIRE(chunks.size() == 5);
  const ChunkType expected[] = {ChunkType::kHello, ChunkType::kFrame, ChunkType::kFrame,
                                ChunkType::kBye, ChunkType::kConnClosed};
  for (size_t i = 0; i < 5; ++i) {
    CAPTURE(i);
    CHECK(chunks[i].header.type == static_cast<uint32_t>(expected[i]));
    CHECK(chunks[i].header.conn == 1);
  }
  CHECK(body_is(chunks[0], hello));
  CHECK(body_is(chunks[1], f0));
  CHECK(body_is(chunks[2], f1));
  CHECK(body_is(chunks[3], bye));
  const std::vector<ConnectionStats> stats = server.stats();
  REQUIRE(stats.size() == 1);
  CHECK(stats[0].pid == 4242);
  CHECK(stats[0].frames == 2);
  CHECK(stats[0].bye);
  CHECK_FALSE(fs::exists(server.socket_path()));
}

TEST_CASE("server: a bad Hello is answered with an error and not recorded") {
  Fixture fx;
  CaptureWriter writer(fx.dir.string());
  Server server(writer);
  server.start();
  Client bad(server.socket_path());
  bad.send(message(wire::MsgType::kHello, hello_body(1, "NOTMAGIC")));
  CHECK(bad.ack().status == static_cast<uint32_t>(wire::AckStatus::kBadMagic));
  CHECK(bad.closed_by_peer());
  Client early(server.socket_path());
  early.send(message(wire::MsgType::kFrame, frame_body(0, 8)));
  CHECK(early.ack().status != static_cast<uint32_t>(wire::AckStatus::kOk));
  CHECK(server.wait_idle(5s));
  server.stop();
  writer.close();
  const std::vector<Chunk> chunks = fx.chunks();
  CHECK(of_type(chunks, ChunkType::kHello).empty());
  CHECK(of_type(chunks, ChunkType::kFrame).empty());
  CHECK(of_type(chunks, ChunkType::kNote).size() == 2);
}

TEST_CASE("server: protocol versions from the oldest still read to the current one are accepted") {
  Fixture fx;
  CaptureWriter writer(fx.dir.string());
  Server server(writer);
  server.start();
  for (uint32_t version = wire::kMinProtocolVersion; version <= wire::kProtocolVersion; ++version) {
    Client c(server.socket_path());
    c.send(message(wire::MsgType::kHello, hello_body(10 + static_cast<int>(version), wire::kHelloMagic, version)));
    CHECK(c.ack().status == static_cast<uint32_t>(wire::AckStatus::kOk));
  }
  for (uint32_t version : {wire::kMinProtocolVersion - 1, wire::kProtocolVersion + 1}) {
    Client c(server.socket_path());
    c.send(message(wire::MsgType::kHello, hello_body(5, wire::kHelloMagic, version)));
    CHECK(c.ack().status == static_cast<uint32_t>(wire::AckStatus::kBadVersion));
    CHECK(c.closed_by_peer());
  }
  CHECK(server.wait_idle(5s));
  server.stop();
  writer.close();
  const std::vector<Chunk> chunks = fx.chunks();
  CHECK(of_type(chunks, ChunkType::kHello).size() == wire::kProtocolVersion - wire::kMinProtocolVersion + 1);
}

TEST_CASE("server: an oversized or unknown message closes only its own connection") {
  Fixture fx;
  CaptureWriter writer(fx.dir.string());
  Server server(writer);
  server.start();
  Client good(server.socket_path()), huge(server.socket_path()), odd(server.socket_path());
  for (Client* c : {&good, &huge, &odd}) {
    c->send(message(wire::MsgType::kHello, hello_body(c->fd)));
    REQUIRE(c->ack().status == static_cast<uint32_t>(wire::AckStatus::kOk));
  }
  wire::MsgHeader too_big{static_cast<uint32_t>(wire::MsgType::kFrame), wire::kMaxMessageBody + 1};
  huge.send(bytes_of(too_big));
  odd.send(message(static_cast<wire::MsgType>(99), {'x'}));
  CHECK(huge.closed_by_peer());
  CHECK(odd.closed_by_peer());
  CHECK(server.connections_open() == 1);
  good.send(message(wire::MsgType::kFrame, frame_body(0, 64)));
  good.close();
  CHECK(server.wait_idle(5s));
  server.stop();
  writer.close();
  const std::vector<Chunk> chunks = fx.chunks();
  CHECK(of_type(chunks, ChunkType::kHello).size() == 3);
  CHECK(of_type(chunks, ChunkType::kConnClosed).size() == 3);
  CHECK(of_type(chunks, ChunkType::kNote).size() == 2);
  const std::vector<Chunk> frames = of_type(chunks, ChunkType::kFrame);
  REQUIRE(frames.size() == 1);
  CHECK(frames[0].header.conn == 1);
}

TEST_CASE("server: stop() keeps what was sent and closes connections still open") {
  Fixture fx;
  CaptureWriter writer(fx.dir.string());
  Server server(writer);
  server.start();
  Client c(server.socket_path());
  c.send(message(wire::MsgType::kHello, hello_body(7)));
  REQUIRE(c.ack().status == static_cast<uint32_t>(wire::AckStatus::kOk));
  const std::vector<char> f0 = frame_body(0, 500);
  c.send(message(wire::MsgType::kFrame, f0));
  CHECK_FALSE(server.wait_idle(50ms));
  server.stop();
  server.stop();  // idempotent
  writer.close();
  const std::vector<Chunk> chunks = fx.chunks();
  const std::vector<Chunk> frames = of_type(chunks, ChunkType::kFrame);
  REQUIRE(frames.size() == 1);
  CHECK(body_is(frames[0], f0));
  CHECK(of_type(chunks, ChunkType::kConnClosed).size() == 1);
  CHECK(chunks.back().header.type == static_cast<uint32_t>(ChunkType::kConnClosed));
}

}  // namespace torchprof
