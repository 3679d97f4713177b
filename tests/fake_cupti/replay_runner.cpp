#include "replay_runner.h"

#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace kineto_replay {

namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
constexpr int64_t kLead = 5'000'000;             // from the setup to the first action
constexpr int64_t kLate = 1'000'000;             // an action this late is counted
constexpr int64_t kFenceTimeout = 10'000'000'000;  // a fence is given up after this (never a hang)

// Trace time to replay time: CPU waits scaled, and each gap in which no thread has an
// event open cut to max_gap first.
class TimeMap {
 public:
  TimeMap(const std::vector<std::pair<int64_t, int64_t>>& busy, int64_t max_gap, double scale) : scale_(scale) {
    int64_t idle_from = 0;
    int64_t removed = 0;
    for (const auto& [start, end] : busy) {
      if (start - idle_from > max_gap) {
        cuts_.push_back({idle_from + max_gap, start - idle_from - max_gap, removed});
        removed += start - idle_from - max_gap;
      }
      idle_from = std::max(idle_from, end);
    }
  }

  int64_t operator()(int64_t t) const {
    auto after = std::upper_bound(cuts_.begin(), cuts_.end(), t, [](int64_t v, const Cut& c) { return v < c.from; });
    int64_t removed = 0;
    if (after != cuts_.begin()) {
      const Cut& c = *(after - 1);
      removed = c.before + std::min(t - c.from, c.len);
    }
    return static_cast<int64_t>(std::llround(static_cast<double>(t - removed) * scale_));
  }

 private:
  struct Cut {
    int64_t from;
    int64_t len;
    int64_t before;  // removed by the cuts before this one
  };
  std::vector<Cut> cuts_;
  double scale_;
};

void atomic_max(std::atomic<int64_t>& value, int64_t candidate) {
  int64_t current = value.load(std::memory_order_relaxed);
  while (current < candidate && !value.compare_exchange_weak(current, candidate, std::memory_order_relaxed)) {
  }
}

class Replay {
 public:
  Replay(const Plan& plan, const FakeApi& api, const RunOptions& options)
      : plan_(plan), api_(api), map_(plan.cpu_busy, options.max_gap_ns, options.time_scale),
        lag_(options.gpu_lag_ns), progress_(plan.threads.size()), fence_done_(plan.fences.size()) {
    for (size_t t = 0; t < plan.threads.size(); ++t) {
      const auto& actions = plan.threads[t].actions;
      progress_[t].store(actions.empty() ? kNever : actions.front().at_ns);
    }
    for (auto& done : fence_done_) done.store(false);
  }

  RunStats run() {
    api_.init();
    nvtxInitialize(nullptr);  // NVTX loads its tool now, not at the first range
    base_ = static_cast<int64_t>(api_.now()) + kLead;
    gpu_base_ = base_ + lag_;
    // Work launched before the trace's CPU side began: no call to hand it out in.
    for (uint32_t index : plan_.unlaunched) queue(index);
    std::vector<std::thread> others;
    for (uint32_t t = 1; t < plan_.threads.size(); ++t) others.emplace_back([this, t] { run_thread(t); });
    if (!plan_.threads.empty()) run_thread(0);
    for (std::thread& thread : others) thread.join();
    RunStats stats;
    stats.wall_ns = static_cast<int64_t>(api_.now()) - base_;
    for (const ThreadPlan& thread : plan_.threads) {
      if (!thread.actions.empty()) stats.cpu_span_ns = std::max(stats.cpu_span_ns, map_(thread.actions.back().at_ns));
    }
    stats.late_max_ns = late_max_.load();
    stats.late_actions = late_actions_.load();
    stats.fence_timeouts = fence_timeouts_.load();
    stats.records = records_.load();
    stats.records_refused = refused_.load();
    return stats;
  }

 private:
  int64_t now() const { return static_cast<int64_t>(api_.now()); }

  // Sleeps through long waits, spins through the last stretch: a yield or a short sleep
  // on a loaded machine gives the core away for a whole time slice.
  void wait_until(int64_t target) const {
    for (int64_t left = target - now(); left > 0; left = target - now()) {
      if (left > 500'000) {
        const int64_t sleep = left - 300'000;
        timespec ts{static_cast<time_t>(sleep / 1'000'000'000), static_cast<long>(sleep % 1'000'000'000)};
        nanosleep(&ts, nullptr);
      } else {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
      }
    }
  }

  template <typename Ready>
  void wait_for(Ready ready) {
    const int64_t deadline = now() + kFenceTimeout;
    while (!ready()) {
      if (now() > deadline) {
        fence_timeouts_.fetch_add(1);
        return;
      }
      timespec ts{0, 20'000};
      nanosleep(&ts, nullptr);
    }
  }

  // Another thread's step marker that this action must follow.
  void follow_fences(uint32_t me, int64_t at, size_t& cursor) {
    for (; cursor < plan_.fences.size(); ++cursor) {
      const Fence& f = plan_.fences[cursor];
      if (f.start ? at < f.at_ns : at <= f.at_ns) return;
      if (f.owner == me) continue;
      std::atomic<bool>& done = fence_done_[cursor];
      wait_for([&] { return done.load(std::memory_order_acquire); });
    }
  }

  // This thread's step marker: the other threads' events before it (at or before it
  // for its end) have run.
  void lead_fence(uint32_t me, const Fence& f) {
    for (uint32_t t = 0; t < progress_.size(); ++t) {
      if (t == me) continue;
      wait_for([&] {
        const int64_t next = progress_[t].load(std::memory_order_acquire);
        return f.start ? next >= f.at_ns : next > f.at_ns;
      });
    }
  }

  void queue(uint32_t index) {
    const GpuWork& work = plan_.gpu[index];
    FakeGpuRecord record = work.record;
    record.start += static_cast<uint64_t>(gpu_base_);
    record.end += static_cast<uint64_t>(gpu_base_);
    record.name = work.name.c_str();
    (api_.queue_record(&record) != 0 ? records_ : refused_).fetch_add(1);
  }

  void execute(const Action& action) {
    switch (action.kind) {
      case ActionKind::kPush: nvtxRangePushA(plan_.messages[action.index].c_str()); break;
      case ActionKind::kPop: nvtxRangePop(); break;
      case ActionKind::kApiEnter: {
        const ApiCall& call = plan_.calls[action.index];
        api_.api_enter(call.domain, call.cbid, call.name.c_str(), call.correlation);
        for (uint32_t index : call.gpu) queue(index);
        break;
      }
      case ActionKind::kApiExit: api_.api_exit(); break;
    }
  }

  void run_thread(uint32_t me) {
    const std::vector<Action>& actions = plan_.threads[me].actions;
    std::vector<std::pair<uint32_t, const Fence*>> own;  // (action, fence) of this thread, in order
    for (const Fence& f : plan_.fences) {
      if (f.owner == me) own.emplace_back(f.action, &f);
    }
    std::sort(own.begin(), own.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    size_t cursor = 0;
    size_t next_own = 0;
    for (uint32_t i = 0; i < actions.size(); ++i) {
      const Action& action = actions[i];
      follow_fences(me, action.at_ns, cursor);
      const int64_t target = base_ + map_(action.at_ns);
      wait_until(target);
      const bool fence = next_own < own.size() && own[next_own].first == i;
      if (fence) lead_fence(me, *own[next_own].second);
      const int64_t late = now() - target;
      atomic_max(late_max_, late);
      if (late > kLate) late_actions_.fetch_add(1, std::memory_order_relaxed);
      execute(action);
      if (fence) fence_done_[static_cast<size_t>(own[next_own++].second - plan_.fences.data())].store(true);
      progress_[me].store(i + 1 < actions.size() ? actions[i + 1].at_ns : kNever, std::memory_order_release);
    }
    progress_[me].store(kNever, std::memory_order_release);
  }

  const Plan& plan_;
  const FakeApi& api_;
  TimeMap map_;
  int64_t lag_;
  int64_t base_ = 0;      // the CPU timeline's start
  int64_t gpu_base_ = 0;  // the GPU timeline's
  std::vector<std::atomic<int64_t>> progress_;  // per thread: time of its next action
  std::vector<std::atomic<bool>> fence_done_;
  std::atomic<int64_t> late_max_{0};
  std::atomic<int64_t> late_actions_{0};
  std::atomic<int64_t> fence_timeouts_{0};
  std::atomic<int64_t> records_{0};
  std::atomic<int64_t> refused_{0};
};

template <typename Fn>
void resolve(void* handle, const char* name, Fn* out) {
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) throw ReplayError(std::string("the fake libcupti lacks ") + name);
  *out = reinterpret_cast<Fn>(symbol);
}

}  // namespace

FakeApi load_fake_api(const char* default_path) {
  const char* path = std::getenv("TORCHPROF_CUPTI_LIB");
  if (path == nullptr || path[0] == '\0') path = default_path;
  void* handle = dlopen(path, RTLD_NOW);
  if (handle == nullptr) throw ReplayError(std::string("cannot load ") + path + ": " + dlerror());
  FakeApi api;
  resolve(handle, "fakecuda_init", &api.init);
  resolve(handle, "fakecuda_now", &api.now);
  resolve(handle, "fakecuda_api_enter", &api.api_enter);
  resolve(handle, "fakecuda_api_exit", &api.api_exit);
  resolve(handle, "fakecuda_queue_record", &api.queue_record);
  return api;
}

RunStats run_plan(const Plan& plan, const FakeApi& api, const RunOptions& options) {
  Replay replay(plan, api, options);
  return replay.run();
}

}  // namespace kineto_replay
