#include "tools/loftctl/testbed.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

extern char** environ;

namespace loft::ctl {
namespace {
namespace fs = std::filesystem;

std::string Join(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  if (!out)
    return IOError(fmt::format("cannot write '{}' to {}: {}", Trim(text), path, std::strerror(errno)));
  return OkStatus();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string StatePath(const std::string& tag) {
  return std::string(kTestbedStateDir) + "/" + tag + ".json";
}

// The tag at the start of a name created by a testbed ("lft1a2b-n3" ->
// "lft1a2b"), or "".
std::string TagOf(const std::string& name) {
  if (name.size() < 7) return "";
  std::string t = name.substr(0, 7);
  return IsTestbedTag(t) ? t : "";
}

std::vector<std::string> NetnsNames() {
  std::vector<std::string> out;
  auto text = RunCommand({"ip", "netns", "list"});
  if (!text.ok()) return out;
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    std::string name = line.substr(0, line.find(' '));
    if (!name.empty()) out.push_back(name);
  }
  return out;
}

std::vector<std::string> LinkNames() {
  std::vector<std::string> out;
  auto text = RunCommand({"ip", "-o", "link", "show"});
  if (!text.ok()) return out;
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {  // "12: lft1a2bh0@if11: <BROADCAST,…"
    auto a = line.find(": ");
    if (a == std::string::npos) continue;
    std::string name = line.substr(a + 2);
    name = name.substr(0, name.find_first_of("@:"));
    out.push_back(name);
  }
  return out;
}

// Every process in `dir` and its sub-cgroups.
std::vector<pid_t> CgroupPids(const std::string& dir) {
  std::vector<pid_t> pids;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return pids;
  std::vector<std::string> dirs = {dir};
  for (const auto& e : fs::recursive_directory_iterator(dir, ec))
    if (e.is_directory()) dirs.push_back(e.path().string());
  for (const auto& d : dirs) {
    std::istringstream in(ReadFile(d + "/cgroup.procs"));
    pid_t p;
    while (in >> p) pids.push_back(p);
  }
  return pids;
}

StatusOr<int> PickSubnet() {
  std::set<int> used;
  for (const auto& s : ListTestbedStates()) used.insert(s.subnet);
  auto addrs = RunCommand({"ip", "-4", "-o", "addr", "show"});
  auto routes = RunCommand({"ip", "-4", "route", "show", "table", "all"});
  std::string sys = (addrs.ok() ? *addrs : "") + (routes.ok() ? *routes : "");
  for (int k = 0; k < 256; ++k) {
    if (used.count(k)) continue;
    if (sys.find(fmt::format("10.213.{}.", k)) != std::string::npos) continue;
    return k;
  }
  return ResourceExhausted(
      "no free testbed subnet in 10.213.0.0/16 (remove old testbeds: loftctl testbed clean)");
}

StatusOr<std::string> PickTag() {
  std::random_device rd;
  std::set<std::string> taken;
  for (const auto& t : TestbedTagsOnSystem()) taken.insert(t);
  for (int attempt = 0; attempt < 64; ++attempt) {
    std::string tag = fmt::format("{}{:04x}", kTestbedPrefix, rd() & 0xffff);
    if (!taken.count(tag)) return tag;
  }
  return ResourceExhausted("no free testbed tag (remove old testbeds: loftctl testbed clean)");
}

int MachineCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::thread::hardware_concurrency());
}

}  // namespace

StatusOr<std::string> TestbedToolPath(const std::string& name) {
  static std::map<std::string, StatusOr<std::string>> found;  // found once per process
  auto it = found.find(name);
  if (it == found.end()) it = found.emplace(name, FindSystemTool(name, kSystemToolDirs)).first;
  return it->second;
}

StatusOr<std::string> RunCommand(const std::vector<std::string>& argv) {
  if (argv.empty()) return InvalidArgument("RunCommand: no command");
  std::string exe = argv[0];
  if (exe.find('/') == std::string::npos) {
    LOFT_ASSIGN_OR_RETURN(exe, TestbedToolPath(exe));
  }
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return IOError("pipe failed");
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return IOError("pipe failed");
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t def;
  sigemptyset(&def);
  sigaddset(&def, SIGPIPE);  // loftctl ignores it (exit_signals.h)
  posix_spawnattr_setsigdefault(&attr, &def);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  args.push_back(exe.data());
  for (size_t i = 1; i < argv.size(); ++i) args.push_back(const_cast<char*>(argv[i].c_str()));
  args.push_back(nullptr);
  // Not the caller's environment: these run as root and their output is parsed.
  std::string env_path = "PATH=/usr/sbin:/usr/bin:/sbin:/bin", env_lc = "LC_ALL=C";
  char* env[] = {env_path.data(), env_lc.data(), nullptr};
  pid_t pid = -1;
  int rc = posix_spawn(&pid, exe.c_str(), &fa, &attr, args.data(), env);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  std::string out, err;
  if (rc == 0) {
    // Small outputs: read stdout, then stderr (a command writing > 64 KiB
    // to stderr before finishing stdout would block; ip and tc do not).
    char buf[4096];
    ssize_t n;
    while ((n = ::read(out_pipe[0], buf, sizeof buf)) > 0) out.append(buf, n);
    while ((n = ::read(err_pipe[0], buf, sizeof buf)) > 0) err.append(buf, n);
  }
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  if (rc != 0) return NotFound(fmt::format("cannot run `{}`: {}", Join(argv), std::strerror(rc)));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Internal(fmt::format("`{}` failed (exit {}): {}", Join(argv),
                                WIFEXITED(status) ? WEXITSTATUS(status) : -1, Trim(err)));
  }
  return out;
}

StatusOr<CpuCgroupRoot> FindCpuCgroup() {
  std::ifstream in("/proc/self/mounts");
  std::string dev, dir, type, opts, rest;
  std::string v2dir;
  while (in >> dev >> dir >> type >> opts && std::getline(in, rest)) {
    if (type == "cgroup") {
      std::istringstream o(opts);
      std::string tok;
      while (std::getline(o, tok, ','))
        if (tok == "cpu") return CpuCgroupRoot{dir, false};
    } else if (type == "cgroup2" && v2dir.empty()) {
      v2dir = dir;
    }
  }
  if (!v2dir.empty()) {
    std::string ctl = ReadFile(v2dir + "/cgroup.controllers");
    if ((" " + Trim(ctl) + " ").find(" cpu ") != std::string::npos) return CpuCgroupRoot{v2dir, true};
    return FailedPrecondition("cgroup v2 at " + v2dir + " has no cpu controller (cgroup.controllers: '" +
                              Trim(ctl) + "')");
  }
  return FailedPrecondition("no cpu cgroup controller is mounted (neither v1 cpu nor cgroup2)");
}

Status CheckTestbedSupport() {
  std::vector<std::string> missing;
  if (::geteuid() != 0) missing.push_back("root (network namespaces and cgroups need it; run as root)");
  for (const char* tool : {"ip", "tc"}) {
    if (auto path = TestbedToolPath(tool); !path.ok()) {
      missing.push_back(fmt::format("the `{}` command: {}", tool, path.status().message()));
    } else if (auto r = RunCommand({tool, "-V"}); !r.ok()) {
      missing.push_back(fmt::format("the `{}` command ({}): {}", tool, *path, r.status().message()));
    }
  }
  auto cg = FindCpuCgroup();
  if (!cg.ok()) missing.push_back(cg.status().message());
  if (!fs::exists("/proc/self/ns/net")) missing.push_back("network namespaces (CONFIG_NET_NS)");
  if (missing.empty()) return OkStatus();
  std::string m = "--testbed cannot run here; missing:";
  for (const auto& s : missing) m += "\n  - " + s;
  m += "\n(without --testbed, agents emulate links with token buckets)";
  return FailedPrecondition(m);
}

bool TestbedState::OwnerAlive() const {
  if (owner <= 0 || owner == ::getpid()) return false;
  if (::kill(owner, 0) != 0 && errno == ESRCH) return false;
  return ReadFile(fmt::format("/proc/{}/cmdline", owner)).find("loftctl") != std::string::npos;
}

std::vector<TestbedState> ListTestbedStates() {
  std::vector<TestbedState> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(kTestbedStateDir, ec)) {
    if (e.path().extension() != ".json") continue;
    auto j = nlohmann::json::parse(ReadFile(e.path().string()), nullptr, false);
    TestbedState s;
    s.tag = e.path().stem().string();
    if (!IsTestbedTag(s.tag)) continue;
    if (j.is_object()) {
      s.spec = j.value("spec", "");
      s.owner = j.value("owner_pid", 0);
      s.subnet = j.value("subnet", -1);
      s.cgroup = j.value("cgroup", "");
    }
    out.push_back(s);
  }
  return out;
}

std::vector<std::string> TestbedTagsOnSystem() {
  std::set<std::string> tags;
  for (const auto& s : ListTestbedStates()) tags.insert(s.tag);
  for (const auto& n : NetnsNames())
    if (!TagOf(n).empty()) tags.insert(TagOf(n));
  for (const auto& n : LinkNames())
    if (!TagOf(n).empty()) tags.insert(TagOf(n));
  if (auto cg = FindCpuCgroup(); cg.ok()) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(cg->dir, ec))
      if (IsTestbedTag(e.path().filename().string())) tags.insert(e.path().filename().string());
  }
  return {tags.begin(), tags.end()};
}

StatusOr<std::vector<std::string>> TeardownTestbed(const std::string& tag) {
  if (!IsTestbedTag(tag)) return InvalidArgument("'" + tag + "' is not a testbed tag (lft + 4 hex digits)");
  std::vector<std::string> done, errors;
  std::string cgdir;
  if (auto cg = FindCpuCgroup(); cg.ok()) cgdir = cg->dir + "/" + tag;
  std::vector<std::string> netns;
  for (const auto& n : NetnsNames())
    if (TagOf(n) == tag) netns.push_back(n);
  // 1. Processes: everything in the run's cgroups and namespaces.
  for (int round = 0; round < 50; ++round) {
    std::vector<pid_t> pids = cgdir.empty() ? std::vector<pid_t>{} : CgroupPids(cgdir);
    for (const auto& n : netns) {
      auto text = RunCommand({"ip", "netns", "pids", n});
      std::istringstream in(text.ok() ? *text : "");
      pid_t p;
      while (in >> p) pids.push_back(p);
    }
    if (pids.empty()) break;
    std::sort(pids.begin(), pids.end());
    pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
    for (pid_t p : pids) {
      if (p == ::getpid()) continue;
      if (::kill(p, SIGKILL) == 0 && round == 0) done.push_back(fmt::format("killed pid {}", p));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // 2. Network: namespaces (their veth ends go, and with them the peers),
  // then any link left (bridge, half-made veths).
  for (const auto& n : netns) {
    auto r = RunCommand({"ip", "netns", "del", n});
    if (r.ok())
      done.push_back("netns " + n);
    else
      errors.push_back(r.status().message());
  }
  for (const auto& l : LinkNames()) {
    if (TagOf(l) != tag) continue;
    auto r = RunCommand({"ip", "link", "del", l});
    if (r.ok())
      done.push_back("link " + l);
    else if (r.status().message().find("Cannot find device") == std::string::npos)
      errors.push_back(r.status().message());  // a veth whose peer just went takes itself along
  }
  // 3. Cgroups, leaves first; a cgroup with a dying task refuses rmdir for a moment.
  std::error_code ec;
  if (!cgdir.empty() && fs::is_directory(cgdir, ec)) {
    std::vector<std::string> dirs;
    for (const auto& e : fs::recursive_directory_iterator(cgdir, ec))
      if (e.is_directory()) dirs.push_back(e.path().string());
    std::sort(dirs.begin(), dirs.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
    dirs.push_back(cgdir);
    for (const auto& d : dirs) {
      int rc = -1;
      for (int i = 0; i < 50 && (rc = ::rmdir(d.c_str())) != 0 && errno == EBUSY; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (rc == 0)
        done.push_back("cgroup " + d);
      else
        errors.push_back(fmt::format("rmdir {}: {}", d, std::strerror(errno)));
    }
  }
  if (!errors.empty()) {
    std::string m = "testbed " + tag + ": could not remove everything:";
    for (const auto& e : errors) m += "\n  " + e;
    return Internal(m);  // the state file stays, so that `testbed down` can retry
  }
  if (fs::remove(StatePath(tag), ec)) done.push_back("state " + StatePath(tag));
  auto root = RevertRootCpu(kTestbedStateDir, [] { return !TestbedTagsOnSystem().empty(); });
  if (!root.ok()) return root.status().WithContext("testbed " + tag + " removed, but the root cgroup");
  if (!root->empty()) done.push_back(*root);
  return done;
}

CleanReport CleanTestbeds(const CleanOptions& options) {
  CleanReport report;
  // Tags before states: a testbed writes its state file before it creates
  // anything, so a tag seen here has its state file listed below, unless
  // that testbed is gone meanwhile (a run starting between the two lists
  // must not look like leftovers without a state file).
  const std::vector<std::string> tags = TestbedTagsOnSystem();
  const std::vector<TestbedState> states = ListTestbedStates();
  for (const auto& tag : tags) {
    const TestbedState* st = nullptr;
    for (const auto& s : states)
      if (s.tag == tag) st = &s;
    std::string why;
    if (st == nullptr) {
      why = "no state file";
    } else if (st->owner == 0) {
      if (options.keep_detached) {
        report.kept.push_back(
            fmt::format("testbed {}: kept, left up by `loftctl testbed up` for {}", tag, st->spec));
        continue;
      }
      why = "left up by `loftctl testbed up`";
    } else if (st->OwnerAlive()) {
      if (!options.force) {
        report.kept.push_back(fmt::format("testbed {}: kept, its loftctl run (pid {}) is alive", tag,
                                          static_cast<int>(st->owner)));
        continue;
      }
      why = fmt::format("its loftctl run (pid {}) is alive: --force", static_cast<int>(st->owner));
    } else {
      why = fmt::format("its loftctl run (pid {}) is gone", static_cast<int>(st->owner));
    }
    auto r = TeardownTestbed(tag);
    if (!r.ok()) {
      report.errors.push_back(r.status().message());
      continue;
    }
    ++report.testbeds_removed;
    report.removed.push_back(fmt::format("testbed {} ({}): removed", tag, why));
    for (const auto& line : *r) report.removed.push_back("  " + line);
  }
  // A record without testbeds (a teardown that stopped before it).
  auto root = RevertRootCpu(kTestbedStateDir, [] { return !TestbedTagsOnSystem().empty(); });
  if (!root.ok())
    report.errors.push_back(root.status().message());
  else if (!root->empty())
    report.removed.push_back(*root);
  return report;
}

StatusOr<std::unique_ptr<Testbed>> Testbed::Up(const ClusterSpec& spec, const std::string& spec_path,
                                               pid_t owner) {
  LOFT_RETURN_IF_ERROR(CheckTestbedSupport());
  LOFT_ASSIGN_OR_RETURN(CpuCgroupRoot cg, FindCpuCgroup());
  std::error_code ec;
  fs::create_directories(kTestbedStateDir, ec);
  if (ec) return IOError(fmt::format("cannot create {}: {}", kTestbedStateDir, ec.message()));
  LOFT_ASSIGN_OR_RETURN(std::string tag, PickTag());
  LOFT_ASSIGN_OR_RETURN(int subnet, PickSubnet());
  LOFT_ASSIGN_OR_RETURN(TestbedPlan plan, PlanTestbed(spec, tag, subnet, MachineCpus()));
  std::unique_ptr<Testbed> tb(new Testbed());
  tb->plan_ = std::move(plan);
  tb->cgroup_dir_ = cg.dir + "/" + tag;
  tb->loftctl_ = fs::read_symlink("/proc/self/exe", ec).string();
  if (ec) return Internal("cannot find this executable (/proc/self/exe)");
  // The state file comes first: from here on, `testbed down` finds the run.
  nlohmann::json st = {
      {"tag", tag},         {"spec", fs::absolute(spec_path).string()}, {"owner_pid", owner},
      {"subnet", subnet},   {"bridge_ip", tb->plan_.bridge_ip},         {"cgroup", tb->cgroup_dir_},
      {"cgroup_v2", cg.v2}, {"nodes", nlohmann::json::array()}};
  for (const auto& n : tb->plan_.nodes)
    st["nodes"].push_back({{"name", n.name},
                           {"netns", n.netns},
                           {"ip", n.ip},
                           {"cgroup", tb->cgroup_dir_ + "/" + n.cgroup},
                           {"up_mbps", n.up_mbps},
                           {"down_mbps", n.down_mbps},
                           {"cpu_cores", n.cpu_cores}});
  // Whole or not at all (a rename): `testbed clean` must never read half of
  // a live run's state file.
  LOFT_RETURN_IF_ERROR(WriteFile(StatePath(tag) + ".tmp", st.dump(2) + "\n"));
  fs::rename(StatePath(tag) + ".tmp", StatePath(tag), ec);
  if (ec) return IOError(fmt::format("cannot write {}: {}", StatePath(tag), ec.message()));

  auto build = [&]() -> Status {
    for (const auto& cmd : tb->plan_.SetupCommands()) {
      auto r = RunCommand(cmd);
      if (!r.ok()) {
        return FailedPrecondition(r.status().message() +
                                  "\n(the testbed needs network namespaces, veth, bridge and the tbf and "
                                  "pfifo_fast qdiscs in the kernel)");
      }
    }
    if (::mkdir(tb->cgroup_dir_.c_str(), 0755) != 0)
      return IOError(fmt::format("mkdir {}: {}", tb->cgroup_dir_, std::strerror(errno)));
    if (cg.v2) {
      // Recorded when it was off: the last testbed to go turns it off again.
      LOFT_RETURN_IF_ERROR(EnableRootCpu(cg.dir, kTestbedStateDir, tag).status());
      LOFT_RETURN_IF_ERROR(WriteFile(tb->cgroup_dir_ + "/cgroup.subtree_control", "+cpu"));
    }
    std::vector<std::string> leaves = {"sched"};
    for (const auto& n : tb->plan_.nodes) leaves.push_back(n.cgroup);
    for (size_t i = 0; i < leaves.size(); ++i) {
      std::string d = tb->cgroup_dir_ + "/" + leaves[i];
      if (::mkdir(d.c_str(), 0755) != 0) return IOError(fmt::format("mkdir {}: {}", d, std::strerror(errno)));
      if (i == 0 || tb->plan_.nodes[i - 1].cfs_quota_us < 0) continue;
      int64_t q = tb->plan_.nodes[i - 1].cfs_quota_us;
      const int64_t period = tb->plan_.nodes[i - 1].cfs_period_us;
      if (cg.v2) {
        LOFT_RETURN_IF_ERROR(WriteFile(d + "/cpu.max", fmt::format("{} {}", q, period)));
      } else {
        LOFT_RETURN_IF_ERROR(WriteFile(d + "/cpu.cfs_period_us", std::to_string(period)));
        LOFT_RETURN_IF_ERROR(WriteFile(d + "/cpu.cfs_quota_us", std::to_string(q)));
      }
    }
    return OkStatus();
  };
  if (Status s = build(); !s.ok()) {
    auto td = TeardownTestbed(tag);
    if (!td.ok())
      return Status(s.code(), s.message() + "\nand the clean-up failed: " + td.status().message());
    return s;
  }
  return tb;
}

Testbed::~Testbed() {
  if (released_) return;
  auto r = TeardownTestbed(plan_.tag);
  if (!r.ok()) {
    std::fprintf(stderr, "%s\nrun `loftctl testbed clean` to retry\n", r.status().ToString().c_str());
  }
}

std::string Testbed::NodeCgroup(int i) const {
  return cgroup_dir_ + "/" + plan_.nodes[i].cgroup;
}

StatusOr<CgroupCpuStat> ParseCpuStat(const std::string& text) {
  CgroupCpuStat st;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string key;
    long long v = 0;
    if (!(ls >> key)) continue;
    if (!(ls >> v) || v < 0) return InvalidArgument(fmt::format("cpu.stat: bad line '{}'", line));
    if (key == "nr_periods") st.nr_periods = v;
    if (key == "nr_throttled") st.nr_throttled = v;
    if (key == "throttled_time") st.throttled_ms = static_cast<double>(v) / 1e6;  // v1: ns
    if (key == "throttled_usec") st.throttled_ms = static_cast<double>(v) / 1e3;  // v2
    if (key == "usage_usec") st.usage_ms = static_cast<double>(v) / 1e3;          // v2
  }
  return st;
}

StatusOr<double> ParseProcStatCpuMs(const std::string& line, long ticks_per_s) {
  // pid (comm) state ppid … utime stime: comm may hold spaces and parens.
  const size_t close = line.rfind(')');
  if (close == std::string::npos || ticks_per_s <= 0)
    return InvalidArgument(fmt::format("not a /proc/PID/stat line: '{}'", Trim(line)));
  std::istringstream in(line.substr(close + 1));
  std::vector<std::string> f;
  std::string tok;
  while (in >> tok) f.push_back(tok);
  // f[0] is field 3 (state); utime and stime are fields 14 and 15.
  long long ut = 0, st = 0;
  if (f.size() < 13 || std::sscanf(f[11].c_str(), "%lld", &ut) != 1 ||
      std::sscanf(f[12].c_str(), "%lld", &st) != 1 || ut < 0 || st < 0)
    return InvalidArgument(fmt::format("not a /proc/PID/stat line: '{}'", Trim(line)));
  return static_cast<double>(ut + st) * 1000.0 / static_cast<double>(ticks_per_s);
}

namespace {
StatusOr<CgroupCpuStat> ReadCpuStat(const std::string& dir) {
  const std::string path = dir + "/cpu.stat";
  std::ifstream in(path);
  if (!in) return IOError(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  std::stringstream ss;
  ss << in.rdbuf();
  auto st = ParseCpuStat(ss.str());
  if (!st.ok()) return st.status().WithContext(path);
  if (st->usage_ms < 0) {  // v1: the processes still in the cgroup
    double ms = 0;
    bool any = false;
    for (pid_t p : CgroupPids(dir)) {
      auto v = ParseProcStatCpuMs(ReadFile(fmt::format("/proc/{}/stat", p)), ::sysconf(_SC_CLK_TCK));
      if (!v.ok()) continue;  // it exited meanwhile
      ms += *v;
      any = true;
    }
    if (any) st->usage_ms = ms;
  }
  return st;
}
}  // namespace

StatusOr<CgroupCpuStat> Testbed::NodeCpuStat(int i) const {
  return ReadCpuStat(NodeCgroup(i));
}

StatusOr<CgroupCpuStat> Testbed::SchedulerCpuStat() const {
  return ReadCpuStat(cgroup_dir_ + "/sched");
}

std::vector<std::string> Testbed::WrapNode(int i, const std::vector<std::string>& argv,
                                           const std::string& user) const {
  std::vector<std::string> w = {loftctl_,   "testbed",    "exec", "--netns", plan_.nodes[i].netns,
                                "--cgroup", NodeCgroup(i)};
  if (!user.empty()) w.insert(w.end(), {"--user", user});
  w.push_back("--");
  w.insert(w.end(), argv.begin(), argv.end());
  return w;
}

std::vector<std::string> Testbed::WrapScheduler(const std::vector<std::string>& argv,
                                                const std::string& user) const {
  std::vector<std::string> w = {loftctl_, "testbed", "exec", "--cgroup", cgroup_dir_ + "/sched"};
  if (!user.empty()) w.insert(w.end(), {"--user", user});
  w.push_back("--");
  w.insert(w.end(), argv.begin(), argv.end());
  return w;
}

Status EnterAndExec(const std::string& netns, const std::string& cgroup_dir, const std::string& user,
                    const std::vector<std::string>& argv) {
  if (argv.empty()) return InvalidArgument("testbed exec: no command given after --");
  std::optional<RunAsUser> as;
  if (!user.empty()) {
    LOFT_ASSIGN_OR_RETURN(RunAsUser u, LookUpUser(user));
    as = u;
  }
  if (!cgroup_dir.empty()) {
    LOFT_RETURN_IF_ERROR(WriteFile(cgroup_dir + "/cgroup.procs", std::to_string(::getpid())));
  }
  if (!netns.empty()) {
    std::string path = "/run/netns/" + netns;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NotFound(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
    int rc = ::setns(fd, CLONE_NEWNET);
    int err = errno;
    ::close(fd);
    if (rc != 0) return PermissionDenied(fmt::format("setns({}): {}", path, std::strerror(err)));
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  if (!as) {
    ::execvp(args[0], args.data());
    return NotFound(fmt::format("exec {}: {}", argv[0], std::strerror(errno)));
  }
  // As the user: a program given by path is opened while still root, so
  // that the user needs to be able to execute it but not to reach it.
  int exe_fd = -1;
  if (argv[0].find('/') != std::string::npos) {
    exe_fd = ::open(argv[0].c_str(), O_PATH | O_CLOEXEC);
    if (exe_fd < 0) return NotFound(fmt::format("cannot open {}: {}", argv[0], std::strerror(errno)));
  }
  LOFT_RETURN_IF_ERROR(DropToUser(*as));
  ::setenv("HOME", as->home.c_str(), 1);
  ::setenv("USER", as->name.c_str(), 1);
  ::setenv("LOGNAME", as->name.c_str(), 1);
  if (exe_fd >= 0) {
    ::fexecve(exe_fd, args.data(), environ);
    if (errno == ENOENT) ::execv(args[0], args.data());  // a script: its interpreter needs the path
  } else {
    ::execvp(args[0], args.data());
  }
  return NotFound(fmt::format("exec {} as {}: {}", argv[0], as->name, std::strerror(errno)));
}

}  // namespace loft::ctl
