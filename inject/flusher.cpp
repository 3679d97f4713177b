#include "inject/flusher.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "common/wire/frame_codec.h"
#include "inject/buffer_budget.h"
#include "inject/capture_control.h"
#include "inject/clock.h"
#include "inject/config.h"
#include "inject/connection.h"
#include "inject/cupti/activity.h"
#include "inject/cupti/tracer.h"
#include "inject/segment_pool.h"
#include "inject/threads.h"
#include "inject/tsc_clock.h"

namespace torchprof::inject {
namespace {

using wire::Kind;
using wire::Record;

// Raw bytes per frame at most (1 MiB): well under wire::kMaxMessageBody even
// when zstd cannot compress.
constexpr uint32_t kFrameSlots = 32768;
// Slots a frame keeps free for the kDropped record that may end it.
constexpr uint32_t kReportSlots = 1;
// Every this many flush intervals the flusher checks whether it is the last thread.
constexpr uint32_t kLastThreadCheckEvery = 5;

bool read_small_file(const char* path, char* buf, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, size - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  return true;
}

// True when the main thread has ended (pthread_exit: a zombie leader) and no thread
// but this one is left. glibc ends a process with exit(0) when its last thread ends;
// this thread would keep such a process alive for ever.
bool only_flusher_left(int pid) {
  char buf[1024];
  if (!read_small_file("/proc/self/stat", buf, sizeof buf)) return false;
  const char* p = strrchr(buf, ')');  // the command name may hold spaces
  if (p == nullptr) return false;
  // Fields after the name: state(3) … num_threads(20).
  int field = 2;
  for (; *p != '\0' && field < 20; ++p) field += *p == ' ';
  if (field != 20 || atoi(p) > 2) return false;
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", pid);
  if (!read_small_file(path, buf, sizeof buf)) return true;  // the leader is gone entirely
  p = strrchr(buf, ')');
  return p != nullptr && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

class Flusher {
 public:
  explicit Flusher(ProcessState* ps) : ps_(ps) {}
  void run();

 private:
  void drain_all(bool final);
  // Converts CUPTI's queued activity buffers into the GPU stream, moving it to a spare
  // segment (draining it first when none is ready) whenever one fills, so that no GPU
  // record is refused for room.
  void pump_gpu();
  void drain_thread(ThreadBuffer* tb, bool final);
  // Copies whole records from the stream, up to `head`, into raw_ (leaving kReportSlots
  // free); returns the heads copied.
  uint64_t take_records(ThreadBuffer* tb, uint64_t head, uint32_t& slots);
  // Keeps the segments read to their end, and makes spares ready for busy threads.
  void recycle_segments();
  // kBufferUsage (and kBufferRefused) when what they say changed, in a frame of its own.
  void report_buffers();
  bool send_frame(ThreadBuffer* tb, uint32_t slots, uint64_t heads);
  void send_bye(int32_t kind, int32_t status);
  // On-demand capture: applies the collector's Control messages, reports the windows
  // this process's step boundaries opened or closed (capture_control.h).
  void exchange_control();
  void retire(ThreadBuffer* tb);
  [[noreturn]] void end_orphaned_process();

  ProcessState* ps_;
  Connection conn_;
  ZSTD_CCtx* cctx_ = nullptr;
  std::vector<Record> raw_;
  // raw_'s delta transform (frame_codec.h), zstd's input: sized for the worst case but
  // never zero-filled, so only the pages the columns reach are ever touched.
  std::unique_ptr<uint8_t[]> coded_;
  std::vector<char> packed_;
  std::vector<ThreadBuffer*> snapshot_;
  std::vector<ThreadBuffer*> dead_;
  std::vector<std::pair<uint64_t, ThreadBuffer*>> backlogs_;
  ThreadBuffer* gpu_ = nullptr;  // the GPU stream; this thread is its only producer
  SegmentPool pool_;
  Segment* finished_ = nullptr;  // segments read to their end, not yet in pool_
  uint64_t reported_peak_ = 0;
  uint64_t reported_loss_ts_ = 0;
  ThreadBuffer* control_ = nullptr;  // capture window records of applied Controls
  uint64_t retired_emitted_ = 0;  // totals of threads already freed
  uint64_t retired_dropped_ = 0;
  uint64_t retired_lost_ = 0;     // of those, records in frames that could not be sent
  uint32_t handled_req_ = 0;
  uint32_t loops_ = 0;
};

void Flusher::run() {
  ps_->flusher_tid.store(static_cast<int>(gettid()), std::memory_order_relaxed);
  t_slot.exited = true;  // nothing on this thread is ever recorded
  prctl(PR_SET_NAME, "torchprof", 0, 0, 0);
  cctx_ = ZSTD_createCCtx();
  raw_.resize(kFrameSlots);
  if (config().delta_frames) coded_.reset(new (std::nothrow) uint8_t[wire::codec::encode_buffer_size(kFrameSlots)]);
  packed_.resize(ZSTD_compressBound(wire::codec::max_encoded_size(kFrameSlots)));
  snapshot_.reserve(64);
  dead_.reserve(64);
  backlogs_.reserve(64);
  const char* no_tsc = config().tsc_clock ? tsc_clock_unavailable() : "TORCHPROF_CLOCK=monotonic";
  if (no_tsc != nullptr) notice(LogLevel::kInfo, "clock: CLOCK_MONOTONIC on every read (%s)", no_tsc);
  if (no_tsc == nullptr) tsc_clock_tick();  // the first pair of the calibration
  conn_.ensure(config(), now_ns());  // Hello right away: the collector learns of us early
  const uint64_t period_ns = uint64_t{config().flush_ms} * 1000000ull;
  for (;;) {
    uint64_t wake_at = monotonic_ns() + period_ns;
    timespec abs{static_cast<time_t>(wake_at / 1000000000ull), static_cast<long>(wake_at % 1000000000ull)};
    while (sem_clockwait(&ps_->wake, CLOCK_MONOTONIC, &abs) != 0 && errno == EINTR) {
    }
    if (no_tsc == nullptr && tsc_clock_tick()) {
      const double ghz = 4294967296.0 / static_cast<double>(tsc_clock_map().mult);
      notice(LogLevel::kInfo, "clock: the TSC (%.4f GHz), kept on CLOCK_MONOTONIC", ghz);
    }
    while (sem_trywait(&ps_->wake) == 0) {  // one drain answers every pending wake
    }
    uint32_t req = ps_->req_seq.load(std::memory_order_acquire);
    bool final = req != handled_req_;
    if (!final && ++loops_ % kLastThreadCheckEvery == 0 && only_flusher_left(ps_->pid)) end_orphaned_process();
    if (ps_->finished.load(std::memory_order_acquire)) {
      if (final) finish_request(ps_, handled_req_ = req);
      continue;
    }
    if (final) cupti_flush_for_exit(config().exit_timeout_ms / 2);
    exchange_control();
    pump_gpu();
    drain_all(final);
    if (!final) continue;
    int32_t kind = ps_->req_kind.load(std::memory_order_relaxed);
    send_bye(kind, ps_->req_status.load(std::memory_order_relaxed));
    if (kind == static_cast<int32_t>(wire::ExitKind::kExec)) {
      conn_.reset();  // if the exec fails, the image goes on under a new connection
    } else {
      ps_->finished.store(true, std::memory_order_release);
    }
    handled_req_ = req;
    finish_request(ps_, req);
  }
}

void Flusher::end_orphaned_process() {
  if (!ps_->finished.load(std::memory_order_acquire)) {
    pump_gpu();
    drain_all(/*final=*/true);
    send_bye(static_cast<int32_t>(wire::ExitKind::kExit), 0);
    ps_->finished.store(true, std::memory_order_release);
  }
  exit(0);  // what glibc does when the last thread ends: atexit handlers, then exit
}

void Flusher::drain_all(bool final) {
  pthread_mutex_lock(&ps_->threads_mu);
  snapshot_.assign(ps_->threads.begin(), ps_->threads.end());
  pthread_mutex_unlock(&ps_->threads_mu);
  bool pending = false;
  for (ThreadBuffer* tb : snapshot_) {
    populate_first_block(tb);  // before any of its segments is read and handed back
    pending = pending || tb->stream.consumer_head() != tb->stream.consumer_tail();
  }
  if (pending) conn_.ensure(config(), now_ns());
  // The largest backlog first: it holds the most memory, and it is the one that grows.
  // Backlogs read once each: the producers move on while this sorts.
  backlogs_.clear();
  for (ThreadBuffer* tb : snapshot_) {
    backlogs_.emplace_back(tb->stream.consumer_head() - tb->stream.consumer_tail(), tb);
  }
  std::stable_sort(backlogs_.begin(), backlogs_.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  for (size_t i = 0; i < backlogs_.size(); ++i) snapshot_[i] = backlogs_[i].second;
  dead_.clear();
  for (ThreadBuffer* tb : snapshot_) {
    // Read `dead` before draining: a thread seen dead has committed its last record.
    bool dead = tb->dead.load(std::memory_order_acquire);
    drain_thread(tb, final || dead);
    if (dead) dead_.push_back(tb);
  }
  for (ThreadBuffer* tb : dead_) retire(tb);
  recycle_segments();
  pool_.trim_for(now_ns());
  report_buffers();
}

void Flusher::exchange_control() {
  wire::Control controls[8];
  const int n = conn_.up() ? conn_.poll_control(controls, 8) : 0;
  for (int i = 0; i < n; ++i) {
    if (control_ == nullptr) control_ = capture::create_control_stream(ps_);
    // GPU activity is switched on before recording starts, and off after it stopped.
    if (capture::collects_gpu_after(controls[i])) cupti_follow_recording(true);
    capture::control(control_, controls[i]);
  }
  cupti_follow_recording(capture::collects_gpu(capture::word()));
  if (!conn_.up()) return;
  wire::WindowEvent events[2];
  const int m = capture::take_window_events(events, 2);
  for (int i = 0; i < m; ++i) conn_.send_window_event(events[i]);
}

void Flusher::pump_gpu() {
  if (!gpu_activity_enabled()) return;
  if (gpu_ == nullptr) {
    // A larger buffer than a program thread's: CUPTI hands over megabytes at once.
    gpu_ = create_thread_buffer(config().buffer_kb * 4, gpu_stream_tid(ps_->pid), /*is_main=*/false, &ps_->wake,
                                config().huge_pages);
    if (gpu_ == nullptr) return;
    // Written by this thread alone: faulting its block in here would move its faults, not spare any.
    gpu_->first_block = nullptr;
    pthread_mutex_lock(&ps_->threads_mu);
    ps_->threads.push_back(gpu_);
    pthread_mutex_unlock(&ps_->threads_mu);
  }
  gpu_buffers_make_ready();
  while (convert_gpu_activity(gpu_) == ConvertStatus::kNeedRoom) {
    if (move_to_spare(gpu_)) continue;
    // No spare (the cap, other threads took what was read): sent, the segment being
    // written starts over. The GPU stream never waits for memory.
    conn_.ensure(config(), now_ns());
    drain_thread(gpu_, /*final=*/false);
    recycle_segments();
    if (!gpu_->stream.rewind()) break;  // not reached: drain_thread read it all
  }
}

uint64_t Flusher::take_records(ThreadBuffer* tb, uint64_t head, uint32_t& slots) {
  uint64_t heads = 0;
  slots = 0;
  for (;;) {
    uint64_t n = 0;
    const Record* p = tb->stream.peek(head, &n, &finished_);
    if (n == 0) return heads;
    uint64_t i = 0;
    while (i < n) {
      const uint32_t len = 1u + p[i].extra;
      if (slots + len > kFrameSlots - kReportSlots) break;
      // A unit never crosses a segment's end; a record that would is not one.
      const uint32_t take = i + len <= n ? len : static_cast<uint32_t>(n - i);
      memcpy(&raw_[slots], &p[i], take * sizeof(Record));
      slots += take;
      i += take;
      ++heads;
    }
    tb->stream.consume(i);
    if (i < n) return heads;  // the frame is full
  }
}

void Flusher::recycle_segments() {
  pool_.put_list(finished_);
  finished_ = nullptr;
  const uint64_t now = now_ns();
  for (ThreadBuffer* tb : snapshot_) {
    if (!tb->dead.load(std::memory_order_relaxed)) pool_.tend(tb, now);
  }
}

// Every batch ends with a kDropped record carrying the thread's running totals,
// so a decoder can check recorded + dropped == emitted per thread.
void Flusher::drain_thread(ThreadBuffer* tb, bool final) {
  uint64_t head = tb->stream.consumer_head();
  uint64_t producer_dropped = tb->dropped.load(std::memory_order_relaxed);
  tb->seen_dropped = producer_dropped;
  bool report_due = producer_dropped + tb->lost != tb->reported_dropped ||
                    (final && tb->drained + producer_dropped != tb->reported_emitted);
  while (tb->stream.consumer_tail() < head || report_due) {
    uint32_t slots = 0;
    uint64_t heads = take_records(tb, head, slots);
    tb->drained += heads;
    if (tb->stream.consumer_tail() >= head) {
      uint64_t dropped = producer_dropped + tb->lost;
      uint64_t emitted = tb->drained + producer_dropped;
      raw_[slots++] = Record{static_cast<uint8_t>(Kind::kDropped), 0, 0, 0, now_ns(), dropped, emitted};
      tb->reported_dropped = dropped;
      tb->reported_emitted = emitted;
      report_due = false;
    }
    send_frame(tb, slots, heads);
    // Between frames of a long backlog: the threads that keep filling segments find spares.
    recycle_segments();
  }
  uint64_t n = 0;
  tb->stream.peek(head, &n, &finished_);  // hands over the segment just read to its end
  publish_arena_position(tb);  // before that segment is used again
}

void Flusher::report_buffers() {
  const BufferBudget& budget = buffer_budget();
  const uint64_t peak = budget.peak();
  const BufferBudget::Refusal loss = budget.first_loss();
  if ((peak == reported_peak_ && loss.ts == reported_loss_ts_) || snapshot_.empty() || !conn_.up()) return;
  uint32_t n = 0;
  raw_[n++] = Record{static_cast<uint8_t>(Kind::kBufferUsage), 0, 0, 0, now_ns(), peak, budget.cap()};
  if (loss.ts != 0) {
    raw_[n++] = Record{static_cast<uint8_t>(Kind::kBufferRefused), 0, static_cast<uint16_t>(loss.why), 0, loss.ts,
                       budget.cap(), loss.held};
  }
  if (!send_frame(snapshot_.front(), n, /*heads=*/0)) return;
  reported_peak_ = peak;
  reported_loss_ts_ = loss.ts;
}

bool Flusher::send_frame(ThreadBuffer* tb, uint32_t slots, uint64_t heads) {
  if (slots == 0) return true;
  if (tb->conn_epoch != conn_.epoch()) {
    tb->conn_epoch = conn_.epoch();
    tb->seq = 0;
  }
  // The shared arena learns where this thread's unsent records will begin once the
  // frame is through, before it is sent (wire/arena.h).
  const uint32_t next_copy = publish_arena_sending(tb);
  bool ok = false;
  if (conn_.up() && cctx_ != nullptr) {
    // The delta transform turns the records into columns of small numbers, so zstd
    // both shrinks them further and has far fewer bytes to work through.
    const bool delta = coded_ != nullptr;
    const void* input = raw_.data();
    size_t input_size = slots * sizeof(Record);
    if (delta) {
      input_size = wire::codec::delta_encode(raw_.data(), slots, coded_.get());
      input = coded_.get();
    }
    size_t packed = ZSTD_compressCCtx(cctx_, packed_.data(), packed_.size(), input, input_size,
                                      /*compressionLevel=*/1);
    if (!ZSTD_isError(packed)) {
      auto encoding = delta ? wire::FrameEncoding::kZstdDelta : wire::FrameEncoding::kZstdRaw;
      wire::FrameHeader fh{tb->tid, static_cast<uint32_t>(encoding),
                           static_cast<uint32_t>(slots * sizeof(Record)), tb->seq};
      ok = conn_.send_frame(fh, packed_.data(), static_cast<uint32_t>(packed));
    }
  }
  ++tb->seq;  // also on failure: the gap tells the decoder a frame is missing
  if (!ok) tb->lost += heads;
  publish_arena_sent(tb, next_copy);
  return ok;
}

void Flusher::send_bye(int32_t kind, int32_t status) {
  wire::Bye bye{kind, status, retired_emitted_, retired_dropped_, now_ns()};
  uint64_t unsent = retired_lost_;
  for (ThreadBuffer* tb : snapshot_) {
    bye.emitted += tb->drained + tb->seen_dropped;
    bye.dropped += tb->seen_dropped + tb->lost;
    unsent += tb->lost;
  }
  if (bye.dropped != 0) {
    notice(LogLevel::kInfo, "%llu of %llu records dropped: %llu for want of buffer memory, %llu in frames not sent",
           static_cast<unsigned long long>(bye.dropped), static_cast<unsigned long long>(bye.emitted),
           static_cast<unsigned long long>(bye.dropped - unsent), static_cast<unsigned long long>(unsent));
  }
  const BufferBudget& budget = buffer_budget();
  notice(LogLevel::kInfo, "buffers: at most %.1f MiB held (cap %.0f MiB), %llu segments mapped by program threads",
         static_cast<double>(budget.peak()) / 1048576.0, static_cast<double>(budget.cap()) / 1048576.0,
         static_cast<unsigned long long>(budget.producer_maps()));
  if (!conn_.up()) conn_.ensure(config(), now_ns());
  conn_.send_bye(bye);
}

void Flusher::retire(ThreadBuffer* tb) {
  retired_emitted_ += tb->drained + tb->seen_dropped;
  retired_dropped_ += tb->seen_dropped + tb->lost;
  retired_lost_ += tb->lost;
  pthread_mutex_lock(&ps_->threads_mu);
  auto& v = ps_->threads;
  v.erase(std::remove(v.begin(), v.end(), tb), v.end());
  pthread_mutex_unlock(&ps_->threads_mu);
  std::replace(snapshot_.begin(), snapshot_.end(), tb, static_cast<ThreadBuffer*>(nullptr));
  snapshot_.erase(std::remove(snapshot_.begin(), snapshot_.end(), nullptr), snapshot_.end());
  destroy_thread_buffer(tb);
}

void* flusher_main(void* arg) {
  auto* f = new (std::nothrow) Flusher(static_cast<ProcessState*>(arg));
  if (f != nullptr) f->run();
  return nullptr;
}

}  // namespace

bool start_flusher(ProcessState* ps) {
  const bool ok = start_background_thread(flusher_main, ps);
  ps->flusher_running.store(ok, std::memory_order_release);
  if (!ok) notice(LogLevel::kWarn, "cannot start the flusher thread; events of this process are dropped");
  return ok;
}

}  // namespace torchprof::inject
