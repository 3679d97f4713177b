#include "cli/output_dir.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

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

bool is_empty_dir(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) && std::filesystem::is_empty(path, ec) && !ec;
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
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(base).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  for (int n = 0; n < kMaxSuffix; ++n) {
    const std::string candidate = n == 0 ? base : base + "-" + std::to_string(n);
    if (::mkdir(candidate.c_str(), 0755) == 0) return {candidate, n > 0};
    if (errno != EEXIST) {
      throw InputError("cannot create output directory " + candidate + ": " + std::strerror(errno));
    }
    if (is_empty_dir(candidate)) return {candidate, n > 0};
  }
  throw InputError("no free output directory name like " + base + "-N");
}

}  // namespace torchprof::cli
