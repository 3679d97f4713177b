// NVTX v3 injection: NVTX calls InitializeInjectionNvtx2 once per module that
// uses it (libtorch, NCCL, the app, ...); we fill that module's CORE and CORE2
// slots with the functions below. Every function is guarded against
// re-entrancy and records through recorder.h.
#include <nvtx3/nvToolsExt.h>

#include <cstddef>
#include <cstring>

#include "inject/capture_control.h"
#include "inject/config.h"
#include "inject/export.h"
#include "inject/process_state.h"
#include "inject/recorder.h"
#include "inject/registry.h"
#include "inject/utf8.h"

namespace torchprof::inject {
namespace {

struct EventFields {
  NameRef name;
  uint64_t attr = 0;
  uint64_t payload = 0;
};

uint16_t domain_id(nvtxDomainHandle_t d) { return static_cast<uint16_t>(reinterpret_cast<uintptr_t>(d)); }

// Payload bits as the wire carries them: 64-bit values raw, u32 zero-extended,
// i32 sign-extended, float as its 32 bits.
bool read_payload(const nvtxEventAttributes_t* a, wire::PayloadType* type, uint64_t* bits) {
  switch (a->payloadType) {
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64: *bits = a->payload.ullValue; break;
    case NVTX_PAYLOAD_TYPE_INT64: *bits = static_cast<uint64_t>(a->payload.llValue); break;
    case NVTX_PAYLOAD_TYPE_DOUBLE: memcpy(bits, &a->payload.dValue, sizeof(double)); break;
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32: *bits = a->payload.uiValue; break;
    case NVTX_PAYLOAD_TYPE_INT32: *bits = static_cast<uint64_t>(static_cast<int64_t>(a->payload.iValue)); break;
    case NVTX_PAYLOAD_TYPE_FLOAT: {
      uint32_t f;
      memcpy(&f, &a->payload.fValue, sizeof(f));
      *bits = f;
      break;
    }
    default: return false;
  }
  *type = static_cast<wire::PayloadType>(a->payloadType);
  return true;
}

EventFields parse(ThreadBuffer* tb, const nvtxEventAttributes_t* a) {
  EventFields f;
  constexpr size_t kFull = offsetof(nvtxEventAttributes_t, message) + sizeof(nvtxMessageValue_t);
  if (a == nullptr || a->size < kFull) return f;
  wire::PayloadType type = wire::PayloadType::kNone;
  if (!read_payload(a, &type, &f.payload)) f.payload = 0;
  f.attr = wire::make_attr(a->category, type);
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: f.name = cached_ascii_name(tb, a->message.ascii); break;
    case NVTX_MESSAGE_TYPE_UNICODE: f.name = wide_name(tb, a->message.unicode); break;
    case NVTX_MESSAGE_TYPE_REGISTERED:
      f.name.id = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(a->message.registered));
      break;
    default: break;
  }
  return f;
}

// Enters a callback: returns `fallback` when re-entered or when there is no
// buffer (inert, thread exiting, out of memory).
#define TP_ENTER(fallback)                     \
  CallbackGuard guard_;                        \
  if (!guard_.entered()) return fallback;      \
  ThreadBuffer* tb = current_buffer();         \
  if (tb == nullptr) return fallback

const char* ascii_message(const nvtxEventAttributes_t* a) {
  constexpr size_t kFull = offsetof(nvtxEventAttributes_t, message) + sizeof(nvtxMessageValue_t);
  if (a == nullptr || a->size < kFull || a->messageType != NVTX_MESSAGE_TYPE_ASCII) return nullptr;
  return a->message.ascii;
}

using capture::fast;
using capture::admit;

// Paused (not armed): a push or pop ends here, before the guard (capture_control.h).
#define TP_PAUSED_PUSH(domain)                                                          \
  if (const uint64_t w_ = capture::word(); __builtin_expect(capture::mode_of(w_) != capture::kRecording, 0)) { \
    int level_;                                                                           \
    if (capture::paused_push_fast(w_, domain, &level_)) return level_;                    \
  }
#define TP_PAUSED_POP(domain)                                                           \
  if (const uint64_t w_ = capture::word(); __builtin_expect(capture::mode_of(w_) != capture::kRecording, 0)) { \
    int level_;                                                                           \
    if (capture::paused_pop_fast(w_, domain, &level_)) return level_;                     \
  }
#define TP_GATE_PUSH(domain, text) \
  if (__builtin_expect(!fast(), 0) && !admit(tb, text)) return capture::paused_push(tb, domain)
#define TP_GATE(text, fallback) \
  if (__builtin_expect(!fast(), 0) && !admit(tb, text)) return fallback
// A range started while paused has id 0: its end is not recorded either.
#define TP_GATE_END(id) \
  if (__builtin_expect(!fast(), 0) && (id) == 0) return

// ---- CORE ----

void mark_ex(const nvtxEventAttributes_t* a) {
  TP_ENTER();
  TP_GATE(ascii_message(a), );
  EventFields f = parse(tb, a);
  record_mark(tb, 0, f.name, f.attr, f.payload);
}
void mark_a(const char* m) {
  TP_ENTER();
  TP_GATE(m, );
  record_mark(tb, 0, cached_ascii_name(tb, m), 0, 0);
}
void mark_w(const wchar_t* m) {
  TP_ENTER();
  TP_GATE(nullptr, );
  record_mark(tb, 0, wide_name(tb, m), 0, 0);
}
nvtxRangeId_t start_ex(const nvtxEventAttributes_t* a) {
  TP_ENTER(0);
  TP_GATE(ascii_message(a), 0);
  EventFields f = parse(tb, a);
  return record_start(tb, 0, f.name, f.attr, f.payload);
}
nvtxRangeId_t start_a(const char* m) {
  TP_ENTER(0);
  TP_GATE(m, 0);
  return record_start(tb, 0, cached_ascii_name(tb, m), 0, 0);
}
nvtxRangeId_t start_w(const wchar_t* m) {
  TP_ENTER(0);
  TP_GATE(nullptr, 0);
  return record_start(tb, 0, wide_name(tb, m), 0, 0);
}
void range_end(nvtxRangeId_t id) {
  TP_ENTER();
  TP_GATE_END(id);
  record_end(tb, 0, id);
}
__attribute__((noinline)) int push_ex_full(const nvtxEventAttributes_t* a) {
  TP_ENTER(-1);
  TP_GATE_PUSH(0, ascii_message(a));
  EventFields f = parse(tb, a);
  return record_push(tb, 0, f.name, f.attr, f.payload);
}
// The paused check first, in a frame of its own: no prologue before it.
int push_ex(const nvtxEventAttributes_t* a) {
  TP_PAUSED_PUSH(0);
  return push_ex_full(a);
}
__attribute__((noinline)) int push_a_full(const char* m) {
  TP_ENTER(-1);
  TP_GATE_PUSH(0, m);
  return record_push(tb, 0, cached_ascii_name(tb, m), 0, 0);
}
// The paused check first, in a frame of its own: no prologue before it.
int push_a(const char* m) {
  TP_PAUSED_PUSH(0);
  return push_a_full(m);
}
__attribute__((noinline)) int push_w_full(const wchar_t* m) {
  TP_ENTER(-1);
  TP_GATE_PUSH(0, nullptr);
  return record_push(tb, 0, wide_name(tb, m), 0, 0);
}
// The paused check first, in a frame of its own: no prologue before it.
int push_w(const wchar_t* m) {
  TP_PAUSED_PUSH(0);
  return push_w_full(m);
}
__attribute__((noinline)) int range_pop_full() {
  TP_ENTER(-1);
  return record_pop(tb, 0);
}
// The paused check first, in a frame of its own: no prologue before it.
int range_pop() {
  TP_PAUSED_POP(0);
  return range_pop_full();
}
void name_category_a(uint32_t category, const char* name) {
  TP_ENTER();
  NameRef n = ascii_name(name);
  registry_category(tb, 0, category, n.text, n.len);
}
void name_category_w(uint32_t category, const wchar_t* name) {
  TP_ENTER();
  NameRef n = wide_name(tb, name);
  registry_category(tb, 0, category, n.text, n.len);
}
void name_thread_a(uint32_t os_tid, const char* name) {
  TP_ENTER();
  record_thread_name(tb, os_tid, ascii_name(name));
}
void name_thread_w(uint32_t os_tid, const wchar_t* name) {
  TP_ENTER();
  record_thread_name(tb, os_tid, wide_name(tb, name));
}

// ---- CORE2 ----

void d_mark_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  TP_ENTER();
  TP_GATE(ascii_message(a), );
  EventFields f = parse(tb, a);
  record_mark(tb, domain_id(d), f.name, f.attr, f.payload);
}
nvtxRangeId_t d_start_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  TP_ENTER(0);
  TP_GATE(ascii_message(a), 0);
  EventFields f = parse(tb, a);
  return record_start(tb, domain_id(d), f.name, f.attr, f.payload);
}
void d_range_end(nvtxDomainHandle_t d, nvtxRangeId_t id) {
  TP_ENTER();
  TP_GATE_END(id);
  record_end(tb, domain_id(d), id);
}
int d_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  TP_PAUSED_PUSH(domain_id(d));
  TP_ENTER(-1);
  TP_GATE_PUSH(domain_id(d), ascii_message(a));
  EventFields f = parse(tb, a);
  return record_push(tb, domain_id(d), f.name, f.attr, f.payload);
}
int d_pop(nvtxDomainHandle_t d) {
  TP_PAUSED_POP(domain_id(d));
  TP_ENTER(-1);
  return record_pop(tb, domain_id(d));
}
nvtxResourceHandle_t d_resource_create(nvtxDomainHandle_t, nvtxResourceAttributes_t*) { return nullptr; }
void d_resource_destroy(nvtxResourceHandle_t) {}
void d_name_category_a(nvtxDomainHandle_t d, uint32_t category, const char* name) {
  TP_ENTER();
  NameRef n = ascii_name(name);
  registry_category(tb, domain_id(d), category, n.text, n.len);
}
void d_name_category_w(nvtxDomainHandle_t d, uint32_t category, const wchar_t* name) {
  TP_ENTER();
  NameRef n = wide_name(tb, name);
  registry_category(tb, domain_id(d), category, n.text, n.len);
}
nvtxStringHandle_t string_handle(uint32_t id) {
  return reinterpret_cast<nvtxStringHandle_t>(static_cast<uintptr_t>(id));
}
nvtxStringHandle_t d_register_string_a(nvtxDomainHandle_t d, const char* s) {
  TP_ENTER(nullptr);
  NameRef n = ascii_name(s);
  return string_handle(registry_string(tb, domain_id(d), n.text, n.len));
}
nvtxStringHandle_t d_register_string_w(nvtxDomainHandle_t d, const wchar_t* s) {
  TP_ENTER(nullptr);
  NameRef n = wide_name(tb, s);
  return string_handle(registry_string(tb, domain_id(d), n.text, n.len));
}
nvtxDomainHandle_t domain_handle(uint16_t id) {
  return reinterpret_cast<nvtxDomainHandle_t>(static_cast<uintptr_t>(id));
}
nvtxDomainHandle_t domain_create_a(const char* name) {
  TP_ENTER(nullptr);
  NameRef n = ascii_name(name);
  return domain_handle(registry_domain(tb, n.text, n.len));
}
nvtxDomainHandle_t domain_create_w(const wchar_t* name) {
  TP_ENTER(nullptr);
  NameRef n = wide_name(tb, name);
  return domain_handle(registry_domain(tb, n.text, n.len));
}
void domain_destroy(nvtxDomainHandle_t) {}
void initialize(const void*) {}

#undef TP_ENTER
#undef TP_PAUSED_PUSH
#undef TP_PAUSED_POP
#undef TP_GATE_PUSH
#undef TP_GATE
#undef TP_GATE_END

struct Slot {
  unsigned id;
  NvtxFunctionPointer fn;
};

template <typename F>
NvtxFunctionPointer fp(F f) {
  return reinterpret_cast<NvtxFunctionPointer>(f);
}

bool fill_module(const NvtxExportTableCallbacks* cb, NvtxCallbackModule module, const Slot* slots, size_t n) {
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (cb->GetModuleFunctionTable(module, &table, &size) == 0 || table == nullptr) return false;
  for (size_t i = 0; i < n; ++i) {
    // An older NVTX may have fewer slots; `size` counts from the unused slot 0.
    if (slots[i].id < size && table[slots[i].id] != nullptr) *table[slots[i].id] = slots[i].fn;
  }
  return true;
}

int initialize_nvtx(NvtxGetExportTableFunc_t get_export_table) {
  if (!config().active || !config().trace_nvtx || get_export_table == nullptr) return 0;
  auto* cb = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (cb == nullptr || cb->struct_size < sizeof(NvtxExportTableCallbacks) || cb->GetModuleFunctionTable == nullptr) {
    return 0;
  }
  const Slot core[] = {
      {NVTX_CBID_CORE_MarkEx, fp(mark_ex)},           {NVTX_CBID_CORE_MarkA, fp(mark_a)},
      {NVTX_CBID_CORE_MarkW, fp(mark_w)},             {NVTX_CBID_CORE_RangeStartEx, fp(start_ex)},
      {NVTX_CBID_CORE_RangeStartA, fp(start_a)},      {NVTX_CBID_CORE_RangeStartW, fp(start_w)},
      {NVTX_CBID_CORE_RangeEnd, fp(range_end)},       {NVTX_CBID_CORE_RangePushEx, fp(push_ex)},
      {NVTX_CBID_CORE_RangePushA, fp(push_a)},        {NVTX_CBID_CORE_RangePushW, fp(push_w)},
      {NVTX_CBID_CORE_RangePop, fp(range_pop)},       {NVTX_CBID_CORE_NameCategoryA, fp(name_category_a)},
      {NVTX_CBID_CORE_NameCategoryW, fp(name_category_w)}, {NVTX_CBID_CORE_NameOsThreadA, fp(name_thread_a)},
      {NVTX_CBID_CORE_NameOsThreadW, fp(name_thread_w)},
  };
  const Slot core2[] = {
      {NVTX_CBID_CORE2_DomainMarkEx, fp(d_mark_ex)},
      {NVTX_CBID_CORE2_DomainRangeStartEx, fp(d_start_ex)},
      {NVTX_CBID_CORE2_DomainRangeEnd, fp(d_range_end)},
      {NVTX_CBID_CORE2_DomainRangePushEx, fp(d_push_ex)},
      {NVTX_CBID_CORE2_DomainRangePop, fp(d_pop)},
      {NVTX_CBID_CORE2_DomainResourceCreate, fp(d_resource_create)},
      {NVTX_CBID_CORE2_DomainResourceDestroy, fp(d_resource_destroy)},
      {NVTX_CBID_CORE2_DomainNameCategoryA, fp(d_name_category_a)},
      {NVTX_CBID_CORE2_DomainNameCategoryW, fp(d_name_category_w)},
      {NVTX_CBID_CORE2_DomainRegisterStringA, fp(d_register_string_a)},
      {NVTX_CBID_CORE2_DomainRegisterStringW, fp(d_register_string_w)},
      {NVTX_CBID_CORE2_DomainCreateA, fp(domain_create_a)},
      {NVTX_CBID_CORE2_DomainCreateW, fp(domain_create_w)},
      {NVTX_CBID_CORE2_DomainDestroy, fp(domain_destroy)},
      {NVTX_CBID_CORE2_Initialize, fp(initialize)},
  };
  if (!fill_module(cb, NVTX_CB_MODULE_CORE, core, sizeof(core) / sizeof(core[0]))) return 0;
  fill_module(cb, NVTX_CB_MODULE_CORE2, core2, sizeof(core2) / sizeof(core2[0]));
  return 1;
}

}  // namespace
}  // namespace torchprof::inject

extern "C" TORCHPROF_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  return torchprof::inject::initialize_nvtx(get_export_table);
}
