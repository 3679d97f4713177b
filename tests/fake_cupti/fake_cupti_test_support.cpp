#include "fake_cupti_test_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "fake_cuda.h"

namespace fake_cupti_test {

namespace {

std::mutex g_mutex;
std::vector<Record> g_records;
std::vector<ApiEvent> g_api_events;
std::vector<OtherEvent> g_other_events;
size_t g_buffers = 0;
std::atomic<size_t> g_buffer_size{64 * 1024};

}  // namespace

std::vector<std::string>& TestSubscriber::range_stack() {
  thread_local std::vector<std::string> stack;
  return stack;
}

void TestSubscriber::set_buffer_size(size_t size) { g_buffer_size.store(size); }

TestSubscriber::TestSubscriber(std::initializer_list<CUpti_ActivityKind> kinds) : kinds_(kinds) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_records.clear();
    g_api_events.clear();
    g_other_events.clear();
    g_buffers = 0;
  }
  status_ = cuptiSubscribe(&handle_, &TestSubscriber::on_callback, this);
  if (status_ != CUPTI_SUCCESS) return;
  status_ = cuptiEnableAllDomains(1, handle_);
  if (status_ == CUPTI_SUCCESS) {
    status_ = cuptiActivityRegisterCallbacks(&TestSubscriber::on_buffer_requested,
                                             &TestSubscriber::on_buffer_completed);
  }
  for (CUpti_ActivityKind kind : kinds_) {
    if (status_ == CUPTI_SUCCESS) status_ = cuptiActivityEnable(kind);
  }
  size_t ignored = 0;
  cuptiActivityGetNumDroppedRecords(nullptr, 0, &ignored);
}

TestSubscriber::~TestSubscriber() {
  if (handle_ == nullptr) return;
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (CUpti_ActivityKind kind : kinds_) cuptiActivityDisable(kind);
  cuptiUnsubscribe(handle_);
}

std::vector<Record> TestSubscriber::flush() {
  fakecuda_wait_idle();  // a forced flush of queued work would give records without times
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  return delivered();
}

std::vector<Record> TestSubscriber::delivered() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<Record> out;
  out.swap(g_records);
  return out;
}

size_t TestSubscriber::buffers_delivered() const {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_buffers;
}

std::vector<ApiEvent> TestSubscriber::api_events() const {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_api_events;
}

std::vector<OtherEvent> TestSubscriber::other_events() const {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_other_events;
}

void CUPTIAPI TestSubscriber::on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                          const void* data) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) {
    g_other_events.push_back(OtherEvent{domain, cbid});
    return;
  }
  const auto* info = static_cast<const CUpti_CallbackData*>(data);
  ApiEvent event;
  event.domain = domain;
  event.cbid = cbid;
  event.site = info->callbackSite;
  event.function = info->functionName != nullptr ? info->functionName : "";
  event.symbol = info->symbolName != nullptr ? info->symbolName : "";
  event.correlation = info->correlationId;
  event.correlation_data = info->correlationData;
  event.correlation_value = info->correlationData != nullptr ? *info->correlationData : 0;
  // A subscriber that keeps data from ENTER to EXIT, as tools do.
  if (info->callbackSite == CUPTI_API_ENTER && info->correlationData != nullptr) *info->correlationData = 1;
  event.ranges = range_stack();
  event.timestamp = fakecuda_now();
  event.thread = std::this_thread::get_id();
  g_api_events.push_back(std::move(event));
}

void CUPTIAPI TestSubscriber::on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  const size_t wanted = g_buffer_size.load();
  *buffer = wanted == 0 ? nullptr : static_cast<uint8_t*>(std::aligned_alloc(8, wanted));
  *size = wanted;
  *max_records = 0;
}

void CUPTIAPI TestSubscriber::on_buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::vector<Record> records;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    const auto* next = reinterpret_cast<const uint8_t*>(record);
    size_t size = valid - static_cast<size_t>(next - buffer);
    CUpti_Activity* peek = record;
    if (cuptiActivityGetNextRecord(buffer, valid, &peek) == CUPTI_SUCCESS) {
      size = static_cast<size_t>(reinterpret_cast<const uint8_t*>(peek) - next);
    }
    Record copy;
    copy.kind = record->kind;
    copy.storage.assign((size + 7) / 8, 0);
    std::memcpy(copy.storage.data(), next, size);
    copy.delivered_on = std::this_thread::get_id();
    records.push_back(std::move(copy));
  }
  std::free(buffer);
  std::lock_guard<std::mutex> lock(g_mutex);
  ++g_buffers;
  for (auto& copy : records) g_records.push_back(std::move(copy));
}

std::vector<Record> of_kind(const std::vector<Record>& records, uint32_t kind) {
  std::vector<Record> out;
  for (const Record& record : records) {
    if (record.kind == kind) out.push_back(record);
  }
  return out;
}

bool in_child(const std::function<bool()>& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body() ? 0 : 1);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace fake_cupti_test
