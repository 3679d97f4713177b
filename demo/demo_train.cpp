// The example the README profiles first: a simulated training loop that marks its work
// with NVTX the way PyTorch code does, so a first run shows steps, nested ops and a
// second thread without needing a GPU.
//
//   demo_train [STEPS=20] [SCALE=1.0]
//
// Each step is a "ProfilerStep#k" range holding "DataLoader#next" (the wait for the next
// batch, named so that the overview counts it as DataLoader time), "forward" (three
// "linear" each with an "aten::mm", then "relu"), "loss", "backward" (three
// "linear_backward") and "optimizer.step" ("zero_grad" inside). A "data_loader" thread prepares batches
// ("load_batch") ahead of the loop. Outside every step: "setup" before the first (2 ms) and
// "teardown" after the last (1 ms). SCALE multiplies every duration; about 1.2 s at 1.0.
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include <nvtx3/nvToolsExt.h>

namespace {

double g_scale = 1.0;

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// Work of a known duration: a spin, so that a loaded machine does not stretch it.
void busy(double ms) {
  const int64_t end = now_ns() + static_cast<int64_t>(ms * g_scale * 1e6);
  while (now_ns() < end) {
  }
}

// Argument i as a number, `fallback` when absent; anything else is a usage error.
double arg(int argc, char** argv, int i, double fallback) {
  if (i >= argc) return fallback;
  char* end = nullptr;
  const double v = std::strtod(argv[i], &end);
  if (end == argv[i] || *end != '\0') {
    std::fprintf(stderr, "usage: demo_train [STEPS=20] [SCALE=1.0]\n");
    std::exit(2);
  }
  return v;
}

struct Range {
  explicit Range(const char* name) { nvtxRangePushA(name); }
  ~Range() { nvtxRangePop(); }
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;
};

class BatchQueue {
 public:
  void put(int batch) {
    std::unique_lock lock(mutex_);
    not_full_.wait(lock, [&] { return batches_.size() < kDepth; });
    batches_.push_back(batch);
    not_empty_.notify_one();
  }
  int take() {
    std::unique_lock lock(mutex_);
    not_empty_.wait(lock, [&] { return !batches_.empty(); });
    const int batch = batches_.front();
    batches_.pop_front();
    not_full_.notify_one();
    return batch;
  }

 private:
  static constexpr size_t kDepth = 2;  // prefetch depth, as a DataLoader's prefetch_factor
  std::mutex mutex_;
  std::condition_variable not_full_, not_empty_;
  std::deque<int> batches_;
};

void data_loader(BatchQueue& queue, int steps) {
  pthread_setname_np(pthread_self(), "data_loader");
  nvtxNameOsThreadA(static_cast<uint32_t>(syscall(SYS_gettid)), "data_loader");
  for (int i = 0; i < steps; ++i) {
    {
      Range r("load_batch");
      busy(3);
    }
    queue.put(i);
  }
}

double train_step(int step, BatchQueue& queue) {
  const std::string name = "ProfilerStep#" + std::to_string(step);
  Range step_range(name.c_str());
  int batch = 0;
  {
    Range r("DataLoader#next");
    batch = queue.take();
  }
  {
    Range fwd("forward");
    for (int layer = 0; layer < 3; ++layer) {
      Range lin("linear");
      busy(1);
      Range mm("aten::mm");
      busy(4);
    }
    Range relu("relu");
    busy(1);
  }
  {
    Range r("loss");
    busy(2);
  }
  {
    Range bwd("backward");
    for (int layer = 0; layer < 3; ++layer) {
      Range r("linear_backward");
      busy(8);
    }
  }
  {
    Range opt("optimizer.step");
    busy(5);
    Range zero("zero_grad");
    busy(1);
  }
  return 1.0 / (1.0 + batch);
}

}  // namespace

int main(int argc, char** argv) {
  nvtxInitialize(nullptr);  // loads the tool now, not inside the first timed range
  const int steps = static_cast<int>(arg(argc, argv, 1, 20));
  g_scale = arg(argc, argv, 2, 1.0);
  {
    Range r("setup");
    busy(2);
  }
  BatchQueue queue;
  std::thread loader(data_loader, std::ref(queue), steps);
  double loss = 0;
  for (int step = 0; step < steps; ++step) loss = train_step(step, queue);
  loader.join();
  {
    Range r("teardown");
    busy(1);
  }
  std::printf("demo_train: %d steps, final loss %.4f\n", steps, loss);
  return 0;
}
