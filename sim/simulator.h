// Simulator: runs one policy on a cluster spec in virtual time, driving
// the REAL scheduler (sched::JobDriver → SchedulerState, Policy, Assigner,
// Ledger, CostModel) exactly as the daemon does; only the clock (a
// ManualClock following the event queue) and the carrier of messages
// (direct calls instead of ZeroMQ) differ. No planning or ledger logic
// lives here.
//
// The scheduler side mirrors server/service_loop.cc: after every input
// (an ack, a death, a registration, a credit) the plan loop runs as the
// daemon's Tick does: up to depth + 1 times, plan if the daemon's
// sched::IterationGate allows it (BSP, or iteration t+1 while t runs) and
// stream the planned partitions to their workers under each agent's
// credit window (sched::CreditWindow, `credits` per agent as an agent
// registers with). Rows and iteration times are recorded as the daemon
// records them (an iteration starts at max(its plan, the previous
// iteration's last ack)).
//
// The agent side mirrors edge_agent/zmq_agent_server.cc: a reader stage
// and a compute stage per worker with prefetch depth ReadyDepth (1, 3 with
// training.exchange.overlap; core/read_ahead.h):
//   reader   takes the next assigned partition when free: local read
//            l·s/disk concurrently with the remote read (per serving
//            peer, latency_ms then one flow of (samples)·s bytes through
//            the FlowNetwork, max-min fair over the peer's uplink and the
//            reader's downlink, shared with every concurrent flow,
//            the ring's included); then holds the read until the ready
//            queue has room;
//   compute  takes the ready partition when free: (c0 + c1·b)·jitter·
//            slowdown; with a model (training.model ≠ none) then the ring
//            all-reduce of its iteration (sim/ring.h), which starts when
//            every member has computed and holds every member's compute
//            stage; then the partition is acked (PartitionDone with the
//            PartitionTimings an agent sends, then a CreditGrant).
// On a node with compute.cpu_cores (the testbed's CPU quota) the agent's
// own CPU is charged too (sim/cpu_quota.h, the spec's `agent` costs): a
// partition's read is done only when its CPU (per partition and per
// sample) is, and a peer's reply starts only after the server's CPU for
// the request (per request and per sample). The reported local read
// times stay the disk's, as an agent's do (its emulated sleeps take a
// stall off the next one); a remote read's include the serving peer's
// CPU, as an agent's do.
// With plan-ahead (auto: training.overlap) the reads of t+1 thus run
// while t computes and all-reduces; without it t+1 is planned after t's
// last ack, so a partition is strictly read, then computed.
// scheduler.overhead_ms delays the sending of each planned iteration (the
// daemon's planning, journal and streaming time); scheduler.handoff_ms
// delays each sent assignment's arrival at its agent's reader (the
// report's and the assignment's delivery and the wake-ups). Links carry
// payload at their rate × network.packet_efficiency, and a fetched sample
// is sample_bytes + network.record_overhead_bytes on them. They also carry
// the small packets nothing waits for (Background): each request to a
// serving peer (network.request_bytes, reader → server), the reader's TCP
// ACKs of each reply (network.ack_bytes_per_byte of it, reader → server),
// per partition its assignment (network.assignment_bytes, scheduler →
// worker) and its report (network.report_bytes, worker → scheduler), the
// scheduler being one more node whose links never limit; a ring chunk
// carries its ACKs with it (sim/allreduce_model.h WireChunkBytes).
// Serve grants: as an assignment leaves, its serving peers get their
// ServeGrants (sched::SendServeGrants, the daemon's rule) over the same
// control path; a peer serves a request once it holds the grant, else
// the reader asks again (a round trip and its 1 ms backoff). Their bytes
// are not charged.
//
// Failures: at a node's failure time it crashes: it stops training,
// serving and sending (its flows stop, reads from it and rings with it
// stall, assignments sent to it are lost). The scheduler notices as the
// daemon does (scheduler/liveness.h HeartbeatExpired): when the node has
// been silent for more than scheduler.heartbeat_timeout_ms since its last
// message (its last heartbeat, every heartbeat_interval_ms from its
// registration, or its last ack or credit grant); 0 = at once. Then it
// departs by the daemon's rule (sched::Depart, scheduler/departures.h:
// what its ring applied is committed, then OnWorkerDead; the partitions
// the death affects fail:
// its own and those reading from it, and their samples return to the
// pool through the Ledger); they leave their agents' stages (a live
// reader's agent returns the credit), a ring with the dead node restarts
// with the survivors (the agents' retry on a newer view). At the end of
// the outage its new agent process registers again by the daemon's rule
// (sched::TakeRegistration, scheduler/worker_messages.h: a new session, a
// WorkerRegistered update, a full credit window; while RegisterBackoff
// makes it wait, it asks again after the wait);
// with a model, the first ring it joins first sends it the job's state
// (parameters + SGD velocity, 8·P bytes, from the first member holding
// it, after the link's latency) and it recomputes its gradient
// (edge_agent/model_trainer.h step 2).
//
// Partition timeouts: the daemon's rule (scheduler/partition_timeouts.h)
// at each partition deadline (scheduler.partition_timeout_ms of the spec):
// a partition the ring applied is committed, any other times out (a failed
// row, its samples retried, its credit back); its agent, which is not
// told, still runs it, and its late ack only returns a credit.
//
// Not responsible for: writing files (sim/output.h), the CLI.
// Thread-safety: not thread-safe; a Simulator runs on one thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/clock.h"
#include "core/cluster_spec.h"
#include "core/read_ahead.h"
#include "core/status.h"
#include "scheduler/accusations.h"
#include "scheduler/driver.h"
#include "scheduler/flow_control.h"
#include "scheduler/iteration_gate.h"
#include "scheduler/open_iterations.h"
#include "scheduler/register_backoff.h"
#include "scheduler/ring_committer.h"
#include "scheduler/run_recorder.h"
#include "scheduler/send_queues.h"
#include "scheduler/worker_messages.h"
#include "sim/allreduce_model.h"
#include "sim/cluster_model.h"
#include "sim/cpu_quota.h"
#include "sim/event_queue.h"
#include "sim/flow_network.h"
#include "sim/summary.h"

namespace loft::sim {

inline constexpr int kExactFlowNodes = 256;
inline constexpr double kLargeFlowIntervalMs = 0.1;

struct SimOptions {
  std::string policy = "loft";
  int64_t iterations = 0;  // 0 = the spec's training.iterations
  uint64_t seed = 0;       // jitter seed; 0 = the spec's training.seed
  // Iterations whose spans are kept for trace.json (the first N); 0 = none.
  int64_t trace_iterations = 100;
  // Evaluate the lower bound (sched::LowerBoundMs) on every iteration's
  // plan request, with the spec's nominal costs.
  bool compute_bound = false;
  // FlowNetwork recompute interval (ms): 0 = exact max-min fair sharing;
  // < 0 = automatic: exact up to kExactFlowNodes nodes, else
  // kLargeFlowIntervalMs (see flow_network.h for what an interval means).
  double flow_interval_ms = -1;
  // Fold every planned partition into SimResult::plan_digest (tests that
  // compare the engines' decisions; costs a pass over every sample id).
  bool plan_digest = false;
  // Plan iteration t+1 while t runs: -1 = auto (as the daemon's
  // `plan_ahead: auto`: deep enough to cover scheduler.overhead_ms +
  // handoff_ms, sched::IterationGate), 0 = BSP, or a fixed depth
  // 1..sched::kMaxPlanAhead.
  int plan_ahead = -1;
  // Each agent's credit window (RegisterRequest.credits; the agent's
  // default, core/read_ahead.h).
  int credits = kDefaultCredits;
  // sched::StateOptions::overlap_epochs: plan the next epoch's first
  // iteration while the last partitions of the current one are in flight
  // (the daemon's default). false: `--no-epoch-overlap`.
  bool overlap_epochs = true;
  // Keep every input given to the scheduler (SimResult::inputs), for
  // tests that replay the run to the daemon.
  bool record_inputs = false;
  // The loss each member reports with its partitions of iteration t
  // (index t; NaN or past the end: none), from a real run's training.csv
  // (sim/loss_trace.h). Only `training.exchange.period: auto` reads it.
  std::vector<double> loss_trace;
  // Test-set evaluations, as `loftctl cluster run --eval-every K` and the
  // agents (edge_agent/model_trainer.h EvaluateNow): after the exchange of
  // every K-th step (a delta exchange: the first at or after each
  // multiple of K) and after the last step, on the ring's first member,
  // at training.eval's cost. 0 = none (loft-sim's default; a real run's
  // default is 50).
  int64_t eval_every = 0;
  // Called after every iteration with (iterations done, total).
  std::function<void(int64_t, int64_t)> progress;
};

// One worker in one iteration, and one iteration: the run recorder's
// types (scheduler/run_recorder.h), shared with the daemon.
using sched::IterationRecord;
using sched::WorkerIteration;

// A span on a worker's track (trace.json).
struct TraceSpan {
  int32_t node = 0;
  const char* name = "";  // "local read" | "remote read" | "compute" | "all-reduce" | "wait" | "down"
  double start_ms = 0;
  double dur_ms = 0;
  int64_t iteration = 0;
};

// One input the scheduler received, in order (SimOptions::record_inputs).
struct SchedulerInput {
  // kHeartbeat: only with SimOptions::record_inputs (the simulator keeps
  // no heartbeat events otherwise; a death's detection time is computed).
  // kTick: no message, the scheduler's timer at a partition deadline (the
  // daemon's Tick finds the partitions timed out then; node -1).
  enum Kind { kDone, kDead, kAlive, kCredit, kHeartbeat, kTick };
  Kind kind = kDone;
  double at_ms = 0;
  int32_t node = 0;
  uint64_t partition_id = 0;           // kDone
  uint32_t attempt = 0;                // kDone
  loft::v1::PartitionTimings timings;  // kDone
};

// A ServeGrant the scheduler sent (SimOptions::record_inputs).
struct GrantSent {
  int32_t peer = 0;  // the serving peer it went to
  uint64_t partition_id = 0;
  int32_t requester = 0;
  int samples = 0;
};

struct SimResult {
  std::string policy;
  std::vector<IterationRecord> iterations;
  std::vector<TraceSpan> spans;
  PolicySummary summary;
  sched::LedgerCounters counters;
  double bound_mean_iteration_ms = -1;        // -1 when not computed
  double bound_epoch_mean_iteration_ms = -1;  // -1 when not computed
  uint64_t events = 0;
  // Iterations the scheduler planned by its even-split fallback because
  // the policy failed (SchedulerState::policy_failures), and the first
  // such error.
  int64_t policy_failures = 0;
  double flow_interval_ms = 0;  // the interval used
  // sched::FoldPlanDigest over every planned partition, in plan order
  // (SimOptions::plan_digest; the seed otherwise).
  uint64_t plan_digest = sched::kPlanDigestSeed;
  std::string first_policy_error;
  std::string blocked_reason;          // set when the run ended early
  int plan_ahead = 0;                  // the deepest plan-ahead in force (auto: over the run)
  int64_t planned_ahead = 0;           // iterations planned while another ran
  std::vector<SchedulerInput> inputs;  // SimOptions::record_inputs
  int64_t serve_grants = 0;            // ServeGrants sent (sched::SendServeGrants)
  std::vector<GrantSent> grants;       // each of them, in order (SimOptions::record_inputs)
  // Partitions committed on their worker's behalf because the ring
  // applied them (sched::RingCommitter, as the daemon): a member that died
  // while applying the round's aggregate.
  int64_t committed_by_ring = 0;
};

class Simulator {
 public:
  static StatusOr<std::unique_ptr<Simulator>> Create(const ClusterSpec& spec, SimOptions options);

  // Runs the configured number of iterations (or until the run cannot
  // continue: every node down for good). Errors come from the scheduler
  // code (e.g. a policy error) and are returned unchanged with context.
  StatusOr<SimResult> Run();

  const sched::JobDriver& driver() const { return *driver_; }
  const EventQueue& queue() const { return queue_; }

 private:
  static constexpr uint64_t kNone = ~uint64_t{0};
  // One partition, from its plan to its ack or failure.
  struct Part {
    uint64_t id = 0;
    uint32_t attempt = 0;
    int64_t batch = 0;
    int32_t node = 0;
    int64_t iteration = 0;
    bool local_step = false;  // training.exchange: no ring after it (Partition.local_step)
    int64_t local = 0;
    int64_t remote = 0;
    std::vector<std::pair<int32_t, int64_t>> from_peer;  // samples per serving peer, ascending peer
    double sendable_ms = 0;                              // planned + scheduler.overhead_ms
    double sent_ms = -1;                                 // -1 = still in the send queue
    double read_start_ms = 0;
    double local_end_ms = 0;
    double remote_end_ms = 0;
    bool local_done = true;
    bool remote_done = true;
    bool cpu_done = true;  // the agent's own CPU for it (quota nodes, sim/cpu_quota.h)
    bool read_in() const { return local_done && remote_done && cpu_done; }
    bool decoded = false;  // encoded samples: the decode after the reads has been charged
    // Partition.decoded_from (ascending): holders that decode for this
    // worker, and how many of its remote samples they serve.
    std::vector<int32_t> decoded_from;
    int64_t remote_decoded = 0;
    double decode_ms = 0;  // its time (reported as preprocess_ms)
    int flows_pending = 0;
    std::vector<uint64_t> flows;
    std::map<int32_t, double> by_peer_ms;
    // Its read ran while its node's exchange step did (the agent's
    // PartitionTimings.read_during_exchange): set when the read is in.
    bool read_during_exchange = false;
    double compute_start_ms = 0;
    double compute_ms = 0;
    double compute_end_ms = -1;  // >= 0: computed (waiting for or in its ring)
    double allreduce_ms = 0;
    // The partitions its ring applied, with their workers (its ack's
    // TrainingReport.applied_partitions / applied_nodes).
    std::vector<std::pair<uint64_t, int32_t>> applied;
    bool committed_by_ring = false;  // committed for it: its ack only returns the credit
  };
  // One worker's agent: its reader and compute stages (prefetch depth
  // ReadyDepth). The scheduler's side of it (send queue, credit window) is
  // sends_, as in the daemon.
  struct Agent {
    // Short FIFO (a credit window of partitions): a vector, front erased.
    std::vector<uint64_t> assigned;  // sent, not yet taken by the reader
    uint64_t reading = kNone;        // in the reader (reading, or holding its read)
    bool holding = false;            // the read is done, the ready queue is full
    std::deque<uint64_t> ready;      // read, waiting for the compute stage (ReadyDepth)
    uint64_t computing = kNone;      // in the compute stage (computing or in its ring)
    // The agent's exchange window (PartitionRunner::Finish of a
    // round-ending step: its compute, then the ring): when the current one
    // started (-1 = none runs) and when the last one ended.
    double exchange_since_ms = -1;
    double exchange_end_ms = -1;
    // The compute stage is free again; an exchange window ends.
    void EndCompute(double now_ms) {
      computing = kNone;
      if (exchange_since_ms >= 0) exchange_end_ms = now_ms;
      exchange_since_ms = -1;
    }
  };
  // One iteration's all-reduce.
  struct Ring {
    bool running = false;
    bool done = false;
    uint64_t generation = 0;  // bumped when the ring restarts
    std::vector<int32_t> members;
    std::vector<uint64_t> parts;
    int step = 0;  // -2 hello, -1 state sync, 0 scatter, 1 gather, then verify/reducer
    // After the verify step the aggregate is fixed: each member applies it
    // on its own CPU and acks then; a crash no longer stalls the others.
    bool applying = false;
    int applying_pending = 0;  // members still applying
    // The partitions it applied, with their workers, as the ring entered
    // its applying step: what every member's ack names.
    std::vector<std::pair<uint64_t, int32_t>> applied;
    double start_ms = 0;
    int flows_pending = 0;
    std::vector<uint64_t> flows;
    // The member that evaluates on the test set after applying (EvalMs),
    // and for how long; -1: nobody.
    int32_t eval_member = -1;
    double eval_ms = 0;
  };
  Simulator(const ClusterSpec& spec, SimOptions options, std::unique_ptr<sched::JobDriver> driver);

  void Sync();  // ManualClock follows the event queue
  // Whether the ring of `iteration` is followed by a test-set evaluation
  // (SimOptions::eval_every), and what it costs its first member.
  bool EvaluatesAfter(int64_t iteration) const;
  double EvalMs(int32_t member) const;
  void Fail(Status s);
  double BoundForRequest();
  Part* FindPart(uint64_t id) {
    return id >= parts_base_ && id - parts_base_ < parts_.size() ? parts_[id - parts_base_].get() : nullptr;
  }
  void AddPart(std::unique_ptr<Part> p);
  void ErasePart(uint64_t id);

  // Scheduler side (simulator.cc).
  void PlanLoop();  // the daemon's Tick: plan (ahead) and stream
  bool PlanIfReady();
  void SendQueued();
  void Acked(Part& p);  // PartitionDone + CreditGrant from the agent
  // The ring of `iteration` applied the aggregate on `members`, each with
  // its registration count when it started applying (their acks, each
  // naming every partition the ring applied; a member that crashed or
  // restarted since acks nothing).
  void MembersApplied(int64_t iteration, uint64_t generation,
                      std::vector<std::pair<int32_t, int64_t>> members);
  // Commits `id` for its worker by the ring's votes: before `dead_node`'s
  // death fails it, or (dead_node < 0) when it timed out.
  Status CommitByRing(uint64_t id, int32_t dead_node);
  // Partition timeouts (sched::TimeOutPartitions) now, and the check at
  // the next deadline (sched::NextPartitionDeadline).
  void CheckPartitionTimeouts();
  void ScheduleTimeoutCheck();
  // `node` was declared dead: the timed-out partitions still on agents
  // that it breaks leave them (`credit_back`: live agents returning one).
  void DropTimedOutOf(int32_t node, std::vector<int32_t>* credit_back);
  void ClosedRow(const Part& p, bool failed);
  void CloseIterations();
  void Crash(int node);        // the node stops (its outage starts)
  void DeclareDead(int node);  // the scheduler notices (heartbeat timeout)
  void NodeUp(int node);
  // `node`'s agent process registers (sched::TakeRegistration, as the
  // daemon's OnRegister).
  StatusOr<sched::Registration> RegisterAgent(int node);
  void Heartbeat(int node, int64_t registration, int64_t k);  // record_inputs only
  // The node sent a message (ack, grant, registration) now.
  void Seen(int node) { last_msg_ms_[static_cast<size_t>(node)] = queue_.now_ms(); }
  void Log(SchedulerInput::Kind kind, int32_t node, const Part* p = nullptr);

  // Agent side (simulator_agent.cc).
  void Deliver(Part& p);  // the assignment reaches the agent
  void ReaderNext(int32_t node);
  void StartRead(Part& p);
  void StartFetchFlow(uint64_t id, int32_t server, int32_t node, double bytes);
  // `bytes` of small packets (network.ack_bytes_per_byte, request_bytes,
  // report_bytes, assignment_bytes) from → to: they take link capacity
  // and nothing waits for them. Not started from or to a crashed node.
  void Background(int32_t from, int32_t to, double bytes);
  // The scheduler's end of the flow network: one node past the cluster's,
  // with links that never limit (its own link is not in the spec).
  int32_t SchedulerNode() const { return static_cast<int32_t>(spec_.nodes.size()); }
  // A read from `server` for partition `id` of `node` cannot go on: the
  // partition is gone, or an end crashed (the read stalls until the death
  // is noticed).
  bool FetchStalled(uint64_t id, int32_t server, int32_t node);
  // Partition `id`'s serving peers get their ServeGrants as its
  // assignment leaves (sched::SendServeGrants), over the control path.
  void SendGrants(uint64_t id);
  // `node`'s request for partition `id` reaches `server`: served (after
  // the server's CPU, `serve_cpu`) once the server holds the partition's
  // grant; else refused ("no grant yet"), asked again after a round trip
  // and the agent's retry backoff.
  // decode_ms > 0: the samples are served decoded; the holder's decode
  // runs after serve_cpu, on its CPU quota.
  void ServeRequest(uint64_t id, int32_t server, int32_t node, double bytes, double serve_cpu,
                    double decode_ms = 0);
  CpuQuota FreshQuota(int node) const;
  void ReadDone(Part& p);
  void ComputeNext(int32_t node);
  void Computed(Part& p);
  void MaybeStartRing(int64_t iteration);
  void RingStep(int64_t iteration, uint64_t generation);
  void RingState(int64_t iteration, uint64_t generation);  // a rejoined member fetches the state
  bool RingStalled(const Ring& ring) const;  // a member crashed: nothing moves until its death is noticed
  // The ring of `iteration` if it is still `generation` (not restarted
  // since); RunningRing: and still running. Null otherwise.
  Ring* RingOfGeneration(int64_t iteration, uint64_t generation);
  Ring* RunningRing(int64_t iteration, uint64_t generation);
  // One flow of that ring, `bytes` from → to after the link's latency
  // (stalled while either end is crashed); the last of the ring's
  // flows_pending to arrive calls `then`.
  void RingFlow(int64_t iteration, uint64_t generation, int32_t from, int32_t to, double bytes,
                std::function<void()> then);
  // One of the ring's flows_pending is done (a flow arrived, or a step's
  // CPU): the last calls `then`. Nothing if the ring restarted since.
  void RingPartDone(int64_t iteration, uint64_t generation, const std::function<void()>& then);
  // The exchange's CPU for one phase (agent.cpu_ms_per_allreduce_mb:
  // every member sends and receives N − 1 pair payloads), queued now on
  // each member's quota; when the last member's is done (now without quotas).
  double RingStepCpuEnd(const std::vector<int32_t>& members, int phase);
  // Removes a failed partition from its agent's queue and stages.
  void DropPart(Part& p);

  ClusterSpec spec_;
  SimOptions options_;
  std::unique_ptr<sched::JobDriver> driver_;
  EventQueue queue_;
  ManualClock clock_;
  ClusterModel model_;
  FlowNetwork network_;
  int64_t target_iterations_ = 0;
  int64_t last_ring_iteration_ = -1;  // the last ring that began applying (EvaluatesAfter)
  sched::IterationGate gate_;         // the daemon's start, plan-ahead and finish rules
  AllreduceModel allreduce_;

  // Open partitions by id - parts_base_ (the ledger's ids only grow).
  std::deque<std::unique_ptr<Part>> parts_;
  uint64_t parts_base_ = 0;
  std::vector<Agent> agents_;
  sched::SendQueues sends_;  // the daemon's send queues and credit windows, per agent
  int ready_depth_ = 1;      // ReadyDepth(spec_.training): partitions an agent holds read ahead
  // Each node's CPU quota (compute.cpu_cores; disabled without one) and
  // what the agent's own work costs on it (the spec's `agent`).
  std::vector<CpuQuota> cpu_;
  // dataset.encoding jpeg: each node's decode ms per sample on one core
  // (nodes[].decode at the mean record); empty with raw samples.
  std::vector<double> decode_ms_per_sample_;
  AgentSpec agent_cpu_;
  sched::OpenIterations open_;  // planned, not closed: rows and the close rule (the daemon's)
  std::map<int64_t, Ring> rings_;
  sched::RingCommitter ring_votes_;          // the acks' votes and the commit rule (the daemon's)
  sched::RegisterBackoff register_backoff_;  // the daemon's, with its defaults
  const sched::AccusationBook accusations_;  // always empty: simulated agents send no PeerReport
  double send_wake_ms_ = -1;                 // a PlanLoop is scheduled then (scheduler overhead)
  bool done_ = false;
  Status error_;
  std::vector<bool> down_;              // declared dead by the scheduler
  std::vector<bool> crashed_;           // physically down (from the crash to the return)
  double holder_wake_ms_ = -1;          // the wake-up scheduled for the end of a holder wait
  std::set<double> timeout_checks_;     // times of the partition-timeout checks in the queue
  std::set<uint64_t> timed_out_;        // sent partitions that timed out: their agents still ack them
  std::vector<bool> stale_;             // restarted agent: holds the seed's parameters until a ring syncs it
  std::vector<double> last_msg_ms_;     // per node: its last ack/grant/registration
  std::vector<double> registered_ms_;   // per node: its last registration (heartbeat phase)
  std::vector<int64_t> registrations_;  // per node: registrations so far (heartbeat chains)
  std::vector<std::set<uint64_t>> granted_;  // per serving node: partitions it holds a ServeGrant for
  size_t heartbeats_pending_ = 0;            // heartbeat events in the queue (record_inputs)
  SimResult result_;
  sched::RunRecorder recorder_;  // every iteration's rows and the summary figures
  double bound_sum_ = 0;
  int64_t bound_count_ = 0;
  double bound_epoch_sum_ = 0;
  int64_t bound_epoch_count_ = 0;
  int64_t bound_epoch_last_ = -1;  // epoch of the last EpochBoundMs
};

// Runs `policy` on `spec` (convenience for the CLI, tests and the bench).
StatusOr<SimResult> RunPolicy(const ClusterSpec& spec, const SimOptions& options);

}  // namespace loft::sim
