#include <doctest/doctest.h>

#include <string>

#include "common/python_program.h"

namespace torchprof::python_program {
namespace {

bool shebang(const std::string& line) { return shebang_runs_python(line.data(), line.size()); }

}  // namespace

TEST_CASE("python program: interpreter names") {
  CHECK(is_python_name("python"));
  CHECK(is_python_name("/usr/bin/python3"));
  CHECK(is_python_name("/opt/venv/bin/python3.11"));
  CHECK_FALSE(is_python_name("/usr/bin/python3-config"));
  CHECK_FALSE(is_python_name("/usr/bin/ipython"));
  CHECK_FALSE(is_python_name("/usr/lib/python3/dist-packages/x.sh"));  // a directory named so
  CHECK_FALSE(is_python_name("pytho"));
  CHECK_FALSE(is_python_name(""));
}

TEST_CASE("python program: #! lines") {
  CHECK(shebang("/usr/bin/python3"));
  CHECK(shebang(" /usr/bin/python3 -u\nimport x"));
  CHECK(shebang("/usr/bin/env python3"));
  CHECK(shebang("/usr/bin/env -S python3 -u"));
  CHECK(shebang("/usr/bin/env PYTHONUNBUFFERED=1 python3.11"));
  CHECK_FALSE(shebang("/bin/sh"));
  CHECK_FALSE(shebang("/usr/bin/env bash"));
  CHECK_FALSE(shebang("/usr/bin/env\npython3"));  // the line ends before a program
  CHECK_FALSE(shebang("/usr/bin/env -S"));
  CHECK_FALSE(shebang(""));
  // Only the bytes given are read: a line cut short names what it has.
  const std::string cut = "/usr/bin/python3";
  CHECK_FALSE(shebang_runs_python(cut.data(), 12));  // "/usr/bin/pyt"
}

}  // namespace torchprof::python_program
