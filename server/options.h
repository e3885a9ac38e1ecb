// SchedulerOptions: everything `loft-scheduler` is configured with. Plain
// struct with in-class defaults; loaded from a YAML file (keys below, all
// optional except cluster_spec) and then overridden by command-line flags.
//
//   cluster_spec: examples/clusters/homogeneous.yaml   # the job's cluster spec
//   policy: loft                    # uniform | lbbsp | pid | loft | loft-epoch
//   bind: tcp://0.0.0.0:7700        # ROUTER endpoint agents connect to
//   journal_dir: /var/lib/loft/scheduler-journal
//   heartbeat_interval_ms: 0        # agents are told to beat this often; 0 = the cluster
//                                   # spec's scheduler.heartbeat_interval_ms (default 250)
//   heartbeat_timeout_ms: 0         # a silent agent is dropped after this; 0 = the spec's
//                                   # scheduler.heartbeat_timeout_ms (default 1500), the
//                                   # figure loft-sim charges: one default for both engines
//   partition_timeout_ms: 0         # minimum partition deadline before a retry; 0 = the spec's
//                                   # scheduler.partition_timeout_ms (30000, 60000 with a model),
//                                   # the figure loft-sim charges: one default for every engine
//   keys_dir: /etc/loft/keys        # from `loftctl keygen`; CURVE is on by default
//   insecure: false                 # plain TCP; only allowed on loopback binds
//   metrics_port: 9464              # Prometheus text on http://<host>:port/metrics; 0 = off
//   metrics_address: 127.0.0.1      # interface the metrics endpoint binds
//   iterations: 0                   # 0 = the spec's training.iterations
//   min_workers: 0                  # live workers before the first plan; 0 = all spec nodes
//   start_when_ready: false         # those workers must also have been heard from after their
//                                   # registration reply (view + manifest) arrived (cluster run: true)
//   start_peers_wait_ms: 0          # and (at most this long) until their peer connections are up
//   journal_sync: true              # fsync every journal batch before acting on it
//   journal_snapshot_every: 10000   # snapshot the state into the journal (dropping the
//                                   # entries it covers) once this many entries accumulated;
//                                   # bounds the journal and the replay at restart. 0 = never
//   plan_ahead: auto                # auto | 0..3: plan iteration t+1 while t-k+1 .. t run
//                                   # (k; agents need credits >= k + 1). auto: deep enough
//                                   # for the spec's scheduler.overhead_ms + handoff_ms
//                                   # (sched::IterationGate; 1 with training.overlap and
//                                   # 0 without when both are 0)
//   epoch_overlap: true             # plan the next epoch's first iteration while the current
//                                   # epoch's last partitions are in flight (two epochs open;
//                                   # sched::StateOptions::overlap_epochs). false: wait for them
//   log_level: info
//   max_message_bytes: 16777216     # per ZeroMQ message (ZMQ_MAXMSGSIZE)
//   manifest: /var/lib/loft/caches/MANIFEST.loft  # dataset manifest (`loftctl ingest`); sent to
//                                   # agents, who refuse peer samples that do not match it
//   control_tos: 16                 # IP type of service of what the scheduler sends (0x10 low
//                                   # delay; 0 = unmarked); 0..255
//
// Not responsible for: reading keys or the spec (the daemon does that).
// Thread-safety: plain value type.
#pragma once

#include <cstdint>
#include <string>

#include "core/cluster_spec.h"
#include "core/status.h"
#include "core/zmq_util.h"

namespace loft::server {

struct SchedulerOptions {
  std::string cluster_spec;
  std::string policy = "loft";
  std::string bind = "tcp://127.0.0.1:7700";
  std::string journal_dir = "scheduler-journal";
  int64_t heartbeat_interval_ms = 0;  // 0 = the spec's (TakeSpecDefaults)
  int64_t heartbeat_timeout_ms = 0;   // 0 = the spec's (TakeSpecDefaults)
  int64_t partition_timeout_ms = 0;   // 0 = the spec's (TakeSpecDefaults; the spec's 0 = never)
  std::string keys_dir;
  bool insecure = false;
  int metrics_port = 0;
  std::string metrics_address = "127.0.0.1";
  int64_t iterations = 0;
  int min_workers = 0;  // live workers needed before the first iteration; 0 = every spec node
  // The first iteration also waits until each of those workers has sent a
  // message after its registration reply (the agent heartbeats as soon as
  // the reply arrives): over a slow link the reply (view, dataset
  // manifest) takes a while, and a peer fetching from a node that has not
  // read it yet is refused, which fails the first partitions.
  bool start_when_ready = false;
  // With start_when_ready: the first iteration also waits, at most this
  // long (ms) after the workers are live and heard from, until each reports
  // its peer-fetch connections to the others handshaken
  // (Heartbeat.peers_ready): the first partitions' reads otherwise pay the
  // handshakes, on a CPU-quota node tens of ms each (docs/testbed.md
  // "The first iterations"). 0 = do not wait.
  int64_t start_peers_wait_ms = 0;
  bool journal_sync = true;  // fsync each journal batch
  // Journal entries after which the scheduler writes a snapshot of its
  // state into the journal and deletes the entries it covers
  // (scheduler/journal.h "Snapshots"): the journal and a restart's replay
  // stay within about this many entries. 0 = never (the journal grows
  // with the job). Each snapshot costs O(samples + partitions of the
  // current epoch), at the end of a tick, after the sends.
  int64_t journal_snapshot_every = 10000;
  // Iterations planned beyond the one running: 0 = strict BSP (plan t+1
  // once t is complete), 1 = plan and stream t+1 while t runs, so agents
  // prefetch its samples and planning + journaling leave the critical
  // path; -1 = auto (1 when the spec's training.overlap is true, which is
  // what the cost model's max(Tread, Tc) assumes). service.h says when
  // planning ahead is allowed.
  int plan_ahead = -1;
  // sched::StateOptions::overlap_epochs (header comment: epoch_overlap).
  bool epoch_overlap = true;
  std::string log_level = "info";
  int64_t max_message_bytes = 16 << 20;
  std::string manifest;  // empty = no manifest (peer samples checked by CRC only)
  // IP type of service (ZMQ_TOS) of the agents' connections to the
  // scheduler, as the scheduler sends (assignments, views): 16 = 0x10, low
  // delay, ahead of bulk records where a queue honours it; 0 = unmarked.
  int control_tos = kLowDelayTos;

  // Names the first invalid field. `insecure` requires a loopback bind
  // (CheckInsecureAllowed in core/curve.h); without it keys_dir is required.
  Status Validate() const;
  // Fills what is left at 0 from the cluster spec's `scheduler:` section
  // (heartbeat interval and timeout), then checks timeout > interval.
  Status TakeSpecDefaults(const SchedulerSpec& spec);
};

// Reads the YAML file over `opts` (unknown keys are errors naming the
// file and line). Fields absent from the file keep their current value.
Status LoadSchedulerOptionsFile(const std::string& path, SchedulerOptions* opts);
Status ParseSchedulerOptions(const std::string& yaml_text, const std::string& source, SchedulerOptions* opts);
// The YAML form of `opts` (every key), which ParseSchedulerOptions reads
// back to the same struct; `loftctl cluster run` writes scheduler.yaml so.
std::string SchedulerOptionsToYaml(const SchedulerOptions& opts);

}  // namespace loft::server
