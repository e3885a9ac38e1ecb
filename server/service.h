// SchedulerService: the protocol layer of loft-scheduler. Protobuf
// envelopes in, envelopes out, Status for every rejection. It moves
// messages and time into the pure sched::JobDriver, journals the updates
// the driver returns BEFORE any external effect (driver.h contract), and
// sends what the driver decided through a SchedulerTransport.
//
// What it keeps itself (soft state, not part of the journaled state):
//  - sessions: per node its endpoints, credits and last heartbeat; also
//    written to <journal_dir>/sessions.json so a restarted scheduler can
//    keep serving agents that do not re-register;
//  - credit-based flow control: a node gets a PartitionAssignment only
//    while it has an unused credit (RegisterRequest.credits + every
//    CreditGrant/Heartbeat.credits − assignments sent); planned
//    partitions wait in a per-node queue otherwise;
//  - heartbeat expiry: a live node silent for heartbeat_timeout_ms is
//    declared dead (JobDriver::OnWorkerDead) and a new view is broadcast;
//  - run statistics for `loftctl status` and `loftctl cluster run`.
// Planning ahead (SchedulerOptions::plan_ahead = 1): iteration t+1 is
// planned, journaled and streamed while t runs, so agents read t+1's
// samples during t's compute (the streaming batch of DESIGN.md; the cost
// model's overlap) and planning + the journal fsync are off the critical
// path. t+1 is planned ahead only when (a) every earlier iteration is
// complete (at most two open), (b) all of t's partitions have been sent,
// (c) the membership view is the one t was planned in and (d) every live
// node got a partition of t. (c) and (d) keep the trainers' rounds in
// order: each member of t's ring receives its partition of t before its
// partition of t+1, so no member needs a weight-0 join of t while holding
// t+1. Otherwise (and always with plan_ahead = 0) t+1 waits until t is
// complete (BSP). Plans made ahead use the profiles known then (without
// t's reports). An epoch's first iteration is never planned ahead (the
// pool is empty until the previous epoch's last samples are committed).
// Samples of a partition that fails return to the pool; with two
// iterations open when a node dies, they may need one more (short)
// iteration in the epoch than under BSP.
// Authentication: with CURVE the peer's key name (ZAP User-Id) must equal
// the node name it speaks for; "loftctl" may only ask for status.
//
// Not responsible for: sockets and framing (ZmqSchedulerServer), planning
// and lineage (scheduler/), deciding sample ids.
// Thread-safety: not thread-safe; one caller thread.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/cluster_spec.h"
#include "core/metrics.h"
#include "core/proto/loft.pb.h"
#include "core/status.h"
#include "scheduler/driver.h"
#include "scheduler/journal.h"
#include "scheduler/poison_reports.h"
#include "server/options.h"
#include "server/transport.h"

namespace loft::server {

struct PeerInfo {
  std::string name;            // CURVE key name (ZAP User-Id); "" when insecure
  bool authenticated = false;  // false in insecure mode: node fields are trusted
};

class SchedulerService {
 public:
  // Opens (or recovers from) the journal in opts.journal_dir. `transport`
  // and `registry` must outlive the service.
  static StatusOr<std::unique_ptr<SchedulerService>> Create(const SchedulerOptions& opts, ClusterSpec spec,
                                                            SchedulerTransport* transport,
                                                            metrics::Registry* registry, double now_ms);

  // One received envelope. `*reply` (left unset for none) goes back to the
  // sender; `*sender_node` is set to the node the message authenticated
  // as (route updates), -1 otherwise. Non-OK: the message was rejected
  // (the caller answers with an Error and counts it); state is unchanged.
  Status Handle(const v1::Envelope& in, const PeerInfo& peer, double now_ms, v1::Envelope* reply,
                int32_t* sender_node);

  // Timers: heartbeat expiry, partition timeouts, planning the next
  // iteration, sending queued partitions. Non-OK only for journal/driver
  // failures (the daemon must stop and recover from the journal).
  Status Tick(double now_ms);

  // The status document (StatusReply.json).
  std::string StatusJson(double now_ms) const;
  // True once the configured number of iterations has completed.
  bool finished() const { return finished_; }
  const sched::JobDriver& driver() const { return *driver_; }
  // The job's id (RegisterReply.job, Partition.job).
  uint64_t job_id() const { return job_id_; }
  // Largest number of partitions ever in flight (sent, not finished) to `node`.
  int64_t max_in_flight(int32_t node) const { return nodes_[node].max_in_flight; }

 private:
  struct NodeSession {
    bool connected = false;  // registered with this scheduler (or restored from sessions.json)
    std::string peer_endpoint;
    std::string ring_endpoint;
    v1::CacheSummary cache;
    int64_t credits = 0;    // unused credits
    int64_t window = 0;     // RegisterRequest.credits: the agent's whole window
    int64_t in_flight = 0;  // assignments sent and not yet finished
    int64_t max_in_flight = 0;
    int64_t partitions_done = 0;
    double last_seen_ms = 0;
    std::deque<uint64_t> queue;  // planned partition ids waiting for a credit
  };
  struct IterationStats {
    double planned_ms = 0;
    // node -> (sent, done) of its partition; the worker's time counts from
    // when it could start: max(sent, the previous iteration's last ack).
    std::map<int32_t, std::pair<double, double>> worker_sent_done;
    double last_done_ms = 0;
  };

  SchedulerService(const SchedulerOptions& opts, ClusterSpec spec, SchedulerTransport* transport,
                   metrics::Registry* registry);
  Status Init(double now_ms);

  // Records updates (already applied in memory by the driver).
  void Record(const sched::Updates& u);
  void Record(sched::Updates&& u);
  // Persists every recorded update (one synced batch). Called before any
  // external effect and at the end of each Tick.
  Status Flush();
  // Journals what is pending without an fsync (see
  // Journal::AppendAllUnsynced): only for records whose loss in a power
  // failure is harmless, like PartitionSent.
  Status FlushUnsynced();
  // The acked partition as it was before its PartitionDone was applied.
  struct AckedPartition {
    uint64_t id = 0;
    int64_t iteration = 0;
    int32_t worker = -1;
    double sent_ms = 0;
  };
  // Bookkeeping that follows applied updates (in-flight counts, stats).
  // `acked`: the partition a PartitionDone in `u` is for, read before the
  // driver call (its record is pruned when the ack completes an epoch).
  // `by_ring`: the PartitionDone is CommitIfApplied's (no timings of
  // its own: left out of the iteration's wall and worker times).
  void Observe(const sched::Updates& u, double now_ms, const AckedPartition* acked = nullptr,
               bool by_ring = false);

  StatusOr<int32_t> Authenticate(const PeerInfo& peer, int32_t claimed_node) const;
  Status OnRegister(const v1::RegisterRequest& req, const PeerInfo& peer, double now_ms, v1::Envelope* reply,
                    int32_t* sender);
  Status BroadcastView();
  Status SendQueued(double now_ms);
  // Plans the next iteration if ReadyToPlan(); true when it did.
  StatusOr<bool> PlanIfReady(double now_ms);
  // Whether the next iteration may be planned now (BSP, or ahead: above).
  bool ReadyToPlan() const;
  Status SaveSessions() const;
  void LoadSessions(double now_ms);
  int64_t target_iterations() const;

  SchedulerOptions opts_;
  ClusterSpec spec_;
  std::string spec_text_;
  std::string sample_digests_;           // the dataset manifest sent at registration (empty = none)
  sched::PoisonReports poison_reports_;  // peers accused of serving forged samples
  SchedulerTransport* transport_;
  std::unique_ptr<sched::Journal> journal_;
  std::unique_ptr<sched::JobDriver> driver_;
  sched::Updates unflushed_;
  std::vector<NodeSession> nodes_;
  std::map<int64_t, IterationStats> open_iterations_;
  int plan_ahead_ = 0;  // resolved SchedulerOptions::plan_ahead
  // The last iteration this process planned: its view and which nodes got
  // a partition (ReadyToPlan's conditions (c) and (d)); -1 = none yet.
  int64_t last_planned_iteration_ = -1;
  int64_t last_planned_view_ = -1;
  std::vector<char> last_planned_workers_;
  int64_t planned_ahead_ = 0;         // iterations planned while the previous one ran
  double prev_done_ms_ = -1;          // last ack of the last closed iteration
  std::vector<double> iteration_ms_;  // completed iterations, wall time plan -> last done
  double straggler_wait_sum_ms_ = 0;
  // Training reports (PartitionTimings.training) by iteration.
  struct TrainingStats {
    double loss_sum = 0;
    int reports = 0;
    double done_ms = 0;
    double test_accuracy = -1;  // -1 = not evaluated
    std::vector<uint64_t> hashes;
    int applied = -1;  // partitions most other workers reported applied; -1 = open
  };
  // Per open iteration: who reported which partitions applied
  // (TrainingReport.applied_partitions; partition id -> reporting
  // workers), and how many distinct workers the iteration was planned on.
  // Dropped when the iteration closes (not kept across a restart).
  // (partition id, the member that named it) -> reporting workers.
  std::map<int64_t, std::map<std::pair<uint64_t, int32_t>, std::set<int32_t>>> ring_votes_;
  std::map<int64_t, int> iteration_workers_;
  // Records `reporter`'s votes from its training report for the open
  // iteration `iteration`: only pairs naming a partition of that iteration
  // together with that partition's worker are kept (junk, another
  // iteration's or another member's partitions cost no memory and never
  // count).
  void RecordVotes(int64_t iteration, int32_t reporter, const v1::TrainingReport& t);
  // A partition in flight that reports from more than half of its
  // iteration's workers, other than its own, say the ring applied is
  // committed with a PartitionDone on its worker's behalf instead of
  // being failed and retried, which would train its samples twice.
  // Returns true when it did. Called before a partition would fail: its
  // worker died or re-registered, it timed out (`timed_out`: its credit
  // comes back as for a timeout), or its worker reported a failure.
  StatusOr<bool> CommitIfApplied(uint64_t partition_id, double now_ms, bool timed_out = false);
  int64_t committed_by_ring_ = 0;
  std::map<int64_t, TrainingStats> training_;
  std::map<uint64_t, v1::TrainingReport> pending_training_;  // the ack being observed
  int64_t local_bytes_ = 0, remote_bytes_ = 0;
  double started_ms_ = 0;
  double first_plan_ms_ = -1;
  double finished_ms_ = 0;
  bool started_ = false;  // first iteration planned (this process or journal)
  bool finished_ = false;
  StatusOr<uint64_t> LoadOrCreateJobId(bool fresh_journal);
  bool recovered_ = false;
  // The job's id (RegisterReply.job, Partition.job): random for a fresh
  // journal, read back from journal_dir/job_id after a restart.
  uint64_t job_id_ = 1;
  bool resent_after_recovery_ = false;
  bool view_dirty_ = false;
  std::string last_blocked_;
  std::map<uint64_t, int32_t> sent_;  // partitions this process sent, not finished -> worker
  // Sent before a restart and not finished since: id -> (worker, iteration).
  std::map<uint64_t, std::pair<int32_t, int64_t>> unconfirmed_;

  metrics::GaugeFamily* g_view_ = nullptr;
  metrics::GaugeFamily* g_iteration_ = nullptr;
  metrics::GaugeFamily* g_in_flight_ = nullptr;
  metrics::GaugeFamily* g_max_in_flight_ = nullptr;
  metrics::GaugeFamily* g_credits_ = nullptr;
  // Per-node children of the three families above, looked up once (the
  // families own them; a child's address never changes).
  struct NodeGauges {
    metrics::Gauge* in_flight = nullptr;
    metrics::Gauge* max_in_flight = nullptr;
    metrics::Gauge* credits = nullptr;
  };
  std::vector<NodeGauges> node_gauges_;
  metrics::GaugeFamily* g_ledger_ = nullptr;
  metrics::HistogramFamily* h_iteration_ = nullptr;
  metrics::HistogramFamily* h_journal_ = nullptr;
  metrics::CounterFamily* c_planned_ahead_ = nullptr;
  metrics::CounterFamily* c_committed_by_ring_ = nullptr;
};

}  // namespace loft::server
