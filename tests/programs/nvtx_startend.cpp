// Start/end ranges that end on another thread than the one that started them.
//
//   nvtx_startend [N=4] [MS=20]
//
// N times: the main thread starts "cross_thread", a second thread (named "ender")
// ends it MS after its start. Then the main thread does a "same_thread" start/end
// range of MS/2 on its own. While "cross_thread" is open the main thread does one
// push/pop "main_busy" range of MS/4, which start/end ranges must not nest with.
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include <nvtx3/nvToolsExt.h>

#include "busy.h"
#include "truth.h"

namespace {

struct Handoff {
  std::mutex mutex;
  std::condition_variable cv;
  bool has_work = false;
  bool done = false;
  bool quit = false;
  nvtxRangeId_t id = 0;
  int64_t start_ns = 0;
  int64_t deadline_ns = 0;
};

void ender(Handoff& h) {
  pthread_setname_np(pthread_self(), "ender");
  nvtxNameOsThreadA(static_cast<uint32_t>(syscall(SYS_gettid)), "ender");
  std::unique_lock lock(h.mutex);
  for (;;) {
    h.cv.wait(lock, [&] { return h.has_work || h.quit; });
    if (h.quit) return;
    h.has_work = false;
    const nvtxRangeId_t id = h.id;
    const int64_t start = h.start_ns;
    const int64_t deadline = h.deadline_ns;
    lock.unlock();
    tp_spin_until(deadline);
    nvtxRangeEnd(id);
    tp_truth('s', "cross_thread", start, tp_now_ns());
    lock.lock();
    h.done = true;
    h.cv.notify_all();
  }
}

}  // namespace

int main(int argc, char** argv) {
  nvtxInitialize(nullptr);  // loads the tool now, not inside the first timed range
  tp_truth_init();
  tp_ready();
  const int n = static_cast<int>(tp_arg(argc, argv, 1, 4));
  const double ms = tp_arg(argc, argv, 2, 20);
  Handoff h;
  std::thread t(ender, std::ref(h));
  for (int i = 0; i < n; ++i) {
    const int64_t start = tp_now_ns();
    const nvtxRangeId_t id = nvtxRangeStartA("cross_thread");
    {
      std::lock_guard lock(h.mutex);
      h.id = id;
      h.start_ns = start;
      h.deadline_ns = start + static_cast<int64_t>(ms * 1e6);
      h.has_work = true;
      h.done = false;
    }
    h.cv.notify_all();
    const int64_t busy_start = tp_push("main_busy");
    tp_spin_until(start + static_cast<int64_t>(ms * 1e6 / 4));
    tp_pop("main_busy", busy_start);
    {
      std::unique_lock lock(h.mutex);
      h.cv.wait(lock, [&] { return h.done; });
    }
    TpTimeline own_timeline = tp_timeline_start();
    const int64_t own_start = own_timeline.next_ns;
    const nvtxRangeId_t own = nvtxRangeStartA("same_thread");
    tp_wait_ms(&own_timeline, ms / 2);
    nvtxRangeEnd(own);
    tp_truth('s', "same_thread", own_start, tp_now_ns());
  }
  {
    std::lock_guard lock(h.mutex);
    h.quit = true;
  }
  h.cv.notify_all();
  t.join();
  std::printf("nvtx_startend: %d\n", n);
  return 0;
}
