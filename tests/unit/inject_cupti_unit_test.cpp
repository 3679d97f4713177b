// Unit tests of GPU tracing's pure parts: the CUPTI version check, runtime API
// names without CUPTI's version tags, the measured clock offset, and the
// recorder's records with continuation slots (GPU activity) and API records.
#include <doctest/doctest.h>
#include <semaphore.h>

#include <cstring>
#include <string>
#include <vector>

#include "inject/cupti/api.h"
#include "inject/cupti/cbids.h"
#include "inject/cupti/search.h"
#include "inject/cupti/support.h"
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

TEST_CASE("CUPTI versions: every release from CUDA 12.0 on is read, each field where it has it") {
  CHECK_FALSE(ti::cupti_version_readable(18));  // CUDA 11.8
  CHECK(ti::cupti_version_readable(19));        // 12.0
  CHECK(ti::cupti_version_readable(22));        // 12.4
  CHECK(ti::cupti_version_readable(28));        // 12.9 Update 1
  CHECK(ti::cupti_version_readable(130001));
  CHECK(ti::cupti_version_readable(130300));
  CHECK_FALSE(ti::sync_record_has_return_value(24));
  CHECK(ti::sync_record_has_return_value(26));
  CHECK(ti::sync_record_has_return_value(130100));
  char name[32];
  ti::cupti_release_name(24, name, sizeof name);
  CHECK(std::string(name) == "12.6");
  ti::cupti_release_name(130100, name, sizeof name);
  CHECK(std::string(name) == "13.1");
  ti::cupti_release_name(18, name, sizeof name);
  CHECK(std::string(name) == "before 12.0");
  // The fields read from a 12.x record lie inside its shorter struct (cupti/activity.cpp).
  CHECK(offsetof(CUpti_ActivityKernel10, graphId) + 4 <= 208);  // Kernel9
  CHECK(offsetof(CUpti_ActivityMemcpy6, graphId) + 4 <= 88);    // Memcpy5
  CHECK(offsetof(CUpti_ActivitySynchronization2, cudaEventId) + 4 <= 40);
  CHECK(offsetof(CUpti_ActivityCudaEvent2, eventId) + 4 <= 24);
  CHECK(offsetof(CUpti_ActivityMemory4, streamId) + 4 <= 120);  // Memory3
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

TEST_CASE("recorded API calls come from the toolkit's cbid headers: every launch form, not the chatter") {
  // Runtime: every call but Kineto's blocklist and the compiler's plumbing.
  for (uint32_t cbid :
       {uint32_t{CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000},
        uint32_t{CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000},
        uint32_t{CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000},
        uint32_t{CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000},
        uint32_t{CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060},
        uint32_t{CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000},
        uint32_t{CUPTI_RUNTIME_TRACE_CBID_cudaLaunchHostFunc_v10000},
        uint32_t{CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000},
        uint32_t{CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000}}) {
    CAPTURE(cbid);
    CHECK((ti::runtime_api_class(cbid) & (ti::kApiLaunch | ti::kApiRecorded)) == (ti::kApiLaunch | ti::kApiRecorded));
  }
  for (uint32_t cbid : {uint32_t{CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020},
                        uint32_t{CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_ptsz_v7000},
                        uint32_t{CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020},
                        uint32_t{CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020},
                        uint32_t{CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020},
                        uint32_t{CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020},
                        // Kineto records these too: they count as "CUDA runtime" in its breakdown.
                        uint32_t{CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020},
                        uint32_t{CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceCount_v3020},
                        uint32_t{CUPTI_RUNTIME_TRACE_CBID_cudaFuncSetAttribute_v9000},
                        uint32_t{CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020},
                        uint32_t{CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_v10000}}) {
    CAPTURE(cbid);
    CHECK(ti::runtime_api_recorded(cbid));
  }
  CHECK((ti::runtime_api_class(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020) & ti::kApiCopy) != 0);
  CHECK((ti::runtime_api_class(CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000) & ti::kApiCapture) != 0);
  for (uint32_t cbid : {uint32_t{CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020},
                        uint32_t{CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020},
                        uint32_t{CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020},
                        uint32_t{CUPTI_RUNTIME_TRACE_CBID_cudaEventCreate_v3020},
                        uint32_t{CUPTI_RUNTIME_TRACE_CBID_cudaEventCreateWithFlags_v3020},
                        uint32_t{CUPTI_RUNTIME_TRACE_CBID_cudaEventDestroy_v3020},
                        uint32_t{CUPTI_RUNTIME_TRACE_CBID___cudaPushCallConfiguration_v13000},
                        uint32_t{CUPTI_RUNTIME_TRACE_CBID___cudaPopCallConfiguration_v13000},
                        uint32_t{CUPTI_RUNTIME_TRACE_CBID___cudaRegisterFunction_v13000},
                        uint32_t{CUPTI_RUNTIME_TRACE_CBID___cudaGetKernel_v13000}, 0u, 1000000u}) {
    CAPTURE(cbid);
    CHECK_FALSE(ti::runtime_api_recorded(cbid));
  }
  // Driver: what direct driver use shows (Triton's launches and the like).
  for (uint32_t cbid : {uint32_t{CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel}, uint32_t{CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx},
                        uint32_t{CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz},
                        uint32_t{CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel},
                        uint32_t{CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch}, uint32_t{CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2},
                        uint32_t{CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async}, uint32_t{CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2},
                        uint32_t{CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2}, uint32_t{CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize},
                        uint32_t{CUPTI_DRIVER_TRACE_CBID_cuEventRecord}, uint32_t{CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent}}) {
    CAPTURE(cbid);
    CHECK(ti::driver_api_recorded(cbid));
  }
  for (uint32_t cbid : {uint32_t{CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent}, uint32_t{CUPTI_DRIVER_TRACE_CBID_cuInit},
                        uint32_t{CUPTI_DRIVER_TRACE_CBID_cuModuleGetFunction},
                        uint32_t{CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState}}) {
    CAPTURE(cbid);
    CHECK_FALSE(ti::driver_api_recorded(cbid));
  }
  // Every id of the headers is in the tables.
  CHECK(ti::kRuntimeCbidCount + 2 >= CUPTI_RUNTIME_TRACE_CBID_SIZE - 1);
}

TEST_CASE("correlation ids widened to 64 bits stay right across the 32-bit wrap") {
  constexpr uint64_t k32 = uint64_t{1} << 32;
  CHECK(ti::widen_correlation(0, 12345) == 0);
  CHECK(ti::widen_correlation(7, 0) == 7);
  CHECK(ti::widen_correlation(4294967000u, 0) == 4294967000u);  // a first id high in the range: not negative
  CHECK(ti::widen_correlation(5, 4294967000u) == k32 + 5);        // after the wrap
  CHECK(ti::widen_correlation(4294967290u, k32 + 5) == 4294967290u);  // a late record from before it
  CHECK(ti::widen_correlation(9, 3 * k32 + 100) == 3 * k32 + 9);
  CHECK(ti::widen_correlation(0x80000000u - 200, 2 * k32 + 100) == 2 * k32 + 0x80000000u - 200);  // nearest: ahead
  CHECK(ti::widen_correlation(0x80000000u + 200, 2 * k32 + 100) == k32 + 0x80000000u + 200);      // nearest: behind
  // A second wrap, walking ids in steps under 2^31 with the reference moved as the tracer moves it.
  uint64_t reference = 0;
  uint64_t last = 0;
  for (uint64_t step = 0; step < 10; ++step) {
    const uint64_t id = 1 + step * (uint64_t{1} << 30);
    const uint64_t widened = ti::widen_correlation(static_cast<uint32_t>(id), reference);
    CHECK(widened == id);
    CHECK(widened > last);
    last = widened;
    if (ti::correlation_reference_due(widened, reference)) reference = widened;
  }
  CHECK_FALSE(ti::correlation_reference_due(100, 50));  // same 2^28 block: no store
  CHECK(ti::correlation_reference_due(ti::kCorrelationBlock + 1, 50));
  CHECK_FALSE(ti::correlation_reference_due(50, ti::kCorrelationBlock + 1));  // never backwards
}


TEST_CASE("times mapped to a second client's clock (a TSC at 3 ticks per ns)") {
  const ti::ClockPair first{1000000000, 7000000000000ull + 3000000000ull};
  const ti::ClockPair last{3000000000, 7000000000000ull + 9000000000ull};
  CHECK(ti::map_to_their_clock(0, first, last) == 0);
  CHECK(ti::map_to_their_clock(3000000000, first, last) == last.theirs);
  CHECK(ti::map_to_their_clock(2999999000, first, last) == last.theirs - 3000);
  CHECK(ti::map_to_their_clock(2000000000, first, last) == 7000000000000ull + 6000000000ull);
  // Pairs read within 1 ms of each other give no rate: 1 is taken.
  CHECK(ti::map_to_their_clock(900, ti::ClockPair{1000, 5000}, ti::ClockPair{1000, 5000}) == 4900);
}

TEST_CASE("shared buffers: a header only this process writes, records after their lengths") {
  alignas(8) uint8_t buffer[128] = {};
  const uint64_t cookie = 0x1234abcdull;
  const uint64_t head[2] = {ti::kSharedBufferMagic, cookie};
  memcpy(buffer, head, sizeof head);
  uint64_t length = 24;
  memcpy(buffer + 16, &length, 8);
  buffer[24] = 10;
  length = 16;
  memcpy(buffer + 48, &length, 8);
  buffer[56] = 4;
  const size_t valid = 72;
  CHECK(ti::is_shared_buffer(buffer, valid, cookie));
  CHECK_FALSE(ti::is_shared_buffer(buffer, valid, cookie + 1));
  CHECK_FALSE(ti::is_shared_buffer(buffer, 8, cookie));
  uint8_t* record = nullptr;
  REQUIRE(ti::next_shared_record(buffer, valid, &record));
  CHECK(record == buffer + 24);
  REQUIRE(ti::next_shared_record(buffer, valid, &record));
  CHECK(record == buffer + 56);
  CHECK_FALSE(ti::next_shared_record(buffer, valid, &record));
  CHECK_FALSE(ti::next_shared_record(buffer, 60, &(record = buffer + 24)));  // a length past the end
}

namespace {

// Files that "exist" for the search below.
const char* const* g_files = nullptr;
bool listed(const char* path) {
  for (const char* const* f = g_files; *f != nullptr; ++f) {
    if (strcmp(*f, path) == 0) return true;
  }
  return false;
}

std::vector<std::string> search(const ti::CuptiSearchInputs& in) {
  static char out[ti::kCuptiCandidatesMax][ti::kCuptiPathMax];
  const size_t n = ti::cupti_search_paths(in, out, ti::kCuptiCandidatesMax);
  return std::vector<std::string>(out, out + n);
}

}  // namespace

TEST_CASE("libcupti search: the CUPTI of the program's CUDA first, the build's next, sonames last") {
  SUBCASE("a CUDA 12 wheel's runtime: its cuda_cupti package, before a CUDA 13 build's CUPTI") {
    static const char* const files[] = {"/v/site/nvidia/cuda_runtime/lib/../../cuda_cupti/lib/libcupti.so.12",
                                        "/opt/cuda-13/lib64/libcupti.so.13", nullptr};
    g_files = files;
    ti::CuptiSearchInputs in;
    in.cudart = "/v/site/nvidia/cuda_runtime/lib/libcudart.so.12";
    in.build_path = "/opt/cuda-13/lib64/libcupti.so.13";
    in.exists = &listed;
    const auto got = search(in);
    REQUIRE(got.size() == 5);
    CHECK(got[0] == files[0]);
    CHECK(got[1] == "libcupti.so.12");
    CHECK(got[2] == files[1]);  // another major version: after every CUDA 12 choice
    CHECK(got[3] == "libcupti.so.13");
    CHECK(got[4] == "libcupti.so");
  }
  SUBCASE("a toolkit's runtime: CUPTI beside it, or in extras/CUPTI/lib64 from targets/<arch>/lib") {
    static const char* const files[] = {"/usr/local/cuda-13.1/targets/x86_64-linux/lib/../../../extras/CUPTI/lib64/"
                                        "libcupti.so.13",
                                        "/b/libcupti.so", nullptr};
    g_files = files;
    ti::CuptiSearchInputs in;
    in.cudart = "/usr/local/cuda-13.1/targets/x86_64-linux/lib/libcudart.so.13.1.80";
    in.build_path = "/b/libcupti.so";
    in.exists = &listed;
    const auto got = search(in);
    REQUIRE(got.size() == 5);
    CHECK(got[0] == files[0]);
    CHECK(got[1] == "/b/libcupti.so");  // no version in its name: taken as the program's
    CHECK(got[2] == "libcupti.so.13");
    CHECK(got[3] == "libcupti.so.12");
  }
  SUBCASE("torch's wheel without a loaded runtime: CUDA 13's nvidia/cu13/lib before CUDA 12's; the venv's once") {
    static const char* const files[] = {"/venv/lib/python3.12/site-packages/torch/lib/../../nvidia/cu13/lib/libcupti.so.13",
                                        "/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so.13",
                                        "/venv/lib/python3.12/site-packages/nvidia/cuda_cupti/lib/libcupti.so.12",
                                        nullptr};
    g_files = files;
    static const char* const sites[] = {"/venv/lib/python3.12/site-packages"};
    ti::CuptiSearchInputs in;
    in.torch_lib = "/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so";
    in.virtual_env = "/venv";
    in.site_packages = sites;
    in.site_packages_count = 1;
    in.exists = &listed;
    const auto got = search(in);
    REQUIRE(got.size() == 6);
    CHECK(got[0] == files[0]);
    CHECK(got[1] == files[1]);
    CHECK(got[2] == files[2]);
    CHECK(got[3] == "libcupti.so.13");
  }
  SUBCASE("nothing known and nothing there: the sonames alone, 13 first") {
    static const char* const files[] = {nullptr};
    g_files = files;
    ti::CuptiSearchInputs in;
    in.exists = &listed;
    CHECK(search(in) == std::vector<std::string>{"libcupti.so.13", "libcupti.so.12", "libcupti.so"});
  }
}
