#include "cli/python_target.h"

#include <filesystem>
#include <fstream>

#include "common/python_program.h"

namespace torchprof::cli {

bool is_python_program(const std::string& path) {
  if (python_program::is_python_name(path.data(), path.size())) return true;
  std::ifstream in(path, std::ios::binary);
  char head[2] = {};
  if (!in.read(head, 2) || head[0] != '#' || head[1] != '!') return false;
  std::string line;
  constexpr size_t kMaxShebang = 256;  // the kernel reads no further either
  for (char c; line.size() < kMaxShebang && in.get(c) && c != '\n';) line.push_back(c);
  return python_program::shebang_runs_python(line.data(), line.size());
}

std::string find_python_bootstrap() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const fs::path dir = exe.parent_path().parent_path() / "share" / "torchprof" / "python";
  if (!fs::is_regular_file(dir / "sitecustomize.py", ec)) return "";
  return fs::weakly_canonical(dir, ec).string();
}

}  // namespace torchprof::cli
