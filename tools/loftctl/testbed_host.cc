#include "tools/loftctl/testbed_host.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace loft::ctl {
namespace {
namespace fs = std::filesystem;

// Root-owned and writable by the owner only (the mode check of FindSystemTool).
Status CheckTrusted(const std::string& path, const struct stat& st, uid_t owner, const char* what) {
  if (st.st_uid != owner)
    return PermissionDenied(fmt::format("{} {} is owned by uid {}, not {}: refusing to run it as root", what,
                                        path, st.st_uid, owner));
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return PermissionDenied(
        fmt::format("{} {} is writable by group or others (mode {:o}): refusing to run it "
                    "as root",
                    what, path, st.st_mode & 07777));
  return OkStatus();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool HasWord(const std::string& text, const std::string& word) {
  std::istringstream in(text);
  std::string w;
  while (in >> w)
    if (w == word) return true;
  return false;
}

Status WriteControl(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);  // as `echo +cpu >` does
  if (fd < 0) return IOError(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size()))
    return IOError(fmt::format("cannot write '{}' to {}: {}", text, path, std::strerror(err)));
  return OkStatus();
}

// An exclusive flock on state_dir/.lock for its lifetime.
class StateLock {
 public:
  static StatusOr<StateLock> Take(const std::string& state_dir) {
    std::error_code ec;
    fs::create_directories(state_dir, ec);
    if (ec) return IOError(fmt::format("cannot create {}: {}", state_dir, ec.message()));
    const std::string path = state_dir + "/.lock";
    int fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) return IOError(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
    while (::flock(fd, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return IOError(fmt::format("flock {}: {}", path, std::strerror(err)));
    }
    return StateLock(fd);
  }
  StateLock(StateLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  StateLock& operator=(StateLock&&) = delete;
  ~StateLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the flock
  }

 private:
  explicit StateLock(int fd) : fd_(fd) {}
  int fd_;
};

// Why a child of the root needs its cpu controller ("" = it does not).
std::string CpuUser(const fs::path& child) {
  const std::string name = child.string();
  if (HasWord(ReadFile(name + "/cgroup.subtree_control"), "cpu"))
    return name + "/cgroup.subtree_control has cpu";
  std::string max = ReadFile(name + "/cpu.max");
  if (!max.empty() && max.rfind("max", 0) != 0)
    return fmt::format("{}/cpu.max is '{}'", name, max.substr(0, max.find('\n')));
  std::string weight = ReadFile(name + "/cpu.weight");
  if (!weight.empty() && std::atoi(weight.c_str()) != 100)
    return fmt::format("{}/cpu.weight is {}", name, weight.substr(0, weight.find('\n')));
  return "";
}

}  // namespace

StatusOr<std::string> FindSystemTool(const std::string& name, const std::vector<std::string>& dirs,
                                     uid_t owner) {
  if (name.empty() || name.find('/') != std::string::npos)
    return InvalidArgument("'" + name + "' is not a program name");
  for (const auto& d : dirs) {
    const std::string candidate = d + "/" + name;
    std::error_code ec;
    if (!fs::exists(candidate, ec)) continue;
    const fs::path real = fs::canonical(candidate, ec);
    if (ec) return NotFound(fmt::format("cannot resolve {}: {}", candidate, ec.message()));
    struct stat st {};
    if (::stat(real.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || (st.st_mode & S_IXUSR) == 0)
      return PermissionDenied(fmt::format("{} (for {}) is not an executable file", real.string(), candidate));
    LOFT_RETURN_IF_ERROR(CheckTrusted(real.string(), st, owner, "program"));
    for (fs::path p = real.parent_path();; p = p.parent_path()) {
      if (::stat(p.c_str(), &st) != 0)
        return PermissionDenied(fmt::format("cannot stat {}: {}", p.string(), std::strerror(errno)));
      LOFT_RETURN_IF_ERROR(CheckTrusted(p.string(), st, 0, "directory"));
      if (p == p.root_path()) break;
    }
    return real.string();
  }
  std::string searched;
  for (const auto& d : dirs) searched += (searched.empty() ? "" : ", ") + d;
  return NotFound(
      fmt::format("no `{}` in {} (Debian package iproute2; loftctl does not search PATH for the "
                  "programs it runs as root)",
                  name, searched));
}

StatusOr<bool> EnableRootCpu(const std::string& cgroup_root, const std::string& state_dir,
                             const std::string& tag) {
  LOFT_ASSIGN_OR_RETURN(StateLock lock, StateLock::Take(state_dir));
  const std::string control = cgroup_root + "/cgroup.subtree_control";
  if (HasWord(ReadFile(control), "cpu")) return false;
  // The record first: a crash right after the write still leaves it.
  const std::string record = state_dir + "/" + kRootCgroupRecord;
  {
    nlohmann::json j = {{"cgroup", cgroup_root}, {"controller", "cpu"}, {"enabled_by", tag}};
    std::ofstream out(record, std::ios::trunc);
    out << j.dump(2) << "\n";
    out.flush();
    if (!out) return IOError(fmt::format("cannot write {}: {}", record, std::strerror(errno)));
  }
  if (Status s = WriteControl(control, "+cpu"); !s.ok()) {
    std::error_code ec;
    fs::remove(record, ec);
    return s;
  }
  return true;
}

StatusOr<std::string> RevertRootCpu(const std::string& state_dir,
                                    const std::function<bool()>& other_testbeds) {
  const std::string record = state_dir + "/" + kRootCgroupRecord;
  std::error_code ec;
  if (!fs::exists(record, ec)) return std::string();
  LOFT_ASSIGN_OR_RETURN(StateLock lock, StateLock::Take(state_dir));
  if (!fs::exists(record, ec)) return std::string();  // reverted meanwhile
  auto j = nlohmann::json::parse(ReadFile(record), nullptr, false);
  if (!j.is_object() || !j.contains("cgroup") || !j["cgroup"].is_string())
    return DataLoss(fmt::format("{} is not a root cgroup record (remove it by hand)", record));
  if (other_testbeds()) return std::string();
  const std::string root = j["cgroup"].get<std::string>();
  const std::string control = root + "/cgroup.subtree_control";
  if (!HasWord(ReadFile(control), "cpu")) {
    fs::remove(record, ec);
    return fmt::format("root cgroup: the cpu controller is already off in {}; removed {}", control, record);
  }
  for (const auto& e : fs::directory_iterator(root, ec)) {
    if (!e.is_directory()) continue;
    if (std::string why = CpuUser(e.path()); !why.empty())
      return fmt::format(
          "root cgroup: kept the cpu controller on in {} (a testbed turned it on, but {}); "
          "{} stays",
          control, why, record);
  }
  if (Status s = WriteControl(control, "-cpu"); !s.ok())
    return fmt::format("root cgroup: kept the cpu controller on ({}); {} stays", s.message(), record);
  fs::remove(record, ec);
  return fmt::format("root cgroup: turned the cpu controller off again in {} (a testbed had turned it on)",
                     control);
}

}  // namespace loft::ctl
