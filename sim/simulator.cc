#include "sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "scheduler/bound.h"
#include "scheduler/departures.h"
#include "scheduler/holder_wait.h"
#include "scheduler/liveness.h"
#include "scheduler/partition_timeouts.h"
#include "scheduler/ring_commit.h"
#include "scheduler/worker_messages.h"

namespace loft::sim {

namespace {
// The cluster's links, then the scheduler's (SchedulerNode): never the
// limit, rates and token buckets alike (a report or an assignment takes
// its worker's tokens only).
std::vector<double> WithScheduler(std::vector<double> per_node, double scheduler) {
  per_node.push_back(scheduler);
  return per_node;
}
constexpr double kUnlimitedBytesPerMs = 1e12;

double FlowInterval(const SimOptions& o, const ClusterSpec& spec) {
  if (o.flow_interval_ms >= 0) return o.flow_interval_ms;
  return spec.num_nodes() <= kExactFlowNodes ? 0.0 : kLargeFlowIntervalMs;
}
}  // namespace

Simulator::Simulator(const ClusterSpec& spec, SimOptions options, std::unique_ptr<sched::JobDriver> driver)
    : spec_(spec),
      options_(std::move(options)),
      driver_(std::move(driver)),
      clock_(0),
      model_(spec, options_.seed != 0 ? options_.seed : spec.training.seed),
      network_(&queue_, WithScheduler(model_.UpRates(), kUnlimitedBytesPerMs),
               WithScheduler(model_.DownRates(), kUnlimitedBytesPerMs), FlowInterval(options_, spec)),
      target_iterations_(options_.iterations > 0 ? options_.iterations : spec.training.iterations),
      gate_({.plan_ahead = options_.plan_ahead,
             .target_iterations = target_iterations_,
             .min_workers = 0,
             .overlap = spec.training.overlap,
             .control_ms = spec.scheduler.overhead_ms + spec.scheduler.handoff_ms},
            spec.num_nodes()),
      allreduce_(spec),
      agents_(spec.nodes.size()),
      sends_(spec.num_nodes()),
      ready_depth_(ReadyDepth(spec.training)),
      down_(spec.nodes.size(), false),
      crashed_(spec.nodes.size(), false),
      stale_(spec.nodes.size(), false),
      last_msg_ms_(spec.nodes.size(), 0.0),
      registered_ms_(spec.nodes.size(), 0.0),
      registrations_(spec.nodes.size(), 0),
      granted_(spec.nodes.size()) {
  result_.policy = options_.policy;
  network_.SetBursts(WithScheduler(model_.UpBursts(), kUnlimitedBytesPerMs),
                     WithScheduler(model_.DownBursts(), kUnlimitedBytesPerMs));
  agent_cpu_ = spec.agent;
  cpu_.resize(spec.nodes.size());
  for (size_t i = 0; i < spec.nodes.size(); ++i) cpu_[i] = FreshQuota(static_cast<int>(i));
  if (spec.dataset.encoding != DatasetEncoding::kRaw) {
    // The preprocessing stage's decode per sample on one core (nodes[].decode
    // at the mean record size); a quota node runs it on its CpuQuota.
    const double s = SampleWireBytes(spec.dataset);
    for (const NodeSpec& n : spec.nodes)
      decode_ms_per_sample_.push_back(n.decode.per_sample_ms + n.decode.per_kb_ms * s / 1024.0);
  }
  // loft-sim's agents serve decoded samples (dataset.decode_placement auto):
  // a holder's decode for a peer runs on its CPU quota and the sample moves
  // as DecodedWireBytes (StartRead, ServeRequest).
  for (int i = 0; i < spec.num_nodes(); ++i) driver_->SetServesDecoded(i, true);
  result_.flow_interval_ms = FlowInterval(options_, spec);
  result_.plan_ahead = std::max(0, options_.plan_ahead);  // auto: the deepest depth after each plan
}

StatusOr<std::unique_ptr<Simulator>> Simulator::Create(const ClusterSpec& spec, SimOptions options) {
  if (spec.nodes.empty()) return InvalidArgument(spec.source + ": the cluster has no nodes");
  if (options.iterations < 0) return InvalidArgument("iterations must be >= 0");
  if (options.plan_ahead < -1 || options.plan_ahead > sched::kMaxPlanAhead)
    return InvalidArgument(fmt::format("plan_ahead must be auto (-1) or 0..{} (got {})", sched::kMaxPlanAhead,
                                       options.plan_ahead));
  if (options.credits < 1 || options.credits > sched::kMaxCredits)
    return InvalidArgument(
        fmt::format("credits must be in [1, {}] (got {})", sched::kMaxCredits, options.credits));
  sched::StateOptions so;
  // Partition timeouts: the daemon's rule (scheduler/partition_timeouts.h),
  // run at the deadlines (CheckPartitionTimeouts).
  so.timeout_min_ms = spec.scheduler.partition_timeout_ms;
  so.overlap_epochs = options.overlap_epochs;
  so.iterations = options.iterations;
  auto driver = sched::JobDriver::Create(spec, options.policy, so);
  if (!driver.ok()) return driver.status().WithContext("policy " + options.policy);
  return std::unique_ptr<Simulator>(new Simulator(spec, std::move(options), std::move(*driver)));
}

void Simulator::Sync() {
  clock_.Set(static_cast<int64_t>(std::llround(queue_.now_ms() * 1000.0)));
}

void Simulator::Fail(Status s) {
  if (error_.ok()) error_ = std::move(s);
  done_ = true;
}

double Simulator::BoundForRequest() {
  auto req = driver_->state().BuildPlanRequest();
  if (!req.ok()) return -1;
  for (sched::WorkerInput& w : req->workers) {
    w.cost = sched::PriorFromSpec(spec_, w.node);
    if (req->coding.encoded) w.decode = sched::DecodePriorFromSpec(spec_, w.node);
  }
  if (req->epoch != bound_epoch_last_) {
    // bound-epoch once per epoch, at its first plannable iteration; with
    // replicas it needs each node's exclusive share (a replicated sample
    // can be drained by either holder).
    if (driver_->state().placement().replication() > 1) driver_->state().FillExclusiveAvailable(*req);
    auto e = sched::EpochBoundMs(*req);
    if (e.ok()) {
      bound_epoch_last_ = req->epoch;
      bound_epoch_sum_ += *e;
      ++bound_epoch_count_;
    }
  }
  auto b = sched::LowerBoundMs(*req);
  return b.ok() ? *b : -1;
}

void Simulator::AddPart(std::unique_ptr<Part> p) {
  const uint64_t id = p->id;
  if (parts_.empty()) parts_base_ = id;
  if (id < parts_base_ + parts_.size()) {
    // Ids only grow (the ledger's last_id + 1); anything else is a bug here.
    return Fail(
        Internal(fmt::format("partition id {} planned after {}", id, parts_base_ + parts_.size() - 1)));
  }
  parts_.resize(static_cast<size_t>(id - parts_base_));
  parts_.push_back(std::move(p));
}

void Simulator::ErasePart(uint64_t id) {
  const Part* gone = FindPart(id);
  if (gone == nullptr) return;
  for (const auto& [peer, count] : gone->from_peer) granted_[static_cast<size_t>(peer)].erase(id);
  parts_[id - parts_base_].reset();
  while (!parts_.empty() && parts_.front() == nullptr) {
    parts_.pop_front();
    ++parts_base_;
  }
}

void Simulator::Log(SchedulerInput::Kind kind, int32_t node, const Part* p) {
  if (!options_.record_inputs) return;
  SchedulerInput in;
  in.kind = kind;
  in.at_ms = queue_.now_ms();
  in.node = node;
  if (p != nullptr) {
    in.partition_id = p->id;
    in.attempt = p->attempt;
  }
  result_.inputs.push_back(std::move(in));
}

// The daemon's Tick after an input (sched::StreamAndPlan): stream what
// waited for credit, plan, stream, and with planning ahead the next plan
// too once the first is streamed. A finished or failed run stops it.
void Simulator::PlanLoop() {
  if (done_) return;
  Sync();
  const auto stopped = [this] { return done_ ? Aborted("run over") : OkStatus(); };
  (void)sched::StreamAndPlan(
      gate_,
      [&] {
        SendQueued();
        return stopped();
      },
      [&]() -> StatusOr<bool> {
        const bool planned = PlanIfReady();
        LOFT_RETURN_IF_ERROR(stopped());
        return planned;
      });
}

bool Simulator::PlanIfReady() {
  const auto& st = driver_->state();
  if (gate_.AllPlanned(st)) {
    if (gate_.Finished(st)) done_ = true;  // the daemon's finish test
    return false;
  }
  const bool complete = st.ledger().in_flight() == 0;
  if (!gate_.ReadyToPlan(st, sends_.empty())) return false;
  const double bound = options_.compute_bound ? BoundForRequest() : -1;
  auto updates = driver_->PlanNextIteration(clock_.NowMillis());
  if (!updates.ok()) {
    Fail(updates.status().WithContext("planning iteration"));
    return false;
  }
  const auto planned_it = std::find_if(updates->begin(), updates->end(), [](const loft::v1::StateUpdate& u) {
    return u.has_iteration_planned();
  });
  if (planned_it == updates->end()) {
    // Blocked. With an iteration running, its acks will retry; with a node
    // down, its return will; otherwise the run cannot continue.
    if (complete && std::find(crashed_.begin(), crashed_.end(), true) == crashed_.end()) {
      result_.blocked_reason = driver_->BlockedReason();
      done_ = true;
    }
    // Waiting for a crashed holder (scheduler/holder_wait.h): plan again
    // when the wait expires, if nothing else happens by then.
    const sched::HolderWait w = sched::CheckHolderWait(st, clock_.NowMillis());
    if (w.waiting && w.may_abandon && !w.expired()) {
      const double at = queue_.now_ms() + (w.limit_ms - w.waited_ms);
      if (at != holder_wake_ms_) {
        holder_wake_ms_ = at;
        queue_.At(at, [this] { PlanLoop(); });
      }
    }
    return false;
  }
  if (!complete) ++result_.planned_ahead;
  const auto& ip = planned_it->iteration_planned();
  const int64_t iteration = ip.iteration();
  sched::OpenIteration& oi = open_.Open(iteration);
  oi.planned_ms = queue_.now_ms();
  oi.epoch = ip.epoch();
  oi.predicted_ms = ip.makespan_ms();
  oi.bound_ms = bound;
  if (bound >= 0) {
    bound_sum_ += bound;
    ++bound_count_;
  }
  if (!ip.policy_error().empty() && result_.first_policy_error.empty())
    result_.first_policy_error = fmt::format("iteration {}: {}", iteration, ip.policy_error());
  std::vector<char> workers(static_cast<size_t>(spec_.num_nodes()), 0);
  const double sendable = queue_.now_ms() + spec_.scheduler.overhead_ms;
  for (const auto& pp : ip.partitions()) {
    const loft::v1::Partition& p = pp.partition();
    if (options_.plan_digest) result_.plan_digest = sched::FoldPlanDigest(result_.plan_digest, p);
    auto part = std::make_unique<Part>();
    part->id = p.id();
    part->attempt = p.attempt();
    part->batch = p.sample_ids_size();
    part->node = p.worker();
    part->iteration = iteration;
    part->local_step = pp.partition().local_step();
    part->sendable_ms = sendable;
    std::vector<int32_t> remote_sources;
    for (int32_t src : p.sources()) {
      if (src == part->node) {
        ++part->local;
      } else {
        remote_sources.push_back(src);
        ++part->remote;
      }
    }
    std::sort(remote_sources.begin(), remote_sources.end());
    part->decoded_from.assign(p.decoded_from().begin(), p.decoded_from().end());
    for (int32_t src : remote_sources)
      part->remote_decoded += std::binary_search(part->decoded_from.begin(), part->decoded_from.end(), src);
    for (int32_t src : remote_sources) {
      if (part->from_peer.empty() || part->from_peer.back().first != src)
        part->from_peer.emplace_back(src, 0);
      ++part->from_peer.back().second;
    }
    if (p.sample_ids_size() > 0) workers[static_cast<size_t>(part->node)] = 1;
    sends_.Push(part->node, p.id());
    oi.partitions.push_back(p.id());
    AddPart(std::move(part));
  }
  ring_votes_.OnPlanned(iteration, gate_.OnPlanned(iteration, st.view(), workers, ip.makespan_ms()));
  result_.plan_ahead = std::max(result_.plan_ahead, gate_.depth());
  ScheduleTimeoutCheck();
  return true;
}

// The daemon's streaming rule (sched::SendQueues): per agent in node
// order, while it has credit; a partition waits until the scheduler has
// planned and journaled it (scheduler.overhead_ms).
void Simulator::SendQueued() {
  const double now = queue_.now_ms();
  using Offer = sched::SendQueues::Offer;
  const Status s = sends_.Stream(
      [&](int32_t, uint64_t id) {
        Part* p = FindPart(id);
        if (p == nullptr) return Offer::kDrop;  // failed before it was sent
        if (p->sendable_ms > now) {
          // The scheduler is still planning/journaling it: come back then.
          if (send_wake_ms_ < now || p->sendable_ms < send_wake_ms_) {
            send_wake_ms_ = p->sendable_ms;
            // Then the daemon's tick goes on: stream, then plan ahead.
            queue_.At(p->sendable_ms, [this, at = p->sendable_ms] {
              if (send_wake_ms_ == at) send_wake_ms_ = -1;
              if (done_) return;
              Sync();
              SendQueued();
              PlanLoop();
            });
          }
          return Offer::kWait;
        }
        return Offer::kSend;
      },
      [&](int32_t, uint64_t id) -> Status {
        Part* p = FindPart(id);
        p->sent_ms = now;
        auto sent = driver_->OnPartitionSent(p->id, p->attempt, clock_.NowMillis());
        if (!sent.ok()) return sent.status().WithContext("partition sent");
        SendGrants(id);  // before the assignment, as the daemon
        // The control path to the agent's reader (scheduler.handoff_ms).
        if (const double handoff = spec_.scheduler.handoff_ms; handoff > 0) {
          queue_.After(handoff, [this, id] {
            if (Part* x = FindPart(id); x != nullptr && !done_) Deliver(*x);
          });
        } else {
          Deliver(*p);
        }
        return OkStatus();
      });
  if (!s.ok()) Fail(s);
}

// The agent's PartitionDone, then its CreditGrant, then the daemon's tick.
void Simulator::Acked(Part& p) {
  Sync();
  const int32_t node = p.node;
  const double now = queue_.now_ms();
  loft::v1::PartitionDone done;
  done.set_partition_id(p.id);
  done.set_attempt(p.attempt);
  done.set_node(node);
  auto* t = done.mutable_timings();
  const double local_ms = p.local > 0 ? p.local_end_ms - p.read_start_ms : 0.0;
  const double remote_ms = p.remote > 0 ? p.remote_end_ms - p.read_start_ms : 0.0;
  t->set_local_read_ms(local_ms);
  t->set_remote_read_ms(remote_ms);
  t->set_compute_ms(p.compute_ms);
  t->set_read_during_exchange(p.read_during_exchange);
  t->set_local_samples(p.local);
  t->set_remote_samples(p.remote);
  t->set_local_bytes(p.local * model_.sample_bytes());
  if (p.remote_decoded > 0) {
    // Decoded samples weigh DecodedWireBytes each (the daemon's reports).
    const auto decoded_bytes =
        static_cast<int64_t>(std::llround(static_cast<double>(p.remote_decoded) * model_.decoded_bytes()));
    t->set_remote_bytes((p.remote - p.remote_decoded) * model_.sample_bytes() + decoded_bytes);
    t->set_remote_decoded_samples(p.remote_decoded);
    t->set_remote_decoded_bytes(decoded_bytes);
  } else {
    t->set_remote_bytes(p.remote * model_.sample_bytes());
  }
  if (p.decode_ms > 0) t->set_preprocess_ms(p.decode_ms);
  for (const auto& [peer, ms] : p.by_peer_ms) (*t->mutable_remote_read_ms_by_peer())[peer] = ms;
  if (allreduce_.enabled()) {
    t->mutable_training()->set_allreduce_ms(p.allreduce_ms);
    const auto& trace = options_.loss_trace;
    if (p.iteration >= 0 && static_cast<size_t>(p.iteration) < trace.size() &&
        std::isfinite(trace[static_cast<size_t>(p.iteration)]))
      t->mutable_training()->set_loss(trace[static_cast<size_t>(p.iteration)]);
    for (const auto& [id, worker] : p.applied) {
      t->mutable_training()->add_applied_partitions(id);
      t->mutable_training()->add_applied_nodes(worker);
    }
  }

  const bool trace = p.iteration < options_.trace_iterations;
  if (trace) {
    if (p.local > 0) result_.spans.push_back({node, "local read", p.read_start_ms, local_ms, p.iteration});
    if (p.remote > 0) result_.spans.push_back({node, "remote read", p.read_start_ms, remote_ms, p.iteration});
    result_.spans.push_back({node, "compute", p.compute_start_ms, p.compute_ms, p.iteration});
  }
  if (options_.record_inputs) {
    Log(SchedulerInput::kDone, node, &p);
    result_.inputs.back().timings = *t;
  }
  Agent& ag = agents_[static_cast<size_t>(node)];
  if (ag.computing == p.id) ag.EndCompute(now);
  Seen(node);
  Background(node, SchedulerNode(), spec_.network.report_bytes);
  // Whether the ack applies, and the worker's word on what the ring
  // applied, recorded before it is applied (sched::RecordAckVotes, the
  // daemon's rule: an epoch's last ack prunes what the votes are checked
  // against).
  const sched::AckVotes votes = sched::RecordAckVotes(ring_votes_, driver_->state().ledger(), node, done);
  const int64_t iteration = p.iteration;
  timed_out_.erase(p.id);
  if (!votes.applies) {
    // Committed on its behalf when a death would have failed it, or timed
    // out: ignored (no state change); its credit comes back.
    ErasePart(p.id);
  } else {
    auto u = driver_->OnPartitionDone(done, clock_.NowMillis());
    if (!u.ok()) return Fail(u.status().WithContext(fmt::format("partition {} done", p.id)));
    // The worker's row from its timings, as the daemon's (scheduler/open_iterations.h).
    open_.AddRow(p.iteration, sched::RowFromTimings(node, *t), p.sent_ms, now);
    ErasePart(p.id);                                     // p is gone
    if (iteration == open_.oldest()) CloseIterations();  // only the oldest can close first
    sends_.window(node).OnFinished(false);
  }
  sends_.window(node).Grant(1);  // the agent's CreditGrant after its report
  Log(SchedulerInput::kCredit, node);
  PlanLoop();
  ComputeNext(node);
  if (!spec_.training.overlap) ReaderNext(node);  // the compute stage is idle: the next read may start
}

// A failed partition that was sent: the daemon's failed row.
void Simulator::ClosedRow(const Part& p, bool failed) {
  if (p.sent_ms < 0) return;  // never sent: no row (as in the daemon)
  sched::WorkerIteration row = sched::FailedRow(p.node, p.batch, p.local);
  row.failed = failed;
  open_.AddRow(p.iteration, std::move(row), p.sent_ms, queue_.now_ms());
}

// Closes finished iterations in order, with the daemon's rule
// (scheduler/open_iterations.h); traced iterations get their wait spans.
void Simulator::CloseIterations() {
  const int added = open_.Close(
      driver_->state().ledger(), &recorder_,
      [this](int64_t iteration, const sched::OpenIteration& s, sched::IterationRecord* rec) {
        // A ring still running (its partitions timed out) finishes first.
        if (auto r = rings_.find(iteration); r != rings_.end() && !r->second.running) rings_.erase(r);
        ring_votes_.Close(iteration);
        if (rec == nullptr || iteration >= options_.trace_iterations) return;
        for (size_t k = 0; k < rec->workers.size(); ++k) {
          const double done = s.sent_done[k].second;
          if (s.last_done_ms > done)
            result_.spans.push_back({rec->workers[k].node, "wait", done, s.last_done_ms - done, iteration});
        }
      });
  if (added > 0 && options_.progress) options_.progress(recorder_.iterations_added(), target_iterations_);
}

// The node crashes: its agent's process is gone (what it held is lost, its
// flows stop); the scheduler still counts its partitions in flight, keeps
// its send queue and credit window, and notices the death when the node
// has been silent for heartbeat_timeout_ms (the daemon's Tick).
void Simulator::Crash(int node) {
  if (done_ || crashed_[static_cast<size_t>(node)]) return;
  crashed_[static_cast<size_t>(node)] = true;
  granted_[static_cast<size_t>(node)].clear();  // its serve grants die with the process
  const double timeout = spec_.scheduler.heartbeat_timeout_ms;
  if (timeout <= 0) return DeclareDead(node);
  Agent& ag = agents_[static_cast<size_t>(node)];
  ag.assigned.clear();
  ag.reading = kNone;
  ag.holding = false;
  ag.ready.clear();
  ag.EndCompute(queue_.now_ms());
  network_.CancelNode(node);  // reads from it, by it and ring flows stall (simulator_agent.cc)
  // Its last message: a heartbeat (registration + k·interval, strictly
  // before now) or its last ack/grant; dead once silent for more than the
  // timeout: the daemon's rule (sched::HeartbeatExpired), at the first
  // microsecond (the clock's unit) it holds.
  const double now = queue_.now_ms();
  const double iv = spec_.scheduler.heartbeat_interval_ms;
  const double reg = registered_ms_[static_cast<size_t>(node)];
  const double k = std::max(0.0, std::ceil((now - reg) / iv) - 1);
  const double last = std::max(reg + k * iv, last_msg_ms_[static_cast<size_t>(node)]);
  const double at = std::max(now, sched::HeartbeatExpiresAt(last, timeout, 1e-3));
  queue_.At(at, [this, node, epoch = registrations_[static_cast<size_t>(node)]] {
    if (registrations_[static_cast<size_t>(node)] == epoch) DeclareDead(node);
  });
}

// The scheduler declares the node dead (as the daemon's Tick on a missed
// heartbeat).
void Simulator::DeclareDead(int node) {
  if (done_ || down_[node]) return;
  down_[node] = true;
  Sync();
  Log(SchedulerInput::kDead, node);
  // The departure rule (sched::Depart, scheduler/departures.h): what its
  // ring applied is committed on its behalf, then OnWorkerDead fails the
  // partitions the death affects (the liveness rule, scheduler/
  // liveness.h: the node's own and every one reading from it, even if its
  // reads are over); they stop here. The iterations those commits
  // completed close below, with the rest (CloseIterations).
  auto u = sched::Depart(*driver_, ring_votes_, node, sched::Departure::kDead,
                         "failure injected by the cluster spec", clock_.NowMillis(),
                         [&](uint64_t id) { return CommitByRing(id, node); });
  if (done_) return;  // a commit failed (CommitByRing stopped the run)
  if (!u.ok()) return Fail(u.status().WithContext(fmt::format("node {} down", node)));
  std::vector<int32_t> credit_back;  // live agents that drop a sent partition
  std::set<int64_t> iterations;
  for (const auto& x : *u) {
    if (!x.has_partition_failed()) continue;
    Part* p = FindPart(x.partition_failed().failed().partition_id());
    if (p == nullptr) continue;
    ClosedRow(*p, /*failed=*/true);
    if (p->node != node && p->sent_ms >= 0) credit_back.push_back(p->node);
    iterations.insert(p->iteration);
    DropPart(*p);
    ErasePart(x.partition_failed().failed().partition_id());
  }
  DropTimedOutOf(node, &credit_back);
  Agent& ag = agents_[static_cast<size_t>(node)];
  ag = Agent{};
  sends_.Depart(node);  // queue dropped, window closed: the daemon's departed (send_queues.h)
  // Rings with the dead node restart with the survivors; flows it served
  // or read are cut (their partitions already failed above).
  for (auto& [it, ring] : rings_) {
    // A ring applying its fixed aggregate goes on without it.
    if (!ring.running || ring.applying ||
        std::find(ring.members.begin(), ring.members.end(), node) == ring.members.end())
      continue;
    for (uint64_t f : ring.flows) network_.Cancel(f);
    ring.flows.clear();
    ring.running = false;
    ++ring.generation;
    iterations.insert(it);
  }
  network_.CancelNode(node);
  CloseIterations();
  PlanLoop();
  // Each live agent that dropped a sent partition returns its credit.
  for (int32_t n : credit_back) {
    if (done_) return;
    Seen(n);
    sends_.window(n).Grant(1);
    Log(SchedulerInput::kCredit, n);
    PlanLoop();
  }
  for (int64_t it : iterations) MaybeStartRing(it);
  for (int32_t n = 0; n < spec_.num_nodes(); ++n) {
    if (crashed_[static_cast<size_t>(n)]) continue;
    ReaderNext(n);
    ComputeNext(n);
  }
}

// Commits partition `id` on its worker's behalf (the ring applied it), as
// the daemon's CommitIfApplied: before `dead_node`'s death fails it
// (sched::Depart's `commit`), or
// (dead_node < 0) when it timed out, whose credit then comes back.
Status Simulator::CommitByRing(uint64_t id, int32_t dead_node) {
  // Committed for its worker (scheduler/ring_commit.h; the callers' rules found the ring applied it).
  auto c = sched::CommitForWorker(*driver_, ring_votes_, id, clock_.NowMillis());
  if (!c.ok()) {
    Fail(c.status().WithContext(fmt::format("committing partition {} by the ring", id)));
    return error_;
  }
  if (!c->has_value()) return OkStatus();
  const int64_t iteration = (*c)->iteration;
  const int32_t worker = (*c)->worker;
  ++result_.committed_by_ring;
  open_.Open(iteration);  // no row: the ring's commit has no timings of its own
  sends_.window(worker).OnFinished(false);
  if (dead_node < 0) sends_.window(worker).Grant(1);  // timed out: as for a timeout
  if (Part* p = FindPart(id); p != nullptr) {
    if (worker == dead_node) {
      DropPart(*p);
      ErasePart(id);
    } else {
      p->committed_by_ring = true;  // its agent still acks (ignored) and takes its credit back
    }
  }
  return OkStatus();
}

// Partition timeouts at a deadline: the daemon's rule
// (sched::TimeOutPartitions, as its Tick runs it). A timed-out partition
// that was sent gets a failed row and its credit back; its agent, which
// does not know, still runs it: its late ack changes nothing but returns
// a credit (Acked). One that was not sent leaves the send queue.
void Simulator::CheckPartitionTimeouts() {
  if (done_) return;
  Sync();
  Log(SchedulerInput::kTick, -1);
  auto u = sched::TimeOutPartitions(*driver_, ring_votes_, clock_.NowMillis(),
                                    [this](uint64_t id) { return CommitByRing(id, -1); });
  if (!u.ok()) return Fail(u.status().WithContext("partition timeouts"));
  if (done_) return;
  for (const auto& x : *u) {
    if (!x.has_partition_timed_out()) continue;
    const uint64_t id = x.partition_timed_out().partition_id();
    Part* p = FindPart(id);
    if (p == nullptr) continue;
    ClosedRow(*p, /*failed=*/true);
    if (p->sent_ms < 0) {
      ErasePart(id);
      continue;
    }
    sends_.window(p->node).OnFinished(/*timed_out=*/true);
    timed_out_.insert(id);
  }
  CloseIterations();
  PlanLoop();
  ScheduleTimeoutCheck();
}

// Timed-out partitions an agent still runs that `node`'s death breaks
// (its own, or reading from it) leave their agents; a live one reports
// the failure (ignored: already timed out) and returns the credit.
void Simulator::DropTimedOutOf(int32_t node, std::vector<int32_t>* credit_back) {
  for (auto it = timed_out_.begin(); it != timed_out_.end();) {
    Part* p = FindPart(*it);
    const bool hit =
        p != nullptr && (p->node == node || std::any_of(p->from_peer.begin(), p->from_peer.end(),
                                                        [&](const auto& f) { return f.first == node; }));
    if (!hit) {
      ++it;
      continue;
    }
    if (p->node != node) credit_back->push_back(p->node);
    DropPart(*p);
    ErasePart(*it);
    it = timed_out_.erase(it);
  }
}

// The next partition deadline gets a check (the daemon's Tick finds it at
// its first tick past it), unless one is due before.
void Simulator::ScheduleTimeoutCheck() {
  const double deadline = sched::NextPartitionDeadline(driver_->state().ledger());
  if (!std::isfinite(deadline)) return;
  const double at = std::max(queue_.now_ms(), sched::PartitionExpiresAt(deadline, 1e-3));
  if (!timeout_checks_.empty() && *timeout_checks_.begin() <= at) return;
  timeout_checks_.insert(at);
  queue_.At(at, [this, at] {
    timeout_checks_.erase(at);
    CheckPartitionTimeouts();
  });
}

// A node's CPU quota as a new agent finds it (a full bucket, nothing
// queued); disabled without compute.cpu_cores.
CpuQuota Simulator::FreshQuota(int node) const {
  const double cores = spec_.nodes[static_cast<size_t>(node)].compute.cpu_cores;
  if (!(cores > 0)) return CpuQuota();
  return CpuQuota(cores, static_cast<double>(CfsPeriodUs(cores)) / 1000.0, agent_cpu_.idle_cores);
}

void Simulator::NodeUp(int node) {
  if (done_ || !crashed_[node]) return;
  if (model_.IsDown(node, queue_.now_ms())) return;  // an overlapping outage continues
  // Back before its death was noticed: its registration ends the old session.
  if (!down_[node]) DeclareDead(node);
  if (done_) return;
  Sync();
  // The new agent process registers: the daemon's rule (sched::TakeRegistration).
  auto reg = RegisterAgent(node);
  if (!reg.ok()) return Fail(reg.status().WithContext(fmt::format("node {} up", node)));
  if (reg->wait_ms > 0) {
    // Too soon (RegisterBackoff): the agent asks again after the wait (at
    // least one clock tick later).
    queue_.After(std::max(reg->wait_ms, 1e-3), [this, node] { NodeUp(node); });
    return;
  }
  for (const auto& x : reg->updates) {
    // Dead since DeclareDead above: its registration fails nothing here.
    if (x.has_partition_failed() || x.has_partition_done())
      return Fail(Internal(fmt::format("node {} up: its registration changed a partition", node)));
  }
  down_[node] = false;
  crashed_[node] = false;
  stale_[node] = allreduce_.enabled();                 // a restarted agent holds the seed's parameters
  cpu_[static_cast<size_t>(node)] = FreshQuota(node);  // a new process: the dead one's CPU queue is gone
  Seen(node);
  registered_ms_[static_cast<size_t>(node)] = queue_.now_ms();
  const int64_t epoch = ++registrations_[static_cast<size_t>(node)];
  if (options_.record_inputs) Heartbeat(node, epoch, 1);
  Log(SchedulerInput::kAlive, node);
  sends_.StartSession(node, options_.credits);  // a new session, as the daemon's (send_queues.h)
  PlanLoop();
}

StatusOr<sched::Registration> Simulator::RegisterAgent(int node) {
  // Each process of the node's agent has its own incarnation (1, 2, ...):
  // a registration is never a reconnect here.
  const auto k = static_cast<uint64_t>(registrations_[static_cast<size_t>(node)]);
  sched::Session session;
  session.connected = k > 0;
  session.incarnation = k;
  loft::v1::RegisterRequest req;
  req.set_node_name(spec_.nodes[static_cast<size_t>(node)].name);
  req.set_credits(options_.credits);
  req.set_incarnation(k + 1);
  return sched::TakeRegistration(*driver_, ring_votes_, accusations_, register_backoff_, node, session, req,
                                 clock_.NowMillis(), [&](uint64_t id) { return CommitByRing(id, node); });
}

StatusOr<SimResult> Simulator::Run() {
  for (int n = 0; n < spec_.num_nodes(); ++n) {
    auto reg = RegisterAgent(n);  // the first registration: a new session, never too soon
    if (!reg.ok()) return reg.status().WithContext(fmt::format("registering node {}", n));
    sends_.StartSession(n, options_.credits);
  }
  for (int n = 0; n < spec_.num_nodes(); ++n) {
    if (options_.record_inputs) Heartbeat(n, 0, 1);
    for (const auto& o : model_.outages(n)) {
      queue_.At(o.start_ms, [this, n] { Crash(n); });
      queue_.At(o.end_ms, [this, n] { NodeUp(n); });
      result_.spans.push_back({static_cast<int32_t>(n), "down", o.start_ms, o.end_ms - o.start_ms, -1});
    }
  }
  queue_.At(0, [this] { PlanLoop(); });
  while (!done_ && queue_.Step()) {
  }
  if (!error_.ok()) return error_;
  if (!done_ && result_.blocked_reason.empty()) result_.blocked_reason = driver_->BlockedReason();

  SimResult r = std::move(result_);
  r.counters = driver_->state().ledger().counters();
  r.policy_failures = driver_->state().policy_failures();
  // Every figure from the run recorder (the daemon's too).
  SetFigures(recorder_.Figures(r.counters.epochs_completed), &r.summary);
  r.iterations = recorder_.TakeIterations();
  r.summary.policy_failures = r.policy_failures;
  r.summary.epochs_completed = r.counters.epochs_completed;
  r.bound_mean_iteration_ms = bound_count_ > 0 ? bound_sum_ / static_cast<double>(bound_count_) : -1;
  r.bound_epoch_mean_iteration_ms =
      bound_epoch_count_ > 0 ? bound_epoch_sum_ / static_cast<double>(bound_epoch_count_) : -1;
  r.events = queue_.events_run();
  // Outage spans outside the simulated time are dropped.
  const double end_ms = r.summary.total_s * 1000.0;
  std::erase_if(r.spans, [&](const TraceSpan& s) { return s.start_ms >= end_ms && s.iteration < 0; });
  return r;
}

// Heartbeat k of the node's registration `epoch` (registration + k·interval),
// kept as an input for tests that replay the run to the daemon.
void Simulator::Heartbeat(int node, int64_t epoch, int64_t k) {
  const double at = registered_ms_[static_cast<size_t>(node)] +
                    static_cast<double>(k) * spec_.scheduler.heartbeat_interval_ms;
  ++heartbeats_pending_;
  queue_.At(at, [this, node, epoch, k] {
    --heartbeats_pending_;
    if (done_ || crashed_[static_cast<size_t>(node)] || registrations_[static_cast<size_t>(node)] != epoch)
      return;
    Log(SchedulerInput::kHeartbeat, node);
    // Only heartbeats left: the run is over (or blocked); stop beating.
    if (queue_.size() > heartbeats_pending_) Heartbeat(node, epoch, k + 1);
  });
}

StatusOr<SimResult> RunPolicy(const ClusterSpec& spec, const SimOptions& options) {
  LOFT_ASSIGN_OR_RETURN(auto sim, Simulator::Create(spec, options));
  return sim->Run();
}

}  // namespace loft::sim
