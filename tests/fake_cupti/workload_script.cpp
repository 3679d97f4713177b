#include "workload_script.h"

#include "kineto_client.h"

#include <cupti_activity.h>

#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "second_client.h"

namespace fake_workload {

namespace {

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t found = text.find(separator, start);
    parts.emplace_back(trim(text.substr(start, found == std::string_view::npos ? found : found - start)));
    if (found == std::string_view::npos) return parts;
    start = found + 1;
  }
}

[[noreturn]] void fail(std::string_view what, std::string_view text) {
  throw std::invalid_argument(std::string(what) + ": '" + std::string(text) + "'");
}

uint64_t parse_integer(std::string_view text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos) fail("not a number", text);
  return std::stoull(std::string(text));
}

uint64_t parse_duration(std::string_view text) {
  const auto digits = text.find_first_not_of("0123456789");
  if (digits == 0 || digits == std::string_view::npos) fail("duration needs a unit (ns, us, ms, s)", text);
  const uint64_t value = parse_integer(text.substr(0, digits));
  const std::string_view unit = text.substr(digits);
  if (unit == "ns") return value;
  if (unit == "us") return value * 1000;
  if (unit == "ms") return value * 1000000;
  if (unit == "s") return value * 1000000000;
  fail("unknown duration unit", text);
}

int parse_copy_kind(std::string_view text) {
  if (text == "htod") return CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  if (text == "dtoh") return CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  if (text == "dtod") return CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
  fail("memcpy kind must be htod, dtoh or dtod", text);
}

// Trailing ":stream=S" / ":sync" options from field `first` on.
void parse_options(const std::vector<std::string>& fields, size_t first, Item* item, bool allow_sync) {
  for (size_t i = first; i < fields.size(); ++i) {
    const std::string& field = fields[i];
    if (field.rfind("stream=", 0) == 0) {
      item->stream = static_cast<uint32_t>(parse_integer(std::string_view(field).substr(7)));
    } else if (allow_sync && field == "sync") {
      item->blocking = true;
    } else {
      fail("unknown option", field);
    }
  }
}

void need_fields(const std::vector<std::string>& fields, size_t least, std::string_view head) {
  if (fields.size() < least) fail("missing fields", head);
}

std::vector<GraphNode> parse_graph_nodes(std::string_view text) {
  std::vector<GraphNode> nodes;
  for (const std::string& node : split(text, ',')) {
    const auto at = node.find('@');
    if (at == std::string::npos || at == 0) fail("graph node must be NAME@DUR", node);
    nodes.push_back(GraphNode{node.substr(0, at), parse_duration(std::string_view(node).substr(at + 1))});
  }
  return nodes;
}

// Items about CUPTI itself and the process around it (see workload_script.h).
bool parse_cupti_item(const std::vector<std::string>& fields, std::string_view head, Item* item) {
  const std::string& verb = fields[0];
  if (verb == "p2p") {
    need_fields(fields, 3, head);
    item->op = Op::kPeerCopy;
    item->bytes = parse_integer(fields[1]);
    item->duration_ns = parse_duration(fields[2]);
    parse_options(fields, 3, item, false);
  } else if (verb == "api") {
    need_fields(fields, 2, head);
    item->op = Op::kApi;
    item->name = fields[1];
  } else if (verb == "skip_ids") {
    need_fields(fields, 2, head);
    item->op = Op::kSkipIds;
    item->bytes = parse_integer(fields[1]);
    if (item->bytes > UINT32_MAX) fail("skip_ids takes at most 2^32-1", head);
  } else if (verb == "cupti_flush" || verb == "client_start") {
    item->op = verb == "cupti_flush" ? Op::kCuptiFlush : Op::kClientStart;
    const char* option = verb == "cupti_flush" ? "forced" : "direct";
    if (fields.size() > 2 || (fields.size() == 2 && fields[1] != option)) fail("unknown option", head);
    item->blocking = fields.size() == 2;
  } else if (verb == "kineto_start") {
    need_fields(fields, 2, head);
    item->op = Op::kKinetoStart;
    item->name = fields[1];
    for (size_t i = 2; i < fields.size(); ++i) {
      if (fields[i] == "teardown") {
        item->blocking = true;
      } else if (fields[i] == "sync") {
        item->sync_events = true;
      } else {
        fail("unknown option", head);
      }
    }
  } else if (verb == "kineto_stop") {
    item->op = Op::kKinetoStop;
  } else if (verb == "sleep") {
    need_fields(fields, 2, head);
    item->op = Op::kSleep;
    item->duration_ns = parse_duration(fields[1]);
  } else if (verb == "unreadable" || verb == "client_stop" || verb == "ready") {
    item->op = verb == "unreadable" ? Op::kUnreadable : verb == "client_stop" ? Op::kClientStop : Op::kReady;
  } else {
    return false;
  }
  return true;
}

Item parse_simple(std::string_view head) {
  const std::vector<std::string> fields = split(head, ':');
  const std::string& verb = fields[0];
  Item item;
  if (verb == "kernel" || verb == "dkernel") {
    need_fields(fields, 3, head);
    item.op = verb == "kernel" ? Op::kKernel : Op::kDriverKernel;
    item.name = fields[1];
    item.duration_ns = parse_duration(fields[2]);
    parse_options(fields, 3, &item, false);
  } else if (verb == "memcpy") {
    need_fields(fields, 4, head);
    item.op = Op::kMemcpy;
    item.memcpy_kind = parse_copy_kind(fields[1]);
    item.bytes = parse_integer(fields[2]);
    item.duration_ns = parse_duration(fields[3]);
    parse_options(fields, 4, &item, true);
  } else if (verb == "memset") {
    need_fields(fields, 3, head);
    item.op = Op::kMemset;
    item.bytes = parse_integer(fields[1]);
    item.duration_ns = parse_duration(fields[2]);
    parse_options(fields, 3, &item, false);
  } else if (verb == "malloc" || verb == "free") {
    need_fields(fields, verb == "malloc" ? 3 : 2, head);
    item.op = verb == "malloc" ? Op::kMalloc : Op::kFree;
    item.name = fields[1];
    if (item.op == Op::kMalloc) item.bytes = parse_integer(fields[2]);
  } else if (verb == "sync") {
    item.op = Op::kSync;
    if (fields.size() > 1) item.sync_stream = static_cast<int64_t>(parse_integer(fields[1]));
  } else if (verb == "graph") {
    need_fields(fields, 3, head);
    item.op = Op::kGraph;
    item.graph_id = static_cast<uint32_t>(parse_integer(fields[1]));
    item.nodes = parse_graph_nodes(fields[2]);
    parse_options(fields, 3, &item, false);
  } else if (verb == "dropped") {
    need_fields(fields, 2, head);
    item.op = Op::kDropped;
    item.bytes = parse_integer(fields[1]);
  } else if (verb == "busy") {
    need_fields(fields, 2, head);
    item.op = Op::kBusy;
    item.duration_ns = parse_duration(fields[1]);
  } else if (verb == "profiler_stop") {
    item.op = Op::kProfilerStop;
  } else if (verb == "profiler_start") {
    item.op = Op::kProfilerStart;
  } else if (verb == "device_reset") {
    item.op = Op::kDeviceReset;
  } else if (!parse_cupti_item(fields, head, &item)) {
    fail("unknown item", head);
  }
  return item;
}

Item parse_block_head(std::string_view head) {
  Item item;
  if (head == "thread") {
    item.op = Op::kThread;
  } else if (head.rfind("range:", 0) == 0 && head.size() > 6) {
    item.op = Op::kRange;
    item.name = std::string(head.substr(6));
  } else if (head.rfind("repeat:", 0) == 0) {
    item.op = Op::kRepeat;
    item.bytes = parse_integer(head.substr(7));
  } else {
    fail("only range:NAME, thread and repeat:N take a {block}", head);
  }
  return item;
}

std::vector<Item> parse_list(std::string_view text, size_t* pos, bool nested) {
  std::vector<Item> items;
  while (true) {
    while (*pos < text.size() && (text[*pos] == ';' || std::isspace(static_cast<unsigned char>(text[*pos])))) ++*pos;
    if (*pos >= text.size()) {
      if (nested) fail("missing '}'", text);
      return items;
    }
    if (text[*pos] == '}') {
      if (!nested) fail("unbalanced '}'", text);
      ++*pos;
      return items;
    }
    const size_t end = text.find_first_of(";{}", *pos);
    const std::string_view head = trim(text.substr(*pos, end == std::string_view::npos ? end : end - *pos));
    *pos = end == std::string_view::npos ? text.size() : end;
    if (*pos < text.size() && text[*pos] == '{') {
      ++*pos;
      Item block = parse_block_head(head);
      block.body = parse_list(text, pos, true);
      items.push_back(std::move(block));
    } else {
      items.push_back(parse_simple(head));
    }
  }
}

// Allocation tags are shared by every thread of one run; so is the second client.
struct RunState {
  std::mutex mutex;
  std::map<std::string, uint64_t> addresses;
  const CuptiApi* cupti = nullptr;
  SecondClient client;
  KinetoClient kineto;
  bool client_ok = true;
};

const char* copy_row_name(int kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "Memcpy HtoD (Pageable -> Device)";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "Memcpy DtoH (Device -> Pageable)";
    default: return "Memcpy DtoD (Device -> Device)";
  }
}

void need(const void* function, const char* item) {
  if (function == nullptr) throw std::invalid_argument(std::string(item) + ": not available in this program");
}

void run_cupti_item(const Item& item, const FakeCudaApi& api, RunState* run) {
  const CuptiCalls& calls = item.blocking && item.op == Op::kClientStart ? run->cupti->direct : run->cupti->linked;
  switch (item.op) {
    case Op::kPeerCopy:
      need(reinterpret_cast<const void*>(api.memcpy_peer), "p2p");
      api.memcpy_peer(item.bytes, 0, 1, item.stream, item.duration_ns);
      break;
    case Op::kApi:
      need(reinterpret_cast<const void*>(api.api_call_named), "api");
      if (api.api_call_named(item.name.c_str()) == 0) throw std::invalid_argument("api: unknown function " + item.name);
      break;
    case Op::kSkipIds:
      need(reinterpret_cast<const void*>(api.skip_correlation_ids), "skip_ids");
      api.skip_correlation_ids(static_cast<uint32_t>(item.bytes));
      break;
    case Op::kUnreadable:
      need(reinterpret_cast<const void*>(api.unreadable_record), "unreadable");
      api.unreadable_record();
      break;
    case Op::kCuptiFlush:
      need(reinterpret_cast<const void*>(calls.flush_all), "cupti_flush");
      calls.flush_all(item.blocking ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
      break;
    case Op::kClientStart:
      need(reinterpret_cast<const void*>(calls.get_next_record), "client_start");
      run->client.start(calls);
      break;
    case Op::kClientStop:
      if (!run->client.stop()) run->client_ok = false;
      break;
    case Op::kKinetoStart: {
      KinetoOptions options;
      options.commit = item.name;
      options.teardown = item.blocking;
      options.sync_events = item.sync_events;
      if (!run->kineto.start(options)) run->client_ok = false;
      break;
    }
    case Op::kKinetoStop:
      if (!run->kineto.stop()) run->client_ok = false;
      break;
    case Op::kSleep: std::this_thread::sleep_for(std::chrono::nanoseconds(item.duration_ns)); break;
    case Op::kReady:
      std::printf("ready pid=%d\n", static_cast<int>(getpid()));
      std::fflush(stdout);
      break;
    default: break;
  }
}

void spin_for(uint64_t duration_ns) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(duration_ns);
  while (std::chrono::steady_clock::now() < until) {
  }
}

void run_items(const std::vector<Item>& items, const FakeCudaApi& api, const RangeHooks& hooks, RunState* run);

void run_graph(const Item& item, const FakeCudaApi& api) {
  std::vector<const char*> names;
  std::vector<uint64_t> durations;
  for (const GraphNode& node : item.nodes) {
    names.push_back(node.name.c_str());
    durations.push_back(node.duration_ns);
  }
  api.graph_launch(item.graph_id, static_cast<uint32_t>(names.size()), names.data(), durations.data(), item.stream);
}

void run_item(const Item& item, const FakeCudaApi& api, const RangeHooks& hooks, RunState* run) {
  switch (item.op) {
    case Op::kRange:
      hooks.push(item.name);
      run_items(item.body, api, hooks, run);
      hooks.pop();
      break;
    case Op::kRepeat:
      for (uint64_t i = 0; i < item.bytes; ++i) run_items(item.body, api, hooks, run);
      break;
    case Op::kThread: {
      std::thread worker([&] { run_items(item.body, api, hooks, run); });
      worker.join();
      break;
    }
    case Op::kKernel:
      run->kineto.op_begin();  // torch's op around its launch: Kineto's external correlation id
      api.launch_kernel(item.name.c_str(), item.duration_ns, item.stream, nullptr);
      run->kineto.op_end();
      run->client.launched(item.name, item.duration_ns);
      run->kineto.launched(item.name, item.duration_ns);
      break;
    case Op::kDriverKernel:
      run->kineto.op_begin();
      api.driver_launch_kernel(item.name.c_str(), item.duration_ns, item.stream, nullptr);
      run->kineto.op_end();
      run->client.launched(item.name, item.duration_ns);
      run->kineto.launched(item.name, item.duration_ns);
      break;
    case Op::kMemcpy:
      run->kineto.op_begin();
      api.memcpy(item.bytes, item.memcpy_kind, item.stream, item.duration_ns, item.blocking);
      run->kineto.op_end();
      run->client.launched(copy_row_name(item.memcpy_kind), item.duration_ns);
      run->kineto.launched(copy_row_name(item.memcpy_kind), item.duration_ns);
      break;
    case Op::kMemset: api.memset(item.bytes, item.stream, item.duration_ns); break;
    case Op::kMalloc: {
      const uint64_t address = api.malloc(item.bytes);
      std::lock_guard<std::mutex> lock(run->mutex);
      run->addresses[item.name] = address;
      break;
    }
    case Op::kFree: {
      uint64_t address = 0;
      {
        std::lock_guard<std::mutex> lock(run->mutex);
        address = run->addresses[item.name];
      }
      api.free(address);
      break;
    }
    case Op::kSync: api.synchronize(item.sync_stream); break;
    case Op::kGraph: run_graph(item, api); break;
    case Op::kDropped: api.set_dropped(item.bytes); break;
    case Op::kBusy: spin_for(item.duration_ns); break;
    case Op::kProfilerStop: api.profiler_stop(); break;
    case Op::kProfilerStart: api.profiler_start(); break;
    case Op::kDeviceReset: api.device_reset(); break;
    default: run_cupti_item(item, api, run); break;
  }
}

void run_items(const std::vector<Item>& items, const FakeCudaApi& api, const RangeHooks& hooks, RunState* run) {
  for (const Item& item : items) run_item(item, api, hooks, run);
}

}  // namespace

Script Script::parse(std::string_view text) {
  Script script;
  script.text_ = std::string(text);
  size_t pos = 0;
  script.items_ = parse_list(text, &pos, /*nested=*/false);
  return script;
}

bool Script::run(const FakeCudaApi& api, const RangeHooks& hooks, const CuptiApi& cupti) const {
  RunState run;
  run.cupti = &cupti;
  // A torch.profiler session first: Kineto subscribes before CUDA starts.
  size_t first = 0;
  if (!items_.empty() && items_[0].op == Op::kKinetoStart) {
    run_cupti_item(items_[0], api, &run);
    first = 1;
  }
  api.init();
  run_items(std::vector<Item>(items_.begin() + static_cast<std::ptrdiff_t>(first), items_.end()), api, hooks, &run);
  if (!run.client.stop()) run.client_ok = false;  // a client still on stops at the end
  if (run.kineto.active() && !run.kineto.stop()) run.client_ok = false;
  return run.client_ok;
}

}  // namespace fake_workload
