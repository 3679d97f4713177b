// Runtime and driver callback ids by function name, from the toolkit's own headers
// (the table gen_cupti_tables.cmake writes).
#include "replay_cbids.h"

#include <cupti_callbacks.h>

#include <limits>
#include <string_view>

#include "fake_cupti_tables.inc"

namespace kineto_replay {

namespace {

// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel": the enum's version suffix, which
// the function names CUPTI and Kineto show do not carry.
std::string_view without_version(std::string_view name) {
  size_t digits = 0;
  while (digits < name.size() && name[name.size() - 1 - digits] >= '0' && name[name.size() - 1 - digits] <= '9') {
    ++digits;
  }
  if (digits >= 4 && name.size() >= digits + 3 && name.substr(name.size() - digits - 2, 2) == "_v") {
    return name.substr(0, name.size() - digits - 2);
  }
  return name;
}

bool names_function(unsigned domain, std::string_view entry, std::string_view name) {
  if (entry == name) return true;
  return domain == CUPTI_CB_DOMAIN_RUNTIME_API && without_version(entry) == name;
}

}  // namespace

std::optional<Callback> lookup_callback(int domain, const std::string& name, int64_t trace_cbid) {
  const auto wanted_domain = static_cast<unsigned>(domain);
  // Kineto writes INVALID for a callback id its own table lacks; the id is still right.
  if (name == "INVALID") {
    for (const auto& entry : kCallbackNames) {
      if (entry.domain == wanted_domain && static_cast<int64_t>(entry.cbid) == trace_cbid) {
        return Callback{entry.cbid, std::string(without_version(entry.name))};
      }
    }
    return std::nullopt;
  }
  // Several ids may carry one name (cudaStreamGetCaptureInfo_v10010 and _v12030): the
  // trace's own id when it is one of them, else the oldest.
  std::optional<Callback> found;
  for (const auto& entry : kCallbackNames) {
    if (entry.domain != wanted_domain || !names_function(entry.domain, entry.name, name)) continue;
    if (static_cast<int64_t>(entry.cbid) == trace_cbid) return Callback{entry.cbid, name};
    if (!found || entry.cbid < found->cbid) found = Callback{entry.cbid, name};
  }
  return found;
}

}  // namespace kineto_replay
