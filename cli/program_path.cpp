#include "cli/program_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace torchprof::cli {
namespace {

constexpr const char* kDefaultPath = "/usr/local/bin:/usr/bin:/bin";

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

ResolvedProgram check_explicit(const std::string& name) {
  struct stat st {};
  if (::stat(name.c_str(), &st) != 0) return {"", 127, std::strerror(errno)};
  if (S_ISDIR(st.st_mode)) return {"", 126, "Is a directory"};
  if (::access(name.c_str(), X_OK) != 0) return {"", 126, std::strerror(errno)};
  return {name, 0, ""};
}

}  // namespace

ResolvedProgram resolve_program(const std::string& name, const char* path_env) {
  if (name.empty()) return {"", 127, "command not found"};
  if (name.find('/') != std::string::npos) return check_explicit(name);
  const std::string dirs = path_env != nullptr ? path_env : kDefaultPath;
  size_t start = 0;
  for (;;) {
    const size_t end = dirs.find(':', start);
    const std::string dir =
        dirs.substr(start, end == std::string::npos ? std::string::npos : end - start);
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (is_executable_file(candidate)) return {candidate, 0, ""};
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return {"", 127, "command not found"};
}

}  // namespace torchprof::cli
