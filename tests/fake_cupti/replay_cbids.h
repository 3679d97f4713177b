// Callback ids of CUDA runtime and driver functions, looked up by the names a Kineto
// trace gives them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kineto_replay {

struct Callback {
  uint32_t cbid = 0;
  std::string name;  // the function name to report (the trace's, or the header's for INVALID)
};

// `domain` is a CUpti_CallbackDomain (driver or runtime API); `name` as the trace
// writes it ("cudaLaunchKernel", "cuLaunchKernel", or Kineto's "INVALID" for an id its
// table lacked, resolved through `trace_cbid`). nullopt: no such function in this
// toolkit's headers.
std::optional<Callback> lookup_callback(int domain, const std::string& name, int64_t trace_cbid);

}  // namespace kineto_replay
