// The delta transform of kZstdDelta frames (common/wire/frame_codec.h) and the
// collector's frame decoding (reading/frame_decode.h): exact round trips, edge
// cases, and damaged input answered with an error rather than a crash.
#include <doctest/doctest.h>
#include <zstd.h>

#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "analysis_capture_builder.h"
#include "engine_test_util.h"
#include "reading/frame_decode.h"
#include "common/errors.h"
#include "common/wire/frame_codec.h"

namespace torchprof {
namespace {

using wire::Kind;
using wire::Record;
namespace codec = wire::codec;

Record rec(Kind kind, uint32_t name, uint64_t ts, uint64_t a = 0, uint64_t b = 0, uint16_t domain = 0,
           uint8_t extra = 0) {
  return Record{static_cast<uint8_t>(kind), extra, domain, name, ts, a, b};
}

std::vector<uint8_t> encode(const std::vector<Record>& slots) {
  std::vector<uint8_t> out(codec::encode_buffer_size(static_cast<uint32_t>(slots.size())));
  size_t n = codec::delta_encode(slots.data(), static_cast<uint32_t>(slots.size()), out.data());
  REQUIRE(n <= codec::max_encoded_size(static_cast<uint32_t>(slots.size())));
  out.resize(n);
  return out;
}

codec::DecodeStatus decode(const std::vector<uint8_t>& coded, uint32_t n, std::vector<Record>& out) {
  out.assign(n, Record{});
  return codec::delta_decode(coded.data(), coded.size(), reinterpret_cast<uint8_t*>(out.data()), n);
}

bool same(const std::vector<Record>& x, const std::vector<Record>& y) {
  return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(Record)) == 0);
}

void check_round_trip(const std::vector<Record>& slots) {
  std::vector<uint8_t> coded = encode(slots);
  std::vector<Record> back;
  REQUIRE(decode(coded, static_cast<uint32_t>(slots.size()), back) == codec::DecodeStatus::kOk);
  CHECK(same(slots, back));
}

// A continuation slot with arbitrary bytes (string bytes, a GPU record's extra fields).
Record filler(uint8_t seed) {
  Record r;
  auto* p = reinterpret_cast<uint8_t*>(&r);
  for (size_t i = 0; i < sizeof r; ++i) p[i] = static_cast<uint8_t>(seed * 31 + i);
  return r;
}

// Repetitive NVTX traffic: push/pop pairs over 8 names, ~60 ns apart with jitter.
std::vector<Record> nvtx_traffic(uint32_t pairs, uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  std::vector<Record> v;
  uint64_t ts = 1'000'000'000'000;
  for (uint32_t i = 0; i < pairs; ++i) {
    ts += 55 + rng() % 16;
    v.push_back(rec(Kind::kPush, 10 + (i & 7), ts));
    ts += 55 + rng() % 16;
    v.push_back(rec(Kind::kPop, 0, ts));
  }
  v.push_back(rec(Kind::kDropped, 0, ts + 100, 0, 2 * pairs));
  return v;
}

std::vector<uint8_t> zstd_of(const void* data, size_t size) {
  std::vector<uint8_t> out(ZSTD_compressBound(size));
  size_t n = ZSTD_compress(out.data(), out.size(), data, size, 1);
  REQUIRE_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

std::vector<uint8_t> frame(wire::FrameEncoding encoding, const std::vector<Record>& slots, uint32_t tid = 7) {
  std::vector<uint8_t> payload;
  if (encoding == wire::FrameEncoding::kZstdDelta) {
    std::vector<uint8_t> coded = encode(slots);
    payload = zstd_of(coded.data(), coded.size());
  } else {
    payload = zstd_of(slots.data(), slots.size() * sizeof(Record));
  }
  wire::FrameHeader fh{tid, static_cast<uint32_t>(encoding), static_cast<uint32_t>(slots.size() * sizeof(Record)),
                       0};
  std::vector<uint8_t> body(sizeof fh);
  std::memcpy(body.data(), &fh, sizeof fh);
  body.insert(body.end(), payload.begin(), payload.end());
  return body;
}

}  // namespace

TEST_CASE("frame codec: varints and zigzag") {
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{127}, uint64_t{128}, uint64_t{1} << 35,
                     std::numeric_limits<uint64_t>::max()}) {
    uint8_t buf[codec::kMaxVarint];
    uint8_t* end = codec::put_varint(buf, v);
    uint64_t back = 0;
    CHECK(codec::get_varint(buf, end, back) == end);
    CHECK(back == v);
    CHECK(codec::get_varint(buf, end - 1, back) == nullptr);  // cut
    CHECK(codec::unzigzag(codec::zigzag(v)) == v);
  }
  CHECK(codec::zigzag(static_cast<uint64_t>(-1)) == 1);
  CHECK(codec::zigzag(1) == 2);
  // An eleventh byte, or a tenth above 1, is more than 64 bits.
  uint8_t too_long[11];
  std::memset(too_long, 0xff, sizeof too_long);
  uint64_t v = 0;
  CHECK(codec::get_varint(too_long, too_long + 11, v) == nullptr);
  too_long[9] = 0x02;
  CHECK(codec::get_varint(too_long, too_long + 10, v) == nullptr);
}

TEST_CASE("frame codec: edge cases round-trip exactly") {
  SUBCASE("empty batch") { check_round_trip({}); }
  SUBCASE("a single record") { check_round_trip({rec(Kind::kPush, 3, 123456789)}); }
  SUBCASE("a single continuation-less kDropped") { check_round_trip({rec(Kind::kDropped, 0, 1, 5, 9)}); }
  SUBCASE("continuation slots: strings and GPU records") {
    std::vector<Record> v;
    v.push_back(rec(Kind::kString, 4, 100, 70, 0, 0, 3));
    for (uint8_t i = 0; i < 3; ++i) v.push_back(filler(i));
    v.push_back(rec(Kind::kPush, 4, 150));
    v.push_back(rec(Kind::kKernel, 9, 5000, 7000, 42, 0, 2));
    v.push_back(filler(7));
    v.push_back(filler(8));
    v.push_back(rec(Kind::kMemcpy, 0, 4000, 4100, 43, 0, 1));
    v.push_back(filler(9));
    v.push_back(rec(Kind::kPop, 0, 160));
    check_round_trip(v);
  }
  SUBCASE("unknown kinds keep every field") {
    std::vector<Record> v;
    for (int k : {13, 31, 43, 99, 200, 255}) {
      v.push_back(Record{static_cast<uint8_t>(k), 0, static_cast<uint16_t>(k * 257), static_cast<uint32_t>(k) << 24,
                         uint64_t(k) << 40, ~uint64_t(k), uint64_t(k) * 0x9e3779b97f4a7c15ull});
    }
    check_round_trip(v);
  }
  SUBCASE("huge timestamp jumps and extreme values") {
    const uint64_t max = std::numeric_limits<uint64_t>::max();
    check_round_trip({rec(Kind::kPush, 1, 0), rec(Kind::kPop, 0, max), rec(Kind::kPush, 1, 1),
                      rec(Kind::kPop, 0, uint64_t{1} << 63), rec(Kind::kCudaRuntime, 2, max, 0, max, 0xffff),
                      rec(Kind::kKernel, 0xffffffffu, 0, max, 0), rec(Kind::kEnd, 0, 5, max, max)});
  }
  SUBCASE("a record whose extra runs past the end keeps what is there") {
    check_round_trip({rec(Kind::kPush, 1, 10), rec(Kind::kString, 2, 11, 200, 0, 0, 7), filler(1), filler(2)});
    check_round_trip({rec(Kind::kKernel, 1, 10, 20, 1, 0, 2)});
  }
  SUBCASE("random slots") {
    std::mt19937_64 rng(12345);
    for (int round = 0; round < 200; ++round) {
      std::vector<Record> v(rng() % 64);
      for (Record& r : v) {
        auto* p = reinterpret_cast<uint64_t*>(&r);
        for (int i = 0; i < 4; ++i) p[i] = rng();
        if (rng() % 4 != 0) r.extra = static_cast<uint8_t>(rng() % 3);  // mostly short runs
      }
      check_round_trip(v);
    }
  }
}

TEST_CASE("frame codec: repetitive NVTX traffic shrinks well below plain zstd") {
  std::vector<Record> v = nvtx_traffic(30000);
  check_round_trip(v);
  std::vector<uint8_t> coded = encode(v);
  size_t delta = zstd_of(coded.data(), coded.size()).size();
  size_t plain = zstd_of(v.data(), v.size() * sizeof(Record)).size();
  MESSAGE("per pair: delta+zstd ", double(delta) / 30000, " B, zstd ", double(plain) / 30000, " B");
  CHECK(delta * 2 < plain);
  CHECK(delta < 30000 * 3);  // under 3 bytes per range (push + pop)
}

TEST_CASE("frame codec: damaged input is an error, never a crash") {
  std::vector<Record> v = nvtx_traffic(50);
  v.insert(v.begin() + 3, {rec(Kind::kString, 4, 100, 40, 0, 0, 2), filler(1), filler(2)});
  const auto n = static_cast<uint32_t>(v.size());
  std::vector<uint8_t> coded = encode(v);
  std::vector<Record> out;
  SUBCASE("every truncation") {
    for (size_t len = 0; len < coded.size(); ++len) {
      std::vector<uint8_t> cut(coded.begin(), coded.begin() + static_cast<std::ptrdiff_t>(len));
      CHECK(decode(cut, n, out) != codec::DecodeStatus::kOk);
    }
  }
  SUBCASE("a trailing byte") {
    coded.push_back(0);
    CHECK(decode(coded, n, out) != codec::DecodeStatus::kOk);
  }
  SUBCASE("the wrong slot count") {
    CHECK(decode(coded, n - 1, out) != codec::DecodeStatus::kOk);
    CHECK(decode(coded, n + 1, out) != codec::DecodeStatus::kOk);
    CHECK(decode(coded, 0, out) != codec::DecodeStatus::kOk);
  }
  SUBCASE("flipped bytes") {
    std::mt19937 rng(7);
    int errors = 0;
    for (int round = 0; round < 2000; ++round) {
      std::vector<uint8_t> bad = coded;
      bad[rng() % bad.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
      errors += decode(bad, n, out) != codec::DecodeStatus::kOk;  // some flips still decode (a ts byte)
    }
    CHECK(errors > 0);
  }
  SUBCASE("garbage") {
    std::mt19937 rng(9);
    for (int round = 0; round < 2000; ++round) {
      std::vector<uint8_t> junk(rng() % 64);
      for (uint8_t& b : junk) b = static_cast<uint8_t>(rng());
      (void)decode(junk, rng() % 8, out);
    }
  }
}

TEST_CASE("frame decode: both encodings, and clean errors") {
  std::vector<Record> v = nvtx_traffic(100);
  v.push_back(rec(Kind::kKernel, 9, 5000, 7000, 42, 0, 2));
  v.push_back(filler(7));
  v.push_back(filler(8));
  const std::vector<uint8_t> raw_bytes(reinterpret_cast<const uint8_t*>(v.data()),
                                       reinterpret_cast<const uint8_t*>(v.data() + v.size()));
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  FrameScratch scratch;
  wire::FrameHeader fh{};
  std::vector<uint8_t> raw;
  std::string why;
  for (auto encoding : {wire::FrameEncoding::kZstdRaw, wire::FrameEncoding::kZstdDelta}) {
    std::vector<uint8_t> body = frame(encoding, v);
    REQUIRE(decode_frame(body.data(), body.size(), dctx, scratch, fh, raw, &why));
    CHECK(fh.tid == 7);
    CHECK(raw == raw_bytes);
    // Every truncation of the body fails cleanly.
    for (size_t len = 0; len < body.size(); len += 1 + len / 8) {
      CHECK_FALSE(decode_frame(body.data(), len, dctx, scratch, fh, raw, &why));
      CHECK_FALSE(why.empty());
    }
  }
  SUBCASE("unknown encoding") {
    std::vector<uint8_t> body = frame(wire::FrameEncoding::kZstdDelta, v);
    uint32_t enc = 9;
    std::memcpy(body.data() + 4, &enc, 4);
    CHECK_FALSE(decode_frame(body.data(), body.size(), dctx, scratch, fh, raw, &why));
    CHECK(why == "unknown frame encoding");
  }
  SUBCASE("delta frame claiming more content than its slots allow") {
    std::vector<uint8_t> big(codec::max_encoded_size(2) + 1, 0);
    std::vector<uint8_t> payload = zstd_of(big.data(), big.size());
    wire::FrameHeader h{1, static_cast<uint32_t>(wire::FrameEncoding::kZstdDelta), 2 * wire::kSlotSize, 0};
    std::vector<uint8_t> body(sizeof h);
    std::memcpy(body.data(), &h, sizeof h);
    body.insert(body.end(), payload.begin(), payload.end());
    CHECK_FALSE(decode_frame(body.data(), body.size(), dctx, scratch, fh, raw, &why));
  }
  SUBCASE("raw frame whose size says otherwise") {
    std::vector<uint8_t> body = frame(wire::FrameEncoding::kZstdDelta, v);
    uint32_t size = 33;
    std::memcpy(body.data() + 8, &size, 4);
    CHECK_FALSE(decode_frame(body.data(), body.size(), dctx, scratch, fh, raw, &why));
  }
  ZSTD_freeDCtx(dctx);
}

TEST_CASE("capture checks: every single-byte change is caught") {
  std::vector<uint8_t> body(301);
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<uint8_t>(i * 7);
  for (uint32_t version : {1u, capture::kFileVersion}) {
    const uint32_t check = capture::chunk_check(version, body.data(), body.size());
    for (size_t i = 0; i < body.size(); ++i) {
      for (uint8_t flip : {uint8_t{1}, uint8_t{0x80}, uint8_t{0xff}}) {
        body[i] ^= flip;
        CHECK(capture::chunk_check(version, body.data(), body.size()) != check);
        body[i] ^= flip;
      }
    }
    // Lengths matter too (a zero byte appended or cut).
    CHECK(capture::chunk_check(version, body.data(), body.size() - 1) != check);
  }
  CHECK(capture::chunk_check(1, body.data(), body.size()) == capture::fnv1a32(body.data(), body.size()));
}

TEST_CASE("frame decode: captures of protocol 1 and 2 decode to the same events") {
  auto slots = [] {
    test::Slots s;
    s.str(1, "forward").str(2, "backward");
    for (uint64_t i = 0; i < 50; ++i) s.push(1 + (i & 1), 2000 + i * 100).pop(2050 + i * 100);
    s.rec(Kind::kDropped, 0, 9000, 0, 100);
    return s;
  };
  auto build = [&](uint32_t wire_version, wire::FrameEncoding encoding) {
    // Protocol 1 came with capture file version 1 (FNV-1a chunk checks).
    test::CaptureBuilder b(wire_version == 1 ? 1 : capture::kFileVersion);
    std::memcpy(b.bytes.data() + offsetof(capture::FileHeader, wire_version), &wire_version, 4);
    b.chunk(capture::ChunkType::kHello, 1,
            test::hello_body(100, 1, 1000, 1'700'000'000'000'000'000ull, "/bin/x", {"x"}, "h", {}));
    test::Slots s = slots();
    std::vector<Record> v(s.raw.size() / sizeof(Record));
    std::memcpy(v.data(), s.raw.data(), s.raw.size());
    std::vector<uint8_t> body = frame(encoding, v, 100);
    b.chunk(capture::ChunkType::kFrame, 1, std::string(body.begin(), body.end()));
    b.chunk(capture::ChunkType::kBye, 1, test::bye_body(wire::ExitKind::kExit, 0, 100, 0, 9500));
    b.chunk(capture::ChunkType::kConnClosed, 1, "");
    return b;
  };
  std::map<int, test::Collected> c1, c2;
  Run v1 = test::analyse(build(1, wire::FrameEncoding::kZstdRaw).save("codec_v1.tprof"), {}, &c1);
  Run v2 = test::analyse(build(2, wire::FrameEncoding::kZstdDelta).save("codec_v2.tprof"), {}, &c2);
  REQUIRE(v1.processes.size() == 1);
  REQUIRE(v2.processes.size() == 1);
  const auto& e1 = c1[100].events;
  const auto& e2 = c2[100].events;
  REQUIRE(e1.size() == 50);
  REQUIRE(e2.size() == e1.size());
  for (size_t i = 0; i < e1.size(); ++i) {
    CHECK(e1[i].name == e2[i].name);
    CHECK(e1[i].start_ns == e2[i].start_ns);
    CHECK(e1[i].end_ns == e2[i].end_ns);
  }
  CHECK(v1.processes[0].cpu_events == 50);
  CHECK(v2.processes[0].cpu_events == 50);
  CHECK(v2.processes[0].warnings.empty());
  // A capture from a newer protocol is refused with a clear message.
  const uint32_t newer = wire::kProtocolVersion + 1;
  std::string path = build(newer, wire::FrameEncoding::kZstdDelta).save("codec_newer.tprof");
  const std::string said = "wire protocol version " + std::to_string(newer);
  CHECK_THROWS_WITH_AS(analyse_capture_file(path, AnalysisOptions{}), doctest::Contains(said.c_str()), InputError);
}

}  // namespace torchprof
