#include "tests/fuzz/fuzz_targets.h"

#include <map>
#include <set>

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "analysis/analysis.h"
#include "collector/capture_writer.h"
#include "analysis/engine.h"
#include "collector/server.h"
#include "common/errors.h"
#include "common/wire/capture_format.h"
#include "common/wire/frame_codec.h"
#include "common/wire/wire.h"

namespace torchprof::fuzz {
namespace {

void append(std::vector<uint8_t>& out, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}

void append_chunk(std::vector<uint8_t>& out, capture::ChunkType type, uint32_t conn, const void* body,
                  size_t size) {
  capture::ChunkHeader h{static_cast<uint32_t>(type), conn, static_cast<uint32_t>(size),
                         capture::chunk_check(capture::kFileVersion, body, size)};
  const capture::MarkedHead head = capture::marked_head(h);
  append(out, &head, sizeof head);
  append(out, body, size);
}

// A capture with one process whose one frame is `frame_body`.
std::vector<uint8_t> wrap_frame(const uint8_t* frame_body, size_t size) {
  std::vector<uint8_t> file;
  capture::FileHeader fh{};
  std::memcpy(fh.magic, capture::kFileMagic, sizeof fh.magic);
  fh.version = capture::kFileVersion;
  fh.wire_version = wire::kProtocolVersion;
  append(file, &fh, sizeof fh);
  wire::Hello hello{};
  std::memcpy(hello.magic, wire::kHelloMagic, sizeof hello.magic);
  hello.version = wire::kProtocolVersion;
  hello.slot_size = wire::kSlotSize;
  hello.pid = 4242;
  hello.ppid = 1;
  hello.mono_ns = 1000;
  hello.real_ns = 1700000000000000000ull;
  append_chunk(file, capture::ChunkType::kHello, 1, &hello, sizeof hello);
  append_chunk(file, capture::ChunkType::kFrame, 1, frame_body, size);
  wire::Bye bye{static_cast<int32_t>(wire::ExitKind::kExit), 0, 0, 0, 5000};
  append_chunk(file, capture::ChunkType::kBye, 1, &bye, sizeof bye);
  append_chunk(file, capture::ChunkType::kConnClosed, 1, nullptr, 0);
  return file;
}

// A frame body: FrameHeader{encoding, raw_size} + zstd of `size` bytes at `data`.
std::vector<uint8_t> make_frame(wire::FrameEncoding encoding, uint32_t raw_size, const uint8_t* data, size_t size) {
  std::vector<uint8_t> body(sizeof(wire::FrameHeader) + ZSTD_compressBound(size));
  wire::FrameHeader fh{7, static_cast<uint32_t>(encoding), raw_size, 0};
  std::memcpy(body.data(), &fh, sizeof fh);
  size_t n = ZSTD_compress(body.data() + sizeof fh, body.size() - sizeof fh, data, size, 1);
  if (ZSTD_isError(n)) return {};
  body.resize(sizeof fh + n);
  return body;
}

std::vector<uint8_t> compress_records(const uint8_t* data, size_t size) {
  size = size / wire::kSlotSize * wire::kSlotSize;
  return make_frame(wire::FrameEncoding::kZstdRaw, static_cast<uint32_t>(size), data, size);
}

std::vector<uint8_t> delta_records(const uint8_t* data, size_t size) {
  const auto slots = static_cast<uint32_t>(size / wire::kSlotSize);
  std::vector<wire::Record> records(slots);
  if (slots != 0) std::memcpy(records.data(), data, size_t{slots} * wire::kSlotSize);
  std::vector<uint8_t> coded(wire::codec::encode_buffer_size(slots));
  size_t n = wire::codec::delta_encode(records.data(), slots, coded.data());
  return make_frame(wire::FrameEncoding::kZstdDelta, slots * wire::kSlotSize, coded.data(), n);
}

std::vector<uint8_t> delta_bytes(const uint8_t* data, size_t size) {
  if (size < 2) return {};
  const uint32_t slots = data[0] | (uint32_t{data[1]} << 8);
  return make_frame(wire::FrameEncoding::kZstdDelta, slots * wire::kSlotSize, data + 2, size - 2);
}

[[noreturn]] void invariant_broken(const char* what) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
  std::abort();
}

bool same_rows(const std::vector<OpStats>& a, const std::vector<OpStats>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].kind != b[i].kind || a[i].calls != b[i].calls ||
        a[i].self_cpu_ns != b[i].self_cpu_ns || a[i].cpu_total_ns != b[i].cpu_total_ns ||
        a[i].self_cuda_ns != b[i].self_cuda_ns || a[i].cuda_total_ns != b[i].cuda_total_ns) {
      return false;
    }
  }
  return true;
}

// A trace sink that checks what the engine hands on: every range and mark of a traced
// cycle has an External id of its own in that cycle, and an API call names only the id of
// a range of that cycle (handed on later, when the range ends).
class CheckingSink : public ProcessTraceSink {
 public:
  void event(const Event& e, const EventIds& ids) override {
    if (ids.cycle < 0) invariant_broken("an event outside every cycle reached the trace");
    std::set<uint32_t>& seen = ids_[ids.cycle];
    if (is_cuda_api(e.kind)) {
      if (ids.enclosing_id != 0) named_[ids.cycle].insert(ids.enclosing_id);
      return;
    }
    if (ids.external_id == 0 || !seen.insert(ids.external_id).second) invariant_broken("an External id is 0 or repeated");
  }
  void gpu(const GpuEvent& g, int cycle, const LaunchIds&, const GpuDevice*) override {
    if (cycle < 0) invariant_broken("a GPU record outside every cycle reached the trace");
    if (g.end_ns < g.start_ns) invariant_broken("a GPU record ends before it starts");
  }
  void finish(const Run&, const Process&) override {
    for (const auto& [cycle, named] : named_) {
      for (uint32_t id : named) {
        if (!ids_[cycle].count(id)) invariant_broken("an API call names an id no range of its cycle has");
      }
    }
  }
  void discard() override {
    ids_.clear();
    named_.clear();
  }

 private:
  std::map<int, std::set<uint32_t>> ids_;
  std::map<int, std::set<uint32_t>> named_;
};

// The engine's table, whatever else it feeds; and the sums a table cannot break.
void analyse_checked(const std::string& path) {
  EngineOutputs everything;
  everything.timeline = 64;
  everything.stats = true;
  everything.folded = true;
  everything.traces = [](const Process&, const std::vector<Step>&, int64_t) { return std::make_unique<CheckingSink>(); };
  const Run run = analyse_capture_file(path, AnalysisOptions{}, everything);
  const Run table = analyse_capture_file(path, AnalysisOptions{}, table_only_outputs());
  if (!same_rows(table.ops, run.ops)) invariant_broken("the table depends on the other outputs asked for");
  for (const OpStats& op : run.ops) {
    if (op.calls == 0) invariant_broken("a row without calls");
    if (op.self_cuda_ns < 0 || op.cuda_total_ns < op.self_cuda_ns) invariant_broken("Self CUDA is not within CUDA total");
  }
  for (const Process& p : run.processes) {
    for (size_t i = 1; i < p.gpu_records.size(); ++i) {
      if (p.gpu_records[i].start_ns < p.gpu_records[i - 1].start_ns) invariant_broken("GPU records out of order");
    }
  }
}

// CaptureReader takes a path: the bytes go into an anonymous in-memory file.
void decode_bytes(const uint8_t* data, size_t size) {
  int fd = memfd_create("torchprof-fuzz", MFD_CLOEXEC);
  if (fd < 0) return;
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    analyse_checked(path);
  } catch (const InputError&) {
    // A clear refusal is a correct answer for a file that is not a capture.
  }
  close(fd);
}

wire::Hello valid_hello(int32_t pid) {
  wire::Hello hello{};
  std::memcpy(hello.magic, wire::kHelloMagic, sizeof hello.magic);
  hello.version = wire::kProtocolVersion;
  hello.slot_size = wire::kSlotSize;
  hello.pid = pid;
  hello.ppid = 1;
  hello.mono_ns = 1000;
  hello.real_ns = 1700000000000000000ull;
  return hello;
}

std::vector<uint8_t> message(wire::MsgType type, const void* body, size_t size) {
  std::vector<uint8_t> out;
  wire::MsgHeader h{static_cast<uint32_t>(type), static_cast<uint32_t>(size)};
  append(out, &h, sizeof h);
  append(out, body, size);
  return out;
}

int connect_to(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends what the socket takes without waiting: a peer that stops reading must not
// stall the fuzzer. Returns false when not everything went.
bool send_some(int fd, const std::vector<uint8_t>& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Waits for the collector's HelloAck. The inject library gives up after 5 s; here the
// question is whether the Hello is accepted at all, and a loaded machine can stall the
// collector's thread for seconds (page-cache writeback throttles its writes), so the
// wait is longer. libFuzzer's -timeout raises SIGALRM every few seconds, which cuts a
// blocked recv short with EINTR: the wait goes on until the deadline.
bool accepted(int fd) {
  constexpr int kWaitSeconds = 30;
  timeval limit{kWaitSeconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kWaitSeconds);
  struct {
    wire::MsgHeader header;
    wire::HelloAck ack;
  } reply{};
  size_t got = 0;
  while (got < sizeof reply) {
    const ssize_t n = ::recv(fd, reinterpret_cast<char*>(&reply) + got, sizeof reply - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR && std::chrono::steady_clock::now() < deadline) {
      continue;
    } else {
      return false;
    }
  }
  return reply.header.type == static_cast<uint32_t>(wire::MsgType::kHelloAck) &&
         reply.ack.status == static_cast<uint32_t>(wire::AckStatus::kOk);
}


void socket_stream(const uint8_t* data, size_t size) {
  if (size == 0) return;
  // The collector's warnings about the misbehaving peer are expected here.
  static const bool quiet = (spdlog::set_level(spdlog::level::off), true);
  (void)quiet;
  const bool hello_first = (data[0] & 1) != 0;
  ++data;
  --size;
  char dir_template[] = "/tmp/torchprof-fuzz-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return;
  const std::string dir = dir_template;
  constexpr int32_t kGoodPid = 1111;
  {
    CaptureWriter writer(dir);
    Server server(writer);
    server.start();
    const int good = connect_to(server.socket_path());
    const int bad = connect_to(server.socket_path());
    if (good < 0 || bad < 0) invariant_broken("could not connect");
    const wire::Hello good_hello = valid_hello(kGoodPid);
    if (!send_some(good, message(wire::MsgType::kHello, &good_hello, sizeof good_hello))) {
      invariant_broken("the good Hello did not go out");
    }
    if (!accepted(good)) invariant_broken("the good Hello was not accepted");
    std::vector<uint8_t> stream;
    if (hello_first) {
      const wire::Hello bad_hello = valid_hello(2222);
      stream = message(wire::MsgType::kHello, &bad_hello, sizeof bad_hello);
    }
    append(stream, data, size);
    send_some(bad, stream);
    const std::vector<uint8_t> frame = compress_records(nullptr, 0);
    const wire::Bye bye{static_cast<int32_t>(wire::ExitKind::kExit), 0, 0, 0, 5000};
    std::vector<uint8_t> rest = message(wire::MsgType::kFrame, frame.data(), frame.size());
    const std::vector<uint8_t> bye_message = message(wire::MsgType::kBye, &bye, sizeof bye);
    rest.insert(rest.end(), bye_message.begin(), bye_message.end());
    if (!send_some(good, rest)) invariant_broken("the good frame did not go out");
    ::close(good);
    ::close(bad);
    server.wait_idle(std::chrono::seconds(30));
    server.stop();
    writer.close();
    bool found = false;
    for (const ConnectionStats& c : server.stats()) {
      if (c.pid != kGoodPid) continue;
      found = true;
      if (c.frames != 1 || !c.bye) invariant_broken("the good connection lost its frame or Bye");
    }
    if (!found) invariant_broken("the good connection was not accepted");
  }
  try {
    analyse_checked(dir + "/" + CaptureWriter::kFileName);
  } catch (const InputError&) {
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

}  // namespace

int run_one(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto mode = static_cast<Mode>(data[0]);
  ++data;
  --size;
  if (mode == Mode::kCapture) {
    decode_bytes(data, size);
  } else if (mode == Mode::kFrameBody) {
    std::vector<uint8_t> file = wrap_frame(data, size);
    decode_bytes(file.data(), file.size());
  } else if (mode == Mode::kRawRecords || mode == Mode::kDeltaRecords || mode == Mode::kDeltaBytes) {
    std::vector<uint8_t> body = mode == Mode::kRawRecords     ? compress_records(data, size)
                                : mode == Mode::kDeltaRecords ? delta_records(data, size)
                                                              : delta_bytes(data, size);
    std::vector<uint8_t> file = wrap_frame(body.data(), body.size());
    decode_bytes(file.data(), file.size());
  } else if (mode == Mode::kSocketStream) {
    socket_stream(data, size);
  }
  return 0;
}

}  // namespace torchprof::fuzz
