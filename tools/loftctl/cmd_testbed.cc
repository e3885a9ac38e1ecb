// loftctl testbed commands (docs/testbed.md):
//   testbed up SPEC          build a testbed for SPEC and leave it (prints its state JSON)
//   testbed down [SPEC] [--all] [--force]
//                            remove the testbeds of SPEC (--all: as clean)
//   testbed clean            remove every testbed leftover on this machine (not a live run's)
//   testbed list             testbeds on this machine
//   testbed check            exit 0 if this machine can run a testbed, else name what is missing
//   testbed exec [--netns NS] [--cgroup DIR] [--user U] -- CMD ARGS…
//                            run CMD in a node's namespace and cgroup (as U)
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "core/cluster_spec.h"
#include "tools/loftctl/commands.h"
#include "tools/loftctl/exit_signals.h"
#include "tools/loftctl/testbed.h"

namespace loft::ctl {
namespace {
namespace fs = std::filesystem;

Status Up(const std::string& spec_path) {
  LOFT_ASSIGN_OR_RETURN(ClusterSpec spec, LoadClusterSpecFile(spec_path));
  InstallExitSignalHandlers();  // a signal while it is built: ~Testbed removes it
  LOFT_ASSIGN_OR_RETURN(auto tb, Testbed::Up(spec, spec_path, 0));
  if (int sig = ExitSignal(); sig != 0)
    return Aborted(
        fmt::format("interrupted by {} while the testbed was built; removed it", ExitSignalName(sig)));
  tb->Release();
  const TestbedPlan& p = tb->plan();
  std::fprintf(stderr, "testbed %s up: bridge %s at %s (bind the scheduler there), cgroups under %s\n",
               p.tag.c_str(), p.bridge.c_str(), p.bridge_ip.c_str(), tb->cgroup_dir().c_str());
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const auto& n = p.nodes[i];
    std::fprintf(stderr, "  %-16s netns %-12s ip %-14s up %g down %g Mbit/s  cpu %s\n", n.name.c_str(),
                 n.netns.c_str(), n.ip.c_str(), n.up_mbps, n.down_mbps,
                 n.cpu_cores > 0 ? fmt::format("{} cores", n.cpu_cores).c_str() : "no quota");
  }
  std::fprintf(stderr,
               "run a node's agent with: loftctl testbed exec --netns NETNS --cgroup %s/nI -- loft-agent …\n"
               "remove it with: loftctl testbed down %s\n",
               tb->cgroup_dir().c_str(), spec_path.c_str());
  std::cout << fs::path(std::string(kTestbedStateDir) + "/" + p.tag + ".json").string() << "\n";
  return OkStatus();
}

// Prints what CleanTestbeds did: removed objects and kept testbeds on
// stdout, errors on stderr (then an error status).
Status PrintCleanReport(const CleanReport& r) {
  if (r.removed.empty() && r.errors.empty())
    std::cout << "nothing to clean: no testbed leftovers on this machine\n";
  for (const auto& line : r.removed) std::cout << line << "\n";
  for (const auto& line : r.kept) std::cout << line << "\n";
  for (const auto& line : r.errors) std::fprintf(stderr, "%s\n", line.c_str());
  if (r.errors.empty()) return OkStatus();
  return Internal(fmt::format("{} testbed(s) could not be removed (see above)", r.errors.size()));
}

Status Clean(bool force) {
  if (::geteuid() != 0) return FailedPrecondition("removing namespaces, links and cgroups needs root");
  CleanOptions o;
  o.force = force;
  return PrintCleanReport(CleanTestbeds(o));
}

Status Down(const std::string& spec_path, bool all, bool force) {
  if (spec_path.empty() && !all) return InvalidArgument("testbed down needs SPEC or --all");
  if (all) return Clean(force);
  std::vector<std::string> tags;
  std::string spec_abs = fs::absolute(spec_path).lexically_normal().string();
  std::vector<TestbedState> states = ListTestbedStates();
  auto owned_by_live_run = [&](const std::string& tag) {
    for (const auto& s : states)
      if (s.tag == tag && s.OwnerAlive()) return s.owner;
    return pid_t{0};
  };
  for (const auto& s : states)
    if (fs::path(s.spec).lexically_normal().string() == spec_abs) tags.push_back(s.tag);
  Status result = OkStatus();
  for (const auto& tag : tags) {
    if (pid_t owner = owned_by_live_run(tag); owner > 0 && !force) {
      std::fprintf(stderr,
                   "testbed %s: kept, its loftctl run (pid %d) is alive (--force removes it anyway)\n",
                   tag.c_str(), owner);
      continue;
    }
    auto r = TeardownTestbed(tag);
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().message().c_str());
      result = r.status();
      continue;
    }
    std::fprintf(stderr, "testbed %s: removed %zu objects\n", tag.c_str(), r->size());
    for (const auto& line : *r) std::fprintf(stderr, "  %s\n", line.c_str());
  }
  if (tags.empty()) std::fprintf(stderr, "no testbed was built for %s\n", spec_abs.c_str());
  return result;
}

void List() {
  std::vector<TestbedState> states = ListTestbedStates();
  for (const auto& tag : TestbedTagsOnSystem()) {
    const TestbedState* s = nullptr;
    for (const auto& st : states)
      if (st.tag == tag) s = &st;
    if (s == nullptr) {
      std::cout << tag << "  (no state file: leftovers; `loftctl testbed clean` removes them)\n";
    } else {
      std::cout << fmt::format(
          "{}  subnet 10.213.{}.0/24  spec {}  owner {}\n", tag, s->subnet, s->spec,
          s->owner == 0 ? std::string("testbed up")
                        : fmt::format("pid {} ({})", s->owner, s->OwnerAlive() ? "running" : "gone"));
    }
  }
}

}  // namespace

void RegisterTestbedCommands(CLI::App& app, int* exit_code) {
  auto* tb =
      app.add_subcommand("testbed", "network namespaces, shaped links and CPU quotas for a spec (root)");
  tb->require_subcommand(1);
  auto fail = [exit_code](const char* what, const Status& st) {
    std::fprintf(stderr, "loftctl testbed %s: %s\n", what, st.ToString().c_str());
    *exit_code = st.code() == StatusCode::kAborted ? 130 : 1;
  };

  auto* up = tb->add_subcommand("up", "build the testbed for SPEC and leave it up (for long experiments)");
  auto up_spec = std::make_shared<std::string>();
  up->add_option("spec", *up_spec, "cluster spec YAML")->required();
  up->callback([=] {
    if (Status st = Up(*up_spec); !st.ok()) fail("up", st);
  });

  auto* down = tb->add_subcommand("down", "remove the testbeds built for SPEC (also after a crashed run)");
  auto down_spec = std::make_shared<std::string>();
  auto down_all = std::make_shared<bool>(false);
  auto down_force = std::make_shared<bool>(false);
  down->add_option("spec", *down_spec, "cluster spec YAML the testbed was built for");
  down->add_flag("--all", *down_all,
                 "remove every loft testbed (names lft????*) on this machine: testbed clean");
  down->add_flag("--force", *down_force, "also remove testbeds whose loftctl run is still alive");
  down->callback([=] {
    if (Status st = Down(*down_spec, *down_all, *down_force); !st.ok()) fail("down", st);
  });

  auto* clean = tb->add_subcommand(
      "clean",
      "remove every testbed leftover on this machine (lft???? namespaces, links, cgroups, processes, state "
      "files, and the root cgroup's cpu controller if a testbed turned it on); keeps the testbeds of live "
      "`cluster run`s; prints what it removed; idempotent");
  clean->callback([=] {
    if (Status st = Clean(false); !st.ok()) fail("clean", st);
  });

  auto* check = tb->add_subcommand("check", "can this machine run a testbed? (root, ip, tc, cpu cgroup)");
  check->callback([=] {
    Status st = CheckTestbedSupport();
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.message().c_str());
      *exit_code = 1;
      return;
    }
    std::fprintf(stderr, "testbed support: ok (cpu cgroup %s)\n", FindCpuCgroup()->dir.c_str());
  });

  auto* list = tb->add_subcommand("list", "testbeds (and leftovers) on this machine");
  list->callback([] { List(); });

  auto* ex = tb->add_subcommand("exec", "run a command in a testbed node's network namespace and cgroup");
  auto ex_netns = std::make_shared<std::string>();
  auto ex_cgroup = std::make_shared<std::string>();
  auto ex_user = std::make_shared<std::string>();
  auto ex_cmd = std::make_shared<std::vector<std::string>>();
  ex->add_option("--netns", *ex_netns, "network namespace (ip netns name)");
  ex->add_option("--cgroup", *ex_cgroup, "cgroup directory to join");
  ex->add_option("--user", *ex_user,
                 "run the command as this user (root joins the cgroup and namespace first)");
  ex->add_option("command", *ex_cmd, "command and arguments (after --)")->required();
  ex->callback([=] {
    Status st = EnterAndExec(*ex_netns, *ex_cgroup, *ex_user, *ex_cmd);  // returns only on error
    fail("exec", st);
    *exit_code = 127;
  });
}

}  // namespace loft::ctl
