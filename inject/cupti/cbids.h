// The runtime and driver API calls GPU tracing records, from a table generated at
// build time out of this toolkit's cupti_runtime_cbid.h and cupti_driver_cbid.h
// (inject/cupti/gen_cbid_table.cmake), never from names matched at run time: every
// callback id those headers define is classified, CUDA 13's __cudaLaunchKernel
// (what nvcc 13 emits for <<<>>>) and the _ptsz forms included.
#pragma once

#include <cstdint>

namespace torchprof::inject {

// What a call does (bits), and whether it is recorded.
enum ApiClass : uint8_t {
  kApiLaunch = 1,     // kernel launches of every form, graph launches, host functions
  kApiCopy = 2,       // memcpy of every form
  kApiSet = 4,        // memset
  kApiAlloc = 8,      // allocations and frees
  kApiSync = 16,      // device/context/stream/event synchronisation
  kApiEvent = 32,     // event records, queries, stream waits
  kApiCapture = 64,   // stream capture begin/end
  kApiRecorded = 128  // its calls become kCudaRuntime / kCudaDriver records
};

struct CbidClass {
  uint32_t cbid;
  uint8_t bits;
  const char* name;  // as the header names it: "cudaLaunchKernel_v7000", "cuMemcpyHtoD_v2"
};

#include "cupti_cbid_table.inc"

// The entry of `cbid` in a table; nullptr for an id these headers do not define.
template <unsigned N>
constexpr const CbidClass* find_entry(const CbidClass (&table)[N], uint32_t cbid) {
  // Tables follow the headers, in increasing cbid order.
  unsigned lo = 0;
  unsigned hi = N;
  while (lo < hi) {
    const unsigned mid = (lo + hi) / 2;
    if (table[mid].cbid < cbid) lo = mid + 1;
    else hi = mid;
  }
  return lo < N && table[lo].cbid == cbid ? &table[lo] : nullptr;
}

namespace cbid_detail {
template <unsigned N>
constexpr uint8_t find(const CbidClass (&table)[N], uint32_t cbid) {
  const CbidClass* entry = find_entry(table, cbid);
  return entry != nullptr ? entry->bits : 0;
}
template <unsigned N>
constexpr bool ascending(const CbidClass (&table)[N]) {
  for (unsigned i = 1; i < N; ++i) {
    if (table[i - 1].cbid >= table[i].cbid) return false;
  }
  return true;
}
static_assert(ascending(kRuntimeCbids) && ascending(kDriverCbids), "cbid tables must follow the headers' order");
}  // namespace cbid_detail

// The ApiClass bits of a runtime (driver = false) or driver callback id; 0 for an
// id these headers do not define (a newer CUPTI's), which is then not recorded.
constexpr uint8_t runtime_api_class(uint32_t cbid) { return cbid_detail::find(kRuntimeCbids, cbid); }
constexpr uint8_t driver_api_class(uint32_t cbid) { return cbid_detail::find(kDriverCbids, cbid); }
// The entry of a runtime (driver = false) or driver callback id, or nullptr.
inline const CbidClass* api_entry(bool driver, uint32_t cbid) {
  return driver ? find_entry(kDriverCbids, cbid) : find_entry(kRuntimeCbids, cbid);
}
constexpr bool runtime_api_recorded(uint32_t cbid) { return (runtime_api_class(cbid) & kApiRecorded) != 0; }
constexpr bool driver_api_recorded(uint32_t cbid) { return (driver_api_class(cbid) & kApiRecorded) != 0; }

}  // namespace torchprof::inject
