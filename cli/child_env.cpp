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

void unset_var(std::vector<std::string>& env, std::string_view key) {
  std::erase_if(env, [key](const std::string& e) { return e.size() > key.size() && e[key.size()] == '=' && e.starts_with(key); });
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

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Sets an injection variable to our library unless it names another tool's.
void set_injection(std::vector<std::string>& env, std::string_view key, const std::string& lib,
                   std::vector<OutsideTool>* outside) {
  const std::string* existing = find_var(env, key);
  if (existing != nullptr) {
    const std::string value = existing->substr(key.size() + 1);
    if (!value.empty() && value != lib && base_name(value) != base_name(lib)) {
      if (outside != nullptr) outside->push_back(OutsideTool{std::string(key), value, outside_tool_name(value)});
      return;
    }
  }
  set_var(env, key, lib);
}

}  // namespace

std::string outside_tool_name(const std::string& path) {
  const std::string base = base_name(path);
  auto has = [&path](const char* part) { return path.find(part) != std::string::npos; };
  if (base.rfind("libToolsInjection", 0) == 0 || has("nsight-systems") || has("/nsys")) return "Nsight Systems";
  if (has("nsight-compute") || has("TreeLauncher") || has("/ncu")) return "Nsight Compute";
  return base;
}

std::string outside_tools_line(const std::vector<OutsideTool>& outside) {
  if (outside.empty()) return {};
  bool cuda = false;
  bool nvtx = false;
  std::string names;
  std::string variables;
  for (const OutsideTool& t : outside) {
    cuda = cuda || t.variable == "CUDA_INJECTION64_PATH";
    nvtx = nvtx || t.variable == "NVTX_INJECTION64_PATH";
    if (names.find(t.name) == std::string::npos) names += (names.empty() ? "" : " and ") + t.name;
    variables += (variables.empty() ? "" : ", ") + t.variable + "=" + t.value;
  }
  std::string left = cuda && nvtx ? "CUDA, GPU and NVTX tracing" : cuda ? "CUDA and GPU tracing" : "NVTX ranges";
  std::string kept = cuda && nvtx ? "torch's ops, Python steps and the processes"
                     : cuda       ? "NVTX ranges, torch's ops and the processes"
                                  : "torch's ops, CUDA, GPU and the processes";
  return names + " holds the injection (" + variables + "): torchprof leaves " + left + " to it and records " + kept;
}

std::vector<std::string> build_child_env(const std::vector<std::string>& parent, const ChildEnvSettings& settings,
                                         std::vector<OutsideTool>* outside) {
  std::vector<std::string> env = parent;
  set_var(env, "LD_PRELOAD", preload_value(env, settings.inject_lib));
  set_injection(env, "NVTX_INJECTION64_PATH", settings.inject_lib, outside);
  set_injection(env, "CUDA_INJECTION64_PATH", settings.inject_lib, outside);
  set_var(env, env::kLib, settings.inject_lib);
  set_var(env, env::kSocket, settings.socket_path);
  if (!settings.log_level.empty()) set_var(env, env::kLogLevel, settings.log_level);
  if (!settings.worker_name.empty()) set_var(env, env::kWorkerName, settings.worker_name);
  if (!settings.python_path.empty()) set_var(env, "PYTHONPATH", python_path_value(env, settings.python_path));
  if (settings.python_bootstrap.empty()) {
    unset_var(env, env::kPython);
  } else {
    set_var(env, env::kPython, settings.python_bootstrap);
  }
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
