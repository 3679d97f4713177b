// Settings of the injected library, read once from the TORCHPROF_* environment
// (common/wire/env.h) when the library is loaded, plus the one-line stderr notice.
#pragma once

#include <cstddef>
#include <cstdint>

namespace torchprof::inject {

enum class LogLevel : int { kTrace = 0, kDebug, kInfo, kWarn, kError, kOff };

// A variable that must survive into exec'd children, as "KEY=VALUE".
struct KeptEnv {
  const char* key = nullptr;    // "LD_PRELOAD"
  const char* entry = nullptr;  // "LD_PRELOAD=/path/lib.so"
};

// 256 MiB: 8M records (4M NVTX ranges), the whole of a 2M-pair flood twice over, or some
// 2 s of a program making 2M ranges/s while the flusher gets no CPU at all; it is held
// only while the flusher is behind and given back once it has caught up. Without
// TORCHPROF_BUFFER_LIMIT, twice TORCHPROF_BUFFER_KB when that is more.
constexpr uint64_t kDefaultBufferLimit = uint64_t{256} << 20;

struct Config {
  bool active = false;              // TORCHPROF_SOCKET set
  const char* socket_path = nullptr;
  const char* lib_path = nullptr;   // TORCHPROF_LIB
  const char* python_dir = nullptr; // TORCHPROF_PYTHON: the bootstrap, for exec'd Python
  size_t python_dir_len = 0;
  LogLevel log_level = LogLevel::kWarn;
  uint32_t buffer_kb = 1024;
  uint64_t buffer_limit = kDefaultBufferLimit;  // TORCHPROF_BUFFER_LIMIT, bytes
  bool huge_pages = true;           // TORCHPROF_HUGE_PAGES is not "0"
  uint32_t flush_ms = 20;
  uint32_t gpu_flush_ms = 500;      // TORCHPROF_GPU_FLUSH_MS, 0 = no periodic CUPTI flush
  uint32_t exit_timeout_ms = 2000;
  bool delta_frames = true;         // TORCHPROF_FRAME_ENCODING is not "raw"
  bool tsc_clock = true;            // TORCHPROF_CLOCK is not "monotonic"
  bool trace_nvtx = true;           // TORCHPROF_TRACE lists nvtx (or is unset)
  bool trace_cuda = true;           // … cuda: runtime/driver API calls (CUPTI callbacks)
  bool cuda_api_activity = false;   // TORCHPROF_CUDA_API=activity: those calls from CUPTI's
                                    // RUNTIME/DRIVER activity records instead
  bool trace_gpu = true;            // … gpu: kernels, copies, sets, syncs (CUPTI activity)
  bool trace_memory = true;         // … memory: device allocations and frees (CUPTI MEMORY2)
  bool tensor_memory = false;       // TORCHPROF_PYTORCH_OPS lists memory: torch's tensor
                                    // allocations (torch_memory.cpp)
  bool paused = false;              // TORCHPROF_PAUSED=1: start with recording off
  // CUDA_INJECTION64_PATH / NVTX_INJECTION64_PATH name this library (or are unset): false
  // when another tool (nsys, ncu) holds them, and torchprof steps back from that side.
  bool cuda_injection_ours = true;
  bool nvtx_injection_ours = true;
  static constexpr int kMaxKept = 24;
  KeptEnv kept[kMaxKept];
  int kept_count = 0;
};

// TORCHPROF_BUFFER_LIMIT's value in bytes: digits, then K, M or G (KiB, MiB, GiB; "iB" or
// "B" may follow), none meaning MiB. 0 when it is not one, or outside [64 KiB, 1 TiB].
uint64_t parse_buffer_size(const char* v);

// Read-only after load_config() ran (from the library constructor).
const Config& config();
void load_config();

// Writes "torchprof: <text>\n" to stderr with one write(2) when `level` passes
// TORCHPROF_LOG_LEVEL. Cold paths only; async-signal-safe when no args are given.
void notice(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace torchprof::inject
