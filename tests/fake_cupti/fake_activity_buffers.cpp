#include <chrono>
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

}  // namespace

size_t record_size(uint32_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_DRIVER:
    case CUPTI_ACTIVITY_KIND_RUNTIME: return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_DEVICE: return sizeof(CUpti_ActivityDevice5);
    case CUPTI_ACTIVITY_KIND_CONTEXT: return sizeof(CUpti_ActivityContext3);
    case CUPTI_ACTIVITY_KIND_MEMORY2: return sizeof(CUpti_ActivityMemory4);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return sizeof(CUpti_ActivitySynchronization2);
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

void ActivityBuffers::append(const void* record, size_t size) {
  // A buffer fetched by another thread in the meantime is kept as a spare.
  for (int attempt = 0; attempt < 4; ++attempt) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!fits(current_, size)) {
        if (current_.data != nullptr) {
          full_.push_back(current_);
          current_ = Buffer{};
          wake_.notify_one();
        }
        while (!spare_.empty() && current_.data == nullptr) {
          current_ = spare_.front();
          spare_.pop_front();
          if (!fits(current_, size)) {
            full_.push_back(current_);
            current_ = Buffer{};
          }
        }
      }
      if (fits(current_, size)) {
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

void ActivityBuffers::take_all_locked(std::deque<Buffer>* out) {
  for (auto& buffer : full_) out->push_back(buffer);
  full_.clear();
  if (current_.data != nullptr) out->push_back(current_);
  current_ = Buffer{};
  for (auto& buffer : spare_) out->push_back(buffer);
  spare_.clear();
}

void ActivityBuffers::deliver(std::deque<Buffer>* buffers) {
  CUpti_BuffersCallbackCompleteFunc completed = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    completed = completed_;
  }
  if (completed == nullptr) return;
  // One delivery at a time, in order, like CUPTI's single worker.
  std::lock_guard<std::mutex> delivery(delivery_mutex_);
  for (auto& buffer : *buffers) {
    completed(/*context=*/nullptr, /*streamId=*/0, buffer.data, buffer.size, buffer.used);
  }
  buffers->clear();
}

void ActivityBuffers::flush_all() {
  std::deque<Buffer> buffers;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    take_all_locked(&buffers);
  }
  deliver(&buffers);
}

void ActivityBuffers::worker_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    const auto period = std::chrono::milliseconds(flush_period_ms_);
    const bool woken = wake_.wait_for(lock, period, [this] { return stopping_ || !full_.empty(); });
    if (stopping_) break;
    std::deque<Buffer> buffers;
    if (woken) {
      buffers.swap(full_);
    } else if (current_.data != nullptr && current_.records > 0) {
      // Periodic flush: partially filled buffers go out too.
      for (auto& buffer : full_) buffers.push_back(buffer);
      full_.clear();
      buffers.push_back(current_);
      current_ = Buffer{};
    }
    if (buffers.empty()) continue;
    lock.unlock();
    deliver(&buffers);
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
