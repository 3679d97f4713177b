// PyTorch ops from torch's own RecordFunction callbacks: the mechanism torch.profiler's
// observers hang on. One global callback (every thread: the program's, autograd's
// workers, DataLoader threads), registered once the program has imported torch
// (python/torchprof/_torch_ops.py asks for it). Each op's begin and end is one record
// on its thread's buffer (kOpBegin/kOpEnd), nested as torch nests them.
//
// torch's API for this is C++ and built without its headers here: the callback struct
// is written as the torch version's RecordFunctionCallback is laid out, the exported
// at::addGlobalCallback / at::removeCallback / at::RecordFunction::name are found with
// dlsym, and the inline accessors (threadId, seqNr, forwardThreadId, scope, handle) are read at
// their fields' offsets. Each layout is an entry of the table below, checked against
// that version's headers; a layout is only ever used in the program after a trial in a
// throwaway child process (mode kTrial: the callbacks write a small log instead of
// records, which the bootstrap checks) has passed on the same torch build.
#include "inject/torch_observer.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/wire/env.h"
#include "inject/capture_control.h"
#include "inject/export.h"
#include "inject/process_state.h"
#include "inject/recorder.h"
#include "inject/registry.h"
#include "inject/torch_shapes.h"
#include "inject/torch_stack.h"

namespace torchprof::inject {
namespace {

// Where torch keeps what the callbacks read, for one torch version (x86-64, Itanium ABI).
struct Layout {
  const char* version;  // "major.minor", matched against torch.__version__
  const char* last;     // with the same major, the last minor laid out so; null: version's alone
  // RecordFunctionCallback: passed by value (trivially copyable, over 16 bytes: in memory).
  uint32_t cb_size;
  uint32_t cb_start;           // StartCallback start_
  uint32_t cb_end;             // EndCallback end_
  uint32_t cb_sampling_prob;   // double sampling_prob_
  uint32_t cb_scopes;          // std::array<bool, NUM_SCOPES> scopes_
  uint32_t num_scopes;         // RecordScope::NUM_SCOPES
  uint32_t cb_needs_inputs;
  uint32_t cb_needs_outputs;
  uint32_t cb_needs_ids;
  // RecordFunction (the fields its inline accessors return)
  uint32_t rf_thread;     // step_callbacks_.thread_id_ (uint64_t): torch's id of the op's thread
  uint32_t rf_scope;      // step_callbacks_.scope_ (uint8_t RecordScope)
  uint32_t rf_sequence;   // sequence_nr_ (int64_t)
  uint32_t rf_fwd_thread; // fwd_thread_id_ (uint64_t)
  uint32_t rf_handle;     // handle_ (uint64_t RecordFunctionHandle)
};

// torch 1.13 (aten/src/ATen/record_function.h at v1.13.1, as Debian's libtorch-dev
// 1.13.1 ships it; offsets printed by offsetof on those headers, with and without NDEBUG):
//   RecordFunctionCallback { start_ @0, end_ @8, double sampling_prob_ @16,
//     std::array<bool, 10> scopes_ @24, needs_inputs_ @34, needs_outputs_ @35,
//     needs_ids_ @36 } size 40
//   RecordFunction { vptr @0, StepCallbacks step_callbacks_ @8 { SmallVector<StartEndPair,4>
//     callbacks_ (80 bytes), thread_id_ @88, scope_ @96, needs_* }, called_start_callbacks_,
//     [inputs_valid_ without NDEBUG], ObserverContextList ctx_, variant fn_,
//     sequence_nr_ @200, inputs_, outputs_, fwd_thread_id_ @248, handle_ @256, ... } size 288
// torch 2.6 (the same file as Debian trixie's libtorch-dev 2.6.0+dfsg-7 ships it, offsets
// printed the same way, and read back from a live callback on its libtorch_cpu.so.2.6):
//   RecordFunctionCallback as in 1.13, size 40
//   RecordFunction as in 1.13 up to sequence_nr_ @200, then inputs_ @208, a new
//     unordered_map kwinputs_ @224 (56 bytes), outputs_ @280, fwd_thread_id_ @304,
//     handle_ @312, ... size 344; NDEBUG changes nothing (inputs_valid_ sits in padding)
// torch 2.14 (sid's libtorch-dev 2.14.1+dfsg-1, the same checks): the same members at the
// same offsets as 2.6. The versions between are taken to be laid out as both ends are.
// torch 2.0 to 2.5 (record_function.h read member by member in copies of 2.0.0, a
// 2.2.0a0 snapshot, 2.2.0 and 2.4.0, and the struct rebuilt on each tree's own c10
// headers to print its offsets): kwinputs_ arrived in 2.4, not 2.6. 2.0 and 2.2 are laid
// out as 1.13 (fn_ became a std::variant of the same 40 bytes; is_nccl_meta_ was added
// after handle_), 2.4 as 2.6; 2.1 lies between two that agree, and 2.3 was cut before the
// change that brought kwinputs_ (its text was not seen), 2.5 between 2.4 and 2.6. Every
// entry is used only after its trial has passed on the program's own torch build.
constexpr Layout kLayouts[] = {
    {"1.13", nullptr, 40, 0, 8, 16, 24, 10, 34, 35, 36, 88, 96, 200, 248, 256},
    {"2.0", "2.3", 40, 0, 8, 16, 24, 10, 34, 35, 36, 88, 96, 200, 248, 256},
    {"2.4", "2.14", 40, 0, 8, 16, 24, 10, 34, 35, 36, 88, 96, 200, 304, 312},
    // Not a torch version: 1.13's layout with the scope and sequence number misplaced, so
    // that the tests can show a layout that does not match gives the fallback
    // (TORCHPROF_TORCH_LAYOUT=test-wrong-layout).
    {"test-wrong-layout", nullptr, 40, 0, 8, 16, 24, 10, 34, 35, 36, 88, 100, 208, 248, 256},
    // Not a torch version either: 1.13's layout with needs_inputs_ written into the
    // struct's padding, so that torch never keeps the inputs and the trial reads no shapes
    // (TORCHPROF_TORCH_LAYOUT=test-no-shapes: ops through the callbacks, shapes not).
    {"test-no-shapes", nullptr, 40, 0, 8, 16, 24, 10, 37, 35, 36, 88, 96, 200, 248, 256},
};

constexpr uint32_t kMaxCallbackBytes = 64;
struct alignas(8) CallbackBytes {
  unsigned char bytes[kMaxCallbackBytes];
};
template <uint32_t N>
struct alignas(8) CallbackOf {
  unsigned char bytes[N];
};

// std::unique_ptr<ObserverContext>'s ABI: one pointer, not trivially destructible, so
// returned through a hidden pointer. Ours is always empty.
struct NoContext {
  void* p = nullptr;
  ~NoContext() {}
};

using NameFn = const char* (*)(const void*);
using RemoveFn = void (*)(uint64_t);
using StartFn = NoContext (*)(const void*);
using EndFn = void (*)(const void*, void*);

const Layout* g_layout = nullptr;
NameFn g_name = nullptr;
RemoveFn g_remove = nullptr;
RemoveFn g_disable = nullptr;
RemoveFn g_reenable = nullptr;
std::atomic<uint64_t> g_handle{0};

template <typename T>
inline T field(const void* rf, uint32_t offset) {
  T v;
  memcpy(&v, static_cast<const char*>(rf) + offset, sizeof v);
  return v;
}

// ---- trial log (the child process's check) -----------------------------------------

constexpr int kTrialEntries = 512;
struct TrialEntry {
  char name[64];
  int depth;
  int begin;  // 1 begin, 0 end
  int64_t sequence;
  uint32_t scope;
  uint64_t fwd_thread;
  uint64_t thread;
  uint64_t handle;
  char sizes[48];  // the op's input shapes as the shapes path writes them, or "-"
  uint64_t flops;  // torch's FLOP count of the op at its begin (0: none, or not found)
};
TrialEntry g_trial[kTrialEntries];
std::atomic<int> g_trial_used{0};
thread_local int t_trial_depth = 0;

void trial_note(const void* rf, bool begin) {
  const int i = g_trial_used.fetch_add(1, std::memory_order_relaxed);
  if (i >= kTrialEntries) return;
  TrialEntry& e = g_trial[i];
  const char* name = g_name(rf);
  snprintf(e.name, sizeof e.name, "%s", name != nullptr ? name : "");
  e.begin = begin ? 1 : 0;
  e.depth = begin ? t_trial_depth++ : --t_trial_depth;
  e.sequence = field<int64_t>(rf, g_layout->rf_sequence);
  e.scope = field<uint8_t>(rf, g_layout->rf_scope);
  e.fwd_thread = field<uint64_t>(rf, g_layout->rf_fwd_thread);
  e.thread = field<uint64_t>(rf, g_layout->rf_thread);
  e.handle = field<uint64_t>(rf, g_layout->rf_handle);
  char text[sizeof e.sizes + 16];
  const size_t n = begin ? shapes_append(rf, text, 0, sizeof e.sizes) : 0;
  // Without its ", sizes = " and with no spaces: one word of the log's line.
  size_t at = 0;
  for (size_t k = 10; k < n && at + 1 < sizeof e.sizes; ++k) {
    if (text[k] != ' ') e.sizes[at++] = text[k];
  }
  if (at == 0) e.sizes[at++] = '-';
  e.sizes[at] = '\0';
  e.flops = begin ? flops_of(rf, name) : 0;
}

// ---- the callbacks ---------------------------------------------------------------

uint16_t ops_domain(ThreadBuffer* tb) {
  if (tb->ops_domain == 0) {
    static constexpr char kDomain[] = "torchprof.ops";
    tb->ops_domain = registry_domain(tb, kDomain, sizeof(kDomain) - 1);
  }
  return tb->ops_domain;
}

NoContext on_nothing(const void*) { return {}; }
void on_nothing_end(const void*, void*) {}

NoContext on_trial_start(const void* rf) {
  trial_note(rf, true);
  return {};
}
void on_trial_end(const void* rf, void*) { trial_note(rf, false); }

// What on_start<true> adds to each op's name (set before the callback is registered).
bool g_with_shapes = false;
bool g_with_stack = false;
bool g_with_flops = false;
// --with-flops, asked for before the observer starts (torchprof_torch_observer_flops).
bool g_flops_wanted = false;

// An op's begin. kDetail (--record-shapes, --with-flops, --with-stack): the op's name with
// torch's ", sizes = [...]", its ", flops = N" and torchprof's ", stack = ..." after it, as
// one string (interned by
// content on the thread; the collector reads them back out of it). Without, the name is
// torch's string, cached by its address: the plain path tests no option per op.
template <bool kDetail>
NoContext on_start(const void* rf) {
  CallbackGuard guard;
  if (!guard.entered()) return {};
  ThreadBuffer* tb = current_buffer();
  if (tb == nullptr) return {};
  const uint16_t domain = ops_domain(tb);
  if (domain == 0) return {};
  const Layout& l = *g_layout;
  const char* name = g_name(rf);
  if (!capture::fast() && !capture::admit(tb, name)) {
    capture::paused_push(tb, domain);
    return {};
  }
  const uint64_t word = wire::op_word(field<int64_t>(rf, l.rf_sequence), field<uint8_t>(rf, l.rf_scope),
                                      field<uint64_t>(rf, l.rf_fwd_thread), field<uint64_t>(rf, l.rf_thread));
  if constexpr (kDetail) {
    const size_t cap = sizeof tb->scratch;
    size_t n = name != nullptr ? strnlen(name, cap / 2) : 0;
    if (n > 0) memcpy(tb->scratch, name, n);
    if (g_with_shapes) {
      n = shapes_append(rf, tb->scratch, n, cap);
      n = types_append(rf, tb->scratch, n, cap);
    }
    if (g_with_flops) n = flops_append(rf, name, tb->scratch, n, cap);
    if (g_with_stack) n = stack_append(tb->scratch, n, cap);
    record_op_begin(tb, domain, NameRef{tb->scratch, static_cast<uint32_t>(n), 0, nullptr}, word,
                    field<uint64_t>(rf, l.rf_handle));
  } else {
    record_op_begin(tb, domain, cached_ascii_name(tb, name), word, field<uint64_t>(rf, l.rf_handle));
  }
  return {};
}

void on_end(const void* rf, void* /*ctx*/) {
  CallbackGuard guard;
  if (!guard.entered()) return;
  ThreadBuffer* tb = current_buffer();
  if (tb == nullptr || tb->ops_domain == 0) return;
  record_op_end(tb, tb->ops_domain, field<uint64_t>(rf, g_layout->rf_handle));
}

// The loaded torch library that defines `symbol`. Python loads torch's libraries with
// RTLD_LOCAL, so they are looked for among the loaded objects named like torch's.
struct SymbolSearch {
  const char* symbol;
  void* found;
};

int search_object(struct dl_phdr_info* info, size_t, void* data) {
  auto* search = static_cast<SymbolSearch*>(data);
  const char* path = info->dlpi_name;
  if (path == nullptr || path[0] == '\0') return 0;
  const char* base = strrchr(path, '/');
  base = base != nullptr ? base + 1 : path;
  if (strstr(base, "torch") == nullptr && strstr(base, "c10") == nullptr) return 0;
  void* handle = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return 0;
  search->found = dlsym(handle, search->symbol);
  dlclose(handle);  // RTLD_NOLOAD took one more reference: the library stays loaded
  return search->found != nullptr ? 1 : 0;
}

void* torch_symbol(const char* symbol) {
  if (void* p = dlsym(RTLD_DEFAULT, symbol)) return p;
  SymbolSearch search{symbol, nullptr};
  dl_iterate_phdr(&search_object, &search);
  return search.found;
}

template <uint32_t N>
uint64_t add_callback(void* add, const CallbackBytes& cb) {
  CallbackOf<N> exact;
  memcpy(exact.bytes, cb.bytes, N);
  return reinterpret_cast<uint64_t (*)(CallbackOf<N>)>(add)(exact);
}

// torch's "major.minor" as numbers; false unless the minor ends the text or is followed
// by '.' or '+' ("1.13", "1.13.1", "1.13.0a0+git…").
bool major_minor(const char* text, int* major, int* minor) {
  int n = 0;
  if (sscanf(text, "%d.%d%n", major, minor, &n) != 2) return false;
  return text[n] == '\0' || text[n] == '.' || text[n] == '+';
}

// Whether torch `version` is one `l` is laid out for: its minor from l.version's to l.last's.
bool version_matches(const Layout& l, const char* version) {
  int major = 0, minor = 0, first_major = 0, first = 0, last_major = 0, last = 0;
  if (!major_minor(version, &major, &minor) || !major_minor(l.version, &first_major, &first)) return false;
  if (!major_minor(l.last != nullptr ? l.last : l.version, &last_major, &last)) return false;
  return major == first_major && major == last_major && first <= minor && minor <= last;
}

void say(char* why, int len, const char* text) {
  if (why != nullptr && len > 0) snprintf(why, static_cast<size_t>(len), "%s", text);
}

}  // namespace
}  // namespace torchprof::inject

namespace tpi = torchprof::inject;

extern "C" {

// Registers the observer for torch `version` (torch.__version__), or the table entry
// named by TORCHPROF_TORCH_LAYOUT when that is set. mode: kObserverRecord (records in
// the program), kObserverShapes (the same, names with their input shapes), kObserverTrial
// (a log for torchprof_torch_trial_log) or kObserverFloor (callbacks that return at once,
// for the benchmark). Returns 1 when registered; 0 with a one-line reason in `why` otherwise. Once per process.
TORCHPROF_EXPORT int torchprof_torch_observer_start(const char* version, int mode, char* why, int why_len) {
  using namespace tpi;
  if (g_handle.load() != 0) {
    say(why, why_len, "the op observer is already registered");
    return 0;
  }
  const char* forced = getenv(torchprof::env::kTorchLayout);
  const char* wanted = forced != nullptr && forced[0] != '\0' ? forced : version;
  const Layout* layout = nullptr;
  for (const Layout& l : kLayouts) {
    const bool match = forced != nullptr && forced[0] != '\0' ? strcmp(l.version, wanted) == 0
                                                              : version_matches(l, wanted);
    if (match) layout = &l;
  }
  char text[160];
  if (layout == nullptr) {
    snprintf(text, sizeof text, "torch %s is not in the op observer's table of layouts", wanted);
    say(why, why_len, text);
    return 0;
  }
  void* add = torch_symbol("_ZN2at17addGlobalCallbackENS_22RecordFunctionCallbackE");
  g_remove = reinterpret_cast<RemoveFn>(torch_symbol("_ZN2at14removeCallbackEm"));
  g_disable = reinterpret_cast<RemoveFn>(torch_symbol("_ZN2at15disableCallbackEm"));
  g_reenable = reinterpret_cast<RemoveFn>(torch_symbol("_ZN2at16reenableCallbackEm"));
  g_name = reinterpret_cast<NameFn>(torch_symbol("_ZNK2at14RecordFunction4nameEv"));
  if (add == nullptr || g_remove == nullptr || g_name == nullptr || g_disable == nullptr || g_reenable == nullptr) {
    say(why, why_len, "torch's RecordFunction functions are not exported by the loaded libtorch");
    return 0;
  }
  CallbackBytes cb{};
  // Each mode its own pair of callbacks: the recording ones never test which mode runs.
  const bool flops = g_flops_wanted && mode != kObserverFloor && mode != kObserverTrial;
  const StartFn start = mode == kObserverFloor   ? &on_nothing
                        : mode == kObserverTrial ? &on_trial_start
                        : mode >= kObserverShapes || flops ? &on_start<true>
                                                           : &on_start<false>;
  const EndFn end = mode == kObserverFloor ? &on_nothing_end : mode == kObserverTrial ? &on_trial_end : &on_end;
  memcpy(cb.bytes + layout->cb_start, &start, sizeof start);
  memcpy(cb.bytes + layout->cb_end, &end, sizeof end);
  const double prob = 1.0;
  memcpy(cb.bytes + layout->cb_sampling_prob, &prob, sizeof prob);
  memset(cb.bytes + layout->cb_scopes, 1, layout->num_scopes);  // every scope, as torch.profiler
  // The shapes path and the trial (which checks the shapes too) have torch keep the inputs.
  const bool shapes = mode == kObserverShapes || mode == kObserverShapesStack || mode == kObserverTrial;
  if (shapes && !shapes_find(&torch_symbol) && mode != kObserverTrial) {
    say(why, why_len, "torch does not export torch::profiler::impl::inputSizes");
    return 0;
  }
  // The trial tries torch's FLOP count too, where torch has it.
  if (mode == kObserverTrial) flops_find(&torch_symbol);
  if (flops && !flops_find(&torch_symbol)) {
    say(why, why_len, "torch does not export saveExtraArgs, computeFlops and their map's clear() (--with-flops)");
    return 0;
  }
  const char* missing = nullptr;
  const bool stack = mode == kObserverStack || mode == kObserverShapesStack;
  if (stack && !stack_find(&missing)) {
    snprintf(text, sizeof text, "the process's Python has no %s", missing != nullptr ? missing : "C API");
    say(why, why_len, text);
    return 0;
  }
  g_with_shapes = shapes && mode != kObserverTrial;
  types_style(atoi(wanted));
  g_with_stack = stack;
  g_with_flops = flops;
  cb.bytes[layout->cb_needs_inputs] = shapes || flops ? 1 : 0;
  cb.bytes[layout->cb_needs_outputs] = 0;
  cb.bytes[layout->cb_needs_ids] = 1;  // handles: the trace's Record function id
  g_layout = layout;
  uint64_t handle = 0;
  switch (layout->cb_size) {
    case 40: handle = add_callback<40>(add, cb); break;
    default:
      say(why, why_len, "the op observer's layout has a callback size it cannot pass");
      return 0;
  }
  if (handle == 0) {
    say(why, why_len, "torch refused the op observer's callback");
    return 0;
  }
  g_handle.store(handle);
  return 1;
}

// --with-flops: each op's name carries torch's FLOP count of it. Before the start.
TORCHPROF_EXPORT void torchprof_torch_observer_flops(int on) { tpi::g_flops_wanted = on != 0; }

// --with-stack: frames under these directories ('\n' between them) are left out.
TORCHPROF_EXPORT void torchprof_torch_observer_stack_skip(const char* dirs) { tpi::stack_skip_dirs(dirs); }

// --with-stack: no more stacks (Python is about to finalize: the GIL must not be asked for).
TORCHPROF_EXPORT void torchprof_torch_observer_stack_off(void) { tpi::stack_off(); }

// Unregisters the observer (the trial's end; the program's when it stops capturing).
TORCHPROF_EXPORT void torchprof_torch_observer_stop(void) {
  const uint64_t handle = tpi::g_handle.exchange(0);
  if (handle != 0 && tpi::g_remove != nullptr) tpi::g_remove(handle);
}

// While the program runs a profiler of its own: on = 0 stops recording ops, 1 resumes.
TORCHPROF_EXPORT void torchprof_torch_observer_enable(int on) {
  const uint64_t handle = tpi::g_handle.load();
  if (handle == 0) return;
  (on != 0 ? tpi::g_reenable : tpi::g_disable)(handle);
}

// The trial's log as text, one line per callback:
//   B|E <depth> <scope> <sequence> <fwd thread> <handle> <thread> <sizes> <flops> <name>
// (sizes: "[[4,4],[4,4]]" at a begin when torch's helper gave them, else "-"; flops:
// torch's count at a begin, 0 when it gave none).
// Returns the bytes written (cut at `len`).
TORCHPROF_EXPORT int torchprof_torch_trial_log(char* out, int len) {
  using namespace tpi;
  const int used = g_trial_used.load() < kTrialEntries ? g_trial_used.load() : kTrialEntries;
  int at = 0;
  for (int i = 0; i < used && at < len; ++i) {
    const TrialEntry& e = g_trial[i];
    const int n = snprintf(out + at, static_cast<size_t>(len - at), "%c %d %u %lld %llu %llu %llu %s %llu %s\n", e.begin ? 'B' : 'E',
                           e.depth, e.scope, static_cast<long long>(e.sequence),
                           static_cast<unsigned long long>(e.fwd_thread), static_cast<unsigned long long>(e.handle),
                           static_cast<unsigned long long>(e.thread), e.sizes,
                           static_cast<unsigned long long>(e.flops), e.name);
    if (n < 0) break;
    at += n;
  }
  return at < len ? at : len;
}

}  // extern "C"
