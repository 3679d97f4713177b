// exec family and posix_spawn. Before an exec replaces the image, everything is
// flushed and Bye(kExec) sent. In both cases an environment that lost our
// variables (a program scrubbing its env) gets them back, so the child is
// profiled too, and a Python interpreter being started gets the bootstrap
// (TORCHPROF_PYTHON) first on its PYTHONPATH, whatever started it: a shell script,
// make, mpirun. Allocation here uses mmap only: these run in vfork children.
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstring>

#include "common/python_program.h"
#include "inject/config.h"
#include "inject/export.h"
#include "inject/process_state.h"

extern char** environ;

namespace torchprof::inject {
namespace {

using ExecveFn = int (*)(const char*, char* const[], char* const[]);
using SpawnFn = int (*)(pid_t*, const char*, const posix_spawn_file_actions_t*, const posix_spawnattr_t*,
                        char* const[], char* const[]);

template <typename Fn>
Fn next_symbol(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

// Resolved at load: a vfork child must not enter the dynamic loader.
struct RealFunctions {
  ExecveFn execve = nullptr;
  ExecveFn execvpe = nullptr;
  SpawnFn posix_spawn = nullptr;
  SpawnFn posix_spawnp = nullptr;
};
RealFunctions g_real;

__attribute__((constructor)) void resolve_real_functions() {
  g_real.execve = next_symbol<ExecveFn>("execve");
  g_real.execvpe = next_symbol<ExecveFn>("execvpe");
  g_real.posix_spawn = next_symbol<SpawnFn>("posix_spawn");
  g_real.posix_spawnp = next_symbol<SpawnFn>("posix_spawnp");
}

// Memory from mmap, released (errno kept) when the exec returned with an error.
class Scratch {
 public:
  void* get(size_t bytes) {
    size_ = bytes;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    mem_ = p == MAP_FAILED ? nullptr : p;
    return mem_;
  }
  ~Scratch() {
    if (mem_ == nullptr) return;
    int saved = errno;
    munmap(mem_, size_);
    errno = saved;
  }

 private:
  void* mem_ = nullptr;
  size_t size_ = 0;
};

const char* find_entry(char* const* envp, const char* key) {
  size_t n = strlen(key);
  for (char* const* e = envp; e != nullptr && *e != nullptr; ++e) {
    if (strncmp(*e, key, n) == 0 && (*e)[n] == '=') return *e;
  }
  return nullptr;
}

bool preload_has_lib(const char* entry, const char* lib) {
  return lib == nullptr || strstr(entry, lib) != nullptr;
}

// Whether the file at `path` starts with a #! line that runs Python.
bool script_runs_python(const char* path) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char head[258];  // "#!" and the 256 bytes the kernel reads of the line
  ssize_t n;
  do {
    n = read(fd, head, sizeof(head));
  } while (n < 0 && errno == EINTR);
  close(fd);
  return n > 2 && head[0] == '#' && head[1] == '!' &&
         python_program::shebang_runs_python(head + 2, static_cast<size_t>(n - 2));
}

// Whether exec'ing `file` runs a Python interpreter; with `search` a name without a
// slash is looked for on PATH as execvp does (the caller's PATH, glibc's default
// without one). errno is kept: the exec's own error is what the program sees.
bool execs_python(const char* file, bool search) {
  if (!config().active || config().python_dir == nullptr || file == nullptr || *file == '\0') return false;
  if (python_program::is_python_name(file)) return true;
  const int saved = errno;
  bool python = false;
  if (!search || strchr(file, '/') != nullptr) {
    python = script_runs_python(file);
  } else {
    const char* path = getenv("PATH");
    if (path == nullptr) path = "/bin:/usr/bin";
    const size_t file_len = strlen(file);
    char candidate[4096];
    for (const char* p = path;;) {
      const char* colon = strchr(p, ':');
      size_t n = colon != nullptr ? static_cast<size_t>(colon - p) : strlen(p);
      if (n + file_len + 3 <= sizeof(candidate)) {
        if (n == 0) {
          candidate[0] = '.';  // an empty entry is the current directory
          n = 1;
        } else {
          memcpy(candidate, p, n);
        }
        candidate[n] = '/';
        memcpy(candidate + n + 1, file, file_len + 1);
        if (access(candidate, X_OK) == 0) {
          python = script_runs_python(candidate);
          break;
        }
      }
      if (colon == nullptr) break;
      p = colon + 1;
    }
  }
  errno = saved;
  return python;
}

// Whether a PYTHONPATH entry (or none) already has the bootstrap first.
bool bootstrap_first(const char* entry, const Config& cfg) {
  if (entry == nullptr) return false;
  const char* value = entry + sizeof("PYTHONPATH=") - 1;
  return strncmp(value, cfg.python_dir, cfg.python_dir_len) == 0 &&
         (value[cfg.python_dir_len] == ':' || value[cfg.python_dir_len] == '\0');
}

// `envp` with our kept variables added back, and for a Python image the bootstrap
// first on PYTHONPATH; envp itself when nothing is missing.
char* const* restore_env(char* const* envp, bool python, Scratch& scratch) {
  const Config& cfg = config();
  if (!cfg.active || envp == nullptr) return envp;
  const char* preload = find_entry(envp, "LD_PRELOAD");
  bool fix_preload = preload != nullptr && !preload_has_lib(preload, cfg.lib_path);
  const char* python_path = find_entry(envp, "PYTHONPATH");
  const bool fix_python = python && cfg.python_dir != nullptr && !bootstrap_first(python_path, cfg);
  int missing = fix_python && python_path == nullptr ? 1 : 0;
  for (int i = 0; i < cfg.kept_count; ++i) missing += find_entry(envp, cfg.kept[i].key) == nullptr;
  if (missing == 0 && !fix_preload && !fix_python) return envp;
  size_t count = 0;
  while (envp[count] != nullptr) ++count;
  const size_t preload_text = fix_preload ? strlen(preload) + strlen(cfg.lib_path) + 2 : 0;
  const size_t python_text = fix_python ? (python_path != nullptr ? strlen(python_path) : 11) + cfg.python_dir_len + 2 : 0;
  auto* out = static_cast<char**>(scratch.get((count + missing + 1) * sizeof(char*) + preload_text + python_text));
  if (out == nullptr) return envp;
  char* text = reinterpret_cast<char*>(out + count + missing + 1);
  size_t n = 0;
  for (size_t i = 0; i < count; ++i) {
    if (fix_preload && envp[i] == preload) continue;
    if (fix_python && envp[i] == python_path) continue;
    out[n++] = envp[i];
  }
  if (fix_preload) {  // "LD_PRELOAD=<ours>:<theirs>"
    char* s = text;
    size_t lib_len = strlen(cfg.lib_path);
    memcpy(s, "LD_PRELOAD=", 11);
    memcpy(s + 11, cfg.lib_path, lib_len);
    s[11 + lib_len] = ':';
    strcpy(s + 12 + lib_len, preload + 11);
    out[n++] = s;
    text += preload_text;
  }
  if (fix_python) {  // "PYTHONPATH=<bootstrap>[:<theirs>]"; an empty value stays empty
    char* s = text;
    memcpy(s, "PYTHONPATH=", 11);
    memcpy(s + 11, cfg.python_dir, cfg.python_dir_len);
    size_t end = 11 + cfg.python_dir_len;
    const char* theirs = python_path != nullptr ? python_path + 11 : "";
    if (*theirs != '\0') s[end++] = ':';
    strcpy(s + end, theirs);
    out[n++] = s;
  }
  for (int i = 0; i < cfg.kept_count; ++i) {
    if (find_entry(envp, cfg.kept[i].key) == nullptr) out[n++] = const_cast<char*>(cfg.kept[i].entry);
  }
  out[n] = nullptr;
  return out;
}

void before_exec() {
  if (config().active) request_final_flush(wire::ExitKind::kExec, 0);
}

int do_execve(const char* path, char* const argv[], char* const envp[]) {
  ExecveFn real = g_real.execve;
  before_exec();
  Scratch scratch;
  char* const* env = restore_env(envp, execs_python(path, false), scratch);
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  return real(path, argv, env);
}

int do_execvpe(const char* file, char* const argv[], char* const envp[]) {
  ExecveFn real = g_real.execvpe;
  before_exec();
  Scratch scratch;
  char* const* env = restore_env(envp, execs_python(file, true), scratch);
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  return real(file, argv, env);
}

// The argument list of execl/execlp/execle as an argv array (in `scratch`);
// `envp_out` gets execle's trailing environment.
char** gather_args(const char* arg0, va_list ap, Scratch& scratch, char*** envp_out) {
  va_list count_ap;
  va_copy(count_ap, ap);
  size_t n = 1;
  if (arg0 != nullptr) {
    while (va_arg(count_ap, char*) != nullptr) ++n;
  }
  va_end(count_ap);
  auto* argv = static_cast<char**>(scratch.get((n + 1) * sizeof(char*)));
  if (argv == nullptr) return nullptr;
  argv[0] = const_cast<char*>(arg0);
  for (size_t i = 1; i < n; ++i) argv[i] = va_arg(ap, char*);
  if (arg0 != nullptr) (void)va_arg(ap, char*);  // the terminating NULL
  argv[n] = nullptr;
  if (envp_out != nullptr) *envp_out = va_arg(ap, char**);
  return argv;
}

int spawn(SpawnFn real, bool search, pid_t* pid, const char* path, const posix_spawn_file_actions_t* actions,
          const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  if (real == nullptr) return ENOSYS;
  Scratch scratch;
  return real(pid, path, actions, attr, argv, restore_env(envp, execs_python(path, search), scratch));
}

}  // namespace
}  // namespace torchprof::inject

namespace tpi = torchprof::inject;

extern "C" {

TORCHPROF_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) noexcept {
  return tpi::do_execve(path, argv, envp);
}

TORCHPROF_EXPORT int execv(const char* path, char* const argv[]) noexcept {
  return tpi::do_execve(path, argv, environ);
}

TORCHPROF_EXPORT int execvp(const char* file, char* const argv[]) noexcept {
  return tpi::do_execvpe(file, argv, environ);
}

TORCHPROF_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) noexcept {
  return tpi::do_execvpe(file, argv, envp);
}

TORCHPROF_EXPORT int execl(const char* path, const char* arg, ...) noexcept {
  tpi::Scratch scratch;
  va_list ap;
  va_start(ap, arg);
  char** argv = tpi::gather_args(arg, ap, scratch, nullptr);
  va_end(ap);
  if (argv == nullptr) return errno = ENOMEM, -1;
  return tpi::do_execve(path, argv, environ);
}

TORCHPROF_EXPORT int execlp(const char* file, const char* arg, ...) noexcept {
  tpi::Scratch scratch;
  va_list ap;
  va_start(ap, arg);
  char** argv = tpi::gather_args(arg, ap, scratch, nullptr);
  va_end(ap);
  if (argv == nullptr) return errno = ENOMEM, -1;
  return tpi::do_execvpe(file, argv, environ);
}

TORCHPROF_EXPORT int execle(const char* path, const char* arg, ...) noexcept {
  tpi::Scratch scratch;
  va_list ap;
  va_start(ap, arg);
  char** envp = nullptr;
  char** argv = tpi::gather_args(arg, ap, scratch, &envp);
  va_end(ap);
  if (argv == nullptr) return errno = ENOMEM, -1;
  return tpi::do_execve(path, argv, envp);
}

TORCHPROF_EXPORT int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* actions,
                                 const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) noexcept {
  return tpi::spawn(tpi::g_real.posix_spawn, false, pid, path, actions, attr, argv, envp);
}

TORCHPROF_EXPORT int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* actions,
                                  const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) noexcept {
  return tpi::spawn(tpi::g_real.posix_spawnp, true, pid, file, actions, attr, argv, envp);
}

}  // extern "C"
