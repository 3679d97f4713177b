#include <doctest/doctest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "cli/errors.h"
#include "cli/output_dir.h"
#include "common/errors.h"

namespace torchprof::cli {
namespace {

namespace fs = std::filesystem;

const char* fake_env(const char* name) {
  static const std::map<std::string, std::string> vars = {{"SLURM_JOB_ID", "4242"},
                                                          {"EMPTY", ""}};
  auto it = vars.find(name);
  return it == vars.end() ? nullptr : it->second.c_str();
}

std::string expand(const std::string& pattern) {
  return expand_output_pattern(pattern, "node7", 314, fake_env);
}

fs::path scratch_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() /
                 ("torchprof_cli_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("output pattern: %h, %p, %q{VAR} and %% expand; plain text stays") {
  CHECK(expand("./torchprof_out") == "./torchprof_out");
  CHECK(expand("out_%h_%p") == "out_node7_314");
  CHECK(expand("job%q{SLURM_JOB_ID}/r") == "job4242/r");
  CHECK(expand("a%q{UNSET_VAR}b%q{EMPTY}c") == "abc");
  CHECK(expand("100%%") == "100%");
  CHECK(expand("%h%h") == "node7node7");
}

TEST_CASE("output pattern: unknown or unfinished % sequences are usage errors") {
  CHECK_THROWS_AS(expand("out_%x"), UsageError);
  CHECK_THROWS_AS(expand("out_%"), UsageError);
  CHECK_THROWS_AS(expand("out_%q"), UsageError);
  CHECK_THROWS_AS(expand("out_%q{VAR"), UsageError);
  CHECK_THROWS_AS(expand("out_%q{}"), UsageError);
}

TEST_CASE("output dir: a fresh name is created, an earlier run is never reused") {
  const fs::path root = scratch_dir("outdir");
  const std::string wanted = (root / "sub" / "run").string();

  const OutputDir first = create_output_dir(wanted);
  CHECK(first.path == wanted);
  CHECK_FALSE(first.renamed);
  CHECK(fs::is_directory(wanted));

  // Still empty: the same directory is fine.
  CHECK(create_output_dir(wanted + "/").path == wanted);

  std::ofstream(wanted + "/capture.tprof") << "x";
  const OutputDir second = create_output_dir(wanted);
  CHECK(second.path == wanted + "-1");
  CHECK(second.renamed);
  std::ofstream(second.path + "/capture.tprof") << "x";

  // A plain file with the wanted name is skipped too.
  std::ofstream(wanted + "-2") << "x";
  const OutputDir third = create_output_dir(wanted);
  CHECK(third.path == wanted + "-3");
  CHECK(fs::is_directory(third.path));
  fs::remove_all(root);
}

TEST_CASE("output dir: a file or a device as -o is an error, never FILE-1") {
  const fs::path root = scratch_dir("outfile");
  const std::string file = (root / "results.txt").string();
  std::ofstream(file) << "x";
  CHECK_THROWS_WITH_AS(create_output_dir(file), doctest::Contains("not a directory"), InputError);
  CHECK_THROWS_WITH_AS(create_output_dir("/dev/null"), doctest::Contains("not a directory"), InputError);
  CHECK_FALSE(fs::exists(file + "-1"));
  CHECK_FALSE(fs::exists("/dev/null-1"));
  fs::remove_all(root);
}

TEST_CASE("output dir: an empty directory others can write in is refused, a sticky one of ours taken") {
  const fs::path root = scratch_dir("outmode");
  const fs::path open_dir = root / "open";
  fs::create_directories(open_dir);
  fs::permissions(open_dir, fs::perms::all);
  CHECK_THROWS_WITH_AS(create_output_dir(open_dir.string()), doctest::Contains("can be written by others"),
                       InputError);
  fs::permissions(open_dir, fs::perms::all | fs::perms::sticky_bit);
  CHECK(create_output_dir(open_dir.string()).path == open_dir.string());
  // Our own link to a directory is followed; what is made is reached through the held fd.
  fs::create_directories(root / "real");
  fs::create_directory_symlink(root / "real", root / "link");
  const OutputDir via = create_output_dir((root / "link" / "run").string());
  CHECK(via.handle.valid());
  CHECK(fs::is_directory(root / "real" / "run"));
  fs::remove_all(root);
}

}  // namespace torchprof::cli
