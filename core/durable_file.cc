#include "core/durable_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace loft {
namespace {

Status Errno(std::string_view what, const std::string& path) {
  return IOError(fmt::format("{} '{}': {}", what, path, std::strerror(errno)));
}

}  // namespace

Status WriteFileDurably(const std::string& path, std::string_view contents) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create", tmp);
  size_t off = 0;
  while (off < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + off, contents.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      Status st = Errno("cannot write", tmp);
      ::close(fd);
      return st;
    }
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    Status st = Errno("cannot fsync", tmp);
    ::close(fd);
    return st;
  }
  if (::close(fd) != 0) return Errno("cannot close", tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Errno(fmt::format("cannot rename '{}' to", tmp), path);
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? std::filesystem::current_path().string() : parent.string();
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return Errno("cannot open directory", dir);
  const int rc = ::fsync(dfd);
  Status st = rc != 0 ? Errno("cannot fsync directory", dir) : OkStatus();
  ::close(dfd);
  return st;
}

}  // namespace loft
