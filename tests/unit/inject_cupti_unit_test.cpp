// Unit tests of GPU tracing's pure parts: the CUPTI version check, runtime API
// names without CUPTI's version tags, the measured clock offset, and the
// recorder's records with continuation slots (GPU activity) and API records.
#include <doctest/doctest.h>
#include <semaphore.h>

#include <cstring>

#include "inject/cupti_api.h"
#include "inject/cupti_support.h"
#include "inject/recorder.h"
#include "inject/thread_buffer.h"

namespace ti = torchprof::inject;
namespace tw = torchprof::wire;

namespace {

uint32_t len_of(const char* s) { return ti::api_name_length(s, static_cast<uint32_t>(strlen(s))); }

// A CUPTI clock 1'000'000 ns ahead of ours; our clock advances 10 ns per read,
// except that the 3rd CUPTI reading is preempted for 500 ns.
uint64_t g_ours = 0;
int g_reads = 0;
uint64_t our_clock() { return g_ours += 10; }
bool cupti_clock(uint64_t* out) {
  if (++g_reads == 3) g_ours += 500;
  *out = g_ours + 1000000;
  return true;
}
bool broken_clock(uint64_t*) { return false; }

}  // namespace

TEST_CASE("CUPTI versions: same major line only") {
  CHECK(ti::cupti_version_compatible(130001, 130001));
  CHECK(ti::cupti_version_compatible(130000, 130001));
  CHECK(ti::cupti_version_compatible(130105, 130001));
  CHECK_FALSE(ti::cupti_version_compatible(28, 130001));      // CUDA 12.9
  CHECK_FALSE(ti::cupti_version_compatible(140000, 130001));  // a later major line
  CHECK_FALSE(ti::cupti_version_compatible(0, 130001));
  CHECK(ti::cupti_version_line(CUPTI_API_VERSION) >= 13);
}

TEST_CASE("runtime API names lose CUPTI's version tag") {
  CHECK(len_of("cudaLaunchKernel_v7000") == strlen("cudaLaunchKernel"));
  CHECK(len_of("cudaGraphLaunch_v10000") == strlen("cudaGraphLaunch"));
  CHECK(len_of("cudaLaunchKernel") == strlen("cudaLaunchKernel"));
  CHECK(len_of("cuMemcpyHtoD_v2") == strlen("cuMemcpyHtoD_v2"));  // a real symbol suffix
  CHECK(len_of("x_v123") == strlen("x_v123"));
  CHECK(len_of("_v1234") == strlen("_v1234"));  // nothing before the tag: kept
  CHECK(ti::api_name_length(nullptr, 0) == 0);
}

TEST_CASE("clock offset: the narrowest bracket wins") {
  g_ours = 5000;
  g_reads = 0;
  int64_t offset = 0;
  REQUIRE(ti::measure_clock_offset(&cupti_clock, &our_clock, 8, &offset));
  // Undisturbed reading: before = t, CUPTI = t + 1'000'000, after = t + 10 → midpoint t + 5.
  CHECK(offset == 1000000 - 5);
  CHECK_FALSE(ti::measure_clock_offset(&broken_clock, &our_clock, 8, &offset));
}

namespace {

// The slot at stream position `pos`, in the segment being read (positions of its records only).
const tw::Record& at(ti::ThreadBuffer* tb, uint64_t pos) {
  ti::Segment* s = tb->stream.read_segment();
  return s->data()[pos - s->base];
}

}  // namespace

TEST_CASE("records with continuation slots: one unit, counted as one record") {
  sem_t wake;
  sem_init(&wake, 0, 0);
  ti::ThreadBuffer* tb = ti::create_thread_buffer(16, 1, false, &wake);
  REQUIRE(tb != nullptr);
  tw::GpuKernelExtra x{};
  x.stream = 13;
  x.grid[0] = 4;
  x.queued = 99;
  tw::Record head{static_cast<uint8_t>(tw::Kind::kKernel), 0, 2, 0, 100, 200, 7};
  REQUIRE(ti::record_with_extra(tb, ti::ascii_name("_Z4gemmv"), head, &x, 2));
  ti::record_api(tb, tw::Kind::kCudaRuntime, 211, ti::NameRef{"cudaLaunchKernel_v7000", 16, 0}, 50, 60, 7);
  uint64_t pos = tb->stream.consumer_tail();
  const tw::Record& s = at(tb, pos);
  CHECK(s.kind == static_cast<uint8_t>(tw::Kind::kString));
  CHECK(s.a == 8);
  pos += 1 + s.extra;
  const tw::Record& k = at(tb, pos);
  CHECK(k.kind == static_cast<uint8_t>(tw::Kind::kKernel));
  CHECK(k.extra == 2);
  CHECK(k.name == s.name);
  CHECK((k.domain == 2 && k.ts == 100 && k.a == 200 && k.b == 7));
  tw::GpuKernelExtra back{};
  memcpy(&back, &at(tb, pos + 1), sizeof(back));
  CHECK((back.stream == 13 && back.grid[0] == 4 && back.queued == 99));
  pos += 3;
  const tw::Record& api_name = at(tb, pos);
  REQUIRE(api_name.kind == static_cast<uint8_t>(tw::Kind::kString));
  CHECK(api_name.a == 16);  // "cudaLaunchKernel", the tag cut by the caller
  const tw::Record& api = at(tb, pos + 1 + api_name.extra);
  CHECK((api.kind == static_cast<uint8_t>(tw::Kind::kCudaRuntime) && api.domain == 211 && api.ts == 50 &&
         api.a == 60 && api.b == 7));
  CHECK(tb->dropped.load() == 0);
  // Too many continuation slots: refused without writing.
  CHECK_FALSE(ti::record_with_extra(tb, ti::NameRef{}, head, &x, ti::kMaxExtraSlots + 1));
  ti::destroy_thread_buffer(tb);
  sem_destroy(&wake);
}
