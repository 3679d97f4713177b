#include "cli/python_target.h"

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <vector>

namespace torchprof::cli {
namespace {

bool is_python_name(const std::string& path) {
  static const std::regex kPython(R"(python[0-9.]*)");
  return std::regex_match(std::filesystem::path(path).filename().string(), kPython);
}

// The interpreter a #! line names: its first word, or for env the first word that
// is not an option or an assignment (env -S python3 -u, env PYTHONUNBUFFERED=1 python3).
std::string shebang_interpreter(const std::string& line) {
  std::istringstream words(line.substr(2));
  std::vector<std::string> parts;
  for (std::string w; words >> w;) parts.push_back(w);
  if (parts.empty()) return "";
  if (std::filesystem::path(parts[0]).filename() != "env") return parts[0];
  for (size_t i = 1; i < parts.size(); ++i) {
    if (parts[i][0] != '-' && parts[i].find('=') == std::string::npos) return parts[i];
  }
  return "";
}

}  // namespace

bool is_python_program(const std::string& path) {
  if (is_python_name(path)) return true;
  std::ifstream in(path, std::ios::binary);
  char head[2] = {};
  if (!in.read(head, 2) || head[0] != '#' || head[1] != '!') return false;
  std::string line = "#!";
  constexpr size_t kMaxShebang = 256;  // the kernel reads no further either
  for (char c; line.size() < kMaxShebang && in.get(c) && c != '\n';) line.push_back(c);
  const std::string interpreter = shebang_interpreter(line);
  return !interpreter.empty() && is_python_name(interpreter);
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
