// Builders of the activity records the fake writes, each in the struct layout of
// this CUPTI header version, appended only when its kind is enabled.
#pragma once

#include <cupti.h>

#include <cstdint>

#include "fake_cuda.h"

namespace fake_cupti {

struct GpuSpan {
  uint64_t queued = 0;
  uint64_t start = 0;
  uint64_t end = 0;
};

struct KernelLaunch {
  const char* name = nullptr;
  uint32_t stream = 0;
  uint32_t correlation_id = 0;
  uint32_t graph_id = 0;
  uint64_t graph_node_id = 0;
  FakeKernelConfig config{};
  GpuSpan span;
};

void append_kernel(const KernelLaunch& launch);
void append_memcpy(uint64_t bytes, int kind, uint32_t stream, uint32_t correlation_id, bool async,
                   const GpuSpan& span);
void append_memset(uint64_t bytes, uint32_t stream, uint32_t correlation_id, const GpuSpan& span);
void append_memory(uint64_t address, uint64_t bytes, bool allocation, uint32_t correlation_id, uint64_t timestamp);
// cudaEventRecord(event, stream): a CUDA_EVENT record (CUpti_ActivityCudaEvent2).
void append_cuda_event(uint32_t event_id, uint32_t stream, uint32_t correlation_id);
// cudaStreamWaitEvent(stream, event): a STREAM_WAIT_EVENT synchronisation record.
void append_stream_wait(uint32_t stream, uint32_t event_id, uint32_t correlation_id, uint64_t start, uint64_t end);
// A cudaEventQuery / cudaStreamQuery: CUDA 13's CUPTI writes a synchronisation record for
// every query by default (cuptiActivityEnableAllSyncRecords), finished or not; one whose
// work was not finished has returnValue CUDA_ERROR_NOT_READY (600).
void append_query(bool event, uint32_t stream, uint32_t event_id, uint32_t correlation_id, uint64_t start,
                  uint64_t end, uint32_t return_value);
void append_synchronization(bool whole_device, uint32_t stream, uint32_t correlation_id, uint64_t start,
                            uint64_t end);
void append_api(bool driver, CUpti_CallbackId cbid, uint32_t correlation_id, uint64_t start, uint64_t end);
// MEMCPY2: a peer-to-peer copy between two devices (the MEMCPY kind never reports those).
void append_peer_copy(uint64_t bytes, uint32_t src_device, uint32_t dst_device, uint32_t stream,
                      uint32_t correlation_id, const GpuSpan& span);
// A record of a kind cuptiActivityGetNextRecord cannot step over (a damaged buffer).
void append_unreadable_record();

}  // namespace fake_cupti
