// Process-wide NVTX registrations: domains, registered strings and category
// names. Each keeps its id and text (cold path, under a mutex) so a forked
// child can define them again in its own first stream. Definitions go into the
// registering thread's stream; decoders resolve ids over all streams of the process.
#pragma once

#include <cstdint>

#include "inject/thread_buffer.h"

namespace torchprof::inject {

// The domain id for `name` (created on first use; the same name gives the same id).
uint16_t registry_domain(ThreadBuffer* tb, const char* name, uint32_t len);
// A registered string's id, which is also its NVTX handle value.
uint32_t registry_string(ThreadBuffer* tb, uint16_t domain, const char* text, uint32_t len);
void registry_category(ThreadBuffer* tb, uint16_t domain, uint32_t category, const char* name, uint32_t len);

// Writes every registration again into `tb` (first thread of a forked child).
void registry_reemit(ThreadBuffer* tb);

void registry_fork_prepare();
void registry_fork_parent();
void registry_fork_child();

}  // namespace torchprof::inject
