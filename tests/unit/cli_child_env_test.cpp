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

TEST_CASE("child env: stale values (an older torchprof's library too) are replaced, settings passed when given") {
  ChildEnvSettings settings = kSettings;
  settings.log_level = "debug";
  settings.worker_name = "trainer0";
  const std::vector<std::string> env = build_child_env(
      {"TORCHPROF_SOCKET=/old/sock", "NVTX_INJECTION64_PATH=/old/prefix/lib/libtorchprof_inject.so",
       "TORCHPROF_LOG_LEVEL=off"},
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


TEST_CASE("child env: another tool's injection is kept, named, and said in one line") {
  const std::string nsys = "/opt/nvidia/nsight-systems/2025.3.1/target-linux-x64/libToolsInjection64.so";
  std::vector<OutsideTool> outside;
  std::vector<std::string> env = build_child_env(
      {"CUDA_INJECTION64_PATH=" + nsys, "NVTX_INJECTION64_PATH=" + nsys, "LD_PRELOAD=/opt/nsys/libpreload.so"},
      kSettings, &outside);
  CHECK(value_of(env, "CUDA_INJECTION64_PATH") == nsys);
  CHECK(value_of(env, "NVTX_INJECTION64_PATH") == nsys);
  CHECK(value_of(env, "LD_PRELOAD") == kSettings.inject_lib + ":/opt/nsys/libpreload.so");
  REQUIRE(outside.size() == 2);
  CHECK(outside[0].name == "Nsight Systems");
  const std::string line = outside_tools_line(outside);
  CHECK(line.find("Nsight Systems holds the injection") == 0);
  CHECK(line.find("Nsight Systems and") == std::string::npos);  // named once
  CHECK(line.find("CUDA, GPU and NVTX tracing") != std::string::npos);

  // Only CUDA's taken (a CUPTI tool of the user's): NVTX stays ours.
  outside.clear();
  env = build_child_env({"CUDA_INJECTION64_PATH=/home/u/libmytool.so"}, kSettings, &outside);
  CHECK(value_of(env, "CUDA_INJECTION64_PATH") == "/home/u/libmytool.so");
  CHECK(value_of(env, "NVTX_INJECTION64_PATH") == kSettings.inject_lib);
  REQUIRE(outside.size() == 1);
  CHECK(outside[0].name == "libmytool.so");
  CHECK(outside_tools_line(outside).find("leaves CUDA and GPU tracing to it and records NVTX ranges") !=
        std::string::npos);

  // Ours already (a nested run, or a scrubbed environment restored) or empty: no other tool.
  outside.clear();
  build_child_env({"CUDA_INJECTION64_PATH=" + kSettings.inject_lib, "NVTX_INJECTION64_PATH="}, kSettings, &outside);
  CHECK(outside.empty());
  CHECK(outside_tools_line(outside).empty());
  CHECK(outside_tool_name("/usr/local/NVIDIA-Nsight-Compute/target/linux-desktop-glibc_2_11_3-x64/libTreeLauncherTargetInjection.so") ==
        "Nsight Compute");
}

TEST_CASE("child env: TORCHPROF_PYTHON names the bootstrap for the tree, or is removed") {
  ChildEnvSettings settings = kSettings;
  settings.python_bootstrap = "/opt/tp/share/torchprof/python";
  std::vector<std::string> env = build_child_env({"PATH=/usr/bin", "PYTHONPATH=/home/u/lib"}, settings);
  CHECK(value_of(env, "TORCHPROF_PYTHON") == settings.python_bootstrap);
  // Not a Python target itself: its PYTHONPATH is left as the user had it.
  CHECK(value_of(env, "PYTHONPATH") == "/home/u/lib");
  // --no-python: an outer run's value does not reach the tree.
  settings.python_bootstrap.clear();
  env = build_child_env({"TORCHPROF_PYTHON=/old/python", "TORCHPROF_PYTHONX=1"}, settings);
  CHECK(value_of(env, "TORCHPROF_PYTHON") == "<unset>");
  CHECK(std::find(env.begin(), env.end(), "TORCHPROF_PYTHON=/old/python") == env.end());
  CHECK(std::find(env.begin(), env.end(), "TORCHPROF_PYTHONX=1") != env.end());
}

}  // namespace torchprof::cli
