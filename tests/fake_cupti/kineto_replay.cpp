// kineto_replay: plays a trace torch.profiler recorded on a real GPU back through the
// fake libcupti, so that a profiler run over it sees that trace's CPU ranges, CUDA API
// calls and GPU work as if the program ran again:
//
//   TORCHPROF_CUPTI_LIB=<build>/lib/fake_cupti/libfake_cupti.so
//       torchprof-run -o OUT -- <build>/bin/kineto_replay TRACE.json[.gz]
//
// Each CPU thread of the trace runs on a thread of its own; GPU records keep the
// trace's offsets and durations exactly, whatever --time-scale does to the CPU side.
// Exit code 2, with one line, for a trace it cannot read or express.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>

#include "replay_plan.h"
#include "replay_runner.h"

#ifndef FAKE_CUPTI_DEFAULT_PATH
#define FAKE_CUPTI_DEFAULT_PATH "libfake_cupti.so"
#endif

namespace {

using namespace kineto_replay;

constexpr const char* kUsage =
    "usage: kineto_replay [--time-scale F] [--max-gap DUR] [--gpu-lag DUR] [--step-marker REGEX] [--stats] [--check]\n"
    "                     TRACE.json[.gz]\n";

void help() {
  std::printf("%s", kUsage);
  std::printf(
      "\n"
      "  --time-scale F       CPU waits times F (default 1; GPU records keep the trace's times)\n"
      "  --max-gap DUR        a stretch in which no thread has an event open is cut to DUR\n"
      "                       of trace time (default 100ms; ns, us, ms or s)\n"
      "  --gpu-lag DUR        start the GPU timeline DUR after the CPU's (default 0): GPU records\n"
      "                       keep their offsets among themselves, CPU actions that run late stay\n"
      "                       ahead of GPU records placed in steps by their start alone\n"
      "  --step-marker REGEX  user_annotation ranges whose names match keep their order against\n"
      "                       the other threads' events exactly (default ^ProfilerStep#)\n"
      "  --stats              print what was replayed and how late, on stderr\n"
      "  --check              read the trace and print what it holds; replay nothing\n"
      "\nWhat each event becomes:\n%s"
      "\nExit codes: 0 replayed; 2 usage, or a trace it cannot read or express.\n",
      categories_help());
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "kineto_replay: %s\n%s", message.c_str(), kUsage);
  return 2;
}

bool parse_duration(std::string_view text, int64_t* out) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 15) return false;
  const int64_t value = std::stoll(std::string(text.substr(0, digits)));
  const std::string_view unit = text.substr(digits);
  const int64_t scale = unit == "ns" ? 1 : unit == "us" ? 1000 : unit == "ms" ? 1'000'000 : unit == "s" ? 1'000'000'000 : 0;
  if (scale == 0 || value > std::numeric_limits<int64_t>::max() / scale) return false;
  *out = value * scale;
  return true;
}

struct Options {
  RunOptions run;
  std::string marker = "^ProfilerStep#";
  std::string path;
  bool stats = false;
  bool check = false;
};

// Returns an exit code >= 0 when the program should stop there.
int parse_args(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (arg == "-h" || arg == "--help") {
      help();
      return 0;
    } else if (arg == "--stats") {
      o->stats = true;
    } else if (arg == "--check") {
      o->check = true;
    } else if (arg == "--time-scale") {
      const char* text = value();
      char* end = nullptr;
      o->run.time_scale = text != nullptr ? std::strtod(text, &end) : -1;
      if (text == nullptr || *end != '\0' || !(o->run.time_scale > 0) || o->run.time_scale > 1000) {
        return usage_error("--time-scale needs a number > 0");
      }
    } else if (arg == "--max-gap") {
      const char* text = value();
      if (text == nullptr || !parse_duration(text, &o->run.max_gap_ns)) {
        return usage_error("--max-gap needs a duration such as 100ms");
      }
    } else if (arg == "--gpu-lag") {
      const char* text = value();
      if (text == nullptr || !parse_duration(text, &o->run.gpu_lag_ns)) {
        return usage_error("--gpu-lag needs a duration such as 50ms");
      }
    } else if (arg == "--step-marker") {
      const char* text = value();
      if (text == nullptr) return usage_error("--step-marker needs a regular expression");
      o->marker = text;
    } else if (arg.starts_with("-") || !o->path.empty()) {
      return usage_error("unexpected argument " + arg);
    } else {
      o->path = arg;
    }
  }
  return o->path.empty() ? usage_error("no trace given") : -1;
}

size_t count_actions(const Plan& plan) {
  size_t n = 0;
  for (const ThreadPlan& t : plan.threads) n += t.actions.size();
  return n;
}

void print_plan(const Plan& plan, FILE* out) {
  std::fprintf(out, "kineto_replay: %zu threads, %lld CPU events (%zu actions), %zu API calls, %zu GPU records "
               "(%zu without their launching call), %zu step fences, %lld events ignored, span %.3f ms\n",
               plan.threads.size(), static_cast<long long>(plan.cpu_events), count_actions(plan), plan.calls.size(),
               plan.gpu.size(), plan.unlaunched.size(), plan.fences.size(), static_cast<long long>(plan.ignored),
               static_cast<double>(plan.span_ns) / 1e6);
}

void print_stats(const RunStats& s) {
  std::fprintf(stderr, "kineto_replay: CPU timeline %.3f ms planned, %.3f ms ran; latest action %.3f ms late, "
               "%lld over 1 ms late; %lld fence timeouts; %lld GPU records written, %lld refused\n",
               static_cast<double>(s.cpu_span_ns) / 1e6, static_cast<double>(s.wall_ns) / 1e6,
               static_cast<double>(s.late_max_ns) / 1e6, static_cast<long long>(s.late_actions),
               static_cast<long long>(s.fence_timeouts), static_cast<long long>(s.records),
               static_cast<long long>(s.records_refused));
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (const int code = parse_args(argc, argv, &options); code >= 0) return code;
  try {
    const Plan plan = load_plan(options.path, options.marker);
    if (options.check) {
      print_plan(plan, stdout);
      return 0;
    }
    const FakeApi api = load_fake_api(FAKE_CUPTI_DEFAULT_PATH);
    if (options.stats) print_plan(plan, stderr);
    const RunStats stats = run_plan(plan, api, options.run);
    if (options.stats) print_stats(stats);
  } catch (const std::exception& error) {  // ReplayError, and a trace too large for memory
    std::fprintf(stderr, "kineto_replay: %s\n", error.what());
    return 2;
  }
  return 0;
}
