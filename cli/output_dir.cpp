#include "cli/output_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <optional>

#include "cli/errors.h"
#include "common/errors.h"

namespace torchprof::cli {
namespace {

constexpr int kMaxSuffix = 10000;

// Returns the position after the closing brace, appending VAR's value to `out`.
size_t expand_env(const std::string& pattern, size_t pos, const EnvLookup& getenv_fn,
                  std::string& out) {
  if (pos >= pattern.size() || pattern[pos] != '{') {
    throw UsageError("output pattern '" + pattern + "': %q must be followed by {VAR}");
  }
  const size_t close = pattern.find('}', pos);
  if (close == std::string::npos || close == pos + 1) {
    throw UsageError("output pattern '" + pattern + "': %q{VAR} is not closed or empty");
  }
  const std::string var = pattern.substr(pos + 1, close - pos - 1);
  if (const char* value = getenv_fn(var.c_str())) out += value;
  return close + 1;
}

bool is_empty_dir(const DirHandle& dir) {
  const int fd = ::dup(dir.fd());
  if (fd < 0) return false;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return false;
  }
  bool empty = true;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") {
      empty = false;
      break;
    }
  }
  ::closedir(d);
  return empty;
}

// The directory `name` inside `parent` that is already there, or nothing when it is a
// directory holding something (an earlier run). Throws when it is not a directory.
std::optional<DirHandle> existing_empty_dir(const std::string& shown, bool first) {
  DirHandle dir;
  try {
    dir = open_dir_safely(shown, /*create=*/false);
  } catch (const InputError&) {
    struct stat st{};
    if (::stat(shown.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
      if (!first) return std::nullopt;  // DIR-N taken by a file: the next name
      throw InputError("-o " + shown + ": not a directory (the output is a directory of files)");
    }
    throw;
  }
  if (!is_empty_dir(dir)) return std::nullopt;
  return dir;
}
}  // namespace

std::string expand_output_pattern(const std::string& pattern, const std::string& host, int pid,
                                  const EnvLookup& getenv_fn) {
  std::string out;
  size_t i = 0;
  while (i < pattern.size()) {
    const char c = pattern[i];
    if (c != '%') {
      out += c;
      ++i;
      continue;
    }
    const char spec = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
    i += 2;
    switch (spec) {
      case 'h': out += host; break;
      case 'p': out += std::to_string(pid); break;
      case '%': out += '%'; break;
      case 'q': i = expand_env(pattern, i, getenv_fn, out); break;
      default:
        throw UsageError("output pattern '" + pattern + "': unknown %" +
                         (spec == '\0' ? std::string() : std::string(1, spec)) +
                         " (use %h, %p, %q{VAR} or %%)");
    }
  }
  return out;
}

OutputDir create_output_dir(const std::string& wanted) {
  std::string base = wanted;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  if (base.empty()) throw UsageError("the output directory name is empty");
  const size_t slash = base.find_last_of('/');
  const std::string parent_shown = slash == std::string::npos ? "." : slash == 0 ? "/" : base.substr(0, slash);
  const std::string name = slash == std::string::npos ? base : base.substr(slash + 1);
  if (name == "." || name == ".." || name.empty()) {
    throw UsageError("-o " + wanted + ": name a directory of its own for the outputs");
  }
  const DirHandle parent = open_dir_safely(parent_shown, /*create=*/true);
  for (int n = 0; n < kMaxSuffix; ++n) {
    const std::string leaf = n == 0 ? name : name + "-" + std::to_string(n);
    const std::string candidate = n == 0 ? base : base + "-" + std::to_string(n);
    OutputDir out{candidate, n > 0, {}};
    if (::mkdirat(parent.fd(), leaf.c_str(), 0755) == 0) {
      const int fd = ::openat(parent.fd(), leaf.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) throw InputError("cannot open " + candidate + ": " + std::strerror(errno));
      out.handle = DirHandle(fd);
    } else if (errno != EEXIST) {
      throw InputError("cannot create output directory " + candidate + ": " + std::strerror(errno));
    } else if (std::optional<DirHandle> empty = existing_empty_dir(candidate, n == 0)) {
      out.handle = *empty;
    } else {
      continue;
    }
    if (const std::string why = unsafe_dir_reason(out.handle, candidate); !why.empty()) {
      throw InputError("refusing the output directory: " + why + "; another user could replace what is written there");
    }
    return out;
  }
  throw InputError("no free output directory name like " + base + "-N");
}

void say_redirect(const std::string& wanted, const OutputDir& dir) {
  if (dir.renamed) std::cerr << "torchprof: " << wanted << " holds an earlier run; writing to " << dir.path << "\n";
}

}  // namespace torchprof::cli
