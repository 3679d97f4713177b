#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>

#include "fake_cupti_internal.h"

namespace fake_cupti {

namespace {

// CUPTI requires activity buffers and records to be 8-byte aligned; every
// record struct of this header version is a multiple of 8 bytes long.
constexpr size_t kAlign = 8;

size_t align_up(size_t value) { return (value + kAlign - 1) & ~(kAlign - 1); }

size_t misalignment_pad(const uint8_t* data) {
  const auto address = reinterpret_cast<uintptr_t>(data);
  return align_up(address) - address;
}

// Reads a record's 64-bit time at `offset`, passes it through `fix`, writes it back.
template <typename Fix>
void fix_time(uint8_t* record, size_t offset, Fix fix) {
  uint64_t t = 0;
  std::memcpy(&t, record + offset, sizeof t);
  t = fix(t);
  std::memcpy(record + offset, &t, sizeof t);
}

// The GPU times of one record of GPU work: converted, or zeroed when not collected.
void finish_gpu_record(uint8_t* record, bool not_collected, const GpuClockMap& clock) {
  auto fix = [not_collected, &clock](uint64_t t) { return not_collected ? 0 : clock.map(t); };
  uint32_t kind = 0;
  std::memcpy(&kind, record, sizeof kind);
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      for (size_t offset : {offsetof(CUpti_ActivityKernel10, start), offsetof(CUpti_ActivityKernel10, end),
                            offsetof(CUpti_ActivityKernel10, completed), offsetof(CUpti_ActivityKernel10, queued),
                            offsetof(CUpti_ActivityKernel10, submitted)}) {
        fix_time(record, offset, fix);
      }
      break;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      fix_time(record, offsetof(CUpti_ActivityMemcpy6, start), fix);
      fix_time(record, offsetof(CUpti_ActivityMemcpy6, end), fix);
      break;
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
      fix_time(record, offsetof(CUpti_ActivityMemcpyPtoP4, start), fix);
      fix_time(record, offsetof(CUpti_ActivityMemcpyPtoP4, end), fix);
      break;
    case CUPTI_ACTIVITY_KIND_MEMSET:
      fix_time(record, offsetof(CUpti_ActivityMemset4, start), fix);
      fix_time(record, offsetof(CUpti_ActivityMemset4, end), fix);
      break;
    default: break;
  }
}

}  // namespace

size_t record_size(uint32_t kind) {
  const uint32_t v = state().version;
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_MEMCPY: return v < kCupti128 ? 88 : sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMCPY2: return sizeof(CUpti_ActivityMemcpyPtoP4);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      if (v < kCupti130) return 208;                      // CUpti_ActivityKernel9
      if (v < kCupti131) return sizeof(CUpti_ActivityKernel10);
      return v < kCupti133 ? 224 : 232;                   // Kernel11 (priority), Kernel12 (executionModel)
    case CUPTI_ACTIVITY_KIND_DRIVER:
    case CUPTI_ACTIVITY_KIND_RUNTIME: return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_DEVICE: return v < kCupti132 ? sizeof(CUpti_ActivityDevice5) : 192;  // Device6: numTpcs
    case CUPTI_ACTIVITY_KIND_CONTEXT:
      if (v < kCupti125) return 24;  // CUpti_ActivityContext2
      return v < kCupti131 ? sizeof(CUpti_ActivityContext3) : 40;  // Context4: processId
    case CUPTI_ACTIVITY_KIND_MEMORY2: return v < kCupti126 ? 120 : sizeof(CUpti_ActivityMemory4);  // Memory3
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      return v < kCupti128 ? 40 : sizeof(CUpti_ActivitySynchronization2);  // Synchronization
    case CUPTI_ACTIVITY_KIND_CUDA_EVENT: return v < kCupti128 ? 24 : sizeof(CUpti_ActivityCudaEvent2);  // CudaEvent
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
    default: return 0;
  }
}

ActivityBuffers::~ActivityBuffers() { stop_worker(); }

CUptiResult ActivityBuffers::register_callbacks(CUpti_BuffersCallbackRequestFunc requested,
                                                CUpti_BuffersCallbackCompleteFunc completed) {
  if (requested == nullptr || completed == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard<std::mutex> lock(mutex_);
  requested_ = requested;
  completed_ = completed;
  if (worker_ == nullptr) {
    stopping_ = false;
    worker_ = new std::thread([this] { worker_loop(); });
  }
  return CUPTI_SUCCESS;
}

CUptiResult ActivityBuffers::set_enabled(uint32_t kind, bool on) {
  if (kind == CUPTI_ACTIVITY_KIND_INVALID || kind >= CUPTI_ACTIVITY_KIND_COUNT) return CUPTI_ERROR_INVALID_KIND;
  kinds_[kind].store(on);
  return CUPTI_SUCCESS;
}

bool ActivityBuffers::enabled(uint32_t kind) const {
  return kind < CUPTI_ACTIVITY_KIND_COUNT && kinds_[kind].load(std::memory_order_relaxed);
}

bool ActivityBuffers::any_enabled() const {
  for (const auto& kind : kinds_) {
    if (kind.load(std::memory_order_relaxed)) return true;
  }
  return false;
}

bool ActivityBuffers::fits(const Buffer& buffer, size_t size) const {
  if (buffer.data == nullptr) return false;
  if (buffer.max_records != 0 && buffer.records >= buffer.max_records) return false;
  return buffer.used + size <= buffer.size;
}

// Called without mutex_ held: the client's callback may take its own locks.
bool ActivityBuffers::request_buffer(Buffer* out) {
  CUpti_BuffersCallbackRequestFunc requested = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    requested = requested_;
  }
  if (requested == nullptr) return false;
  uint8_t* data = nullptr;
  size_t size = 0;
  size_t max_records = 0;
  requested(&data, &size, &max_records);
  if (data == nullptr) return false;
  const size_t pad = misalignment_pad(data);
  *out = Buffer{data, size, pad < size ? pad : size, 0, max_records};
  return true;
}

void ActivityBuffers::append(const void* record, size_t size, uint64_t gpu_end) {
  // A buffer fetched by another thread in the meantime is kept as a spare.
  for (int attempt = 0; attempt < 4; ++attempt) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!fits(current_, size)) {
        if (current_.data != nullptr) {
          full_.push_back(std::move(current_));
          current_ = Buffer{};
          full_added_ = true;
          wake_.notify_one();
        }
        while (!spare_.empty() && current_.data == nullptr) {
          current_ = std::move(spare_.front());
          spare_.pop_front();
          if (!fits(current_, size)) {
            full_.push_back(std::move(current_));
            current_ = Buffer{};
            full_added_ = true;
          }
        }
      }
      if (fits(current_, size)) {
        if (gpu_end != 0) {
          current_.gpu_records.push_back(GpuRecord{current_.used, gpu_end});
          current_.last_gpu_end = std::max(current_.last_gpu_end, gpu_end);
        }
        std::memcpy(current_.data + current_.used, record, size);
        current_.used += align_up(size);
        ++current_.records;
        return;
      }
    }
    Buffer fresh;
    if (!request_buffer(&fresh)) break;
    std::lock_guard<std::mutex> lock(mutex_);
    spare_.push_back(fresh);
  }
  // No buffer from the client: CUPTI drops the record and counts it.
  dropped_.fetch_add(1);
}

void ActivityBuffers::deliver(std::deque<Buffer>* buffers, bool forced, uint64_t now) {
  CUpti_BuffersCallbackCompleteFunc completed = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    completed = completed_;
  }
  if (completed == nullptr) return;
  // One delivery at a time, in order, like CUPTI's single worker.
  std::lock_guard<std::mutex> delivery(delivery_mutex_);
  const GpuClockMap clock = gpu_clock_map();
  for (Buffer& buffer : *buffers) {
    for (const GpuRecord& record : buffer.gpu_records) {
      finish_gpu_record(buffer.data + record.offset, /*not_collected=*/forced && record.end > now, clock);
    }
    completed(/*context=*/nullptr, /*streamId=*/0, buffer.data, buffer.size, buffer.used);
  }
  buffers->clear();
}

void ActivityBuffers::flush_all(bool forced) {
  const uint64_t now = raw_now_ns();
  std::deque<Buffer> buffers;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::deque<Buffer> kept;
    for (Buffer& buffer : full_) {
      (forced || buffer.last_gpu_end <= now ? buffers : kept).push_back(std::move(buffer));
    }
    full_.swap(kept);
    const bool current_ready = current_.records > 0 && current_.last_gpu_end <= now;
    if (current_.data != nullptr && (forced || current_ready)) {
      buffers.push_back(std::move(current_));
      current_ = Buffer{};
    }
    if (forced) {
      for (Buffer& buffer : spare_) buffers.push_back(std::move(buffer));
      spare_.clear();
    }
  }
  deliver(&buffers, forced, now);
}

// CUPTI's worker: full buffers only, and only once all their records are complete.
void ActivityBuffers::worker_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    const auto period = std::chrono::milliseconds(flush_period_ms_);
    wake_.wait_for(lock, period, [this] { return stopping_ || full_added_; });
    full_added_ = false;
    if (stopping_) break;
    const uint64_t now = raw_now_ns();
    std::deque<Buffer> ready;
    std::deque<Buffer> kept;
    for (Buffer& buffer : full_) (buffer.last_gpu_end <= now ? ready : kept).push_back(std::move(buffer));
    full_.swap(kept);
    if (ready.empty()) continue;
    lock.unlock();
    deliver(&ready, /*forced=*/false, now);
    lock.lock();
  }
}

void ActivityBuffers::set_flush_period_ms(uint32_t ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  flush_period_ms_ = ms == 0 ? 100 : ms;
  wake_.notify_one();
}

size_t ActivityBuffers::take_dropped() { return static_cast<size_t>(dropped_.exchange(0)); }

void ActivityBuffers::add_dropped(uint64_t n) { dropped_.fetch_add(n); }

void ActivityBuffers::stop_worker() {
  std::thread* worker = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    worker = worker_;
    worker_ = nullptr;
    wake_.notify_one();
  }
  if (worker == nullptr) return;
  if (worker->get_id() == std::this_thread::get_id()) {
    worker->detach();
  } else {
    worker->join();
  }
  delete worker;
}

void ActivityBuffers::forget_worker_after_fork() {
  // The thread does not exist in the child; its std::thread object is leaked on purpose.
  worker_ = nullptr;
}

}  // namespace fake_cupti
