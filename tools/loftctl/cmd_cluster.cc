// loftctl cluster commands:
//   keygen --out DIR [--spec SPEC.yaml | --nodes a,b,...]
//   status --scheduler ENDPOINT [--json] [--keys-dir DIR | --insecure]
//   cluster run SPEC.yaml --policy P [--iterations N] --out DIR [--testbed]
//     writes summary.json, iterations.csv (one row per worker per
//     iteration: the simulator's header, sched::RunRecorder), training.csv
//     (training runs: loss and accuracy over wall time) and status.json.
//     A run ends on its own terms (tools/loftctl/README.md): when its job
//     finishes; stopped (no iteration completed for --no-progress-timeout-s,
//     the explicit --timeout-s, or Ctrl-C/SIGTERM), it still writes those
//     files of what it did, marked "stopped" with the reason, and exits 1
//     (130 when interrupted).
//     A scheduler or agent process that exits on its own (before the
//     launcher stops it, also after the job's last iteration) fails the run
//     at once; so does a --trainer process, except that status 0 is its
//     normal end once the job ended, and is given up to 30 s for the job to
//     end when the trainer exits in the job's last iteration (the scheduler
//     may still be committing it). A failed run: everything is stopped,
//     status.json gets "failed": true and "error", no summary.json, exit
//     status 1.
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "cache/ingest.h"
#include "cache/manifest.h"
#include "core/cluster_spec.h"
#include "core/codec.h"
#include "core/curve.h"
#include "core/placement.h"
#include "core/zmq_util.h"
#include "edge_agent/agent_config.h"
#include "scheduler/run_recorder.h"
#include "server/options.h"
#include "sim/summary.h"
#include "tools/loftctl/child_process.h"
#include "tools/loftctl/commands.h"
#include "tools/loftctl/exit_signals.h"
#include "tools/loftctl/run_as_user.h"
#include "tools/loftctl/run_deadline.h"
#include "tools/loftctl/status_pages.h"
#include "tools/loftctl/testbed.h"

namespace loft::ctl {
namespace {
namespace fs = std::filesystem;

// Writes scheduler, per-node and operator ("loftctl") key pairs.
Status Keygen(const std::string& out, const std::string& spec_path, const std::vector<std::string>& extra) {
  std::vector<std::string> names = {"scheduler", "loftctl"};
  if (!spec_path.empty()) {
    LOFT_ASSIGN_OR_RETURN(ClusterSpec spec, LoadClusterSpecFile(spec_path));
    for (const auto& n : spec.nodes) names.push_back(n.name);
  }
  for (const auto& n : extra) names.push_back(n);
  if (names.size() == 2) return InvalidArgument("keygen needs --spec or --nodes to name the agents");
  for (const auto& name : names) {
    if (name.empty() || name.find('/') != std::string::npos || name[0] == '.') {
      return InvalidArgument("invalid key name '" + name + "'");
    }
    LOFT_ASSIGN_OR_RETURN(CurveKeyPair kp, GenerateCurveKeyPair());
    LOFT_RETURN_IF_ERROR(WriteCurveKeyPair(out, name, kp));
  }
  std::fprintf(stderr,
               "wrote %zu key pairs to %s (<name>.key secret, <name>.pub public).\n"
               "The scheduler accepts every <name>.pub in its keys_dir; give each machine its own\n"
               "<name>.key plus the .pub files of everyone it must accept (docs/deployment.md).\n",
               names.size(), out.c_str());
  return OkStatus();
}

}  // namespace

StatusOr<v1::StatusReply> QueryStatusReply(const std::string& endpoint, const std::string& keys_dir,
                                           bool insecure, int timeout_ms, bool include_rows) {
  zmq::context_t ctx(1);
  SocketOptions so;
  so.recv_timeout_ms = timeout_ms;
  so.send_timeout_ms = timeout_ms;
  if (!insecure) {
    if (keys_dir.empty()) return InvalidArgument("--keys-dir is required unless --insecure");
    LOFT_ASSIGN_OR_RETURN(CurveKeyPair own, ReadCurveKeyPair((fs::path(keys_dir) / "loftctl.key").string()));
    LOFT_ASSIGN_OR_RETURN(std::string server_pub,
                          ReadCurvePublicKey((fs::path(keys_dir) / "scheduler.pub").string()));
    so.curve_own = own;
    so.curve_server_public = server_pub;
  } else {
    LOFT_RETURN_IF_ERROR(CheckInsecureAllowed({endpoint}));
  }
  LOFT_ASSIGN_OR_RETURN(zmq::socket_t sock, MakeSocket(ctx, zmq::socket_type::dealer, so));
  LOFT_RETURN_IF_ERROR(Connect(sock, endpoint));
  // One request; a reply refused for the key's status budget
  // (server/status_reply.h) is asked again a little later, for a while.
  auto ask = [&](int64_t rows_from) -> StatusOr<v1::StatusReply> {
    v1::Envelope req;
    req.mutable_status_request()->set_include_rows(include_rows);
    req.mutable_status_request()->set_rows_from(rows_from);
    for (int tries = 1;; ++tries) {
      LOFT_RETURN_IF_ERROR(SendEnvelope(sock, req));
      auto reply = RecvEnvelope(sock);
      if (!reply.ok()) {
        return Unavailable("no status reply from " + endpoint + ": " + reply.status().ToString());
      }
      if (reply->has_error()) {
        Status st = StatusFromError(reply->error());
        if (st.code() == StatusCode::kResourceExhausted && tries < 100) {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          continue;
        }
        return st;
      }
      if (!reply->has_status_reply()) {
        return DataLoss(fmt::format("unexpected reply '{}' from {}", BodyName(*reply), endpoint));
      }
      return std::move(*reply->mutable_status_reply());
    }
  };
  // Rows come a page at a time (StatusRequest.rows_from).
  if (include_rows) return ReadAllRowPages(ask);
  return ask(0);
}

StatusOr<std::string> QueryStatus(const std::string& endpoint, const std::string& keys_dir, bool insecure,
                                  int timeout_ms) {
  LOFT_ASSIGN_OR_RETURN(v1::StatusReply r, QueryStatusReply(endpoint, keys_dir, insecure, timeout_ms, false));
  return r.json();
}

// The run's figures as JSON (status.json "run", `loftctl status --json`).
nlohmann::json RunJson(const v1::RunSummary& r) {
  return {{"iterations_completed", r.iterations_completed()},
          {"mean_iteration_ms", r.mean_iteration_ms()},
          {"p95_iteration_ms", r.p95_iteration_ms()},
          {"last_decile_iteration_ms", r.last_decile_iteration_ms()},
          {"straggler_wait_ms", r.straggler_wait_ms()},
          {"local_bytes", r.local_bytes()},
          {"remote_bytes", r.remote_bytes()},
          {"total_s", r.total_s()},
          {"rows_dropped", r.rows_dropped()}};
}

namespace {

std::string StatusTable(const nlohmann::json& j) {
  std::string out;
  auto get = [&](const char* k) { return j.contains(k) ? j[k].dump() : std::string("?"); };
  out += fmt::format("view {}  epoch {}  iteration {}  policy {}\n", get("view"), get("epoch"),
                     get("iteration"), get("policy"));
  if (j.contains("ledger")) out += "ledger " + j["ledger"].dump() + "\n";
  if (j.contains("workers") && j["workers"].is_array()) {
    out += fmt::format("{:<16} {:>5} {:>8} {:>9} {:>10}  {}\n", "node", "live", "credits", "in_flight",
                       "done", "profile");
    for (const auto& w : j["workers"]) {
      out +=
          fmt::format("{:<16} {:>5} {:>8} {:>9} {:>10}  {}\n", w.value("name", "?"),
                      w.value("live", false) ? "yes" : "no", w.value("credits", 0), w.value("in_flight", 0),
                      w.value("partitions_done", 0), w.contains("profile") ? w["profile"].dump() : "");
    }
  }
  return out;
}

}  // namespace

namespace {

// A free TCP port on 127.0.0.1 (bound to port 0, then released).
StatusOr<int> FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return IOError("socket() failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return IOError("cannot bind a free port on 127.0.0.1");
  }
  int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

Status WriteText(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::trunc);
  out << text;
  if (!out) return IOError("cannot write " + p.string());
  return OkStatus();
}

// testbed.json: per agent (and the scheduler) its CPU quota, how often the
// quota stopped it and the CPU it used (cgroup cpu.stat; testbed.h
// CgroupCpuStat), over its whole life and, under "job", since cluster run
// first saw the job running (`job_from_iteration`: the iteration it
// showed then; the start-up before it, registration and the cache scan,
// is left out), with its partitions: the agents' own CPU is not in
// loft-sim's model (docs/testbed.md "Agent CPU under quotas"). A cgroup
// that cannot be read is reported, not fatal.
struct TestbedCpuSnapshot {
  int64_t iteration = -1;
  std::vector<StatusOr<CgroupCpuStat>> nodes;
  std::map<std::string, int64_t> partitions;  // per node name, from status
};

std::map<std::string, int64_t> PartitionsDone(const nlohmann::json& status) {
  std::map<std::string, int64_t> out;
  if (status.is_object() && status.contains("workers")) {
    for (const auto& w : status["workers"]) out[w.value("name", "")] = w.value("partitions_done", int64_t{0});
  }
  return out;
}

TestbedCpuSnapshot SnapshotTestbedCpu(const Testbed& tb, const nlohmann::json& status) {
  TestbedCpuSnapshot s;
  s.iteration = status.is_object() ? status.value("iteration", int64_t{-1}) : -1;
  for (size_t i = 0; i < tb.plan().nodes.size(); ++i) s.nodes.push_back(tb.NodeCpuStat(static_cast<int>(i)));
  s.partitions = PartitionsDone(status);
  return s;
}

void WriteTestbedCpu(const Testbed& tb, const std::optional<TestbedCpuSnapshot>& at_job_start,
                     const nlohmann::json& last, const fs::path& path) {
  auto stat_json = [](const CgroupCpuStat& st) {
    return nlohmann::json{
        {"nr_periods", st.nr_periods},
        {"nr_throttled", st.nr_throttled},
        {"throttled_ms", st.throttled_ms},
        {"usage_ms", st.usage_ms >= 0 ? nlohmann::json(st.usage_ms) : nlohmann::json(nullptr)}};
  };
  auto entry = [&](const StatusOr<CgroupCpuStat>& st, double cores) {
    nlohmann::json j = {{"cpu_cores", cores > 0 ? nlohmann::json(cores) : nlohmann::json(nullptr)}};
    if (!st.ok()) {
      j["error"] = st.status().ToString();
      return j;
    }
    j.update(stat_json(*st));
    return j;
  };
  const std::map<std::string, int64_t> done = PartitionsDone(last);
  nlohmann::json nodes = nlohmann::json::object();
  for (size_t i = 0; i < tb.plan().nodes.size(); ++i) {
    const TestbedNode& n = tb.plan().nodes[i];
    const StatusOr<CgroupCpuStat> now = tb.NodeCpuStat(static_cast<int>(i));
    nlohmann::json j = entry(now, n.cpu_cores);
    if (auto d = done.find(n.name); d != done.end()) j["partitions_done"] = d->second;
    if (at_job_start && i < at_job_start->nodes.size() && now.ok() && at_job_start->nodes[i].ok()) {
      const CgroupCpuStat& a = *at_job_start->nodes[i];
      CgroupCpuStat diff;
      diff.nr_periods = now->nr_periods - a.nr_periods;
      diff.nr_throttled = now->nr_throttled - a.nr_throttled;
      diff.throttled_ms = now->throttled_ms - a.throttled_ms;
      diff.usage_ms = now->usage_ms >= 0 && a.usage_ms >= 0 ? now->usage_ms - a.usage_ms : -1;
      nlohmann::json job = stat_json(diff);
      auto before = at_job_start->partitions.find(n.name);
      auto after = done.find(n.name);
      if (before != at_job_start->partitions.end() && after != done.end())
        job["partitions_done"] = after->second - before->second;
      j["job"] = std::move(job);
    }
    nodes[n.name] = std::move(j);
  }
  nlohmann::json doc = {{"tag", tb.plan().tag},
                        {"cfs_period_us", tb.plan().nodes.empty() ? 0 : tb.plan().nodes[0].cfs_period_us},
                        {"job_from_iteration",
                         at_job_start ? nlohmann::json(at_job_start->iteration) : nlohmann::json(nullptr)},
                        {"nodes", std::move(nodes)},
                        {"scheduler", entry(tb.SchedulerCpuStat(), 0)}};
  if (Status s = WriteText(path, doc.dump(2) + "\n"); !s.ok())
    std::fprintf(stderr, "cluster run: %s\n", s.ToString().c_str());
}

// Ingests every node's cache that has no completion marker yet, and writes
// the dataset manifest (cache_root/MANIFEST.loft) when it is missing.
Status EnsureCaches(const ClusterSpec& spec, const fs::path& cache_root, const std::string& dataset_dir) {
  std::vector<int> missing;
  for (int i = 0; i < spec.num_nodes(); ++i) {
    if (!fs::exists(cache_root / spec.nodes[i].name / "LOFT_INGESTED")) missing.push_back(i);
  }
  const fs::path manifest_path = cache_root / cache::kManifestFile;
  if (missing.empty() && fs::exists(manifest_path)) return OkStatus();
  LOFT_ASSIGN_OR_RETURN(cache::IdxDataset ds, cache::LoadFashionMnist(dataset_dir, "train"));
  LOFT_RETURN_IF_ERROR(cache::CheckSpecAgainstDataset(spec, ds, "train"));
  {
    std::error_code ec;
    fs::create_directories(cache_root, ec);
    if (ec) return IOError("cannot create " + cache_root.string() + ": " + ec.message());
    LOFT_ASSIGN_OR_RETURN(
        cache::Manifest m,
        cache::Manifest::Build(ds, spec.dataset.samples, cache::PayloadEncoding::FromSpec(spec.dataset)));
    LOFT_RETURN_IF_ERROR(cache::WriteManifestFile(manifest_path.string(), m));
  }
  LOFT_ASSIGN_OR_RETURN(Placement placement, Placement::FromSpec(spec));
  for (int i : missing) {
    fs::path dir = cache_root / spec.nodes[i].name;
    LOFT_RETURN_IF_ERROR(cache::SampleCache::Destroy(dir.string()));
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return IOError("cannot create " + dir.string() + ": " + ec.message());
    LOFT_ASSIGN_OR_RETURN(auto c, cache::SampleCache::Open(dir.string()));
    cache::IngestOptions opts;
    opts.encoding = cache::PayloadEncoding::FromSpec(spec.dataset);
    LOFT_ASSIGN_OR_RETURN(auto r, cache::IngestSamples(*c, ds, placement.SamplesOf(i), opts));
    c.reset();
    LOFT_RETURN_IF_ERROR(cache::WriteIngestMarker(
        dir.string(),
        cache::IngestMarker{spec.nodes[i].name, r.samples, cache::IdsDigest(placement.SamplesOf(i)),
                            spec.source, "train", spec.dataset.samples}));
    std::fprintf(stderr, "ingested %lld samples into %s (%.2f s)\n", static_cast<long long>(r.samples),
                 dir.c_str(), r.seconds);
  }
  return OkStatus();
}

// A --trainer process for one agent: `sh -c CMD` with LOFT_CONSUMER_ENDPOINT,
// LOFT_NODE and LOFT_ITERATIONS set, and the loft Python package of this
// build or install prefix (bindir/../python, bindir/../lib/python3/dist-packages)
// put first on PYTHONPATH. In its own process group: stopping it stops what
// CMD started. Restarted with its node (spec failures) with LOFT_RESTARTED=1.
Child TrainerChild(const std::string& cmd, const std::string& node, const std::string& endpoint,
                   int64_t iterations, const fs::path& bindir, const std::string& log) {
  std::string pypath;
  for (const fs::path& p : {bindir / ".." / "python", bindir / ".." / "lib" / "python3" / "dist-packages"}) {
    std::error_code ec;
    if (fs::exists(p / "loft" / "__init__.py", ec)) pypath += fs::canonical(p, ec).string() + ":";
  }
  std::string env = fmt::format("export LOFT_CONSUMER_ENDPOINT='{}' LOFT_NODE='{}' LOFT_ITERATIONS={}; ",
                                endpoint, node, iterations);
  if (!pypath.empty()) env += "export PYTHONPATH=\"" + pypath + "${PYTHONPATH:-}\"; ";
  Child c{"trainer-" + node, {"/bin/sh", "-c", env + "exec " + cmd}, log};
  c.own_group = true;  // stopping it also stops what the command started
  return c;
}

// How long a trainer that exited with status 0 during the job's last
// iteration may precede the job's end (its last partitions being committed).
constexpr double kTrainerEndGraceS = 30.0;

struct RunOptions {
  std::string spec_path;
  std::string policy = "loft";
  int64_t iterations = 0;
  std::string out;
  std::string cache_root;
  std::string dataset_dir = "/usr/share/datasets/fashion-mnist";
  bool insecure = false;
  bool link_emulation = true;
  bool disk_emulation = true;    // local reads at the spec's disk.read_mbps (agents' disk_emulation)
  RunDeadlines deadlines;        // --no-progress-timeout-s, --timeout-s (run_deadline.h)
  int heartbeat_timeout_ms = 0;  // 0 = the spec's scheduler.heartbeat_timeout_ms
  int partition_timeout_ms = 0;  // 0 = the spec's scheduler.partition_timeout_ms
  std::string log_level = "info";
  int eval_every = 50;              // training: test-set evaluation period (and after the last iteration)
  std::string plan_ahead = "auto";  // the scheduler's plan_ahead: auto | 0 | 1
  bool testbed = false;             // namespaces, kernel-shaped links, CPU cgroups (docs/testbed.md)
  std::string trainer;              // --trainer: a command run once per agent (compute_mode external)
  // --testbed: the scheduler and agents drop root for this user ("root": they keep it).
  std::string testbed_user = "nobody";
};

// What a run is set up with before any process starts.
struct RunSetup {
  ClusterSpec spec;
  std::string spec_abs;
  fs::path out, bindir, cache_root, keys;
  std::optional<RunAsUser> daemon_user;  // --testbed: who the daemons run as (none: root)
  WorkDirGrant grant;                    // what daemon_user owns for the run; given back after `tb` goes
  std::unique_ptr<Testbed> tb;           // --testbed; removed when destroyed
  std::string endpoint;                  // the scheduler's
  bool training = false;
  int64_t total_iterations = 0;
  std::string node_ip(int i) const { return tb ? tb->plan().nodes[i].ip : std::string("127.0.0.1"); }
  std::string daemon_user_name() const { return daemon_user ? daemon_user->name : std::string(); }
};

// The processes of a run. The scheduler and the agents run in process
// groups of their own, as the trainers do: a Ctrl-C in the terminal reaches
// loftctl only, which then reads the run's rows from the scheduler before
// it stops everything (in loftctl's group the scheduler died with the
// Ctrl-C, and the rows with it).
struct RunProcesses {
  Child sched;
  std::vector<Child> agents;
  std::vector<Child> trainers;

  void StopEverything(const RunSetup& s) {
    std::vector<Child*> t, a;
    for (auto& c : trainers) t.push_back(&c);
    for (auto& c : agents) a.push_back(&c);
    StopAll(t, 3000);
    StopAll(a, 3000);
    Stop(sched, 3000);
    std::error_code ec;
    for (const auto& n : s.spec.nodes) fs::remove(s.out / ("consumer-" + n.name + ".sock"), ec);
  }
};

// --testbed, before anything is built: the machine can run a testbed, the
// daemons' user exists, and what crashed testbed runs left (their loftctl
// killed: SIGKILL cannot be caught) is removed, saying so; when it cannot
// be, the run refuses and names `loftctl testbed clean`. The testbeds of
// live runs and of `testbed up` are left alone.
Status PrepareTestbedHost(const RunOptions& ro, RunSetup& s) {
  LOFT_RETURN_IF_ERROR(CheckTestbedSupport());
  auto user = LookUpUser(ro.testbed_user);
  if (!user.ok()) return user.status().WithContext("--testbed-user");
  if (user->uid != 0) {
    s.daemon_user = *user;
  } else {
    std::fprintf(stderr, "cluster run: --testbed-user %s: the scheduler and agents run as root\n",
                 ro.testbed_user.c_str());
  }
  CleanOptions stale;
  stale.keep_detached = true;
  const CleanReport r = CleanTestbeds(stale);
  for (const auto& line : r.removed)
    std::fprintf(stderr, "cluster run: %s%s\n", line.rfind("testbed ", 0) == 0 ? "stale " : "", line.c_str());
  if (!r.errors.empty()) {
    std::string m = "the leftovers of an earlier testbed run could not be removed:";
    for (const auto& e : r.errors) m += "\n  " + e;
    return FailedPrecondition(m + "\nremove them with `sudo loftctl testbed clean`, then run again");
  }
  return OkStatus();
}

// --testbed as a user: gives the user OUT (where the agents make their
// consumer sockets), the scheduler's journal, the daemons' secret keys and
// the nodes' caches (RocksDB writes its LOCK and logs) for the run (back to
// their owners when the run ends: RunSetup's WorkDirGrant), then checks
// as that user that the daemons can open everything they need. The logs are
// opened by loftctl, as root.
Status GiveWorkDirsToDaemonUser(const RunOptions& ro, RunSetup& s) {
  if (!s.daemon_user) return OkStatus();
  const RunAsUser& u = *s.daemon_user;
  s.grant = WorkDirGrant(u.uid, u.gid);
  // (Not the executables: `testbed exec --user` opens them as root.)
  std::vector<PathAccess> need = {{s.out.string(), R_OK | W_OK | X_OK},
                                  {s.spec_abs, R_OK},
                                  {(s.out / "scheduler.yaml").string(), R_OK},
                                  {s.keys.string(), R_OK | X_OK}};
  LOFT_RETURN_IF_ERROR(s.grant.Give(s.out.string(), false));
  // The scheduler's journal: made here so that it goes back to root after the run.
  const fs::path journal = s.out / "scheduler-journal";
  std::error_code ec;
  fs::create_directories(journal, ec);
  if (ec) return IOError(fmt::format("cannot create {}: {}", journal.string(), ec.message()));
  LOFT_RETURN_IF_ERROR(s.grant.Give(journal.string(), true));
  need.push_back({journal.string(), R_OK | W_OK | X_OK});
  std::vector<std::string> secret = {"scheduler"};  // not loftctl.key: that one is loftctl's
  for (const auto& n : s.spec.nodes) secret.push_back(n.name);
  for (const auto& name : secret) {
    const fs::path key = s.keys / (name + ".key");
    LOFT_RETURN_IF_ERROR(s.grant.Give(key.string(), false));
    need.push_back({key.string(), R_OK});
    need.push_back({(s.keys / (name + ".pub")).string(), R_OK});
  }
  for (const auto& n : s.spec.nodes) {
    const fs::path cache = s.cache_root / n.name;
    LOFT_RETURN_IF_ERROR(s.grant.Give(cache.string(), true));
    need.push_back({cache.string(), R_OK | W_OK | X_OK});
    need.push_back({(s.out / ("agent-" + n.name + ".yaml")).string(), R_OK});
  }
  if (fs::exists(s.cache_root / cache::kManifestFile))
    need.push_back({(s.cache_root / cache::kManifestFile).string(), R_OK});
  if (s.training) need.push_back({ro.dataset_dir, R_OK | X_OK});
  Status st = CheckAccessAs(u, need);
  if (!st.ok())
    return Status(st.code(),
                  st.message() + fmt::format("\n(the daemons run as --testbed-user {}: choose an --out "
                                             "and --cache-root that user can reach, or another user)",
                                             u.name));
  return OkStatus();
}

// Loads the spec, clears OUT of a previous run's results, ingests missing
// caches, writes the keys and brings the testbed up.
StatusOr<RunSetup> PrepareRun(const RunOptions& ro) {
  auto interrupted = [](const char* during) { return Aborted(fmt::format("interrupted during {}", during)); };
  RunSetup s;
  LOFT_RETURN_IF_ERROR(ro.deadlines.Validate());
  LOFT_ASSIGN_OR_RETURN(s.spec, LoadClusterSpecFile(ro.spec_path));
  s.out = fs::absolute(ro.out);
  std::error_code ec;
  fs::create_directories(s.out / "logs", ec);
  if (ec) return IOError("cannot create " + s.out.string() + ": " + ec.message());
  // A previous run's results in OUT must not pass for this run's if it fails.
  for (const char* f : {"summary.json", "iterations.csv", "training.csv", "status.json"}) {
    fs::remove(s.out / f, ec);
    if (ec) return IOError("cannot remove the previous run's " + (s.out / f).string() + ": " + ec.message());
  }
  s.bindir = fs::read_symlink("/proc/self/exe", ec).parent_path();
  if (ec) return Internal("cannot find this executable's directory");
  for (const char* exe : {"loft-scheduler", "loft-agent"}) {
    if (!fs::exists(s.bindir / exe))
      return NotFound((s.bindir / exe).string() + " not found (build it first)");
  }
  if (ro.testbed) LOFT_RETURN_IF_ERROR(PrepareTestbedHost(ro, s));  // before the slow set-up steps
  s.cache_root = ro.cache_root.empty() ? s.out / "caches" : fs::absolute(ro.cache_root);
  LOFT_RETURN_IF_ERROR(EnsureCaches(s.spec, s.cache_root, ro.dataset_dir));
  s.keys = s.out / "keys";
  if (!ro.insecure) LOFT_RETURN_IF_ERROR(Keygen(s.keys.string(), ro.spec_path, {}));
  // --testbed: the scheduler binds the bridge address in the root namespace,
  // each agent its own address in its namespace; the kernel shapes the
  // rates, the agents keep only link_emulation's latency.
  if (ro.testbed) {
    if (ro.insecure)
      return InvalidArgument("--testbed needs CURVE (agents talk over a bridge, not loopback)");
    if (ExitSignal()) return interrupted("the caches' and keys' set-up");
    LOFT_ASSIGN_OR_RETURN(s.tb, Testbed::Up(s.spec, ro.spec_path, ::getpid()));
    std::fprintf(stderr, "testbed %s up (loftctl testbed clean removes it if this run is killed)\n",
                 s.tb->plan().tag.c_str());
    if (ExitSignal()) return interrupted("the testbed's set-up");  // ~Testbed removes it
  }
  LOFT_ASSIGN_OR_RETURN(int port, FreePort());
  s.endpoint = fmt::format("tcp://{}:{}", s.tb ? s.tb->plan().bridge_ip : "127.0.0.1", port);
  s.spec_abs = fs::absolute(ro.spec_path).string();
  if (s.tb) {
    // The daemons read a copy in OUT: a user without root may not reach SPEC.
    const fs::path copy = s.out / "cluster-spec.yaml";
    if (fs::absolute(ro.spec_path) != copy) {
      fs::copy_file(ro.spec_path, copy, fs::copy_options::overwrite_existing, ec);
      if (ec)
        return IOError(fmt::format("cannot copy {} to {}: {}", ro.spec_path, copy.string(), ec.message()));
    }
    s.spec_abs = copy.string();
  }
  s.training = s.spec.training.model != "none";
  s.total_iterations = ro.iterations > 0 ? ro.iterations : s.spec.training.iterations;
  return s;
}

// The scheduler's options for this run (written to OUT/scheduler.yaml).
server::SchedulerOptions SchedulerOptionsFor(const RunOptions& ro, const RunSetup& s) {
  server::SchedulerOptions so;
  so.cluster_spec = s.spec_abs;
  so.policy = ro.policy;
  so.bind = s.endpoint;
  so.journal_dir = (s.out / "scheduler-journal").string();
  so.heartbeat_interval_ms = 0;  // the spec's scheduler.heartbeat_interval_ms
  so.heartbeat_timeout_ms = ro.heartbeat_timeout_ms;
  so.partition_timeout_ms = ro.partition_timeout_ms;  // 0: the daemon takes the spec's
  so.iterations = ro.iterations;
  so.log_level = ro.log_level;
  so.plan_ahead = ro.plan_ahead == "auto" ? -1 : std::stoi(ro.plan_ahead);
  so.start_when_ready = true;     // no first partitions lost to an agent still reading its registration
  so.start_peers_wait_ms = 3000;  // nor paying its peers' handshakes (server/README.md)
  so.insecure = ro.insecure;
  if (!ro.insecure) so.keys_dir = s.keys.string();
  if (fs::exists(s.cache_root / cache::kManifestFile))
    so.manifest = (s.cache_root / cache::kManifestFile).string();
  return so;
}

// Node i's agent options for this run (written to OUT/agent-<name>.yaml).
agent::AgentConfig AgentConfigFor(const RunOptions& ro, const RunSetup& s, const std::string& manifest,
                                  int i) {
  const std::string& name = s.spec.nodes[i].name;
  agent::AgentConfig ac;
  ac.node_name = name;
  ac.cluster_spec = s.spec_abs;
  ac.cache_dir = (s.cache_root / name).string();
  // The agent's copy of the manifest: it registers with the root only.
  if (!manifest.empty()) ac.manifest = manifest;
  ac.scheduler_endpoint = s.endpoint;
  ac.peer_bind = fmt::format("tcp://{}:0", s.node_ip(i));
  ac.credits = 4;  // loft-agent's default: a window for plan-ahead up to sched::kMaxPlanAhead
  ac.compute_mode = "synthetic";
  ac.link_emulation = ro.link_emulation;
  ac.disk_emulation = ro.disk_emulation;
  // Until its registration reply names the scheduler's (the spec's).
  ac.heartbeat_interval_ms = static_cast<int>(std::ceil(s.spec.scheduler.heartbeat_interval_ms));
  ac.log_level = ro.log_level;
  ac.seed = static_cast<uint64_t>(i + 1);
  if (s.tb) {
    ac.ring_bind = fmt::format("tcp://{}:0", s.node_ip(i));
    ac.link_rate_emulation = false;
  }
  ac.insecure = ro.insecure;
  if (!ro.insecure) ac.keys_dir = s.keys.string();
  if (s.training) {
    ac.test_data_dir = ro.dataset_dir;
    ac.eval_every = ro.eval_every;
    ac.last_iteration = s.total_iterations - 1;
  }
  if (!ro.trainer.empty()) {
    // --trainer: the agent serves a local consumer, one trainer process per agent.
    ac.compute_mode = "external";
    ac.consumer_endpoint = "ipc://" + (s.out / ("consumer-" + name + ".sock")).string();
    ac.consumer_timeout_ms = 30000;
  }
  return ac;
}

// Writes the daemons' configs and describes their processes (not started).
StatusOr<RunProcesses> ConfigureProcesses(const RunOptions& ro, const RunSetup& s) {
  if (!ro.trainer.empty() && s.spec.training.model != "external" && s.spec.training.model != "none")
    return InvalidArgument(
        "--trainer runs the model in the trainers: training.model must be external (or none: "
        "no all-reduce), got '" +
        s.spec.training.model + "'");
  std::error_code ec;
  const server::SchedulerOptions so = SchedulerOptionsFor(ro, s);
  fs::remove_all(so.journal_dir, ec);
  LOFT_RETURN_IF_ERROR(WriteText(s.out / "scheduler.yaml", server::SchedulerOptionsToYaml(so)));
  RunProcesses p;
  p.sched = Child{"scheduler",
                  {(s.bindir / "loft-scheduler").string(), "--config", (s.out / "scheduler.yaml").string()},
                  (s.out / "logs" / "scheduler.log").string()};
  if (s.tb) p.sched.argv = s.tb->WrapScheduler(p.sched.argv, s.daemon_user_name());
  p.sched.own_group = true;
  for (int i = 0; i < s.spec.num_nodes(); ++i) {
    const std::string& name = s.spec.nodes[i].name;
    const agent::AgentConfig ac = AgentConfigFor(ro, s, so.manifest, i);
    if (!ro.trainer.empty()) {
      p.trainers.push_back(TrainerChild(ro.trainer, name, ac.consumer_endpoint, s.total_iterations, s.bindir,
                                        (s.out / "logs" / ("trainer-" + name + ".log")).string()));
    }
    fs::path cfg = s.out / ("agent-" + name + ".yaml");
    LOFT_RETURN_IF_ERROR(WriteText(cfg, agent::AgentConfigToYaml(ac)));
    std::vector<std::string> argv = {(s.bindir / "loft-agent").string(), "--config", cfg.string()};
    if (s.tb) argv = s.tb->WrapNode(i, argv, s.daemon_user_name());
    p.agents.push_back(Child{name, argv, (s.out / "logs" / ("agent-" + name + ".log")).string()});
    p.agents.back().own_group = true;
  }
  // Each log holds this run only (a restarted agent appends to its own).
  fs::remove(p.sched.log, ec);
  for (const auto& c : p.agents) fs::remove(c.log, ec);
  for (const auto& c : p.trainers) fs::remove(c.log, ec);
  return p;
}

// Starts the scheduler, the agents and the trainers; on an error, stops
// what was started.
Status StartProcesses(RunProcesses& p, const RunSetup& s) {
  if (Status st = BecomeSubreaper(); !st.ok())
    std::fprintf(stderr, "cluster run: %s\n", st.ToString().c_str());
  LOFT_RETURN_IF_ERROR(Spawn(p.sched));
  for (std::vector<Child>* group : {&p.agents, &p.trainers}) {
    for (auto& c : *group) {
      if (Status st = Spawn(c); !st.ok()) {
        p.StopEverything(s);
        return st;
      }
    }
  }
  std::fprintf(stderr, "cluster run: scheduler %s (pid %d), %d agents, logs in %s\n", s.endpoint.c_str(),
               p.sched.pid, s.spec.num_nodes(), (s.out / "logs").c_str());
  return OkStatus();
}

// How a run's watch ended: the job finished (`result` ok, no `stop`), was
// stopped (`stop`: interrupt or deadline; `result` is its status), or
// failed (`result` an error, no `stop`: a process exited on its own, a
// restart failed).
struct RunEnd {
  Status result;
  std::optional<RunStop> stop;
};

// Watches a started run until its job finishes, it is stopped or it fails:
// polls the scheduler's status every 200 ms, prints progress, injects the
// spec's failures, judges children that exit on their own.
class RunWatcher {
 public:
  RunWatcher(const RunOptions& ro, RunSetup& s, RunProcesses& p) : ro_(ro), s_(s), p_(p) {
    for (int i = 0; i < s.spec.num_nodes(); ++i) {
      for (const auto& f : s.spec.nodes[i].failures) {
        events_.push_back({f.at_s, i, true});
        events_.push_back({f.at_s + f.down_s, i, false});
      }
    }
    std::sort(events_.begin(), events_.end(), [](const Event& a, const Event& b) { return a.at_s < b.at_s; });
  }
  RunEnd Watch();
  // The scheduler's last status document and run figures seen.
  nlohmann::json& last() { return last_; }
  const v1::RunSummary& last_run() const { return last_run_; }
  const std::optional<TestbedCpuSnapshot>& cpu_at_job_start() const { return cpu_at_job_start_; }
  double Now() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }
  JobProgress Progress() const;
  Status CheckChildren();

 private:
  struct Event {  // failure injection: (time since the job started, node, kill?)
    double at_s;
    int node;
    bool kill;
  };
  void ReadStatus();
  Status InjectFailures();
  void PrintProgress();

  const RunOptions& ro_;
  RunSetup& s_;
  RunProcesses& p_;
  std::vector<Event> events_;
  size_t next_event_ = 0;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  std::optional<double> job_start_s_;
  std::optional<TestbedCpuSnapshot> cpu_at_job_start_;
  nlohmann::json last_;
  v1::RunSummary last_run_;
  bool last_fresh_ = false;  // `last_` is this poll's status reply (not an older one)
  double last_print_ = -1;
};

JobProgress RunWatcher::Progress() const {
  JobProgress p;
  p.last_iteration = s_.total_iterations - 1;
  if (!last_.is_null()) {
    p.finished = last_.value("finished", false);
    p.iteration = last_.value("iteration", int64_t{-1});
  }
  return p;
}

void RunWatcher::ReadStatus() {
  auto reply = QueryStatusReply(s_.endpoint, ro_.insecure ? "" : s_.keys.string(), ro_.insecure, 1000,
                                /*include_rows=*/false);
  last_fresh_ = false;
  if (!reply.ok()) return;
  auto j = nlohmann::json::parse(reply->json(), nullptr, false);
  if (j.is_discarded()) return;
  last_ = std::move(j);
  last_run_ = reply->run();
  last_fresh_ = true;
  if (!job_start_s_ && last_.value("iteration", int64_t{-1}) >= 0) {
    job_start_s_ = Now();
    if (s_.tb) cpu_at_job_start_ = SnapshotTestbedCpu(*s_.tb, last_);
  }
}

Status RunWatcher::InjectFailures() {
  while (job_start_s_ && next_event_ < events_.size() && Now() - *job_start_s_ >= events_[next_event_].at_s) {
    const Event& e = events_[next_event_++];
    Child& a = p_.agents[e.node];
    // The node goes down with its trainer; the restarted trainer gets
    // LOFT_RESTARTED=1 (train_fmnist.py then takes the ring's state).
    Child* t = p_.trainers.empty() ? nullptr : &p_.trainers[e.node];
    const double at = Now() - *job_start_s_;
    if (e.kill) {
      std::fprintf(stderr, "failure injection: SIGKILL %s at %.1f s\n", a.name.c_str(), at);
      if (t) KillNow(*t);
      KillNow(a);
    } else if (a.pid <= 0) {
      std::fprintf(stderr, "failure injection: restarting %s at %.1f s\n", a.name.c_str(), at);
      Status st = Spawn(a);
      if (st.ok() && t) {
        if (t->argv.back().rfind("export LOFT_RESTARTED=1; ", 0) != 0)
          t->argv.back() = "export LOFT_RESTARTED=1; " + t->argv.back();
        st = Spawn(*t);
      }
      if (!st.ok()) return st.WithContext("failure injection: restarting " + a.name);
    }
  }
  return OkStatus();
}

void RunWatcher::PrintProgress() {
  if (Now() - last_print_ < 1.0) return;
  last_print_ = Now();
  const auto& l = last_["ledger"];
  std::fprintf(stderr,
               "[%6.1f s] iteration %lld/%lld epoch %lld view %lld live %zu committed %lld retries %lld\n",
               last_print_, static_cast<long long>(last_.value("iteration", int64_t{-1}) + 1),
               static_cast<long long>(last_.value("iterations_target", int64_t{0})),
               static_cast<long long>(last_.value("epoch", int64_t{0})),
               static_cast<long long>(last_.value("view", int64_t{0})), last_["live_nodes"].size(),
               static_cast<long long>(l.value("samples_committed", int64_t{0})),
               static_cast<long long>(l.value("retries", int64_t{0})));
}

// A process that exits on its own while the job runs (not stopped by this
// launcher) fails the run at once: a trainer, unless it ended normally
// after the job's last round (JudgeTrainerExit); an agent or the scheduler, always.
Status RunWatcher::CheckChildren() {
  const double now = Now();
  if (Poll(p_.sched, now) || p_.sched.wait_status)
    return ChildExitError(p_.sched, "the scheduler", /*trainer=*/false, Progress());
  for (auto& a : p_.agents) {
    if (Poll(a, now) || a.wait_status)
      return ChildExitError(a, "agent " + a.name, /*trainer=*/false, Progress());
  }
  for (size_t i = 0; i < p_.trainers.size(); ++i) {
    Child& t = p_.trainers[i];
    Poll(t, now);
    if (!t.wait_status) continue;
    const ExitVerdict v =
        JudgeTrainerExit(*t.wait_status, Progress(), now - t.exited_at_s, kTrainerEndGraceS);
    if (v == ExitVerdict::kFail) {
      // A status-0 exit is judged against a fresh status reply only: on
      // an older one a trainer that ended after its last batch would look
      // early.
      const bool clean = WIFEXITED(*t.wait_status) && WEXITSTATUS(*t.wait_status) == 0;
      if (clean && !last_fresh_) continue;
      return ChildExitError(t, "the trainer of node " + s_.spec.nodes[i].name, /*trainer=*/true, Progress());
    }
  }
  return OkStatus();
}

RunEnd RunWatcher::Watch() {
  ProgressWatch deadlines(ro_.deadlines, Now());
  while (true) {
    if (const int sig = ExitSignal(); sig != 0) {
      Status st = Aborted(fmt::format("interrupted by {}", ExitSignalName(sig)));
      return {st, RunStop{"interrupted", st}};
    }
    if (Poll(p_.sched, Now())) return {ChildExitError(p_.sched, "the scheduler", false, Progress()), {}};
    ReadStatus();
    deadlines.Observe(last_run_.iterations_completed(), Now());
    if (std::optional<RunStop> stop = deadlines.Due(Now())) return {stop->status, stop};
    if (!last_.is_null()) {
      if (Status st = InjectFailures(); !st.ok()) return {st, {}};
      PrintProgress();
      if (last_.value("finished", false)) return {OkStatus(), {}};
    }
    if (Status st = CheckChildren(); !st.ok()) return {st, {}};
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// The scheduler's status document and the run recorder's figures with
// every row (one per worker per iteration), read once before it stops.
StatusOr<v1::StatusReply> ReadFinalStatus(const RunOptions& ro, const RunSetup& s) {
  return QueryStatusReply(s.endpoint, ro.insecure ? "" : s.keys.string(), ro.insecure, 10000,
                          /*include_rows=*/true);
}

// Trainers end on their own after the last round (they evaluate first):
// give them a minute; one that fails there fails the run.
Status WaitTrainers(RunWatcher& w, RunProcesses& p) {
  for (int waited = 0; !ExitSignal() && waited < 60000; waited += 100) {
    if (std::all_of(p.trainers.begin(), p.trainers.end(), [&](Child& t) {
          Poll(t, w.Now());
          return t.pid <= 0;
        }))
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  LOFT_RETURN_IF_ERROR(w.CheckChildren());
  for (const auto& t : p.trainers) {
    if (t.pid > 0)
      std::fprintf(stderr, "cluster run: %s still running 60 s after the job ended; stopping it\n",
                   t.name.c_str());
  }
  return OkStatus();
}

// Each trainer's last log line (its result).
void PrintTrainerResults(const RunProcesses& p) {
  for (const auto& t : p.trainers) {
    std::ifstream in(t.log);
    std::string line, lastline;
    while (std::getline(in, line))
      if (!line.empty()) lastline = line;
    std::fprintf(stderr, "trainer %s: %s\n", t.name.c_str(), lastline.c_str());
  }
}

// summary.json: the loft-sim format plus "ledger"; every figure from the
// scheduler's run recorder (the simulator's, sched::RunRecorder); training
// runs add "training" and "final_accuracy". Fills *train_by_it with the
// training entries per iteration (training.csv).
nlohmann::json SummaryJson(const RunOptions& ro, const nlohmann::json& last, const v1::RunSummary& run,
                           sim::SummaryFile* summary, std::map<int64_t, nlohmann::json>* train_by_it) {
  const nlohmann::json& l = last.contains("ledger") ? last["ledger"] : nlohmann::json::object();
  sim::PolicySummary& ps = summary->policies[ro.policy];
  sim::SetFigures(sched::FiguresFromProto(run), &ps);
  ps.epochs_completed = l.value("epochs_completed", int64_t{0});
  auto sj = nlohmann::json::parse(sim::SummaryToJson(*summary));
  sj["ledger"] = {{"epochs_completed", l.value("epochs_completed", int64_t{0})},
                  {"samples_committed", l.value("samples_committed", int64_t{0})},
                  {"duplicates", l.value("duplicates", int64_t{0})},
                  {"lost", l.value("lost", int64_t{0})},
                  {"retries", l.value("retries", int64_t{0})},
                  {"failed", l.value("failed", int64_t{0})},
                  {"timed_out", l.value("timed_out", int64_t{0})},
                  {"unavailable", l.value("unavailable", int64_t{0})},
                  {"unavailable_samples",
                   l.contains("unavailable_samples") ? l["unavailable_samples"] : nlohmann::json::array()}};
  // Training: final accuracy, loss and test accuracy over wall time.
  if (last.contains("training")) {
    const auto& tr = last["training"];
    double acc = tr.value("final_accuracy", -1.0);
    nlohmann::json fa = acc >= 0 ? nlohmann::json(acc) : nlohmann::json(nullptr);
    sj["final_accuracy"] = fa;
    if (sj.contains("policies") && sj["policies"].contains(ro.policy))
      sj["policies"][ro.policy]["final_accuracy"] = fa;
    const nlohmann::json its = tr.contains("iterations") ? tr["iterations"] : nlohmann::json::array();
    sj["training"] = {
        {"model", tr.value("model", "")},
        {"aggregation", tr.value("aggregation", "")},
        {"final_accuracy", fa},
        {"hash_mismatches", tr.value("hash_mismatches", int64_t{0})},
        {"poisoned_samples",
         last.contains("poisoning") ? last["poisoning"].value("samples", int64_t{0}) : int64_t{0}},
        {"iterations_reported", its.size()}};
    for (const auto& e : its) (*train_by_it)[e.value("iteration", int64_t{-1})] = e;
  }
  // Detection: peer-served samples refused by the dataset manifest.
  if (last.contains("poisoning")) sj["poisoning"] = last["poisoning"];
  // Detection in the ring: offences by kind, reports, evictions (scheduler/ring_detection.h).
  if (last.contains("ring_detection")) sj["ring_detection"] = last["ring_detection"];
  return sj;
}

// training.csv: loss and test accuracy over wall time, per iteration.
std::string TrainingCsv(const std::map<int64_t, nlohmann::json>& train_by_it) {
  std::string csv = "iteration,wall_s,loss,test_accuracy\n";
  for (const auto& [i, e] : train_by_it) {
    std::string wall = fmt::format("{:.3f}", e.value("wall_s", 0.0)), loss, acc;
    if (e.contains("loss") && e["loss"].is_number()) loss = fmt::format("{:.6f}", e["loss"].get<double>());
    if (e.contains("test_accuracy") && e["test_accuracy"].is_number())
      acc = fmt::format("{:.4f}", e["test_accuracy"].get<double>());
    csv += fmt::format("{},{},{},{}\n", i, wall, loss, acc);
  }
  return csv;
}

// summary.json, iterations.csv, training.csv (training runs) and
// status.json of a run that finished or was stopped. A stopped run's
// summary.json and status.json say so under "stopped": why (the reason and
// the message), how far it got, and `rows_error` when the scheduler could
// no longer give its rows (iterations.csv then holds the header only).
Status WriteRunFiles(const RunOptions& ro, const RunSetup& s, nlohmann::json last, const v1::RunSummary& run,
                     const std::optional<RunStop>& stop, const std::string& rows_error) {
  if (last.is_null()) last = nlohmann::json::object();
  sim::SummaryFile summary;
  std::map<int64_t, nlohmann::json> train_by_it;
  nlohmann::json sj = SummaryJson(ro, last, run, &summary, &train_by_it);
  if (stop) {
    nlohmann::json st = {{"reason", stop->reason},
                         {"message", stop->status.ToString()},
                         {"iterations_completed", run.iterations_completed()},
                         {"iterations_target", s.total_iterations}};
    if (!rows_error.empty()) st["rows_error"] = rows_error;
    sj["stopped"] = st;
    last["stopped"] = st;
  }
  LOFT_RETURN_IF_ERROR(WriteText(s.out / "summary.json", sj.dump(2) + "\n"));
  {
    // iterations.csv: the simulator's header (sched::kIterationsCsvHeader).
    std::vector<std::string> names;
    for (const auto& n : s.spec.nodes) names.push_back(n.name);
    std::ofstream csv(s.out / "iterations.csv", std::ios::trunc);
    sched::WriteIterationsCsvHeader(csv);
    sched::WriteIterationsCsvRows(ro.policy, sched::IterationsFromProto(run), names, csv);
    if (!csv) return IOError("cannot write " + (s.out / "iterations.csv").string());
  }
  if (run.rows_dropped() > 0) {
    std::fprintf(stderr,
                 "cluster run: the scheduler kept the first rows only; %lld rows not in iterations.csv\n",
                 static_cast<long long>(run.rows_dropped()));
  }
  if (s.training) LOFT_RETURN_IF_ERROR(WriteText(s.out / "training.csv", TrainingCsv(train_by_it)));
  last["run"] = RunJson(run);
  LOFT_RETURN_IF_ERROR(WriteText(s.out / "status.json", last.dump(2) + "\n"));
  std::cout << sim::SummaryTable(summary);
  std::cout << "ledger " << sj["ledger"].dump() << "\n";
  if (sj.contains("training")) std::cout << "training " << sj["training"].dump() << "\n";
  return OkStatus();
}

// A failed run: no summary.json; status.json keeps how far the run got,
// marked failed.
Status WriteFailedStatus(const RunSetup& s, nlohmann::json last, const Status& result) {
  if (last.is_null()) last = nlohmann::json::object();
  std::fprintf(stderr, "cluster run: FAILED at iteration %lld; ledger so far %s\n",
               static_cast<long long>(last.value("iteration", int64_t{-1}) + 1),
               last.contains("ledger") ? last["ledger"].dump().c_str() : "{}");
  last["failed"] = true;
  last["error"] = result.ToString();
  (void)WriteText(s.out / "status.json", last.dump(2) + "\n");
  return result;
}

// SIGINT, SIGTERM, SIGHUP or SIGQUIT at any point, the testbed's set-up
// included, ends the run through its clean-up (exit_signals.h; a default
// SIGINT there left the namespaces, links and cgroups behind), and so does
// an error or an exception: RunSetup's destructor removes the testbed.
Status ClusterRun(const RunOptions& ro) {
  InstallExitSignalHandlers();
  LOFT_ASSIGN_OR_RETURN(RunSetup s, PrepareRun(ro));
  LOFT_ASSIGN_OR_RETURN(RunProcesses p, ConfigureProcesses(ro, s));
  LOFT_RETURN_IF_ERROR(GiveWorkDirsToDaemonUser(ro, s));
  LOFT_RETURN_IF_ERROR(StartProcesses(p, s));
  RunWatcher w(ro, s, p);
  RunEnd end = w.Watch();
  // A stopped run keeps the last status's figures when the scheduler can no
  // longer give its rows.
  v1::RunSummary run = w.last_run();
  std::string rows_error;
  if (end.result.ok() || end.stop) {
    if (auto reply = ReadFinalStatus(ro, s); reply.ok()) {
      run = std::move(*reply->mutable_run());
      auto j = nlohmann::json::parse(reply->json(), nullptr, false);
      if (!j.is_discarded()) w.last() = std::move(j);  // the ledger and training as of the rows
    } else if (end.stop) {
      rows_error = reply.status().ToString();
    } else {
      end.result = reply.status().WithContext("reading the run's rows from the scheduler");
    }
  }
  if (end.result.ok()) end.result = WaitTrainers(w, p);
  if (s.tb)
    WriteTestbedCpu(*s.tb, w.cpu_at_job_start(), w.last(), s.out / "testbed.json");  // agents still run
  p.StopEverything(s);
  PrintTrainerResults(p);
  if (!end.result.ok() && !end.stop) return WriteFailedStatus(s, w.last(), end.result);
  LOFT_RETURN_IF_ERROR(WriteRunFiles(ro, s, w.last(), run, end.stop, rows_error));
  if (end.stop) {
    std::fprintf(stderr, "cluster run: stopped (%s) after %lld of %lld iterations; %s marked \"stopped\"\n",
                 end.stop->reason.c_str(), static_cast<long long>(run.iterations_completed()),
                 static_cast<long long>(s.total_iterations), (s.out / "summary.json").c_str());
    return end.stop->status;
  }
  std::fprintf(stderr, "cluster run: done. %s\n", (s.out / "summary.json").c_str());
  return OkStatus();
}

void RegisterClusterRunCommand(CLI::App& app, int* exit_code) {
  auto* cluster = app.add_subcommand("cluster", "run a cluster spec as real processes on this machine");
  auto* run =
      cluster->add_subcommand("run", "start a scheduler and one agent per node on loopback, run the job");
  cluster->require_subcommand(1);
  auto ro = std::make_shared<RunOptions>();
  run->add_option("spec", ro->spec_path, "cluster spec YAML")->required();
  run->add_option("--policy", ro->policy, "uniform|lbbsp|pid|loft|loft-epoch")->capture_default_str();
  run->add_option("--iterations", ro->iterations, "0 = the spec's training.iterations");
  run->add_option("--out", ro->out, "output directory (summary.json, logs, keys, caches)")->required();
  run->add_option("--cache-root", ro->cache_root,
                  "cache directories (default OUT/caches); ingested if missing");
  run->add_option("--dataset-dir", ro->dataset_dir, "Fashion-MNIST IDX directory")->capture_default_str();
  run->add_flag("--insecure", ro->insecure, "no CURVE keys (loopback only)");
  run->add_flag("!--no-link-emulation", ro->link_emulation, "do not emulate the spec's link rates");
  run->add_flag("!--no-disk-emulation", ro->disk_emulation,
                "read the node caches at the machine's speed instead of the spec's disk.read_mbps");
  CLI::Option* testbed_flag =
      run->add_flag("--testbed", ro->testbed,
                    "root: each agent in its own network namespace and CPU cgroup, link rates shaped by the "
                    "kernel (tbf), cpu_cores quotas (docs/testbed.md)");
  run->add_option("--no-progress-timeout-s", ro->deadlines.no_progress_s,
                  "stop the run when no iteration has completed for this long (0 = never); a run that "
                  "makes progress is never stopped by it. A stopped run still writes summary.json, "
                  "iterations.csv and training.csv of what it did, marked \"stopped\"")
      ->capture_default_str();
  run->add_option("--timeout-s", ro->deadlines.deadline_s,
                  "stop the run this long after its processes started, progress or not (0 = no deadline)")
      ->capture_default_str();
  run->add_option(
         "--heartbeat-timeout-ms", ro->heartbeat_timeout_ms,
         "a silent agent is declared dead after this (0 = the spec's scheduler.heartbeat_timeout_ms, "
         "default 1500)")
      ->capture_default_str();
  run->add_option("--partition-timeout-ms", ro->partition_timeout_ms,
                  "minimum partition deadline before a retry (0 = the spec's scheduler.partition_timeout_ms, "
                  "default 30000, 60000 when the spec trains a model)")
      ->capture_default_str();
  run->add_option("--plan-ahead", ro->plan_ahead,
                  "scheduler: plan iteration t+1 while t-k+1 .. t run (auto: deep enough for the spec's "
                  "scheduler.overhead_ms + handoff_ms)")
      ->check(CLI::IsMember({"auto", "0", "1", "2", "3"}))
      ->capture_default_str();
  run->add_option("--daemon-log-level", ro->log_level, "log level of the daemons")->capture_default_str();
  run->add_option("--trainer", ro->trainer,
                  "run this command once per agent as its consumer (spec training.model external; "
                  "env LOFT_CONSUMER_ENDPOINT, LOFT_NODE, LOFT_ITERATIONS). A trainer that exits before "
                  "the job's last iteration, or with a non-zero status, fails the run at once (exit "
                  "status 1); status 0 in the last iteration waits up to 30 s for the job to end");
  run->add_option("--eval-every", ro->eval_every, "training: evaluate on the test set every N iterations")
      ->capture_default_str();
  run->add_option("--testbed-user", ro->testbed_user,
                  "--testbed: run the scheduler and agents as this user; loftctl gives it OUT, the keys and "
                  "the caches for the run (root: keep them root)")
      ->capture_default_str()
      ->needs(testbed_flag);
  run->callback([=] {
    Status st;
    try {
      st = ClusterRun(*ro);  // an exception unwinds it too: the testbed goes
    } catch (const std::exception& e) {
      st = Internal(std::string("unexpected error: ") + e.what());
    }
    if (!st.ok()) {
      std::fprintf(stderr, "loftctl cluster run: %s\n", st.ToString().c_str());
      *exit_code = st.code() == StatusCode::kAborted ? 130 : 1;
    }
  });
}

}  // namespace

void RegisterClusterCommands(CLI::App& app, int* exit_code) {
  // keygen
  auto* keygen = app.add_subcommand("keygen", "write CURVE key pairs for the scheduler, nodes and loftctl");
  auto kg_out = std::make_shared<std::string>();
  auto kg_spec = std::make_shared<std::string>();
  auto kg_nodes = std::make_shared<std::vector<std::string>>();
  keygen->add_option("--out", *kg_out, "directory to write")->required();
  keygen->add_option("--spec", *kg_spec, "cluster spec whose node names get key pairs");
  keygen->add_option("--nodes", *kg_nodes, "node names (comma separated)")->delimiter(',');
  keygen->callback([=] {
    auto st = Keygen(*kg_out, *kg_spec, *kg_nodes);
    if (!st.ok()) {
      std::fprintf(stderr, "loftctl keygen: %s\n", st.ToString().c_str());
      *exit_code = 1;
    }
  });

  // status
  auto* status = app.add_subcommand("status", "print a scheduler's membership, iteration and ledger");
  auto st_ep = std::make_shared<std::string>();
  auto st_keys = std::make_shared<std::string>();
  auto st_json = std::make_shared<bool>(false);
  auto st_insecure = std::make_shared<bool>(false);
  auto st_timeout = std::make_shared<int>(3000);
  status->add_option("--scheduler", *st_ep, "scheduler endpoint, e.g. tcp://10.0.0.1:7700")->required();
  status->add_option("--keys-dir", *st_keys, "directory with loftctl.key and scheduler.pub");
  status->add_flag("--insecure", *st_insecure, "plain TCP (loopback only)");
  status->add_flag("--json", *st_json, "print the raw JSON document");
  status->add_option("--timeout-ms", *st_timeout, "reply timeout")->capture_default_str();
  status->callback([=] {
    auto reply = QueryStatusReply(*st_ep, *st_keys, *st_insecure, *st_timeout, /*include_rows=*/false);
    if (!reply.ok()) {
      std::fprintf(stderr, "loftctl status: %s\n", reply.status().ToString().c_str());
      *exit_code = 1;
      return;
    }
    auto j = nlohmann::json::parse(reply->json(), nullptr, false);
    if (j.is_discarded()) {
      std::fprintf(stderr, "loftctl status: scheduler sent malformed JSON\n");
      *exit_code = 1;
      return;
    }
    j["run"] = RunJson(reply->run());
    if (*st_json) {
      std::cout << j.dump() << "\n";
      return;
    }
    std::cout << StatusTable(j);
  });

  RegisterClusterRunCommand(app, exit_code);
}

}  // namespace loft::ctl
