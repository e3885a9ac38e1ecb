#include "sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "scheduler/bound.h"

namespace loft::sim {

namespace {
double FlowInterval(const SimOptions& o, const ClusterSpec& spec) {
  if (o.flow_interval_ms >= 0) return o.flow_interval_ms;
  return spec.num_nodes() <= kExactFlowNodes ? 0.0 : kLargeFlowIntervalMs;
}
}  // namespace

struct Simulator::Active {
  loft::v1::Partition p;
  size_t row = 0;  // index in current_.workers
  double start_ms = 0;
  int64_t local = 0;
  int64_t remote = 0;
  bool local_done = true;
  bool remote_done = true;
  bool compute_started = false;
  bool compute_done = false;
  bool closed = false;  // done or failed
  int flows_pending = 0;
  double local_end_ms = 0;
  double remote_end_ms = 0;
  double compute_start_ms = 0;
  double compute_ms = 0;
  std::vector<uint64_t> flows;
  std::map<int32_t, double> by_peer_ms;
};

Simulator::Simulator(const ClusterSpec& spec, SimOptions options, std::unique_ptr<sched::JobDriver> driver)
    : spec_(spec),
      options_(std::move(options)),
      driver_(std::move(driver)),
      clock_(0),
      model_(spec, options_.seed != 0 ? options_.seed : spec.training.seed),
      network_(&queue_, model_.UpRates(), model_.DownRates(), FlowInterval(options_, spec)),
      target_iterations_(options_.iterations > 0 ? options_.iterations : spec.training.iterations),
      gate_({.plan_ahead = 0, .target_iterations = target_iterations_, .min_workers = 0}, spec.num_nodes()),
      allreduce_(spec),
      down_(spec.nodes.size(), false) {
  result_.policy = options_.policy;
  result_.flow_interval_ms = FlowInterval(options_, spec);
}

StatusOr<std::unique_ptr<Simulator>> Simulator::Create(const ClusterSpec& spec, SimOptions options) {
  if (spec.nodes.empty()) return InvalidArgument(spec.source + ": the cluster has no nodes");
  if (options.iterations < 0) return InvalidArgument("iterations must be >= 0");
  sched::StateOptions so;
  so.timeout_min_ms = 0;  // nothing hangs in the simulator; failures are reported directly
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
  for (sched::WorkerInput& w : req->workers) w.cost = sched::PriorFromSpec(spec_, w.node);
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

void Simulator::StartIteration() {
  if (done_) return;
  Sync();
  // The daemon's gate (BSP here: the simulator runs one iteration at a
  // time and models prefetching as overlap within a partition).
  if (!gate_.ReadyToPlan(driver_->state(), /*send_queues_empty=*/true)) {
    return Fail(Internal("the iteration gate refused a plan after a complete iteration"));
  }
  const double bound = options_.compute_bound ? BoundForRequest() : -1;
  auto updates = driver_->PlanNextIteration(clock_.NowMillis());
  if (!updates.ok()) return Fail(updates.status().WithContext("planning iteration"));
  auto parts = sched::JobDriver::PartitionsToSend(*updates);
  if (parts.empty()) {
    // Blocked: wait for a node to come back, or give up when none is down.
    if (std::find(down_.begin(), down_.end(), true) != down_.end()) {
      waiting_for_node_ = true;
      return;
    }
    result_.blocked_reason = driver_->BlockedReason();
    done_ = true;
    return;
  }
  current_ = IterationRecord{};
  for (const auto& u : *updates) {
    if (u.has_iteration_planned()) {
      current_.iteration = u.iteration_planned().iteration();
      current_.epoch = u.iteration_planned().epoch();
      current_.predicted_ms = u.iteration_planned().makespan_ms();
      if (!u.iteration_planned().policy_error().empty() && result_.first_policy_error.empty()) {
        result_.first_policy_error = fmt::format("iteration {}: {}", u.iteration_planned().iteration(),
                                                 u.iteration_planned().policy_error());
      }
    }
  }
  {
    std::vector<char> workers(static_cast<size_t>(spec_.num_nodes()), 0);
    for (const auto& p : parts) {
      if (p.sample_ids_size() > 0) workers[static_cast<size_t>(p.worker())] = 1;
      if (options_.plan_digest) result_.plan_digest = sched::FoldPlanDigest(result_.plan_digest, p);
    }
    gate_.OnPlanned(current_.iteration, driver_->state().view(), workers);
  }
  current_.start_ms = queue_.now_ms();
  current_.bound_ms = bound;
  if (bound >= 0) {
    bound_sum_ += bound;
    ++bound_count_;
  }
  iteration_open_ = true;
  active_.clear();
  for (const auto& p : parts) {
    auto sent = driver_->OnPartitionSent(p.id(), p.attempt(), clock_.NowMillis());
    if (!sent.ok()) return Fail(sent.status().WithContext("partition sent"));
  }
  for (auto& p : parts) StartPartition(std::move(p));
  MaybeEndIteration();  // every partition may have been empty
}

void Simulator::StartPartition(loft::v1::Partition partition) {
  auto owned = std::make_unique<Active>();
  Active& a = *owned;
  const size_t idx = active_.size();
  active_.push_back(std::move(owned));
  a.p = std::move(partition);
  const loft::v1::Partition& p = a.p;
  a.start_ms = queue_.now_ms();
  const int32_t node = p.worker();
  // Samples per serving peer, ascending peer (flows start in that order).
  std::vector<int32_t> remote_sources;
  for (int32_t src : p.sources()) {
    if (src == node) {
      ++a.local;
    } else {
      remote_sources.push_back(src);
      ++a.remote;
    }
  }
  std::sort(remote_sources.begin(), remote_sources.end());
  std::vector<std::pair<int32_t, int64_t>> from_peer;
  for (int32_t src : remote_sources) {
    if (from_peer.empty() || from_peer.back().first != src) from_peer.emplace_back(src, 0);
    ++from_peer.back().second;
  }
  WorkerIteration row;
  row.node = node;
  row.batch = p.sample_ids_size();
  row.local = a.local;
  row.remote = a.remote;
  a.row = current_.workers.size();
  current_.workers.push_back(row);

  const int64_t it = current_.iteration;
  auto alive = [this, idx, it] {
    return iteration_open_ && current_.iteration == it && idx < active_.size() && !active_[idx]->closed;
  };
  if (a.local > 0) {
    a.local_done = false;
    queue_.After(model_.LocalReadMs(node, a.local), [this, idx, alive] {
      if (!alive()) return;
      Active& x = *active_[idx];
      x.local_done = true;
      x.local_end_ms = queue_.now_ms();
      MaybeFinishPartition(x);
    });
  }
  if (a.remote > 0) {
    a.remote_done = false;
    a.flows_pending = static_cast<int>(from_peer.size());
    const double latency = model_.LatencyMs(node);
    const double bytes_per_sample = static_cast<double>(model_.sample_bytes());
    for (const auto& [peer, count] : from_peer) {
      const int32_t server = peer;
      const double bytes = static_cast<double>(count) * bytes_per_sample;
      queue_.After(latency, [this, idx, alive, server, node, bytes] {
        if (!alive()) return;
        const uint64_t f = network_.Start(server, node, bytes, [this, idx, alive, server](bool ok) {
          if (!alive()) return;
          Active& x = *active_[idx];
          if (!ok) {
            FailPartitionsOfReaders({x.p.id()}, "peer down");
            return;
          }
          x.by_peer_ms[server] = queue_.now_ms() - x.start_ms;
          if (--x.flows_pending == 0) {
            x.remote_done = true;
            x.remote_end_ms = queue_.now_ms();
            MaybeFinishPartition(x);
          }
        });
        active_[idx]->flows.push_back(f);
      });
    }
  }
  if (spec_.training.overlap || (a.local_done && a.remote_done)) {
    a.compute_started = true;
    a.compute_start_ms = queue_.now_ms();
    a.compute_ms = model_.ComputeMs(node, row.batch, a.compute_start_ms);
    queue_.After(a.compute_ms, [this, idx, alive] {
      if (!alive()) return;
      Active& x = *active_[idx];
      x.compute_done = true;
      MaybeFinishPartition(x);
    });
  }
  if (a.local == 0 && a.remote == 0 && row.batch == 0) MaybeFinishPartition(a);
}

void Simulator::MaybeFinishPartition(Active& a) {
  if (a.closed) return;
  const int32_t node = a.p.worker();
  if (a.local_done && a.remote_done && !a.compute_started) {
    // Without overlap, compute starts once every sample has arrived.
    a.compute_started = true;
    a.compute_start_ms = queue_.now_ms();
    a.compute_ms = model_.ComputeMs(node, a.p.sample_ids_size(), a.compute_start_ms);
    // Active objects live until the next iteration starts; the iteration
    // check comes first so a stale pointer is never dereferenced.
    const int64_t it = current_.iteration;
    Active* ap = &a;
    queue_.After(a.compute_ms, [this, ap, it] {
      if (!iteration_open_ || current_.iteration != it || ap->closed) return;
      ap->compute_done = true;
      MaybeFinishPartition(*ap);
    });
    return;
  }
  if (!(a.local_done && a.remote_done && a.compute_done)) return;
  a.closed = true;
  Sync();
  const double now = queue_.now_ms();
  WorkerIteration& row = current_.workers[a.row];
  row.local_read_ms = a.local > 0 ? a.local_end_ms - a.start_ms : 0.0;
  row.remote_read_ms = a.remote > 0 ? a.remote_end_ms - a.start_ms : 0.0;
  row.read_ms = std::max(row.local_read_ms, row.remote_read_ms);
  row.compute_ms = a.compute_ms;
  row.own_ms = now - a.start_ms;

  loft::v1::PartitionDone done;
  done.set_partition_id(a.p.id());
  done.set_attempt(a.p.attempt());
  done.set_node(node);
  auto* t = done.mutable_timings();
  t->set_local_read_ms(row.local_read_ms);
  t->set_remote_read_ms(row.remote_read_ms);
  t->set_compute_ms(row.compute_ms);
  t->set_local_samples(a.local);
  t->set_remote_samples(a.remote);
  t->set_local_bytes(a.local * model_.sample_bytes());
  t->set_remote_bytes(a.remote * model_.sample_bytes());
  for (const auto& [peer, ms] : a.by_peer_ms) (*t->mutable_remote_read_ms_by_peer())[peer] = ms;
  row.local_bytes = a.local * model_.sample_bytes();
  row.remote_bytes = a.remote * model_.sample_bytes();

  const bool trace = current_.iteration < options_.trace_iterations;
  if (trace) {
    if (a.local > 0)
      result_.spans.push_back({node, "local read", a.start_ms, row.local_read_ms, current_.iteration});
    if (a.remote > 0) {
      result_.spans.push_back({node, "remote read", a.start_ms, row.remote_read_ms, current_.iteration});
    }
    result_.spans.push_back({node, "compute", a.compute_start_ms, a.compute_ms, current_.iteration});
  }
  auto u = driver_->OnPartitionDone(done, clock_.NowMillis());
  if (!u.ok()) return Fail(u.status().WithContext(fmt::format("partition {} done", a.p.id())));
  MaybeEndIteration();
}

void Simulator::FailPartitionsOfReaders(const std::vector<uint64_t>& ids, const char* reason, bool report) {
  Sync();
  for (uint64_t id : ids) {
    for (auto& ap : active_) {
      Active& a = *ap;
      if (a.p.id() != id || a.closed) continue;
      a.closed = true;
      for (uint64_t f : a.flows) network_.Cancel(f);
      WorkerIteration& row = current_.workers[a.row];
      row.failed = true;
      row.own_ms = queue_.now_ms() - a.start_ms;
      if (!report) continue;  // already failed by OnWorkerDead
      loft::v1::PartitionFailed f;
      f.set_partition_id(a.p.id());
      f.set_attempt(a.p.attempt());
      f.set_node(a.p.worker());
      f.set_reason(reason);
      auto u = driver_->OnPartitionFailed(f, clock_.NowMillis());
      if (!u.ok()) return Fail(u.status().WithContext(fmt::format("partition {} failed", id)));
    }
  }
}

void Simulator::NodeDown(int node) {
  if (done_ || down_[node]) return;
  down_[node] = true;
  Sync();
  auto u = driver_->OnWorkerDead(node, "failure injected by the cluster spec", clock_.NowMillis());
  if (!u.ok()) return Fail(u.status().WithContext(fmt::format("node {} down", node)));
  // OnWorkerDead failed the partitions the death affects (the liveness
  // rule, scheduler/liveness.h: the node's own and every one reading from
  // it, even if its reads are over); they stop here, as in the daemon.
  std::vector<uint64_t> failed;
  for (const auto& x : *u) {
    if (x.has_partition_failed()) failed.push_back(x.partition_failed().failed().partition_id());
  }
  FailPartitionsOfReaders(failed, "worker down", /*report=*/false);
  // Flows it served or read are cut; their readers fail ("peer down").
  network_.CancelNode(node);
  MaybeEndIteration();
}

void Simulator::NodeUp(int node) {
  if (done_ || !down_[node]) return;
  if (model_.IsDown(node, queue_.now_ms())) return;  // an overlapping outage continues
  down_[node] = false;
  Sync();
  auto u = driver_->OnWorkerAlive(node, clock_.NowMillis());
  if (!u.ok()) return Fail(u.status().WithContext(fmt::format("node {} up", node)));
  if (waiting_for_node_) {
    waiting_for_node_ = false;
    StartIteration();
  }
}

void Simulator::MaybeEndIteration() {
  if (!iteration_open_ || done_) return;
  for (auto& ap : active_) {
    if (!ap->closed) return;
  }
  if (!driver_->IterationComplete()) {
    return Fail(Internal(fmt::format("iteration {}: every partition closed but the ledger has some in flight",
                                     current_.iteration)));
  }
  // --- issue 15: all-reduce and scheduler overhead (sim/allreduce_model.h)
  if (!tail_charged_) {
    if (const double tail = IterationTailMs(); tail > 0) {
      tail_charged_ = true;
      const int64_t it = current_.iteration;
      queue_.After(tail, [this, it] {
        if (iteration_open_ && current_.iteration == it) MaybeEndIteration();
      });
      return;
    }
  }
  tail_charged_ = false;
  // ---
  iteration_open_ = false;
  const double now = queue_.now_ms();
  current_.makespan_ms = now - current_.start_ms;
  const bool trace = current_.iteration < options_.trace_iterations;
  if (trace) {
    for (const WorkerIteration& w : current_.workers) {
      const double wait = current_.makespan_ms - w.own_ms;
      if (wait > 0)
        result_.spans.push_back({w.node, "wait", current_.start_ms + w.own_ms, wait, current_.iteration});
    }
  }
  recorder_.Add(std::move(current_));  // fills each row's wait_ms
  current_ = IterationRecord{};
  const int64_t n = recorder_.iterations_added();
  if (options_.progress) options_.progress(n, target_iterations_);
  if (gate_.Finished(driver_->state())) {  // the daemon's finish test
    done_ = true;
    return;
  }
  queue_.After(0, [this] { StartIteration(); });
}

// Issue 15: each surviving member's row gets the agent's view of the
// ring (its wait for the last member + the ring) as allreduce_ms, in its
// own time as in a real run; the scheduler overhead ends up in wait_ms.
double Simulator::IterationTailMs() {
  const double overhead = spec_.scheduler.overhead_ms;
  if (!allreduce_.enabled()) return overhead;
  std::vector<int32_t> members;
  for (const WorkerIteration& w : current_.workers)
    if (!w.failed && w.batch > 0) members.push_back(w.node);
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  const double ring = allreduce_.RingMs(members);
  if (ring > 0) {
    const double now = queue_.now_ms();
    for (WorkerIteration& w : current_.workers) {
      if (w.failed || w.batch == 0) continue;
      w.allreduce_ms = std::max(0.0, now - (current_.start_ms + w.own_ms)) + ring;
      w.own_ms += w.allreduce_ms;
    }
    if (current_.iteration < options_.trace_iterations)
      for (int32_t m : members) result_.spans.push_back({m, "all-reduce", now, ring, current_.iteration});
  }
  return ring + overhead;
}

StatusOr<SimResult> Simulator::Run() {
  for (int n = 0; n < spec_.num_nodes(); ++n) {
    auto u = driver_->RegisterWorker(n, 0.0);
    if (!u.ok()) return u.status().WithContext(fmt::format("registering node {}", n));
  }
  for (int n = 0; n < spec_.num_nodes(); ++n) {
    for (const auto& o : model_.outages(n)) {
      queue_.At(o.start_ms, [this, n] { NodeDown(n); });
      queue_.At(o.end_ms, [this, n] { NodeUp(n); });
      result_.spans.push_back({static_cast<int32_t>(n), "down", o.start_ms, o.end_ms - o.start_ms, -1});
    }
  }
  queue_.At(0, [this] { StartIteration(); });
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

StatusOr<SimResult> RunPolicy(const ClusterSpec& spec, const SimOptions& options) {
  LOFT_ASSIGN_OR_RETURN(auto sim, Simulator::Create(spec, options));
  return sim->Run();
}

}  // namespace loft::sim
