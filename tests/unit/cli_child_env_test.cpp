#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cli/child_env.h"

namespace torchprof::cli {
namespace {

std::string value_of(const std::vector<std::string>& env, const std::string& key) {
  std::string found = "<unset>";
  int count = 0;
  for (const std::string& e : env) {
    if (e.compare(0, key.size() + 1, key + "=") == 0) {
      found = e.substr(key.size() + 1);
      ++count;
    }
  }
  REQUIRE(count <= 1);
  return found;
}

const ChildEnvSettings kSettings{"/opt/tp/lib/libtorchprof_inject.so", "/tmp/torchprof-x/c.sock",
                                 "", ""};

}  // namespace

TEST_CASE("child env: injection variables all name the same absolute library") {
  const std::vector<std::string> env =
      build_child_env({"PATH=/usr/bin", "HOME=/root"}, kSettings);
  CHECK(value_of(env, "LD_PRELOAD") == kSettings.inject_lib);
  CHECK(value_of(env, "NVTX_INJECTION64_PATH") == kSettings.inject_lib);
  CHECK(value_of(env, "CUDA_INJECTION64_PATH") == kSettings.inject_lib);
  CHECK(value_of(env, "TORCHPROF_LIB") == kSettings.inject_lib);
  CHECK(value_of(env, "TORCHPROF_SOCKET") == kSettings.socket_path);
  CHECK(value_of(env, "PATH") == "/usr/bin");
  CHECK(value_of(env, "HOME") == "/root");
  // Not asked for: inherited as they are (here: absent).
  CHECK(value_of(env, "TORCHPROF_LOG_LEVEL") == "<unset>");
  CHECK(value_of(env, "TORCHPROF_WORKER_NAME") == "<unset>");
}

TEST_CASE("child env: our library goes in front of an existing LD_PRELOAD, once") {
  std::vector<std::string> env =
      build_child_env({"LD_PRELOAD=/usr/lib/libfoo.so /usr/lib/libbar.so"}, kSettings);
  CHECK(value_of(env, "LD_PRELOAD") ==
        kSettings.inject_lib + ":/usr/lib/libfoo.so /usr/lib/libbar.so");
  // A nested run must not stack the same library twice.
  env = build_child_env(env, kSettings);
  CHECK(value_of(env, "LD_PRELOAD") ==
        kSettings.inject_lib + ":/usr/lib/libfoo.so /usr/lib/libbar.so");
  CHECK(value_of(build_child_env({"LD_PRELOAD="}, kSettings), "LD_PRELOAD") ==
        kSettings.inject_lib);
}

TEST_CASE("child env: stale values are replaced, settings passed when given") {
  ChildEnvSettings settings = kSettings;
  settings.log_level = "debug";
  settings.worker_name = "trainer0";
  const std::vector<std::string> env = build_child_env(
      {"TORCHPROF_SOCKET=/old/sock", "NVTX_INJECTION64_PATH=/other.so", "TORCHPROF_LOG_LEVEL=off"},
      settings);
  CHECK(value_of(env, "TORCHPROF_SOCKET") == settings.socket_path);
  CHECK(value_of(env, "NVTX_INJECTION64_PATH") == settings.inject_lib);
  CHECK(value_of(env, "TORCHPROF_LOG_LEVEL") == "debug");
  CHECK(value_of(env, "TORCHPROF_WORKER_NAME") == "trainer0");
}

TEST_CASE("child env: PyTorch op capture travels as TORCHPROF_PYTORCH_OPS when asked for") {
  CHECK(value_of(build_child_env({"TORCHPROF_PYTORCH_OPS=ops"}, kSettings), "TORCHPROF_PYTORCH_OPS") == "ops");
  ChildEnvSettings settings = kSettings;
  settings.pytorch_ops = "ops,shapes,stack";
  CHECK(value_of(build_child_env({"TORCHPROF_PYTORCH_OPS=ops"}, settings), "TORCHPROF_PYTORCH_OPS") ==
        "ops,shapes,stack");
}

}  // namespace torchprof::cli
