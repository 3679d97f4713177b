#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli/program_path.h"

namespace torchprof::cli {
namespace {

namespace fs = std::filesystem;

struct ScratchBin {
  fs::path root = fs::temp_directory_path() / ("torchprof_cli_path_" + std::to_string(::getpid()));
  ScratchBin() {
    fs::remove_all(root);
    fs::create_directories(root / "a");
    fs::create_directories(root / "b");
    write(root / "a" / "tool", 0644);  // not executable: skipped in a PATH search
    write(root / "b" / "tool", 0755);
    write(root / "b" / "plain", 0644);
  }
  ~ScratchBin() { fs::remove_all(root); }
  static void write(const fs::path& p, mode_t mode) {
    std::ofstream(p) << "#!/bin/sh\n";
    ::chmod(p.c_str(), mode);
  }
};

}  // namespace

TEST_CASE("program path: PATH is searched in order for an executable file") {
  ScratchBin bin;
  const std::string path = (bin.root / "a").string() + ":" + (bin.root / "b").string();
  const ResolvedProgram found = resolve_program("tool", path.c_str());
  CHECK(found.exit_code == 0);
  CHECK(found.path == (bin.root / "b" / "tool").string());

  const ResolvedProgram missing = resolve_program("no-such-tool", path.c_str());
  CHECK(missing.exit_code == 127);
  CHECK(missing.error == "command not found");
  CHECK(resolve_program("plain", path.c_str()).exit_code == 127);
  CHECK(resolve_program("", path.c_str()).exit_code == 127);
}

TEST_CASE("program path: a name with a slash is used as it is") {
  ScratchBin bin;
  const std::string tool = (bin.root / "b" / "tool").string();
  CHECK(resolve_program(tool, "").path == tool);
  CHECK(resolve_program((bin.root / "nope").string(), "").exit_code == 127);
  // No execute bit at all: refused even for root.
  CHECK(resolve_program((bin.root / "b" / "plain").string(), "").exit_code == 126);
  CHECK(resolve_program((bin.root / "b").string(), "").exit_code == 126);
}

}  // namespace torchprof::cli
