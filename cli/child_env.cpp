#include "cli/child_env.h"

#include <unistd.h>

#include <string_view>

#include "common/wire/env.h"

namespace torchprof::cli {
namespace {

std::string_view key_of(std::string_view entry) { return entry.substr(0, entry.find('=')); }

// Sets KEY=value, replacing an earlier entry with the same key.
void set_var(std::vector<std::string>& env, std::string_view key, const std::string& value) {
  const std::string entry = std::string(key) + "=" + value;
  for (std::string& e : env) {
    if (key_of(e) == key) {
      e = entry;
      return;
    }
  }
  env.push_back(entry);
}

const std::string* find_var(const std::vector<std::string>& env, std::string_view key) {
  for (const std::string& e : env) {
    if (key_of(e) == key && e.size() > key.size()) return &e;
  }
  return nullptr;
}

// ld.so splits LD_PRELOAD on spaces and colons; ours goes first so that our
// interposers run before any other preloaded tool's.
std::string preload_value(const std::vector<std::string>& env, const std::string& lib) {
  const std::string* existing = find_var(env, "LD_PRELOAD");
  if (existing == nullptr) return lib;
  const std::string rest = existing->substr(std::string_view("LD_PRELOAD=").size());
  if (rest.empty()) return lib;
  size_t start = 0;
  while (start <= rest.size()) {
    const size_t end = rest.find_first_of(": ", start);
    const size_t stop = end == std::string::npos ? rest.size() : end;
    if (rest.compare(start, stop - start, lib) == 0) return rest;  // already preloaded
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return lib + ":" + rest;
}

// The bootstrap's directory first, so its sitecustomize is the one Python imports;
// it runs the user's own sitecustomize from the rest of the path.
std::string python_path_value(const std::vector<std::string>& env, const std::string& dir) {
  const std::string* existing = find_var(env, "PYTHONPATH");
  if (existing == nullptr) return dir;
  const std::string rest = existing->substr(std::string_view("PYTHONPATH=").size());
  // An empty entry would mean the current directory: not added where there was none.
  if (rest.empty()) return dir;
  if (rest == dir || rest.starts_with(dir + ":")) return rest;
  return dir + ":" + rest;
}

}  // namespace

std::vector<std::string> build_child_env(const std::vector<std::string>& parent,
                                         const ChildEnvSettings& settings) {
  std::vector<std::string> env = parent;
  set_var(env, "LD_PRELOAD", preload_value(env, settings.inject_lib));
  set_var(env, "NVTX_INJECTION64_PATH", settings.inject_lib);
  set_var(env, "CUDA_INJECTION64_PATH", settings.inject_lib);
  set_var(env, env::kLib, settings.inject_lib);
  set_var(env, env::kSocket, settings.socket_path);
  if (!settings.log_level.empty()) set_var(env, env::kLogLevel, settings.log_level);
  if (!settings.worker_name.empty()) set_var(env, env::kWorkerName, settings.worker_name);
  if (!settings.python_path.empty()) set_var(env, "PYTHONPATH", python_path_value(env, settings.python_path));
  if (!settings.trace.empty()) set_var(env, env::kTrace, settings.trace);
  if (!settings.pytorch_ops.empty()) set_var(env, env::kPytorchOps, settings.pytorch_ops);
  if (settings.paused) set_var(env, env::kPaused, "1");
  return env;
}

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

}  // namespace torchprof::cli
