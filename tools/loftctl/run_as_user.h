// Running the testbed's daemons as an unprivileged user. Joining a cgroup
// and a network namespace needs root, so `loftctl testbed exec --user U`
// does both as root and then drops to U for good (DropToUser) just before
// it execs the daemon: the quota, the namespace and the tbf qdiscs, all set
// up by the root parent, still apply. `cluster run --testbed` gives U what
// the daemons write for the time of the run (WorkDirGrant) and checks, as
// U, that they can open what they need (CheckAccessAs) before starting them.
//
// Not responsible for: which paths a run needs (cmd_cluster.cc), the
// namespace and cgroup (testbed.h). Thread-safety: none; CheckAccessAs
// forks and may be called from a process with threads.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "core/status.h"

namespace loft::ctl {

struct RunAsUser {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;  // the user's primary group; no supplementary groups are kept
  std::string home;
};

// The passwd entry of `name`; NotFound naming it when there is none.
StatusOr<RunAsUser> LookUpUser(const std::string& name);

// setgroups(none), setresgid, setresuid to `u`, then PR_SET_NO_NEW_PRIVS (a
// set-uid program cannot bring root back); checks that root cannot be
// regained. An error names the call that failed.
Status DropToUser(const RunAsUser& u);

struct PathAccess {
  std::string path;
  int mode = 0;  // access(2) bits: R_OK | W_OK | X_OK
};
// Checks in a child process running as `u` that it can access every path
// with its mode. PermissionDenied lists each path it cannot, and why.
Status CheckAccessAs(const RunAsUser& u, const std::vector<PathAccess>& paths);

// Gives paths to a user (chown, recursively for directories where asked)
// and, when destroyed or on Restore(), gives them back to their owners
// before: what the user created inside goes to the owner of the granted
// directory. Symlinks and files with more than one link are neither
// followed nor changed. Moved, not copied.
class WorkDirGrant {
 public:
  WorkDirGrant() = default;
  WorkDirGrant(uid_t uid, gid_t gid) : uid_(uid), gid_(gid) {}
  WorkDirGrant(WorkDirGrant&& o) noexcept;
  WorkDirGrant& operator=(WorkDirGrant&& o) noexcept;
  WorkDirGrant(const WorkDirGrant&) = delete;
  WorkDirGrant& operator=(const WorkDirGrant&) = delete;
  ~WorkDirGrant() { Restore(); }

  // An error names the path it could not chown.
  Status Give(const std::string& path, bool recursive);
  void Restore();

 private:
  struct Entry {
    std::string path;
    bool recursive = false;
    uid_t uid = 0;
    gid_t gid = 0;
  };
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  std::vector<Entry> given_;
};

}  // namespace loft::ctl
