// What the unit tests of the injected library read back from a thread's buffer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "inject/thread_buffer.h"

namespace torchprof::inject::test {

// Drains `tb`'s stream: its record heads in order, and string texts by id in `strings`.
// Segments read to their end are unmapped.
inline std::vector<wire::Record> drain_records(ThreadBuffer* tb, std::vector<std::string>* strings = nullptr) {
  std::vector<wire::Record> out;
  const uint64_t head = tb->stream.consumer_head();
  for (;;) {
    uint64_t n = 0;
    Segment* finished = nullptr;
    const wire::Record* p = tb->stream.peek(head, &n, &finished);
    while (finished != nullptr) {
      Segment* next = finished->link;
      unmap_segment(finished);
      finished = next;
    }
    if (n == 0) return out;
    for (uint64_t i = 0; i < n; i += 1 + p[i].extra) {
      const wire::Record& r = p[i];
      out.push_back(r);
      if (strings != nullptr && r.kind == static_cast<uint8_t>(wire::Kind::kString)) {
        strings->emplace_back(reinterpret_cast<const char*>(&p[i + 1]), r.a);
      }
    }
    tb->stream.consume(n);
  }
}

}  // namespace torchprof::inject::test
