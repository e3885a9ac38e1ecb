// What the testbed needs from the host besides namespaces and cgroups, kept
// apart from testbed.cc so that each rule can be tested on its own:
//
// - FindSystemTool: the `ip` and `tc` programs loftctl runs as root, found
//   in root-owned system directories and checked, never through PATH.
// - The cgroup v2 root: the testbed turns the cpu controller on in the
//   root's cgroup.subtree_control when it is off. EnableRootCpu records that
//   in <state dir>/root-cgroup.json; RevertRootCpu turns it off again when
//   the record says a testbed turned it on, no testbed is left and no other
//   cgroup uses it. Both hold an flock on <state dir>/.lock, so a testbed
//   coming up never sees the controller vanish under it.
//
// Not responsible for: creating or removing the testbed's own objects
// (testbed.h), deciding when the last testbed went (the caller says, through
// `other_testbeds`). Thread-safety: none.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "core/status.h"

namespace loft::ctl {

// Where FindSystemTool looks, in order (Debian's iproute2: /usr/sbin/tc,
// /usr/sbin/ip -> /bin/ip).
inline const std::vector<std::string> kSystemToolDirs = {"/usr/sbin", "/sbin", "/usr/bin", "/bin"};

// The first `dirs[k]/name` that exists, resolved through symlinks. The file
// must be a regular executable owned by `owner` and writable by no one else,
// and so must every directory on its resolved path: anyone who could replace
// it would run code as root. NotFound names the directories searched,
// PermissionDenied the file or directory that fails the check.
StatusOr<std::string> FindSystemTool(const std::string& name, const std::vector<std::string>& dirs,
                                     uid_t owner = 0);

inline constexpr const char* kRootCgroupRecord = "root-cgroup.json";

// Turns on the cpu controller for the children of the cgroup v2 root
// `cgroup_root` (writes "+cpu" to its cgroup.subtree_control) unless it is
// on; when it turned it on, state_dir/root-cgroup.json says so (written
// before the change). Returns whether it turned it on. An error names the
// file it could not write.
StatusOr<bool> EnableRootCpu(const std::string& cgroup_root, const std::string& state_dir,
                             const std::string& tag);

// Undoes EnableRootCpu once no testbed is left: when state_dir holds the
// record, `other_testbeds()` (asked under the lock) is false and no child of
// the root uses the controller (a "cpu" in its cgroup.subtree_control, a
// cpu.max other than "max …" or a cpu.weight other than 100), writes "-cpu"
// and removes the record. Returns a line saying what it did or why it kept
// the controller on; "" when there is no record or testbeds remain.
StatusOr<std::string> RevertRootCpu(const std::string& state_dir,
                                    const std::function<bool()>& other_testbeds);

}  // namespace loft::ctl
