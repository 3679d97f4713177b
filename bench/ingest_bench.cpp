// Collector ingest capacity: the real collector (Server + CaptureWriter, in this
// process) takes frames from SENDERS forked processes that send ready-made frames
// as fast as their sockets allow, so the figure is the collector's own cost, not
// the senders' (who do no recording or compression while sending).
//
//   ingest_bench [SENDERS=2] [FRAMES_PER_SENDER=200] [ENCODING=delta|raw]
//
// Each frame holds FRAME_PAIRS NVTX push/pop pairs of the repetitive kind
// (bench/nvtx_pairs.c's traffic: 8 names, ~60 ns apart with jitter) plus the
// kDropped record the flusher appends, encoded as the injected library sends them.
// Prints `records`, `collector_cpu_s` (CPU time of this process: the collector's
// event loop; the main thread only waits), `records_per_collector_cpu_s` (the
// collector's capacity per core), `records_per_wall_s`, `wire_bytes_per_record`
// and `capture_bytes`.
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "collector/capture_writer.h"
#include "collector/server.h"
#include "common/wire/frame_codec.h"
#include "common/wire/wire.h"

namespace {

using namespace torchprof;

constexpr uint32_t kFramePairs = 16383;  // a half-ring drain of the default 1 MiB ring

double cpu_s() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

std::vector<wire::Record> traffic(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<wire::Record> v;
  uint64_t ts = 1'000'000'000'000 + seed * 1'000'000'000;
  for (uint32_t i = 0; i < kFramePairs; ++i) {
    ts += 50 + rng() % 24;
    v.push_back(wire::Record{static_cast<uint8_t>(wire::Kind::kPush), 0, 0, 10 + (i & 7), ts, 0, 0});
    ts += 50 + rng() % 24;
    v.push_back(wire::Record{static_cast<uint8_t>(wire::Kind::kPop), 0, 0, 0, ts, 0, 0});
  }
  v.push_back(wire::Record{static_cast<uint8_t>(wire::Kind::kDropped), 0, 0, 0, ts + 10, 0, 2ull * kFramePairs});
  return v;
}

// zstd payload of one frame as the flusher makes it.
std::vector<char> payload(const std::vector<wire::Record>& v, bool delta) {
  std::vector<uint8_t> coded;
  const void* in = v.data();
  size_t in_size = v.size() * sizeof(wire::Record);
  if (delta) {
    coded.resize(wire::codec::encode_buffer_size(static_cast<uint32_t>(v.size())));
    in_size = wire::codec::delta_encode(v.data(), static_cast<uint32_t>(v.size()), coded.data());
    in = coded.data();
  }
  std::vector<char> out(ZSTD_compressBound(in_size));
  out.resize(ZSTD_compress(out.data(), out.size(), in, in_size, 1));
  return out;
}

bool send_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// A sender process: Hello, `frames` frames, Bye. Exits 0 when all went out.
int sender(const std::string& path, uint32_t frames, bool delta, uint32_t index) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, path.c_str());
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return 1;
  wire::Hello hello{};
  std::memcpy(hello.magic, wire::kHelloMagic, sizeof hello.magic);
  hello.version = wire::kProtocolVersion;
  hello.slot_size = wire::kSlotSize;
  hello.pid = getpid();
  hello.ppid = getppid();
  wire::MsgHeader mh{static_cast<uint32_t>(wire::MsgType::kHello), sizeof hello};
  if (!send_all(fd, &mh, sizeof mh) || !send_all(fd, &hello, sizeof hello)) return 1;
  char ack[sizeof(wire::MsgHeader) + sizeof(wire::HelloAck)];
  if (::recv(fd, ack, sizeof ack, MSG_WAITALL) != static_cast<ssize_t>(sizeof ack)) return 1;
  std::vector<wire::Record> v = traffic(index);
  std::vector<char> body = payload(v, delta);
  std::vector<char> msg(sizeof(wire::MsgHeader) + sizeof(wire::FrameHeader) + body.size());
  for (uint32_t seq = 0; seq < frames; ++seq) {
    wire::MsgHeader fmh{static_cast<uint32_t>(wire::MsgType::kFrame),
                        static_cast<uint32_t>(sizeof(wire::FrameHeader) + body.size())};
    wire::FrameHeader fh{static_cast<uint32_t>(getpid()),
                         static_cast<uint32_t>(delta ? 1u : 0u),  // kZstdDelta / kZstdRaw
                         static_cast<uint32_t>(v.size() * sizeof(wire::Record)), seq};
    std::memcpy(msg.data(), &fmh, sizeof fmh);
    std::memcpy(msg.data() + sizeof fmh, &fh, sizeof fh);
    std::memcpy(msg.data() + sizeof fmh + sizeof fh, body.data(), body.size());
    if (!send_all(fd, msg.data(), msg.size())) return 1;
  }
  wire::Bye bye{0, 0, uint64_t{frames} * v.size(), 0, 0};
  wire::MsgHeader bmh{static_cast<uint32_t>(wire::MsgType::kBye), sizeof bye};
  if (!send_all(fd, &bmh, sizeof bmh) || !send_all(fd, &bye, sizeof bye)) return 1;
  ::close(fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int senders = argc > 1 ? std::atoi(argv[1]) : 2;
  const auto frames = static_cast<uint32_t>(argc > 2 ? std::atoi(argv[2]) : 200);
  const bool delta = argc > 3 ? std::strcmp(argv[3], "raw") != 0 : true;
  if (senders < 1 || senders > 64 || frames < 1) {
    std::fprintf(stderr, "usage: ingest_bench [SENDERS 1..64] [FRAMES>0] [delta|raw]\n");
    return 2;
  }
  char tmpl[] = "/tmp/torchprof_ingest.XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return 1;
  const std::string dir = tmpl;
  int bad = 0;
  double cpu = 0, wall = 0;
  uint64_t capture_bytes = 0, wire_bytes = 0;
  {
    CaptureWriter writer(dir);
    Server server(writer);
    server.start();
    const double cpu0 = cpu_s();
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<pid_t> kids;
    for (int i = 0; i < senders; ++i) {
      pid_t pid = ::fork();
      if (pid == 0) ::_exit(sender(server.socket_path(), frames, delta, static_cast<uint32_t>(i)));
      kids.push_back(pid);
    }
    for (pid_t pid : kids) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      bad += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    server.wait_idle(std::chrono::seconds(60));
    wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    cpu = cpu_s() - cpu0;
    server.stop();
    for (const auto& s : server.stats()) wire_bytes += s.bytes;
    capture_bytes = writer.bytes_written();
  }
  std::filesystem::remove_all(dir);
  const double records = double(senders) * frames * (2.0 * kFramePairs + 1);
  std::printf("records %.0f records\n", records);
  std::printf("senders_failed %d -\n", bad);
  std::printf("collector_cpu_s %.4f s\n", cpu);
  std::printf("records_per_collector_cpu_s %.6g records/s\n", records / cpu);
  std::printf("records_per_wall_s %.6g records/s\n", records / wall);
  std::printf("wire_bytes_per_record %.4g B\n", double(wire_bytes) / records);
  std::printf("capture_bytes %.0f B\n", double(capture_bytes));
  return bad == 0 ? 0 : 1;
}
