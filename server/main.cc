// loft-scheduler: the per-job scheduler daemon. Usage:
//   loft-scheduler --config scheduler.yaml [--bind EP] [--policy P] ...
// Flags override the config file; keys are documented in server/README.md
// and server/options.h.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <string>

#include "core/logging.h"
#include "server/options.h"
#include "server/zmq_server.h"

namespace {
volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) {
  g_stop = 1;
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"loft-scheduler: plans iterations and streams partitions to loft agents"};
  std::string config;
  loft::server::SchedulerOptions flags;
  app.add_option("--config", config, "YAML config file (see server/README.md)");
  auto* o_spec = app.add_option("--cluster-spec", flags.cluster_spec, "cluster spec YAML");
  auto* o_policy = app.add_option("--policy", flags.policy, "uniform|lbbsp|pid|loft|loft-epoch");
  auto* o_bind = app.add_option("--bind", flags.bind, "ROUTER endpoint, e.g. tcp://0.0.0.0:7700");
  auto* o_journal = app.add_option("--journal-dir", flags.journal_dir, "RocksDB journal directory");
  auto* o_hbi = app.add_option("--heartbeat-interval-ms", flags.heartbeat_interval_ms);
  auto* o_hbt = app.add_option("--heartbeat-timeout-ms", flags.heartbeat_timeout_ms);
  auto* o_pt = app.add_option("--partition-timeout-ms", flags.partition_timeout_ms);
  auto* o_keys = app.add_option("--keys-dir", flags.keys_dir, "directory written by `loftctl keygen`");
  auto* o_insecure = app.add_flag("--insecure", flags.insecure, "no CURVE (loopback development only)");
  auto* o_metrics = app.add_option("--metrics-port", flags.metrics_port, "Prometheus port; 0 = off");
  auto* o_iters = app.add_option("--iterations", flags.iterations, "0 = the spec's training.iterations");
  auto* o_log = app.add_option("--log-level", flags.log_level, "trace|debug|info|warn|error|off");
  auto* o_max = app.add_option("--max-message-bytes", flags.max_message_bytes);
  auto* o_snap = app.add_option("--journal-snapshot-every", flags.journal_snapshot_every,
                                "journal entries between state snapshots; 0 = never");
  std::string plan_ahead;
  auto* o_ahead = app.add_option("--plan-ahead", plan_ahead,
                                 "auto|0..3: plan iteration t+1 while t-k+1 .. t run (auto: deep enough "
                                 "for the spec's scheduler.overhead_ms + handoff_ms)")
                      ->check(CLI::IsMember({"auto", "0", "1", "2", "3"}));
  bool no_epoch_overlap = false;
  app.add_flag("--no-epoch-overlap", no_epoch_overlap,
               "start an epoch only once the previous one is committed (epoch_overlap: false)");
  CLI11_PARSE(app, argc, argv);

  loft::server::SchedulerOptions opts;
  if (!config.empty()) {
    auto st = loft::server::LoadSchedulerOptionsFile(config, &opts);
    if (!st.ok()) {
      std::fprintf(stderr, "loft-scheduler: %s\n", st.ToString().c_str());
      return 2;
    }
  }
  if (o_spec->count()) opts.cluster_spec = flags.cluster_spec;
  if (o_policy->count()) opts.policy = flags.policy;
  if (o_bind->count()) opts.bind = flags.bind;
  if (o_journal->count()) opts.journal_dir = flags.journal_dir;
  if (o_hbi->count()) opts.heartbeat_interval_ms = flags.heartbeat_interval_ms;
  if (o_hbt->count()) opts.heartbeat_timeout_ms = flags.heartbeat_timeout_ms;
  if (o_pt->count()) opts.partition_timeout_ms = flags.partition_timeout_ms;
  if (o_keys->count()) opts.keys_dir = flags.keys_dir;
  if (o_insecure->count()) opts.insecure = flags.insecure;
  if (o_metrics->count()) opts.metrics_port = flags.metrics_port;
  if (o_iters->count()) opts.iterations = flags.iterations;
  if (o_log->count()) opts.log_level = flags.log_level;
  if (o_max->count()) opts.max_message_bytes = flags.max_message_bytes;
  if (o_snap->count()) opts.journal_snapshot_every = flags.journal_snapshot_every;
  if (o_ahead->count()) opts.plan_ahead = plan_ahead == "auto" ? -1 : std::stoi(plan_ahead);
  if (no_epoch_overlap) opts.epoch_overlap = false;

  auto st = opts.Validate();
  if (!st.ok()) {
    std::fprintf(stderr, "loft-scheduler: invalid configuration: %s\n", st.ToString().c_str());
    return 2;
  }
  st = loft::InitLogging(opts.log_level, "loft-scheduler");
  if (!st.ok()) {
    std::fprintf(stderr, "loft-scheduler: %s\n", st.ToString().c_str());
    return 2;
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);

  auto server = loft::server::ZmqSchedulerServer::Create(opts, loft::SystemClock::Default());
  if (!server.ok()) {
    spdlog::error("cannot start: {}", server.status().ToString());
    return 1;
  }
  st = (*server)->Run([] { return g_stop != 0; });
  if (!st.ok()) {
    spdlog::error("stopped with error: {}", st.ToString());
    return 1;
  }
  spdlog::info("stopped cleanly");
  return 0;
}
