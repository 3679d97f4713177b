#include "formats/write_behind.h"

#include <utility>

namespace torchprof {

WriteBehind::WriteBehind(size_t depth, size_t block_bytes)
    : depth_(depth == 0 ? 1 : depth), block_bytes_(block_bytes), thread_([this] { run(); }) {}

WriteBehind::~WriteBehind() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void WriteBehind::write(const std::shared_ptr<OutputFile>& file, json::Buffer& block) {
  Job job{file, std::move(block), false};  // leaves `block` without storage
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!spares_.empty()) {
      block.swap(spares_.back());
      spares_.pop_back();
    }
  }
  if (block.capacity() == 0) block = json::Buffer(block_bytes_);
  push(std::move(job));
}

void WriteBehind::close(const std::shared_ptr<OutputFile>& file) { push(Job{file, json::Buffer(0), true}); }

void WriteBehind::push(Job job) {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return queue_.size() < depth_ || error_; });
  rethrow_locked();
  queue_.push_back(std::move(job));
  changed_.notify_all();
}

void WriteBehind::finish() {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return (queue_.empty() && !busy_) || error_; });
  rethrow_locked();
}

void WriteBehind::rethrow_locked() {
  if (error_) std::rethrow_exception(error_);
}

void WriteBehind::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    changed_.wait(lock, [&] { return !queue_.empty() || stop_; });
    if (stop_) return;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    std::exception_ptr error;
    try {
      if (job.close) {
        job.file->close();
      } else {
        job.file->write(job.bytes.view());
      }
    } catch (...) {
      error = std::current_exception();
    }
    job.file.reset();  // a file whose last job this was is closed here, off the caller's thread
    lock.lock();
    busy_ = false;
    if (error && !error_) {
      error_ = error;
      queue_.clear();
    }
    if (!job.close && !error_ && spares_.size() < depth_) {
      job.bytes.clear();
      spares_.push_back(std::move(job.bytes));
    }
    changed_.notify_all();
  }
}

}  // namespace torchprof
