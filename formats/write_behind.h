// Writing a large output file on a thread of its own: the caller formats the next
// block while the last ones go through the page cache (and zlib, for .gz traces).
// On a 2-core machine the time of formatting and writing becomes about the larger
// of the two instead of their sum.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "formats/json_writer.h"

namespace torchprof {

// Where output bytes go, and how the file is finished. write() and close() throw
// std::runtime_error ("cannot write PATH: why") on failure.
class OutputFile {
 public:
  virtual ~OutputFile() = default;
  virtual void write(std::string_view bytes) = 0;
  virtual void close() = 0;
};

// One writing thread; blocks are written to their files in the order they are handed
// over, and a file is closed after its last block. At most `depth` blocks wait at a
// time: handing over one more waits for the thread (memory stays at depth blocks).
//
// The first failure (a full disk, say) stops the writing: what is queued after it is
// dropped, and the error is thrown to the caller from its next hand-over or finish().
class WriteBehind {
 public:
  explicit WriteBehind(size_t depth = 4, size_t block_bytes = 1 << 20);
  ~WriteBehind();  // drops what is still queued and joins; finish() is the way to wait
  WriteBehind(const WriteBehind&) = delete;
  WriteBehind& operator=(const WriteBehind&) = delete;

  // Queues `block`'s bytes for `file`, and gives `block` back empty (it is swapped for
  // a spare one, so the bytes are not copied).
  void write(const std::shared_ptr<OutputFile>& file, json::Buffer& block);
  // Queues the closing of `file`, after its blocks.
  void close(const std::shared_ptr<OutputFile>& file);
  // Waits until everything queued is written and closed; throws the first error.
  void finish();

 private:
  struct Job {
    std::shared_ptr<OutputFile> file;
    json::Buffer bytes{0};
    bool close = false;
  };
  void push(Job job);
  void run();
  void rethrow_locked();

  const size_t depth_;
  const size_t block_bytes_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<Job> queue_;
  std::vector<json::Buffer> spares_;
  bool busy_ = false;  // the thread holds a job outside the queue
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace torchprof
