// Output directories another local user cannot redirect: each path component is opened
// from the directory held before it, never through a link someone else owns, and every
// file is made inside a held directory by name, never through a link.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace torchprof {

// An open directory (O_DIRECTORY); closed when the last copy goes. Empty: none.
class DirHandle {
 public:
  DirHandle() = default;
  explicit DirHandle(int fd);
  int fd() const { return fd_ ? *fd_ : -1; }
  bool valid() const { return fd_ != nullptr; }

 private:
  std::shared_ptr<int> fd_;
};

// Opens `path` one component at a time, each from the directory held before it with
// O_NOFOLLOW. A symbolic link is followed only when it belongs to root or to us: one of
// another user could point anywhere. With `create`, missing directories are made (0755).
// Throws InputError "cannot open PATH: reason".
DirHandle open_dir_safely(const std::string& path, bool create);

// Why files we make in `dir` could be replaced or redirected by someone else: the
// directory belongs to another user, or group or others can write in it (unless it is
// ours and sticky). "" when it is safe; `shown` names it in the reason.
std::string unsafe_dir_reason(const DirHandle& dir, const std::string& shown);

// The directory `name` inside `parent`, made (0755) when missing, never through a link;
// refused as unsafe_dir_reason says. Throws InputError.
DirHandle sub_dir(const DirHandle& parent, const std::string& name, const std::string& shown);

// Writes `text` to `name` inside `dir` through a private temporary file renamed over
// it: a link named `name` is replaced, never followed. Throws std::runtime_error
// "cannot write SHOWN: reason".
void write_file_at(const DirHandle& dir, const std::string& name, std::string_view text,
                   const std::string& shown, unsigned mode = 0644);

// A descriptor for writing `name` inside `dir`, never through a link: a new file
// (O_EXCL), or with `append` the regular file of that name. Throws std::runtime_error.
int open_file_at(const DirHandle& dir, const std::string& name, bool append, const std::string& shown);

// Whether `name` exists inside `dir` (a link counts; it is not followed).
bool exists_at(const DirHandle& dir, const std::string& name);

}  // namespace torchprof
