// The overview (analysis/overview.h) as JSON: summary.json's "overview" object, which
// report.html's first section also reads. Times are integer nanoseconds, shares percent.
#pragma once

#include <nlohmann/json.hpp>

#include "analysis/module_view.h"
#include "analysis/overview.h"

namespace torchprof {

nlohmann::ordered_json overview_json(const Overview& overview);

// The module view (--with-modules, analysis/module_view.h) as summary.json's "modules",
// which report.html's module table reads too.
nlohmann::ordered_json module_view_json(const std::vector<ModuleRow>& modules);

}  // namespace torchprof
