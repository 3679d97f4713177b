#include "inject/config.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/wire/env.h"
#include "inject/buffer_budget.h"

extern char** environ;

namespace torchprof::inject {
namespace {

Config g_config;

uint32_t read_u32(const char* name, uint32_t fallback, uint32_t lo, uint32_t hi) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  unsigned long long x = strtoull(v, &end, 10);
  if (end == v || *end != '\0' || x < lo || x > hi) return fallback;
  return static_cast<uint32_t>(x);
}

}  // namespace

uint64_t parse_buffer_size(const char* v) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long x = strtoull(v, &end, 10);
  if (end == v || errno != 0 || *v == '-') return 0;
  int shift = 20;
  if (*end == 'K' || *end == 'k') shift = 10;
  if (*end == 'G' || *end == 'g') shift = 30;
  if (*end != '\0' && strchr("KkMmGg", *end) != nullptr) {
    ++end;
    if (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0) end += strlen(end);
  }
  if (*end != '\0' || x > (uint64_t{1} << 40) >> shift) return 0;
  const uint64_t bytes = static_cast<uint64_t>(x) << shift;
  return bytes >= (uint64_t{64} << 10) && bytes <= (uint64_t{1} << 40) ? bytes : 0;
}

namespace {

void read_buffer_limit(Config& c) {
  const char* v = getenv(env::kBufferLimit);
  if (v == nullptr || *v == '\0') return;
  const uint64_t bytes = parse_buffer_size(v);
  if (bytes != 0) {
    c.buffer_limit = bytes;
  } else {
    notice(LogLevel::kWarn, "%s=%s is not a size from 64K to 1024G; the buffers' cap stays %llu MiB", env::kBufferLimit,
           v, static_cast<unsigned long long>(c.buffer_limit >> 20));
  }
}

LogLevel parse_level(const char* v) {
  if (v == nullptr) return LogLevel::kWarn;
  static constexpr const char* kNames[] = {"trace", "debug", "info", "warn", "error", "off"};
  for (int i = 0; i < 6; ++i) {
    if (strcasecmp(v, kNames[i]) == 0) return static_cast<LogLevel>(i);
  }
  if (strcasecmp(v, "warning") == 0) return LogLevel::kWarn;
  return LogLevel::kWarn;
}

// True when the comma-separated TORCHPROF_TRACE value `v` names `what` (or
// "all", or is unset/empty: everything is traced by default).
bool trace_lists(const char* v, const char* what) {
  if (v == nullptr || *v == '\0') return true;
  const size_t what_len = strlen(what);
  const char* p = v;
  while (*p != '\0') {
    const char* comma = strchr(p, ',');
    size_t n = comma ? static_cast<size_t>(comma - p) : strlen(p);
    if ((n == what_len && strncmp(p, what, n) == 0) || (n == 3 && strncmp(p, "all", 3) == 0)) return true;
    if (comma == nullptr) break;
    p = comma + 1;
  }
  return false;
}

// Keeps the variables that make an exec'd child profiled again: the loader and
// injection paths and every TORCHPROF_* setting, as they were at start.
void remember_env(Config& c) {
  static constexpr const char* kKeys[] = {"LD_PRELOAD", "NVTX_INJECTION64_PATH", "CUDA_INJECTION64_PATH"};
  auto keep = [&c](const char* entry, size_t key_len) {
    if (c.kept_count >= Config::kMaxKept) return;
    char* key = strndup(entry, key_len);
    char* copy = strdup(entry);
    if (key == nullptr || copy == nullptr) return;
    c.kept[c.kept_count++] = KeptEnv{key, copy};
  };
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = strchr(*e, '=');
    if (eq == nullptr) continue;
    size_t key_len = static_cast<size_t>(eq - *e);
    bool wanted = strncmp(*e, "TORCHPROF_", 10) == 0;
    for (const char* k : kKeys) wanted = wanted || (strlen(k) == key_len && strncmp(*e, k, key_len) == 0);
    if (wanted) keep(*e, key_len);
  }
}

// Whether the comma list `list` has `word` as one of its items.
bool comma_list_has(const char* list, const char* word) {
  const size_t n = strlen(word);
  for (const char* p = list; *p != '\0';) {
    const char* comma = strchr(p, ',');
    const size_t len = comma != nullptr ? static_cast<size_t>(comma - p) : strlen(p);
    if (len == n && strncmp(p, word, n) == 0) return true;
    if (comma == nullptr) break;
    p = comma + 1;
  }
  return false;
}

// Whether an injection variable's value names this library: unset or empty, the same
// path, or the same file.
bool names_us(const char* value, const char* lib) {
  if (value == nullptr || *value == '\0') return true;
  if (lib == nullptr) return strstr(value, "libtorchprof_inject") != nullptr;
  if (strcmp(value, lib) == 0) return true;
  char a[4096];
  char b[4096];
  return realpath(value, a) != nullptr && realpath(lib, b) != nullptr && strcmp(a, b) == 0;
}

}  // namespace

const Config& config() { return g_config; }

void load_config() {
  Config& c = g_config;
  const char* sock = getenv(env::kSocket);
  c.log_level = parse_level(getenv(env::kLogLevel));
  if (sock == nullptr || *sock == '\0') return;  // inert
  c.socket_path = strdup(sock);
  const char* lib = getenv(env::kLib);
  c.lib_path = (lib != nullptr && *lib != '\0') ? strdup(lib) : nullptr;
  const char* python = getenv(env::kPython);
  c.python_dir = (python != nullptr && *python == '/') ? strdup(python) : nullptr;
  c.python_dir_len = c.python_dir != nullptr ? strlen(c.python_dir) : 0;
  c.buffer_kb = read_u32(env::kBufferKb, 1024, 16, 1u << 20);
  // A thread asked to have more than half the default cap: room for it twice over.
  c.buffer_limit = std::max(kDefaultBufferLimit, uint64_t{c.buffer_kb} << 11);
  read_buffer_limit(c);
  buffer_budget().set_cap(c.buffer_limit);
  const char* huge = getenv(env::kHugePages);
  c.huge_pages = huge == nullptr || strcmp(huge, "0") != 0;
  c.flush_ms = read_u32(env::kFlushMs, 20, 1, 60000);
  c.gpu_flush_ms = read_u32(env::kGpuFlushMs, 500, 0, 600000);
  c.exit_timeout_ms = read_u32(env::kExitTimeoutMs, 2000, 0, 600000);
  const char* encoding = getenv(env::kFrameEncoding);
  c.delta_frames = encoding == nullptr || strcmp(encoding, "raw") != 0;
  const char* cuda_api = getenv(env::kCudaApi);
  c.cuda_api_activity = cuda_api != nullptr && strcmp(cuda_api, "activity") == 0;
  const char* clock = getenv(env::kClock);
  c.tsc_clock = clock == nullptr || strcmp(clock, "monotonic") != 0;
  const char* trace = getenv(env::kTrace);
  c.trace_nvtx = trace_lists(trace, "nvtx");
  c.trace_cuda = trace_lists(trace, "cuda");
  c.trace_gpu = trace_lists(trace, "gpu");
  c.trace_memory = trace_lists(trace, "memory");
  const char* ops = getenv(env::kPytorchOps);
  c.tensor_memory = ops != nullptr && comma_list_has(ops, "memory");
  const char* paused = getenv(env::kPaused);
  c.paused = paused != nullptr && strcmp(paused, "1") == 0;
  c.cuda_injection_ours = names_us(getenv("CUDA_INJECTION64_PATH"), c.lib_path);
  c.nvtx_injection_ours = names_us(getenv("NVTX_INJECTION64_PATH"), c.lib_path);
  remember_env(c);
  c.active = c.socket_path != nullptr;
}

void notice(LogLevel level, const char* fmt, ...) {
  if (static_cast<int>(level) < static_cast<int>(g_config.log_level)) return;
  char buf[512];
  static constexpr char kPrefix[] = "torchprof: ";
  memcpy(buf, kPrefix, sizeof(kPrefix) - 1);
  size_t n = sizeof(kPrefix) - 1;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
  va_end(ap);
  if (w > 0) n += static_cast<size_t>(w) < sizeof(buf) - n - 1 ? static_cast<size_t>(w) : sizeof(buf) - n - 2;
  buf[n++] = '\n';
  ssize_t rc = write(STDERR_FILENO, buf, n);
  (void)rc;
}

}  // namespace torchprof::inject
