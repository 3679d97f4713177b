#include <doctest/doctest.h>

#include "analysis/schedule.h"

namespace torchprof {

TEST_CASE("schedule: torch's worked example wait=1 warmup=1 active=3 repeat=2") {
  Schedule s{.wait = 1, .warmup = 1, .active = 3, .repeat = 2};
  using A = StepAction;
  const A expected[] = {A::kNone,   A::kWarmup, A::kRecord, A::kRecord,
                        A::kRecordAndSave, A::kNone, A::kWarmup, A::kRecord,
                        A::kRecord, A::kRecordAndSave, A::kNone, A::kNone};
  for (int step = 0; step < 12; ++step) {
    CAPTURE(step);
    CHECK(schedule_action(s, step) == expected[step]);
  }
}

TEST_CASE("schedule: skip_first and repeat=0 repeat forever") {
  Schedule s{.wait = 0, .warmup = 1, .active = 2, .repeat = 0, .skip_first = 2};
  using A = StepAction;
  const A expected[] = {A::kNone, A::kNone, A::kWarmup, A::kRecord, A::kRecordAndSave,
                        A::kWarmup, A::kRecord, A::kRecordAndSave};
  for (int step = 0; step < 8; ++step) {
    CAPTURE(step);
    CHECK(schedule_action(s, step) == expected[step]);
  }
  CHECK(schedule_action(s, 2 + 3 * 1000 + 2) == A::kRecordAndSave);
}

TEST_CASE("schedule: active=1 saves every step of its period") {
  Schedule s{.wait = 2, .warmup = 0, .active = 1, .repeat = 1};
  CHECK(schedule_action(s, 0) == StepAction::kNone);
  CHECK(schedule_action(s, 1) == StepAction::kNone);
  CHECK(schedule_action(s, 2) == StepAction::kRecordAndSave);
  CHECK(schedule_action(s, 3) == StepAction::kNone);
}

TEST_CASE("schedule: parsing") {
  std::string error, warning;
  auto s = parse_schedule("wait=1, warmup=1,active=3,repeat=2,skip_first=4", &error, &warning);
  REQUIRE(s);
  CHECK(s->wait == 1);
  CHECK(s->warmup == 1);
  CHECK(s->active == 3);
  CHECK(s->repeat == 2);
  CHECK(s->skip_first == 4);
  CHECK(warning.empty());

  s = parse_schedule("wait=0,warmup=0,active=2", &error, &warning);
  REQUIRE(s);
  CHECK(warning.find("warmup=0") != std::string::npos);

  CHECK_FALSE(parse_schedule("wait=1,warmup=1", &error));
  CHECK(error.find("active") != std::string::npos);
  CHECK_FALSE(parse_schedule("wait=1,warmup=1,active=0", &error));
  CHECK(error.find("> 0") != std::string::npos);
  CHECK_FALSE(parse_schedule("wait=-1,active=1", &error));
  CHECK(error.find("wait") != std::string::npos);
  CHECK_FALSE(parse_schedule("wait=x,active=1", &error));
  CHECK(error.find("'x'") != std::string::npos);
  CHECK_FALSE(parse_schedule("active=1,bogus=2", &error));
  CHECK(error.find("bogus") != std::string::npos);
  CHECK_FALSE(parse_schedule("active=1,active=2", &error));
  CHECK_FALSE(parse_schedule("active=1,,wait=1", &error));
  CHECK_FALSE(parse_schedule("active", &error));
}

}  // namespace torchprof
