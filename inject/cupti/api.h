// libcupti loaded at run time: the functions GPU tracing uses, resolved into one
// table. The library is compiled against this toolkit's CUPTI headers but never
// linked to libcupti, so a process without CUDA never loads it, and a CUPTI
// whose record layouts differ from the headers is refused instead of misread.
#pragma once

#include <cupti.h>

#include <cstddef>
#include <cstdint>

namespace torchprof::inject {

struct CuptiApi {
  decltype(&cuptiGetVersion) get_version = nullptr;
  decltype(&cuptiGetResultString) get_result_string = nullptr;
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiEnableDomain) enable_domain = nullptr;
  decltype(&cuptiEnableCallback) enable_callback = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) activity_enable = nullptr;
  decltype(&cuptiActivityDisable) activity_disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) get_next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) get_num_dropped = nullptr;
  decltype(&cuptiGetTimestamp) get_timestamp = nullptr;
  // Optional: missing in old CUPTIs; then the clock offset is measured instead.
  decltype(&cuptiActivityRegisterTimestampCallback) register_timestamp_callback = nullptr;
  // Optional: TORCHPROF_CUDA_API=activity asks API records to name threads as the system does.
  decltype(&cuptiSetThreadIdType) set_thread_id_type = nullptr;
  uint32_t version = 0;      // what cuptiGetVersion reported
  const char* path = "";     // the library's path as dlopen was given it
};

// Loads libcupti and checks its version. A libcupti already in the process (the
// program's own, e.g. torch's libcupti.so.12) is the one used: a second copy
// from elsewhere would be a second CUPTI fighting the first over the driver's
// callbacks. Otherwise TORCHPROF_CUPTI_LIB, else the toolkit's found at build
// time, else the versioned sonames. On failure returns nullptr and writes a
// one-line reason into `why`. Once loaded, later calls return the same table.
const CuptiApi* load_cupti(char* why, size_t why_size);

// The address of CUPTI function `name` in the libcupti the program itself uses
// (ours once loaded, else one found in the process), for the interposed entry
// points (cupti/share.cpp); nullptr when no libcupti is loaded.
void* real_cupti_function(const char* name);

// The table load_cupti filled, or nullptr before / after a failed load.
const CuptiApi* cupti();

// CUPTI's name for `result` ("CUPTI_ERROR_UNKNOWN"), never null.
const char* cupti_result_text(CUptiResult result);

// Cold path of TP_CUPTI_CALL: logs the failing call, its result text and where.
void cupti_call_failed(const char* call, CUptiResult result, const char* file, int line);

}  // namespace torchprof::inject

// Evaluates a call through the table (e.g. TP_CUPTI_CALL(enable_domain(1, s, d)))
// and yields its CUptiResult; a failure is logged with file:line.
#define TP_CUPTI_CALL(call)                                                                 \
  ([&]() -> CUptiResult {                                                                   \
    CUptiResult tp_result_ = ::torchprof::inject::cupti()->call;                            \
    if (__builtin_expect(tp_result_ != CUPTI_SUCCESS, 0)) {                                 \
      ::torchprof::inject::cupti_call_failed(#call, tp_result_, __FILE__, __LINE__);        \
    }                                                                                       \
    return tp_result_;                                                                      \
  }())
