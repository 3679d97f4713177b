#include "formats/write_behind.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace torchprof {

namespace {

// Records what reaches it and from which thread; write number `fail_at` (from 1)
// throws, as a full disk would.
struct RecordingFile : OutputFile {
  std::mutex mu;
  std::string text;
  std::vector<std::string> ops;  // "w" per block, "c" for close
  std::thread::id writer;
  int writes = 0;
  int fail_at = 0;
  std::chrono::milliseconds delay{0};

  void write(std::string_view bytes) override {
    std::this_thread::sleep_for(delay);
    std::lock_guard<std::mutex> lock(mu);
    writer = std::this_thread::get_id();
    if (++writes == fail_at) throw std::runtime_error("cannot write f: No space left on device");
    text.append(bytes);
    ops.push_back("w");
  }
  void close() override {
    std::lock_guard<std::mutex> lock(mu);
    ops.push_back("c");
  }
};

std::string block_text(int file, int i) {
  std::string text = "<";
  text += std::to_string(file);
  text += ':';
  text += std::to_string(i);
  text += '>';
  return text;
}

}  // namespace

TEST_CASE("write-behind: blocks reach their files in order, on another thread, then the close") {
  auto a = std::make_shared<RecordingFile>();
  auto b = std::make_shared<RecordingFile>();
  std::string want_a, want_b;
  {
    WriteBehind behind(/*depth=*/3, /*block_bytes=*/64);
    json::Buffer block(64);
    for (int i = 0; i < 2000; ++i) {
      // Uneven interleaving, so that blocks of both files wait in the queue together.
      const bool to_a = i % 3 != 0;
      const std::string text = block_text(to_a ? 0 : 1, i);
      block += text;
      (to_a ? want_a : want_b) += text;
      behind.write(to_a ? a : b, block);
      CHECK(block.size() == 0);  // handed back empty
      CHECK(block.capacity() > 0);
    }
    behind.close(a);
    block += "tail";
    want_b += "tail";
    behind.write(b, block);
    behind.close(b);
    behind.finish();
    // finish() returns once everything queued ran: nothing more arrives after it.
    CHECK(a->ops.back() == "c");
  }
  CHECK(a->text == want_a);
  CHECK(b->text == want_b);
  CHECK(a->ops.size() == 2000 - 667 + 1);
  CHECK(a->ops.back() == "c");
  CHECK(b->ops.size() == 667 + 1 + 1);
  CHECK(b->ops.back() == "c");
  CHECK(a->writer != std::this_thread::get_id());
}

TEST_CASE("write-behind: a failed write is thrown to the caller and stops the writing") {
  auto full = std::make_shared<RecordingFile>();
  full->fail_at = 3;
  auto other = std::make_shared<RecordingFile>();
  WriteBehind behind(/*depth=*/2, /*block_bytes=*/64);
  json::Buffer block(64);
  std::string thrown;
  int handed = 0;
  try {
    for (; handed < 10000; ++handed) {
      block += block_text(0, handed);
      behind.write(handed % 2 == 0 ? full : other, block);
    }
    behind.finish();
  } catch (const std::runtime_error& e) {
    thrown = e.what();
  }
  CHECK(thrown == "cannot write f: No space left on device");
  // The caller learns of it within the queue's depth (plus the block being written).
  CHECK(handed < 3 * 2 + 4);
  // Blocks queued after the failure are dropped, the other file's included.
  std::lock_guard<std::mutex> lock(other->mu);
  CHECK(other->writes <= 3);
  // And it is thrown again, not lost, by the next call.
  CHECK_THROWS_WITH_AS(behind.finish(), "cannot write f: No space left on device", std::runtime_error);
  CHECK_THROWS_AS(behind.close(full), std::runtime_error);
}

TEST_CASE("write-behind: destroyed without finish() while the file is slow, it drops the queue and returns") {
  auto slow = std::make_shared<RecordingFile>();
  slow->delay = std::chrono::milliseconds(20);
  {
    WriteBehind behind(/*depth=*/4, /*block_bytes=*/64);
    json::Buffer block(64);
    for (int i = 0; i < 5; ++i) {
      block += block_text(0, i);
      behind.write(slow, block);
    }
  }
  // Five blocks at 20 ms would take 100 ms; at most the one being written finishes.
  // (Checked by count, not by time: the machine may be slow.)
  std::lock_guard<std::mutex> lock(slow->mu);
  CHECK(slow->writes < 5);
  CHECK(slow.use_count() == 1);  // the queue's references are gone
}

}  // namespace torchprof
