#!/usr/bin/env bash
# Installs what torchprof needs on Debian/Ubuntu. Safe to run again: apt-get skips what is
# already installed. Needs root (uses sudo otherwise).
#
#   scripts/setup.sh            the build packages: enough to build torchprof and profile a program
#   scripts/setup.sh --tests    those, and what only the tests need (torch, Chromium, clang, man-db)
#   scripts/setup.sh --list [--tests]   print the packages it would install, install nothing
set -euo pipefail

build_packages=(
  build-essential cmake ninja-build pkg-config binutils
  python3  # the test programs' CMake checks for it; torchprof runs Python targets
  libcli11-dev libspdlog-dev libzstd-dev zlib1g-dev doctest-dev nlohmann-json3-dev
  libsqlite3-dev  # torchprof export --type sqlite (linked statically)
)
test_packages=(
  python3-torch  # the Python-target tests; torch.profiler is the reference they compare against
  chromium man-db  # test_html loads report.html headless; test_install renders the man pages
  clang libclang-rt-dev  # libFuzzer for fuzz.capture_smoke
  sqlite3  # test_sqlite runs its queries with the sqlite3 command line too
)

usage() {
  echo "usage: scripts/setup.sh [--tests] [--list]" >&2
  exit 2
}

tests=0
list=0
for arg in "$@"; do
  case $arg in
    --tests) tests=1 ;;
    --list) list=1 ;;
    *) usage ;;
  esac
done

packages=("${build_packages[@]}")
((tests)) && packages+=("${test_packages[@]}")
if ((list)); then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
  sudo=()
elif command -v sudo >/dev/null; then
  sudo=(sudo)
else
  echo "setup.sh: run as root or install sudo" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  "${sudo[@]}" apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
else
  echo "setup.sh: all packages already installed"
fi

# The CUDA toolkit provides the NVTX v3 and CUPTI headers (no GPU is needed to build or test).
cuda_root=${CUDAToolkit_ROOT:-/usr/local/cuda}
if [[ ! -f $cuda_root/include/nvtx3/nvToolsExt.h || ! -f $cuda_root/include/cupti.h ]]; then
  cat >&2 <<MSG
setup.sh: the CUDA toolkit was not found at $cuda_root (need include/nvtx3/ and include/cupti.h).
  Install NVIDIA's CUDA toolkit packages for this distribution (the NVTX, CUPTI and cudart
  development packages are enough; no driver or GPU is needed),
  or point CUDAToolkit_ROOT at an existing toolkit.
MSG
  exit 1
fi
echo "setup.sh: ready (CUDA toolkit at $cuda_root)"
