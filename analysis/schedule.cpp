#include "analysis/schedule.h"

#include <charconv>
#include <set>

namespace torchprof {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool fail(std::string* error, std::string message) {
  if (error) *error = std::move(message);
  return false;
}

// Stores one "key=value" item into `s`; false with *error set when it is not valid.
bool apply_item(std::string_view item, Schedule& s, std::set<std::string>& seen,
                std::string* error) {
  size_t eq = item.find('=');
  if (eq == std::string_view::npos) {
    return fail(error, "schedule item '" + std::string(item) + "' is not key=value");
  }
  std::string key(trim(item.substr(0, eq)));
  std::string_view text = trim(item.substr(eq + 1));
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
    return fail(error, "schedule value '" + std::string(text) + "' of " + key +
                           " is not an integer");
  }
  int* field = key == "wait"         ? &s.wait
               : key == "warmup"     ? &s.warmup
               : key == "active"     ? &s.active
               : key == "repeat"     ? &s.repeat
               : key == "skip_first" ? &s.skip_first
                                     : nullptr;
  if (field == nullptr) {
    return fail(error, "unknown schedule key '" + key +
                           "' (valid: wait, warmup, active, repeat, skip_first)");
  }
  if (!seen.insert(key).second) return fail(error, "schedule key '" + key + "' given twice");
  if (value < 0) return fail(error, "schedule value of " + key + " must be >= 0");
  *field = value;
  return true;
}

}  // namespace

std::optional<Schedule> parse_schedule(std::string_view text, std::string* error,
                                       std::string* warning) {
  Schedule s;
  std::set<std::string> seen;
  std::string_view rest = text;
  while (true) {
    size_t comma = rest.find(',');
    std::string_view item = trim(rest.substr(0, comma));
    if (item.empty()) {
      fail(error, "empty item in schedule '" + std::string(text) + "'");
      return std::nullopt;
    }
    if (!apply_item(item, s, seen, error)) return std::nullopt;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (!seen.count("active")) {
    fail(error, "schedule needs active=N (steps recorded per cycle)");
    return std::nullopt;
  }
  if (s.active <= 0) {
    fail(error, "schedule value of active must be > 0");
    return std::nullopt;
  }
  if (warning && s.warmup == 0) {
    *warning = "schedule has warmup=0: profiler results of the first recorded steps may be skewed";
  }
  return s;
}

StepAction schedule_action(const Schedule& s, int step) {
  if (step < s.skip_first) return StepAction::kNone;
  step -= s.skip_first;
  const int period = s.wait + s.warmup + s.active;
  // torch tests step / period >= repeat with real division, i.e. step >= repeat * period.
  if (s.repeat > 0 && static_cast<double>(step) / period >= s.repeat) return StepAction::kNone;
  const int position = step % period;
  if (position < s.wait) return StepAction::kNone;
  if (position < s.wait + s.warmup) return StepAction::kWarmup;
  return position < period - 1 ? StepAction::kRecord : StepAction::kRecordAndSave;
}

}  // namespace torchprof
