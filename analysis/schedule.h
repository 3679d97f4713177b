// torch.profiler's schedule as a pure function of the step number.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "analysis/model.h"

namespace torchprof {

struct Schedule {
  int wait = 0;
  int warmup = 0;
  int active = 1;
  int repeat = 0;      // 0 = forever
  int skip_first = 0;
};

// Parses "wait=1,warmup=1,active=3[,repeat=2][,skip_first=0]". On failure returns
// nullopt and sets *error to a one-line reason naming the bad part. Sets *warning
// (if given) for warmup=0, as torch warns.
std::optional<Schedule> parse_schedule(std::string_view text, std::string* error,
                                       std::string* warning = nullptr);

// Action of step `step` (0-based).
StepAction schedule_action(const Schedule& s, int step);

}  // namespace torchprof
