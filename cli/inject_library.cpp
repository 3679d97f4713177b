#include "cli/inject_library.h"

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "common/wire/env.h"

namespace torchprof::cli {

std::string find_inject_library() {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path lib;
  const char* override_path = std::getenv(env::kLib);
  if (override_path != nullptr && *override_path != '\0') {
    lib = override_path;
  } else {
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (ec) throw std::runtime_error("cannot find the torchprof executable: " + ec.message());
    lib = exe.parent_path().parent_path() / "lib" / kInjectLibName;
  }
  // The target may chdir before its libraries load; only absolute paths survive that.
  fs::path absolute = fs::weakly_canonical(fs::absolute(lib, ec), ec);
  if (ec || !fs::is_regular_file(absolute, ec)) {
    throw std::runtime_error("injection library not found: " + lib.string() + " (set " +
                             env::kLib + " to its path)");
  }
  return absolute.string();
}

}  // namespace torchprof::cli
