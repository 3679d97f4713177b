#include "inject/cupti/search.h"

#include <cstdio>
#include <cstring>

namespace torchprof::inject {
namespace {

struct List {
  char (*out)[kCuptiPathMax];
  size_t max;
  size_t count = 0;
  bool (*exists)(const char*);

  void add(const char* path, bool must_exist) {
    if (count == max || path[0] == '\0' || strlen(path) >= kCuptiPathMax) return;
    for (size_t i = 0; i < count; ++i) {
      if (strcmp(out[i], path) == 0) return;
    }
    if (must_exist && exists != nullptr && !exists(path)) return;
    snprintf(out[count++], kCuptiPathMax, "%s", path);
  }
  void add_in(const char* dir, const char* rel, const char* major) {
    char path[kCuptiPathMax];
    const int n = snprintf(path, sizeof path, "%s/%slibcupti.so.%s", dir, rel, major);
    if (n > 0 && static_cast<size_t>(n) < sizeof path) add(path, true);
  }
};

// The folder of a path ("" for a bare name).
void dir_of(const char* path, char* dir, size_t size) {
  const char* slash = strrchr(path, '/');
  if (slash == nullptr) {
    dir[0] = '\0';
    return;
  }
  snprintf(dir, size, "%.*s", static_cast<int>(slash - path), path);
}

// "13" of ".../libcudart.so.13" (or .so.13.0.96); "" when the name has no version.
void major_of(const char* path, char* major, size_t size) {
  major[0] = '\0';
  const char* so = strstr(path, ".so.");
  if (so == nullptr) return;
  so += 4;
  size_t n = 0;
  while (so[n] >= '0' && so[n] <= '9') ++n;
  if (n == 0 || n >= size) return;
  snprintf(major, size, "%.*s", static_cast<int>(n), so);
}

// Where CUDA's packages put libcupti beside a site-packages folder: CUDA 13's wheels
// put every library in nvidia/cu13/lib, CUDA 12's each in its own package.
void add_site_packages(List& list, const char* site, const char* major) {
  char dir[kCuptiPathMax];
  if (strcmp(major, "12") != 0) {
    snprintf(dir, sizeof dir, "%s/nvidia/cu13/lib", site);
    list.add_in(dir, "", "13");
  }
  if (strcmp(major, "13") != 0) {
    snprintf(dir, sizeof dir, "%s/nvidia/cuda_cupti/lib", site);
    list.add_in(dir, "", "12");
  }
}

}  // namespace

size_t cupti_search_paths(const CuptiSearchInputs& in, char (*out)[kCuptiPathMax], size_t max) {
  List list{out, max, 0, in.exists};
  char major[16] = "";
  if (in.cudart != nullptr) major_of(in.cudart, major, sizeof major);

  // Beside the CUDA runtime the program loaded: the toolkit's lib64 (CUPTI in the same
  // folder, or in extras/CUPTI/lib64 of the toolkit, also from targets/<arch>/lib), a
  // CUDA 13 wheel's nvidia/cu13/lib, a CUDA 12 wheel's nvidia/cuda_runtime/lib.
  if (in.cudart != nullptr && major[0] != '\0') {
    char dir[kCuptiPathMax];
    dir_of(in.cudart, dir, sizeof dir);
    if (dir[0] != '\0') {
      list.add_in(dir, "", major);
      list.add_in(dir, "../extras/CUPTI/lib64/", major);
      list.add_in(dir, "../../../extras/CUPTI/lib64/", major);
      list.add_in(dir, "../../cuda_cupti/lib/", major);
    }
  }
  // torch's wheel: site-packages/torch/lib, with CUDA's wheels two folders up.
  if (in.torch_lib != nullptr) {
    char dir[kCuptiPathMax];
    dir_of(in.torch_lib, dir, sizeof dir);
    if (dir[0] != '\0') {
      char site[kCuptiPathMax];
      snprintf(site, sizeof site, "%s/../..", dir);
      add_site_packages(list, site, major);
    }
  }
  if (in.virtual_env != nullptr && in.virtual_env[0] != '\0') {
    for (size_t i = 0; i < in.site_packages_count; ++i) add_site_packages(list, in.site_packages[i], major);
  }
  // The CUPTI torchprof was built with, where it is of the program's CUDA (or the
  // program's is not known); one of another major version comes after every match.
  char build_major[16] = "";
  if (in.build_path != nullptr) major_of(in.build_path, build_major, sizeof build_major);
  const bool build_matches = major[0] == '\0' || build_major[0] == '\0' || strcmp(major, build_major) == 0;
  if (in.build_path != nullptr && build_matches) list.add(in.build_path, true);
  static constexpr const char* kToolkits[] = {"/usr/local/cuda/extras/CUPTI/lib64", "/usr/local/cuda/lib64"};
  const char* first = strcmp(major, "12") == 0 ? "12" : "13";
  const char* second = strcmp(first, "12") == 0 ? "13" : "12";
  for (const char* dir : kToolkits) list.add_in(dir, "", first);
  // Then the loader's own search (LD_LIBRARY_PATH, ldconfig's cache).
  list.add(strcmp(first, "12") == 0 ? "libcupti.so.12" : "libcupti.so.13", false);
  if (in.build_path != nullptr && !build_matches) list.add(in.build_path, true);
  for (const char* dir : kToolkits) list.add_in(dir, "", second);
  list.add(strcmp(second, "12") == 0 ? "libcupti.so.12" : "libcupti.so.13", false);
  list.add("libcupti.so", false);
  return list.count;
}

}  // namespace torchprof::inject
