// The overview (analysis/overview.h) as JSON: summary.json's "overview" object, which
// report.html's first section also reads. Times are integer nanoseconds, shares percent.
#pragma once

#include <nlohmann/json.hpp>

#include "analysis/overview.h"

namespace torchprof {

nlohmann::ordered_json overview_json(const Overview& overview);

}  // namespace torchprof
