#include "cli/program_path.h"

#include <fcntl.h>
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

// A script whose #! line names an interpreter that is not there fails in execve with
// ENOENT, which would read as if the script itself were missing: said here, before any
// output directory is made.
ResolvedProgram check_interpreter(ResolvedProgram found) {
  if (found.exit_code != 0) return found;
  const int fd = ::open(found.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return found;
  char head[512];
  const ssize_t n = ::read(fd, head, sizeof head);
  ::close(fd);
  if (n < 3 || head[0] != '#' || head[1] != '!') return found;
  const std::string line(head + 2, static_cast<size_t>(n - 2));
  const size_t start = line.find_first_not_of(" \t");
  if (start == std::string::npos) return found;
  const size_t end = line.find_first_of(" \t\r\n", start);
  const std::string interpreter = line.substr(start, end == std::string::npos ? std::string::npos : end - start);
  if (interpreter.empty() || is_executable_file(interpreter)) return found;
  struct stat st {};
  const bool exists = ::stat(interpreter.c_str(), &st) == 0;
  return {"", exists ? 126 : 127,
          "bad interpreter " + interpreter + ": " + (exists ? "not an executable file" : "No such file or directory")};
}

}  // namespace

ResolvedProgram resolve_program(const std::string& name, const char* path_env) {
  return check_interpreter(resolve_program_file(name, path_env));
}

ResolvedProgram resolve_program_file(const std::string& name, const char* path_env) {
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
