// SchedulerService: the protocol layer of loft-scheduler. Protobuf
// envelopes in, envelopes out, Status for every rejection. It decodes,
// authenticates and routes messages, runs the timers, persists, and
// moves messages and time into the scheduler library, which decides:
//  - sched::JobDriver: membership, planning, ledger, epoch pool; it
//    returns StateUpdates, journaled here BEFORE any external effect
//    (driver.h contract), then sent through a SchedulerTransport;
//  - sched::IterationGate: start gate (min_workers), plan-ahead
//    conditions, finish test (scheduler/iteration_gate.h);
//  - sched::RingCommitter: the ring's votes and the commit rule for a
//    partition that would fail (scheduler/ring_committer.h);
//  - sched liveness: heartbeat death and the partitions it affects
//    (scheduler/liveness.h, shared with JobDriver::OnWorkerDead), and
//    who leaves at a tick, dead or evicted (sched::DepartAt,
//    scheduler/departures.h);
//  - sched::CreditWindow, GrantsFor, RestartHold: flow control, serve
//    grants, the hold after a restart (scheduler/flow_control.h), and
//    the re-send after it (scheduler/restart_resend.h);
//  - sched::RunRecorder: every row and figure of the run
//    (scheduler/run_recorder.h, shared with loft-sim).
// What it keeps itself (soft state, not journaled): sessions (per node
// its endpoints, credit window, last heartbeat, send queue), also written
// to <journal_dir>/sessions.json so a restarted scheduler can keep
// serving agents that do not re-register; training reports for status.
// Authentication: with CURVE the peer's key name (ZAP User-Id) must equal
// the node name it speaks for; "loftctl" may only ask for status. Any
// key may ask for status, only "loftctl" for the run's rows, a page at a
// time, within its key's byte budget (server/status_reply.h). Log lines a
// peer can cause are rate-limited per kind and peer (peer_log_).
//
// Not responsible for: sockets and framing (ZmqSchedulerServer), any
// decision (scheduler/), reading the spec (the caller passes it in).
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
#include "core/log_limiter.h"
#include "core/metrics.h"
#include "core/proto/loft.pb.h"
#include "core/status.h"
#include "scheduler/accusations.h"
#include "scheduler/driver.h"
#include "scheduler/flow_control.h"
#include "scheduler/iteration_gate.h"
#include "scheduler/journal.h"
#include "scheduler/open_iterations.h"
#include "scheduler/poison_reports.h"
#include "scheduler/register_backoff.h"
#include "scheduler/restart_resend.h"
#include "scheduler/ring_committer.h"
#include "scheduler/ring_detection.h"
#include "scheduler/run_recorder.h"
#include "scheduler/send_queues.h"
#include "server/options.h"
#include "server/status_reply.h"
#include "server/transport.h"

namespace loft::server {

// Who sent an envelope, as the transport authenticated it (the agent-side
// address book of peers is a different thing: agent::PeerInfo).
struct Sender {
  std::string name;            // CURVE key name (ZAP User-Id); "" when insecure
  bool authenticated = false;  // false in insecure mode: node fields are trusted
};

class SchedulerService {
 public:
  // Opens (or recovers from) the journal in opts.journal_dir. `spec_yaml`
  // is the spec's text (sent to agents in RegisterReply); the service
  // never reads opts.cluster_spec itself. `transport` and `registry` must
  // outlive the service.
  static StatusOr<std::unique_ptr<SchedulerService>> Create(const SchedulerOptions& opts, ClusterSpec spec,
                                                            std::string spec_yaml,
                                                            SchedulerTransport* transport,
                                                            metrics::Registry* registry, double now_ms);

  // One received envelope. `*reply` (left unset for none) goes back to the
  // sender; `*sender_node` is set to the node the message authenticated
  // as (route updates), -1 otherwise. Non-OK: the message was rejected
  // (the caller answers with an Error and counts it); state is unchanged.
  Status Handle(const v1::Envelope& in, const Sender& peer, double now_ms, v1::Envelope* reply,
                int32_t* sender_node);

  // Timers: heartbeat expiry, partition timeouts, planning the next
  // iteration, sending queued partitions. Non-OK only for journal/driver
  // failures (the daemon must stop and recover from the journal).
  Status Tick(double now_ms);

  // The status document (StatusReply.json): membership, workers, ledger,
  // training (every training iteration, or the last
  // kStatusTrainingEntries of them when `training_entries` is set:
  // server/status_reply.h). The run's figures are StatusReply.run
  // (RunSummary).
  std::string StatusJson(double now_ms, size_t training_entries = SIZE_MAX) const;
  // The run's figures (sched::RunRecorder), with every kept row when
  // `include_rows` (in-process callers; a StatusRequest gets one page:
  // server/status_reply.h).
  v1::RunSummary RunSummary(bool include_rows) const;
  // Every node's current cost profile (StatusReply.workers), in node order.
  void WorkerProfiles(google::protobuf::RepeatedPtrField<v1::WorkerCostProfile>* out) const;
  // True once the configured number of iterations has completed.
  bool finished() const { return finished_; }
  // Recovered from a journal: the latest time it records (planned, sent or
  // finished partitions; scheduler/recovered_time.h), which the caller's
  // clock must not read earlier than from now on (ServiceClock::NotBefore;
  // Init already used max(now_ms, this)). 0 otherwise.
  double resume_floor_ms() const { return resume_floor_ms_; }
  // The longest an ack stays journaled without an fsync (SyncIfDue).
  static constexpr double kMaxUnsyncedMs = 20;
  const sched::JobDriver& driver() const { return *driver_; }
  // The job's id (RegisterReply.job, Partition.job).
  uint64_t job_id() const { return job_id_; }
  // Largest number of partitions ever in flight (sent, not finished) to `node`.
  int64_t max_in_flight(int32_t node) const { return sends_.window(node).max_in_flight; }

 private:
  struct NodeSession {
    bool connected = false;  // registered with this scheduler (or restored from sessions.json)
    // Heard from since its registration reply (which carries the view and
    // the dataset manifest) was sent: the job starts only when every
    // worker the gate needs is (a fetch from a node that has not read its
    // reply yet is refused; over a slow link that reply takes a while).
    bool confirmed = false;
    int32_t peers_ready = 0;  // its last Heartbeat.peers_ready
    std::string peer_endpoint;
    std::string ring_endpoint;
    uint64_t incarnation = 0;  // RegisterRequest.incarnation (0 = unknown; not in sessions.json)
    v1::CacheSummary cache;
    int64_t partitions_done = 0;
    double last_seen_ms = 0;
  };
  SchedulerService(const SchedulerOptions& opts, ClusterSpec spec, std::string spec_yaml,
                   SchedulerTransport* transport, metrics::Registry* registry);
  Status Init(double now_ms);

  // Records updates (already applied in memory by the driver).
  void Record(const sched::Updates& u);
  void Record(sched::Updates&& u);
  // Persists every recorded update (one synced batch). Called before any
  // external effect and at the end of each Tick.
  Status Flush();
  // Journals what is pending without an fsync (see
  // Journal::AppendAllUnsynced): only for records no external effect
  // derives from (PartitionSent, PartitionDone). `now_ms` starts the
  // unsynced window (SyncIfDue).
  Status FlushUnsynced(double now_ms);
  // Before an external effect that may derive from what is recorded:
  // Flush when any record needs an fsync first, else FlushUnsynced. Acks
  // (PartitionDone) and PartitionSent records need none: nothing leaves
  // the scheduler because of them that was not journaled synced before
  // (a plan, a view), and the next synced write makes them durable (the
  // WAL is synced as a whole). One fsync per iteration instead of one per
  // tick that handled an ack (4.5 per iteration at 8 workers).
  Status FlushBeforeEffects(double now_ms);
  // What a power failure may take: the acks written since the last synced
  // write. A lost ack leaves its partition Sent after recovery, held until
  // it times out and then retried, so its samples are trained twice (as
  // for an ack lost on its way). The window already existed between an
  // agent's work and the fsync of its ack (one tick); it is bounded here:
  // at the end of a Tick whose oldest unsynced record is kMaxUnsyncedMs
  // old, the journal is synced even with nothing new to write (planning
  // may be stalled: credits, the last iterations, too few workers).
  // `force`: sync whatever is unsynced now (the job's end).
  Status SyncIfDue(double now_ms, bool force = false);
  // Adds the journal's synced writes since it counted `before` to
  // loft_scheduler_journal_syncs_total.
  void CountSyncs(int64_t before);
  // Writes a journal snapshot (Journal::WriteSnapshot) when
  // journal_snapshot_every entries have accumulated since the last one and
  // nothing recorded is unjournaled (the snapshot must be of the journaled
  // state). Called at the end of each Tick, after the sends. A failed
  // snapshot leaves the journal as it was: it is logged and retried after
  // another journal_snapshot_every entries.
  void MaybeSnapshotJournal();
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

  StatusOr<int32_t> Authenticate(const Sender& peer, int32_t claimed_node) const;
  // Authentication and the endpoints' form, then the registration rule
  // (sched::TakeRegistration, scheduler/worker_messages.h); the session,
  // credit window, journal and reply follow from what it decided.
  Status OnRegister(const v1::RegisterRequest& req, const Sender& peer, double now_ms, v1::Envelope* reply,
                    int32_t* sender);
  Status BroadcastView();
  // Each worker message converted into calls of its rules
  // (scheduler/worker_messages.h, failure_reports.h).
  Status OnHeartbeat(const v1::Heartbeat& hb, const Sender& peer, double now_ms, v1::Envelope* reply,
                     int32_t* sender_node);
  Status OnCreditGrant(const v1::CreditGrant& cg, const Sender& peer, double now_ms, int32_t* sender_node);
  Status OnPartitionDone(const v1::PartitionDone& d, const Sender& peer, double now_ms, int32_t* sender_node);
  Status OnPartitionFailed(const v1::PartitionFailed& f, const Sender& peer, double now_ms,
                           int32_t* sender_node);
  // A ring member's report of another: which count, sched::TakePeerReport
  // (scheduler/accusations.h); logs and metrics here.
  Status OnPeerReport(const v1::PeerReport& pr, const Sender& peer, double now_ms, int32_t* sender_node);
  // A StatusRequest: who may read what, the key's budget, the reply
  // (service_status.cc; server/status_reply.h).
  Status OnStatusRequest(const v1::StatusRequest& req, const Sender& peer, double now_ms,
                         v1::Envelope* reply);
  // The run's figures, recomputed only when an iteration closed or an
  // epoch completed since the last call.
  const v1::RunSummary& Figures() const;
  // A PartitionFailed's poisoning report: counted, and the accused peer
  // distrusted as a source once f+1 distinct nodes reported it
  // (service_byzantine.cc).
  Status OnPoisonReport(int32_t node, const v1::PartitionFailed& f, double now_ms);
  // The log line of a failure report that changes state (rate-limited per node).
  void LogPartitionFailed(int32_t node, const v1::PartitionFailed& f, double now_ms);
  Status SendQueued(double now_ms);
  // Plans the next iteration if the gate allows it; true when it did.
  StatusOr<bool> PlanIfReady(double now_ms);
  // One warning per HoldersAbandoned in `u` (scheduler/holder_wait.h).
  void LogHoldersAbandoned(const std::vector<v1::StateUpdate>& u) const;
  Status SaveSessions() const;
  void LoadSessions(double now_ms);
  int64_t target_iterations() const;

  // Iteration times and training reports kept for status (bounded).
  static constexpr size_t kMaxIterationSamples = 100000;

  SchedulerOptions opts_;
  ClusterSpec spec_;
  std::string spec_text_;
  std::string sample_digests_;           // the dataset manifest sent at registration (empty = none)
  std::string manifest_root_;            // its root (cache::Manifest::Root; empty = none)
  sched::PoisonReports poison_reports_;  // peers accused of serving forged samples
  sched::RingDetection ring_detection_;  // ring offences, reports and evictions (status "ring_detection")
  SchedulerTransport* transport_;
  std::unique_ptr<sched::Journal> journal_;
  std::unique_ptr<sched::JobDriver> driver_;
  sched::Updates unflushed_;
  std::vector<NodeSession> nodes_;
  sched::SendQueues sends_{0};             // per node: partitions waiting for a credit, its credit window
  sched::OpenIterations open_iterations_;  // planned, not closed: rows and the close rule
  std::unique_ptr<sched::IterationGate> gate_;  // start gate, plan-ahead, finish test
  sched::RingCommitter ring_;                   // the ring's votes and commit rule
  sched::RestartHold hold_;                     // partitions sent before a restart, unconfirmed
  int64_t planned_ahead_ = 0;                   // iterations planned while the previous one ran
  // Closed iterations: rows and figures (the simulator's recorder too).
  sched::RunRecorder recorder_;
  mutable v1::RunSummary figures_;           // Figures()' cache ...
  mutable int64_t figures_iterations_ = -1;  // ... for this many iterations added
  mutable int64_t figures_epochs_ = -1;      // ... and epochs completed
  StatusBudget status_budget_;               // status reply bytes per key
  // Training reports (PartitionTimings.training) by iteration.
  struct TrainingStats {
    double loss_sum = 0;
    int reports = 0;
    double done_ms = 0;
    double test_accuracy = -1;  // -1 = not evaluated
    uint64_t first_hash = 0;    // the first report's parameter hash
    bool hashes_equal = true;   // every report's hash is first_hash
    int applied = -1;           // partitions most other workers reported applied; -1 = open
  };
  // Commits, with a PartitionDone on its worker's behalf, a partition in
  // flight that the ring committer's rule says the ring applied, instead
  // of failing and retrying it. Returns true when it did. Called before a partition would fail: its
  // worker died or re-registered, it timed out (`timed_out`: its credit
  // comes back as for a timeout), or its worker reported a failure.
  StatusOr<bool> CommitIfApplied(uint64_t partition_id, double now_ms, bool timed_out = false);
  int64_t committed_by_ring_ = 0;
  std::map<int64_t, TrainingStats> training_;
  std::map<uint64_t, v1::TrainingReport> pending_training_;  // the ack being observed
  double started_ms_ = 0;
  double first_plan_ms_ = -1;
  bool started_ = false;  // first iteration planned (this process or journal)
  bool finished_ = false;
  StatusOr<uint64_t> LoadOrCreateJobId(bool fresh_journal);
  bool recovered_ = false;
  double resume_floor_ms_ = 0;  // recovered: the journal's latest recorded time
  // The job's id (RegisterReply.job, Partition.job): random for a fresh
  // journal, read back from journal_dir/job_id after a restart.
  uint64_t job_id_ = 1;
  sched::RestartResend restart_resend_;      // the re-send after a restart, due once recovered
  sched::RegisterBackoff register_backoff_;  // view-changing (re-)registrations per node
  sched::AccusationBook accusations_;        // ring members reported by agents (PeerReport)
  bool view_dirty_ = false;
  // Every log line a peer's message can cause (core/log_limiter.h):
  // loft_scheduler_log_suppressed_total{kind} counts what it held back.
  PeerLogLimits peer_log_{nullptr};
  // The service clock's `now_ms` as the limiter's time.
  static LogRateLimiter::TimePoint LogTime(double now_ms) {
    return LogRateLimiter::TimePoint(std::chrono::duration_cast<LogRateLimiter::TimePoint::duration>(
        std::chrono::duration<double, std::milli>(now_ms)));
  }
  std::string last_blocked_;
  std::map<uint64_t, int32_t> sent_;  // partitions this process sent, not finished -> worker

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
  metrics::HistogramFamily* h_snapshot_ = nullptr;
  metrics::GaugeFamily* g_journal_entries_ = nullptr;
  uint64_t snapshot_retry_seq_ = 0;  // after a failed snapshot: no new try before this entry
  metrics::CounterFamily* c_planned_ahead_ = nullptr;
  metrics::CounterFamily* c_journal_syncs_ = nullptr;
  double unsynced_since_ms_ = -1;  // Tick time of the oldest record written without an fsync; -1: none
  metrics::CounterFamily* c_committed_by_ring_ = nullptr;
  // Reports that change no state (scheduler/ledger.h WouldApply).
  void CountIgnored(const char* type);
  int64_t reports_ignored_ = 0;
  metrics::CounterFamily* c_reports_ignored_ = nullptr;
};

}  // namespace loft::server
