// The TORCHPROF_* environment variables: the launcher sets them (cli/child_env.cpp),
// the injected library reads them once (inject/config.cpp). Documented in
// man/torchprof-run.1 under ENVIRONMENT.
#pragma once

namespace torchprof::env {

// Path of the collector's Unix socket. Unset: the injected library stays inert.
constexpr const char* kSocket = "TORCHPROF_SOCKET";
// Absolute path of libtorchprof_inject.so, to put back into a scrubbed environment.
constexpr const char* kLib = "TORCHPROF_LIB";
// trace,debug,info,warn,error,off: what the injected library prints to stderr (cold path only).
constexpr const char* kLogLevel = "TORCHPROF_LOG_LEVEL";
// Per-thread buffer size in KiB (default 1024): two segments of half of it.
constexpr const char* kBufferKb = "TORCHPROF_BUFFER_KB";
// Most memory a process's buffers may grow to (threads' segments and CUPTI's activity
// buffers together): MiB, or a number with K, M or G (default 256 MiB).
constexpr const char* kBufferLimit = "TORCHPROF_BUFFER_LIMIT";
// "0": buffers of 8 MiB or more are not asked for 2 MiB pages (default: they are).
constexpr const char* kHugePages = "TORCHPROF_HUGE_PAGES";
// Flush interval of the per-process flusher thread in ms (default 20).
constexpr const char* kFlushMs = "TORCHPROF_FLUSH_MS";
// Interval of the periodic default (non-forced) flush of CUPTI's activity buffers in
// ms (default 500; 0 = none): CUPTI hands back only full buffers otherwise, so GPU
// records would wait until the end, and a SIGKILL would lose all of them.
constexpr const char* kGpuFlushMs = "TORCHPROF_GPU_FLUSH_MS";
// Most time spent flushing at process exit, in ms (default 2000).
constexpr const char* kExitTimeoutMs = "TORCHPROF_EXIT_TIMEOUT_MS";
// Worker name for this process's traces instead of <host>_<pid>.
constexpr const char* kWorkerName = "TORCHPROF_WORKER_NAME";
// Path of libcupti to dlopen instead of the toolkit's.
constexpr const char* kCuptiLib = "TORCHPROF_CUPTI_LIB";
// How the flusher encodes frames: "delta" (default: delta transform, then zstd) or
// "raw" (zstd of the slots as they are, protocol 1's only encoding; for comparison).
constexpr const char* kFrameEncoding = "TORCHPROF_FRAME_ENCODING";
// The clock of CPU records: "tsc" (default: the TSC, calibrated against and kept on
// CLOCK_MONOTONIC, where the kernel's clocksource is the TSC) or "monotonic"
// (clock_gettime(CLOCK_MONOTONIC) on every read).
constexpr const char* kClock = "TORCHPROF_CLOCK";
// How CUDA API calls are recorded: "callbacks" (default: a CUPTI callback on the calling
// thread writes each call into its own buffer) or "activity" (CUPTI's RUNTIME and DRIVER
// activity records, as Kineto takes them; the analysis places each call among its
// thread's records by time).
constexpr const char* kCudaApi = "TORCHPROF_CUDA_API";
// Comma-separated subset of nvtx,cuda,gpu,memory,python (default all).
constexpr const char* kTrace = "TORCHPROF_TRACE";
// PyTorch op capture by the Python bootstrap: "ops", optionally with ",shapes",
// ",stack" and ",memory" (tensor allocations, read by the injected library too); unset or
// "" = off. Read by python/torchprof/_pytorch_ops.py.
constexpr const char* kPytorchOps = "TORCHPROF_PYTORCH_OPS";
// The Python bootstrap's directory (share/torchprof/python): a process that execs a
// Python interpreter (a python* binary, or a script whose #! line runs one) puts it first
// on the new image's PYTHONPATH (inject/interpose_exec.cpp), so every Python process of
// the tree gets the bootstrap; unset (--no-python): none does.
constexpr const char* kPython = "TORCHPROF_PYTHON";
// The op observer's table entry to use instead of the one torch's version picks
// (inject/torch_observer.cpp); for tests, e.g. "test-wrong-layout".
constexpr const char* kTorchLayout = "TORCHPROF_TORCH_LAYOUT";
// For tests of clock correction across hosts: nanoseconds (may be negative) added to the
// CLOCK_REALTIME reading of the process's Hello, as if its host's clock were that far off.
constexpr const char* kTestClockShiftNs = "TORCHPROF_TEST_CLOCK_SHIFT_NS";
// "1": the process starts with recording off (torchprof-run --paused, --capture-range
// signal); the collector's Control messages switch it on and off.
constexpr const char* kPaused = "TORCHPROF_PAUSED";

}  // namespace torchprof::env
