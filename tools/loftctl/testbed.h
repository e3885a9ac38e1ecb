// Testbed: carries out a TestbedPlan on this machine (root only): network
// namespaces, veth pairs, a bridge, tbf qdiscs (via the `ip` and `tc`
// commands, by absolute path: testbed_host.h) and one CPU cgroup per agent
// (v1 cpu.cfs_quota_us, or v2 cpu.max), plus a state file
// /run/loft-testbed/<tag>.json written before anything is created so that
// `loftctl testbed clean` can clean up after a crashed run.
// docs/testbed.md describes the layout and the commands.
//
// Not responsible for: deciding names, addresses and quotas (testbed_plan.h),
// starting the scheduler and agents (cmd_cluster.cc wraps their argv with
// WrapNode / WrapScheduler, which run them through `loftctl testbed exec`).
// Thread-safety: none; one Testbed per process.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "core/cluster_spec.h"
#include "core/status.h"
#include "tools/loftctl/run_as_user.h"
#include "tools/loftctl/testbed_host.h"
#include "tools/loftctl/testbed_plan.h"

namespace loft::ctl {

inline constexpr const char* kTestbedStateDir = "/run/loft-testbed";

// The absolute path of `ip` or `tc` (FindSystemTool in kSystemToolDirs),
// found and checked once per process.
StatusOr<std::string> TestbedToolPath(const std::string& name);

// Runs argv, waits; returns its stdout. argv[0] is an absolute path or a
// name TestbedToolPath finds (never a PATH lookup); the environment is
// PATH=/usr/sbin:/usr/bin:/sbin:/bin and LC_ALL=C only. A non-zero exit is an
// error naming the command and quoting its stderr.
StatusOr<std::string> RunCommand(const std::vector<std::string>& argv);

// The cpu controller's root directory, and whether it is cgroup v2.
struct CpuCgroupRoot {
  std::string dir;
  bool v2 = false;
};
StatusOr<CpuCgroupRoot> FindCpuCgroup();

// Root, the ip and tc commands, a cpu cgroup controller: the error names
// everything that is missing.
Status CheckTestbedSupport();

// A testbed as recorded in its state file.
struct TestbedState {
  std::string tag;
  std::string spec;  // absolute path of the spec it was built for
  pid_t owner = 0;   // the `cluster run` that owns it; 0 = `testbed up` (detached)
  int subnet = -1;
  std::string cgroup;  // the run's cgroup directory
  bool OwnerAlive() const;
};
std::vector<TestbedState> ListTestbedStates();

// Tags with any namespace, link, cgroup or state file on this machine.
std::vector<std::string> TestbedTagsOnSystem();

// Kills the testbed's processes, deletes its namespaces, links, cgroups and
// state file (found by name prefix, so a half-built testbed goes too); the
// last testbed to go turns the root cgroup's cpu controller off again when a
// testbed turned it on (RevertRootCpu). Returns a line per removed object;
// errors name what could not be removed.
StatusOr<std::vector<std::string>> TeardownTestbed(const std::string& tag);

// `loftctl testbed clean`, `testbed down --all` and the check of `cluster
// run --testbed` for a crashed run's leftovers.
struct CleanOptions {
  bool keep_detached = false;  // keep the testbeds of `testbed up` (cluster run keeps them)
  bool force = false;          // also remove testbeds whose `cluster run` is alive
};
struct CleanReport {
  int testbeds_removed = 0;
  std::vector<std::string> removed;  // per testbed "testbed lftXXXX (why): removed", then its objects
  std::vector<std::string> kept;     // per testbed left alone, and why
  std::vector<std::string> errors;   // per testbed that could not be removed, what stayed
};
// Tears down every testbed on this machine (every lftXXXX name, cgroup or
// state file) but those `options` keep, then reverts the root cgroup when no
// testbed is left and a testbed changed it. Never touches a name without the
// prefix.
CleanReport CleanTestbeds(const CleanOptions& options);

// One cgroup's CPU accounting (cpu.stat): how often its quota stopped it,
// and the CPU it used: v2's cpu.stat has usage_usec; cgroup v1's cpu
// controller keeps none (cpuacct is a hierarchy of its own here), so there
// usage_ms is the user + system time of the processes in the cgroup when
// it is read (/proc/PID/stat), -1 if none is left.
struct CgroupCpuStat {
  int64_t nr_periods = 0;    // CFS periods in which the cgroup ran
  int64_t nr_throttled = 0;  // periods that ended with the cgroup throttled
  double throttled_ms = 0;   // total time throttled
  double usage_ms = -1;      // CPU time used
};
// Parses cpu.stat text (v1: throttled_time in ns; v2: throttled_usec,
// usage_usec). InvalidArgument naming the line when a value is not a number.
StatusOr<CgroupCpuStat> ParseCpuStat(const std::string& text);
// utime + stime of a /proc/PID/stat line, in ms at `ticks_per_s`
// (sysconf(_SC_CLK_TCK)); InvalidArgument when the line is not one.
StatusOr<double> ParseProcStatCpuMs(const std::string& line, long ticks_per_s);

class Testbed {
 public:
  // Builds the testbed for `spec`; `owner` = the process it belongs to (0 =
  // detached). On failure removes what it created.
  static StatusOr<std::unique_ptr<Testbed>> Up(const ClusterSpec& spec, const std::string& spec_path,
                                               pid_t owner);
  ~Testbed();  // tears down unless Release()d
  Testbed(const Testbed&) = delete;
  Testbed& operator=(const Testbed&) = delete;

  void Release() { released_ = true; }
  const TestbedPlan& plan() const { return plan_; }
  const std::string& cgroup_dir() const { return cgroup_dir_; }
  std::string NodeCgroup(int i) const;
  // cpu.stat of node i's cgroup / the scheduler's; an error names the file.
  StatusOr<CgroupCpuStat> NodeCpuStat(int i) const;
  StatusOr<CgroupCpuStat> SchedulerCpuStat() const;

  // argv that runs `argv` in node i's namespace and cgroup / the scheduler's
  // cgroup (root namespace) as `user` ("" = as root): `loftctl testbed exec
  // --netns … --cgroup … --user … -- argv`.
  std::vector<std::string> WrapNode(int i, const std::vector<std::string>& argv,
                                    const std::string& user) const;
  std::vector<std::string> WrapScheduler(const std::vector<std::string>& argv, const std::string& user) const;

 private:
  Testbed() = default;
  TestbedPlan plan_;
  std::string cgroup_dir_;
  std::string loftctl_;
  bool released_ = false;
};

// `loftctl testbed exec`: joins the cgroup (if any) and the namespace (if
// any), drops root for `user` (if any; run_as_user.h), then execs argv;
// returns only on error.
Status EnterAndExec(const std::string& netns, const std::string& cgroup_dir, const std::string& user,
                    const std::vector<std::string>& argv);

}  // namespace loft::ctl
