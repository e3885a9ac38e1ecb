#include "tools/loftctl/run_as_user.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

namespace loft::ctl {
namespace {
namespace fs = std::filesystem;

// The steps of DropToUser; async-signal-safe (CheckAccessAs runs it after
// fork). Returns 0, or the failing step (1..5) with errno set.
int DropRaw(uid_t uid, gid_t gid) {
  if (::setgroups(0, nullptr) != 0) return 1;
  if (::setresgid(gid, gid, gid) != 0) return 2;
  if (::setresuid(uid, uid, uid) != 0) return 3;
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return 4;
  if (uid != 0 && (::setuid(0) == 0 || ::seteuid(0) == 0)) {
    errno = EPERM;
    return 5;
  }
  return 0;
}

const char* DropStep(int step) {
  switch (step) {
    case 1: return "setgroups";
    case 2: return "setresgid";
    case 3: return "setresuid";
    case 4: return "prctl(PR_SET_NO_NEW_PRIVS)";
    default: return "the check that root cannot be regained";
  }
}

// Regular files with one link and directories: what a grant may chown.
bool Changeable(const struct stat& st) {
  return S_ISDIR(st.st_mode) || (S_ISREG(st.st_mode) && st.st_nlink == 1);
}

}  // namespace

StatusOr<RunAsUser> LookUpUser(const std::string& name) {
  if (name.empty()) return InvalidArgument("no user name given");
  std::vector<char> buf(16384);
  struct passwd pw {};
  struct passwd* found = nullptr;
  int rc = ::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found);
  if (rc != 0) return IOError(fmt::format("looking up user '{}': {}", name, std::strerror(rc)));
  if (found == nullptr)
    return NotFound(fmt::format("no user '{}' on this machine (getent passwd {})", name, name));
  return RunAsUser{name, pw.pw_uid, pw.pw_gid, pw.pw_dir ? pw.pw_dir : "/"};
}

Status DropToUser(const RunAsUser& u) {
  if (int step = DropRaw(u.uid, u.gid); step != 0)
    return PermissionDenied(fmt::format("dropping root for user {} (uid {}): {}: {}", u.name, u.uid,
                                        DropStep(step), std::strerror(errno)));
  return OkStatus();
}

namespace {

// access(2) as `u` for each check, in a child process; the failures as
// (index, errno), or (-step, errno) when the child could not become `u`.
StatusOr<std::vector<std::pair<int, int>>> AccessFailures(const RunAsUser& u,
                                                          const std::vector<PathAccess>& checks) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return IOError(fmt::format("pipe: {}", std::strerror(errno)));
  std::vector<const char*> cpaths;
  for (const auto& c : checks) cpaths.push_back(c.path.c_str());
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return IOError(fmt::format("fork: {}", std::strerror(errno)));
  }
  if (pid == 0) {  // only async-signal-safe calls from here
    ::close(fds[0]);
    int rec[2];
    if (int step = DropRaw(u.uid, u.gid); step != 0) {
      rec[0] = -step;
      rec[1] = errno;
      (void)!::write(fds[1], rec, sizeof rec);
      ::_exit(1);
    }
    for (size_t i = 0; i < cpaths.size(); ++i) {
      if (::access(cpaths[i], checks[i].mode) == 0) continue;
      rec[0] = static_cast<int>(i);
      rec[1] = errno;
      (void)!::write(fds[1], rec, sizeof rec);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::vector<std::pair<int, int>> failed;
  int rec[2];
  while (::read(fds[0], rec, sizeof rec) == static_cast<ssize_t>(sizeof rec))
    failed.emplace_back(rec[0], rec[1]);
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (failed.empty() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
    return Internal("the access check's child process failed");
  return failed;
}

std::string ModeWords(const std::string& path, int mode) {
  std::string w;
  auto add = [&w](const char* s) { w += (w.empty() ? "" : "+") + std::string(s); };
  if (mode & R_OK) add("read");
  if (mode & W_OK) add("write");
  if (mode & X_OK) add(fs::is_directory(path) ? "search" : "execute");
  return w;
}

}  // namespace

Status CheckAccessAs(const RunAsUser& u, const std::vector<PathAccess>& paths) {
  // Every directory above the paths first (search), so that the error names
  // the one directory that shuts the user out instead of all below it.
  std::vector<PathAccess> checks;
  std::set<std::string> seen;
  for (const auto& p : paths) {
    const fs::path abs = fs::absolute(p.path).lexically_normal();
    std::vector<std::string> up;
    for (fs::path a = abs.parent_path(); !a.empty() && a != a.root_path(); a = a.parent_path())
      up.push_back(a.string());
    for (auto a = up.rbegin(); a != up.rend(); ++a)
      if (seen.insert(*a).second) checks.push_back({*a, X_OK});
  }
  const size_t n_dirs = checks.size();
  for (const auto& p : paths) checks.push_back({fs::absolute(p.path).lexically_normal().string(), p.mode});
  LOFT_ASSIGN_OR_RETURN(auto failed, AccessFailures(u, checks));
  std::vector<std::string> problems, closed_dirs;
  for (const auto& [i, err] : failed) {
    if (i < 0) {
      problems.push_back(fmt::format("cannot become {}: {}: {}", u.name, DropStep(-i), std::strerror(err)));
      continue;
    }
    const PathAccess& c = checks[static_cast<size_t>(i)];
    bool below_closed = false;
    for (const auto& d : closed_dirs)
      if (c.path.rfind(d + "/", 0) == 0) below_closed = true;
    if (below_closed) continue;  // that directory is the problem, said once
    if (static_cast<size_t>(i) < n_dirs) {
      closed_dirs.push_back(c.path);
      struct stat st {};
      const bool known = ::stat(c.path.c_str(), &st) == 0;
      problems.push_back(fmt::format(
          "{} (search, needed for what is below it): {}{}", c.path, std::strerror(err),
          known ? fmt::format(" (owner uid {}, mode {:o})", st.st_uid, st.st_mode & 07777) : std::string()));
      continue;
    }
    problems.push_back(fmt::format("{} ({}): {}", c.path, ModeWords(c.path, c.mode), std::strerror(err)));
  }
  if (problems.empty()) return OkStatus();
  std::string m = fmt::format("user {} (uid {}) cannot open what the daemons need:", u.name, u.uid);
  for (const auto& p : problems) m += "\n  " + p;
  return PermissionDenied(m);
}

WorkDirGrant::WorkDirGrant(WorkDirGrant&& o) noexcept
    : uid_(o.uid_), gid_(o.gid_), given_(std::move(o.given_)) {
  o.given_.clear();
}

WorkDirGrant& WorkDirGrant::operator=(WorkDirGrant&& o) noexcept {
  if (this != &o) {
    Restore();
    uid_ = o.uid_;
    gid_ = o.gid_;
    given_ = std::move(o.given_);
    o.given_.clear();
  }
  return *this;
}

Status WorkDirGrant::Give(const std::string& path, bool recursive) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return IOError(fmt::format("stat {}: {}", path, std::strerror(errno)));
  if (!Changeable(st))
    return InvalidArgument(fmt::format("{} is neither a directory nor a single-link file", path));
  given_.push_back({path, recursive, st.st_uid, st.st_gid});
  if (::chown(path.c_str(), uid_, gid_) != 0)
    return IOError(fmt::format("chown {} to uid {}: {}", path, uid_, std::strerror(errno)));
  if (!recursive || !S_ISDIR(st.st_mode)) return OkStatus();
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    struct stat e {};
    if (::lstat(it->path().c_str(), &e) != 0 || !Changeable(e)) continue;
    if (::lchown(it->path().c_str(), uid_, gid_) != 0)
      return IOError(fmt::format("chown {} to uid {}: {}", it->path().string(), uid_, std::strerror(errno)));
  }
  if (ec) return IOError(fmt::format("listing {}: {}", path, ec.message()));
  return OkStatus();
}

void WorkDirGrant::Restore() {
  // Last given first; only what the user owns now goes back.
  for (auto e = given_.rbegin(); e != given_.rend(); ++e) {
    std::error_code ec;
    if (e->recursive) {
      for (auto it = fs::recursive_directory_iterator(e->path, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        struct stat st {};
        if (::lstat(it->path().c_str(), &st) != 0 || !Changeable(st) || st.st_uid != uid_) continue;
        (void)::lchown(it->path().c_str(), e->uid, e->gid);
      }
    }
    (void)::chown(e->path.c_str(), e->uid, e->gid);
  }
  given_.clear();
}

}  // namespace loft::ctl
