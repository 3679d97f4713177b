// CUPTI's callback side, shared with the program's own CUPTI clients (torch.profiler's
// Kineto, a custom tool). CUPTI before 13.2 allows one subscriber per process, and
// torchprof's must be it from cuInit on; left alone, a client's cuptiSubscribe would
// get CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED and Kineto would turn torch.profiler
// CPU-only for the rest of the process.
//
// Being preloaded, this library defines the callback API itself (cuptiSubscribe,
// cuptiSubscribe_v2, cuptiUnsubscribe, cuptiEnableCallback, cuptiEnableDomain,
// cuptiEnableAllDomains, cuptiGetCallbackState, cuptiFinalize). There is one real
// subscriber, torchprof's, made at the first of our cuInit or a client's subscribe.
// A client gets a handle of its own; what it enables is kept per client and enabled
// on the real subscriber as well, and each callback CUPTI makes goes to torchprof
// (when torchprof enabled it) and to every client that enabled it, with that
// client's userdata and its own correlationData slot. A client's unsubscribe or
// cuptiFinalize removes what that program's clients did, never torchprof's
// subscription. Among the program's clients CUPTI's own rule holds (one legacy
// subscriber at a time), so every call returns what CUPTI gives the program alone.
//
// With a CUPTI that allows several subscribers (13.2's
// CUpti_SubscriberParams.allowMultipleSubscribers), torchprof subscribes that way and
// a client that asks for it through cuptiSubscribe_v2 gets a real subscriber of its
// own; a legacy cuptiSubscribe is still forwarded through torchprof's.
//
// Without GPU tracing (TORCHPROF_TRACE lacks cuda, gpu and memory, another tool holds
// CUDA's injection, a forked child) every call goes straight to the program's libcupti.
#pragma once

#include <cupti.h>

#include <cstdint>

namespace torchprof::inject {

// Whether the callback side is shared here (see above); decided once, at the first call.
bool hub_active();

// The real subscriber, torchprof's: subscribed at the first call (our cuInit or a
// client's subscribe), with `*rc` what CUPTI answered then. nullptr when it failed.
// Called from InitializeInjection: `deferred` is set when that runs inside the very
// subscribe a client's call is making (CUPTI initialising CUDA), so that the caller
// returns and is called again once the subscribe is done.
CUpti_SubscriberHandle hub_real_subscriber(CUptiResult* rc, bool* deferred);

// torchprof's own callback: CUPTI's callbacks for what torchprof enabled go to it.
void hub_set_ours(CUpti_CallbackFunc callback);
// torchprof's own enable of one callback (cupti/tracer.cpp); the real subscriber's
// enable is ours or any client's.
CUptiResult hub_enable_ours(uint32_t enable, CUpti_CallbackDomain domain, CUpti_CallbackId cbid);

// How the program's clients were served, for the log and summary.json.
enum class HubPath : uint8_t {
  kNone = 0,
  kForwarded = 1,      // through torchprof's one subscriber (CUPTI's single-subscriber rule)
  kOwnSubscriber = 2,  // a subscriber of its own (CUPTI's multi-subscriber mode)
  kPassedThrough = 3,  // torchprof does not trace the GPU here: straight to CUPTI
};

// Forked child: CUPTI's state is the parent's; every call goes straight through.
void hub_forget_after_fork();

// InitializeInjection asks for a second try (see hub_real_subscriber's `deferred`).
void hub_set_retry(void (*retry)());

}  // namespace torchprof::inject
