// A second CUPTI client in the profiled process (torch.profiler's Kineto, Inductor's
// benchmarking, nsys-style tools linked into the program). CUPTI has one set of
// buffer callbacks, one timestamp callback and one set of enabled kinds per
// process: the last client to register wins. Left alone, Kineto's
// cuptiActivityRegisterCallbacks sends our buffers to its callbacks (which drop
// them as unknown), its rdtsc timestamp callback changes the clock of our records,
// and its stop disables the kinds we trace: GPU time silently drops to 0.
//
// Being preloaded, this library defines those CUPTI entry points itself, so a
// client linked against libcupti calls them here first. While our tracing runs,
// the client's callbacks and clock are kept here instead of in CUPTI, kinds it
// disables stay on when we need them, and every buffer CUPTI hands us is also
// copied, filtered to the kinds the client enabled and with its times in the
// client's clock, into buffers the client asked for, which its
// cuptiActivityGetNextRecord walks here. As with CUPTI alone, the client has one
// buffer out while it has kinds enabled; it goes back when full or at the client's
// own flush. Without our tracing every call goes
// straight to the program's libcupti.
#pragma once

#include <cupti.h>

#include <cstddef>
#include <cstdint>

namespace torchprof::inject {

// Our buffer callbacks and timestamp callback are CUPTI's from now on: a client's
// calls are held here (cupti/tracer.cpp, once our callbacks are registered).
void share_start(CUpti_BuffersCallbackRequestFunc requested, CUpti_BuffersCallbackCompleteFunc completed,
                 CUpti_TimestampCallbackFunc timestamp);
// A kind our tracing enabled: a client's cuptiActivityDisable leaves it on.
void share_note_our_kind(CUpti_ActivityKind kind);
// Whether a second client has `kind` enabled (so a pause must leave it on).
bool share_client_wants(CUpti_ActivityKind kind);
// Forked child: CUPTI's state is the parent's; every call goes straight through.
void share_forget_after_fork();

// Our bufferCompleted, on the thread CUPTI delivers on: the client's copies of
// `buffer`'s records, handed to it before this returns.
void share_with_second_client(const uint8_t* buffer, size_t valid);

// The program's cuptiFinalize (cupti/subscribers.cpp): its activity settings are undone
// as CUPTI's finalize would, torchprof's tracing goes on.
void share_client_finalized();
// Whether torchprof takes API calls from CUPTI's RUNTIME/DRIVER records (then a
// client's API record filters are applied to its copies only).
bool share_api_records_ours();
// CUPTI told to write query records only for queries that found their work done,
// unless the client wants them all (cuptiActivityEnableAllSyncRecords, its default).
void share_set_all_sync();

// CUPTI's own clock is ours + `offset_ns` (read before our timestamp callback replaced
// it): the records of a client that registered no clock are shifted onto it.
void share_set_cupti_clock(int64_t offset_ns);

// Whether a second client registered buffer callbacks while we traced.
bool second_client_seen();

// A buffer CUPTI returned that we never handed out: the second client's, from before
// our callbacks replaced its own. Handed back to it; false when there is none.
bool return_to_second_client(uint8_t* buffer, size_t size, size_t valid);

}  // namespace torchprof::inject
