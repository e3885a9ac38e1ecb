// SchedulerService, the loop side: timers (Tick), planning through the
// iteration gate, streaming under the credit window, ring commits, and
// the bookkeeping that follows applied updates (rows for the run
// recorder). service.h describes the class.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <type_traits>
#include <vector>

#include "scheduler/departures.h"
#include "scheduler/partition_timeouts.h"
#include "scheduler/restart_resend.h"
#include "scheduler/ring_commit.h"
#include "server/service.h"

namespace loft::server {

namespace {
// The ledger's partition record as the wire message (the journal may keep
// a wire-identical mirror type).
template <typename P>
v1::Partition WireOf(const P& p) {
  if constexpr (std::is_same_v<P, v1::Partition>) {
    return p;
  } else {
    v1::Partition w;
    w.ParseFromString(p.SerializeAsString());
    return w;
  }
}
}  // namespace

void SchedulerService::Observe(const sched::Updates& updates, double now_ms, const AckedPartition* acked,
                               bool by_ring) {
  const auto& ledger = driver_->state().ledger();
  for (const auto& u : updates) {
    uint64_t id = 0;
    if (u.has_partition_done())
      id = u.partition_done().done().partition_id();
    else if (u.has_partition_failed())
      id = u.partition_failed().failed().partition_id();
    else if (u.has_partition_timed_out())
      id = u.partition_timed_out().partition_id();
    else
      continue;
    // What the update did to the partition. The ack that commits an
    // epoch's last sample also advances the epoch, which prunes the
    // epoch's finished records: that one is known from `acked`.
    sched::PartitionRecord pruned;
    const auto* rec = ledger.Find(id);
    if (rec == nullptr && acked != nullptr && acked->id == id && u.has_partition_done()) {
      pruned.partition.set_id(id);
      pruned.partition.set_iteration(acked->iteration);
      pruned.partition.set_worker(acked->worker);
      pruned.state = sched::PartitionState::kDone;
      pruned.sent_ms = acked->sent_ms;
      pruned.finished_ms = now_ms;
      rec = &pruned;
    }
    if (rec == nullptr || !sched::IsTerminal(rec->state) || rec->finished_ms != now_ms) continue;
    auto it = sent_.find(id);
    if (it == sent_.end()) continue;  // a replayed or never-sent partition
    NodeSession& n = nodes_[it->second];
    // A timed-out partition's credit comes back (flow_control.h).
    sends_.window(it->second).OnFinished(rec->state == sched::PartitionState::kTimedOut);
    sent_.erase(it);
    hold_.Release(id);
    const int64_t iteration = rec->partition.iteration();
    if (rec->state != sched::PartitionState::kDone) {
      // A failed or timed-out partition is a row too (open_iterations.h).
      open_iterations_.AddRow(iteration, sched::FailedRow(rec->partition), rec->sent_ms, rec->finished_ms);
    }
    if (rec->state == sched::PartitionState::kDone) {
      ++n.partitions_done;
      if (!by_ring && u.has_partition_done()) {
        // The worker's row of iterations.csv, from its own timings.
        open_iterations_.AddRow(
            iteration, sched::RowFromTimings(rec->partition.worker(), u.partition_done().done().timings()),
            rec->sent_ms, rec->finished_ms);
      } else {
        open_iterations_.Open(iteration);
      }
      if (u.has_partition_done()) {
        // The journal keeps no training report: take it from the ack.
        auto tr = pending_training_.find(id);
        if (tr != pending_training_.end()) {
          const v1::TrainingReport& t = tr->second;
          if (training_.size() < kMaxIterationSamples) {
            TrainingStats& ts = training_[rec->partition.iteration()];
            ts.loss_sum += t.loss();
            ++ts.reports;
            ts.done_ms = std::max(ts.done_ms, now_ms);
            if (t.evaluated()) ts.test_accuracy = t.test_accuracy();
            if (ts.reports == 1) {
              ts.first_hash = t.param_hash();
            } else if (t.param_hash() != ts.first_hash) {
              ts.hashes_equal = false;
            }
          }
        }
      }
    }
  }
  // Close finished iterations in order (scheduler/open_iterations.h).
  open_iterations_.Close(ledger, &recorder_,
                         [this](int64_t iteration, const sched::OpenIteration&, sched::IterationRecord* rec) {
                           if (rec != nullptr) h_iteration_->Get().Observe(rec->makespan_ms);
                           // The ring's votes are only needed while the iteration is open.
                           if (auto ts = training_.find(iteration); ts != training_.end()) {
                             const int applied = ring_.AppliedCount(iteration);
                             if (applied >= 0) ts->second.applied = applied;
                           }
                           ring_.Close(iteration);
                         });
}

Status SchedulerService::SendQueued(double now_ms) {
  const auto& ledger = driver_->state().ledger();
  using Offer = sched::SendQueues::Offer;
  return sends_.Stream(
      [&](int32_t node, uint64_t id) {
        const auto* rec = ledger.Find(id);
        if (rec == nullptr || rec->state != sched::PartitionState::kPlanned) return Offer::kDrop;
        if (hold_.Holds(node, rec->partition.iteration()))
          return Offer::kWait;  // after a restart: its earlier one first
        v1::Envelope env;
        *env.mutable_assignment()->mutable_partition() = WireOf(rec->partition);
        // Serving peers learn what they may serve before the worker asks
        // (sched::SendServeGrants, loft-sim's rule too).
        sched::SendServeGrants(env.assignment().partition(), [&](int32_t src, v1::ServeGrant&& grant) {
          v1::Envelope g;
          *g.mutable_serve_grant() = std::move(grant);
          Status s = transport_->Send(src, g);
          if (!s.ok()) spdlog::debug("grant for partition {} to node {}: {}", id, src, s.ToString());
        });
        // No route or backpressure: retry next tick.
        return transport_->Send(node, env).ok() ? Offer::kSend : Offer::kWait;
      },
      [&](int32_t node, uint64_t id) -> Status {
        sent_[id] = node;
        LOFT_ASSIGN_OR_RETURN(auto u,
                              driver_->OnPartitionSent(id, ledger.Find(id)->partition.attempt(), now_ms));
        Record(std::move(u));
        return OkStatus();
      });
}

StatusOr<bool> SchedulerService::CommitIfApplied(uint64_t partition_id, double now_ms, bool timed_out) {
  // Committed for its worker when the ring applied it (scheduler/ring_commit.h).
  LOFT_ASSIGN_OR_RETURN(auto c, sched::CommitForWorker(*driver_, ring_, partition_id, now_ms));
  if (!c) return false;
  spdlog::info(
      "partition {} of iteration {} on {}: {} of the iteration's {} workers report the ring applied it; "
      "committing it instead of retrying its samples",
      partition_id, c->iteration, spec_.nodes[c->worker].name, c->votes, ring_.workers(c->iteration));
  const AckedPartition acked{c->id, c->iteration, c->worker, c->sent_ms};
  Observe(c->updates, now_ms, &acked, /*by_ring=*/true);
  Record(std::move(c->updates));
  if (timed_out) {
    // As for a timeout: the assignment or its ack was probably lost.
    sends_.window(c->worker).Grant(1);
  }
  ++committed_by_ring_;
  c_committed_by_ring_->Get().Increment();
  return true;
}

StatusOr<bool> SchedulerService::PlanIfReady(double now_ms) {
  if (finished_) return false;
  const auto& st = driver_->state();
  const bool complete = st.ledger().in_flight() == 0;  // no iteration open
  if (gate_->AllPlanned(st)) {
    if (!gate_->Finished(st)) return false;  // the last iterations are still running
    // The last acks, durable before the job's end is reported.
    LOFT_RETURN_IF_ERROR(Flush());
    LOFT_RETURN_IF_ERROR(SyncIfDue(now_ms, /*force=*/true));
    finished_ = true;
    const auto& c = st.ledger().counters();
    spdlog::info(
        "job finished: {} iterations, {} epochs completed, {} samples committed, duplicates {}, lost {}, "
        "retries {}, {} iterations planned ahead",
        st.next_iteration(), c.epochs_completed, c.samples_committed, c.duplicates, c.lost, c.retries,
        planned_ahead_);
    return false;
  }
  if (!gate_->ReadyToPlan(st, sends_.empty())) return false;
  if (!started_) {
    std::vector<sched::IterationGate::WorkerReadiness> live;
    for (int32_t node : st.LiveNodes())
      live.push_back({node, nodes_[node].connected, nodes_[node].confirmed, nodes_[node].peers_ready});
    const auto c = gate_->CheckStart(live, opts_.start_when_ready,
                                     static_cast<double>(opts_.start_peers_wait_ms), now_ms);
    if (!c.start) return false;
    if (opts_.start_when_ready && opts_.start_peers_wait_ms > 0) {
      std::vector<std::string> waiting;
      for (int32_t node : c.without_peers) waiting.push_back(spec_.nodes[node].name);
      if (!waiting.empty()) {
        spdlog::warn(
            "starting the job although {} reported no handshaken connection to every other worker "
            "within start_peers_wait_ms {}",
            fmt::join(waiting, ", "), opts_.start_peers_wait_ms);
      } else {
        spdlog::info("every worker's peer connections are up ({:.0f} ms after the workers were ready)",
                     c.peers_waited_ms);
      }
    }
    started_ = true;
    first_plan_ms_ = now_ms;
    spdlog::info("{} workers live; starting the job ({} iterations, policy {}, plan ahead {})", c.live,
                 target_iterations(), opts_.policy,
                 gate_->plan_ahead() >= 0 ? std::to_string(gate_->plan_ahead()) : std::string("auto"));
  }
  const auto plan_t0 = std::chrono::steady_clock::now();
  LOFT_ASSIGN_OR_RETURN(auto u, driver_->PlanNextIteration(now_ms));
  const double plan_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - plan_t0).count();
  if (u.empty() ||
      !std::any_of(u.begin(), u.end(), [](const v1::StateUpdate& x) { return x.has_iteration_planned(); })) {
    // Blocked. Only worth a log line when BSP is blocked too (planning
    // ahead at an epoch's end waits for the running iteration's samples).
    if (complete && driver_->BlockedReason() != last_blocked_) {
      last_blocked_ = driver_->BlockedReason();
      spdlog::info("planning blocked: {}", last_blocked_);
    }
    LogHoldersAbandoned(u);
    Record(std::move(u));  // an EpochAdvanced may precede a blocked plan
    return false;
  }
  LogHoldersAbandoned(u);
  last_blocked_.clear();
  if (!complete) {
    ++planned_ahead_;
    c_planned_ahead_->Get().Increment();
  }
  // Queue the partitions (ids only; SendQueued reads them from the
  // ledger), then hand the updates to the journal without copying them.
  std::vector<char> workers(static_cast<size_t>(spec_.num_nodes()), 0);
  int64_t planned = -1;
  double predicted_ms = 0;
  for (const auto& up : u) {
    if (!up.has_iteration_planned()) continue;
    planned = up.iteration_planned().iteration();
    predicted_ms = up.iteration_planned().makespan_ms();
    sched::OpenIteration& stats = open_iterations_.Open(planned);
    stats.planned_ms = now_ms;
    stats.epoch = up.iteration_planned().epoch();
    stats.plan_ms = plan_ms;
    stats.predicted_ms = up.iteration_planned().makespan_ms();
    for (const auto& pp : up.iteration_planned().partitions()) {
      const int32_t w = pp.partition().worker();
      sends_.Push(w, pp.partition().id());
      stats.partitions.push_back(pp.partition().id());
      if (pp.partition().sample_ids_size() > 0) workers[static_cast<size_t>(w)] = 1;
    }
  }
  ring_.OnPlanned(planned, gate_->OnPlanned(planned, st.view(), workers, predicted_ms));
  Record(std::move(u));
  const auto journal_t0 = std::chrono::steady_clock::now();
  LOFT_RETURN_IF_ERROR(Flush());  // journal before streaming
  if (sched::OpenIteration* o = open_iterations_.Find(planned); o != nullptr)
    o->journal_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - journal_t0).count();
  return true;
}

void SchedulerService::LogHoldersAbandoned(const std::vector<v1::StateUpdate>& u) const {
  for (const auto& x : u) {
    if (!x.has_holders_abandoned()) continue;
    std::string names;
    for (int32_t node : x.holders_abandoned().dead_holders())
      names += (names.empty() ? "" : ", ") + spec_.nodes[node].name;
    spdlog::warn(
        "HELD OUT: {} unconsumed samples held only by dead nodes ({}) are left out of their epoch: "
        "scheduler.holder_wait_s = {:g} s passed since the last of them died; training goes on",
        x.holders_abandoned().samples(), names, spec_.scheduler.holder_wait_s);
  }
}

Status SchedulerService::Tick(double now_ms) {
  const auto& st = driver_->state();
  // Departures (scheduler/departures.h): evicted by the accusation rule,
  // or silent past the heartbeat timeout; the ring's commits first.
  sched::DepartureCallbacks departures;
  departures.last_seen_ms = [&](int32_t node) { return nodes_[node].last_seen_ms; };
  departures.leaving = [&](int32_t node, sched::Departure why) {
    if (why == sched::Departure::kEvicted)
      spdlog::warn("node {} was reported by its ring: dropping it for good", spec_.nodes[node].name);
    else
      spdlog::warn("node {} missed heartbeats for {:.0f} ms: dropping it", spec_.nodes[node].name,
                   now_ms - nodes_[node].last_seen_ms);
  };
  departures.commit = [&](uint64_t id) { return CommitIfApplied(id, now_ms).status(); };
  departures.departed = [&](int32_t node, sched::Departure why, sched::Updates&& u, int64_t lost) {
    if (why == sched::Departure::kEvicted)
      spdlog::warn(
          "EVICTED: node {} ({}) never comes back; {} unconsumed samples of the open epochs that only "
          "it held are left out as unavailable (in every later epoch too)",
          node, spec_.nodes[node].name, lost);
    Record(u);
    Observe(u, now_ms);
    for (auto it = sent_.begin(); it != sent_.end();) {
      it = it->second == node ? sent_.erase(it) : std::next(it);
    }
    hold_.ReleaseNode(node);
    nodes_[node].connected = false;
    sends_.Depart(node);  // queue dropped, window closed (send_queues.h)
    view_dirty_ = true;
    return OkStatus();
  };
  LOFT_RETURN_IF_ERROR(
      sched::DepartAt(*driver_, accusations_, ring_, now_ms, opts_.heartbeat_timeout_ms, departures));
  {
    // Partition timeouts (scheduler/partition_timeouts.h): the ring's
    // commit for those it applied, PartitionTimedOut for the rest.
    LOFT_ASSIGN_OR_RETURN(auto u, sched::TimeOutPartitions(*driver_, ring_, now_ms, [&](uint64_t id) {
                            return CommitIfApplied(id, now_ms, /*timed_out=*/true).status();
                          }));
    if (!u.empty()) {
      spdlog::warn("{} partition(s) timed out", u.size());
      Record(u);
      Observe(u, now_ms);
    }
  }
  // After a restart, once: re-queue what was planned, hold what was sent
  // (scheduler/restart_resend.h).
  sched::ResendAfterRestart(restart_resend_, st.ledger(), sends_, hold_,
                            [&](const sched::PartitionRecord& rec) {
                              if (rec.state == sched::PartitionState::kSent)
                                sent_[rec.partition.id()] = rec.partition.worker();
                              sched::OpenIteration& stats = open_iterations_.Open(rec.partition.iteration());
                              stats.planned_ms = rec.planned_ms;
                              stats.epoch = rec.partition.epoch();
                            });
  if (view_dirty_) {
    LOFT_RETURN_IF_ERROR(Flush());
    view_dirty_ = false;
    LOFT_RETURN_IF_ERROR(BroadcastView());
  }
  // Stream, plan (ahead) and stream (sched::StreamAndPlan).
  LOFT_RETURN_IF_ERROR(sched::StreamAndPlan(
      *gate_, [&] { return SendQueued(now_ms); },
      [&]() -> StatusOr<bool> {
        LOFT_ASSIGN_OR_RETURN(const bool planned, PlanIfReady(now_ms));
        LOFT_RETURN_IF_ERROR(FlushBeforeEffects(now_ms));  // a plan flushed itself (synced)
        return planned;
      }));
  // What SendQueued recorded are PartitionSent updates: the sends already
  // happened, nothing external derives from the records, and if they are
  // lost (power failure before the next synced write) recovery re-sends
  // those partitions, which agents ignore as duplicates. So no fsync of
  // its own: one fsync per iteration (the plan's) instead of two. They
  // still reach the WAL now, so a killed process keeps them.
  LOFT_RETURN_IF_ERROR(FlushUnsynced(now_ms));
  LOFT_RETURN_IF_ERROR(SyncIfDue(now_ms));
  MaybeSnapshotJournal();
  g_journal_entries_->Get().Set(static_cast<double>(journal_->entries()));

  g_view_->Get().Set(static_cast<double>(st.view()));
  g_iteration_->Get().Set(static_cast<double>(st.last_iteration()));
  if (node_gauges_.empty()) {
    node_gauges_.resize(static_cast<size_t>(spec_.num_nodes()));
    for (int32_t node = 0; node < spec_.num_nodes(); ++node) {
      const std::string& name = spec_.nodes[node].name;
      node_gauges_[node] = {&g_in_flight_->WithLabels({name}), &g_max_in_flight_->WithLabels({name}),
                            &g_credits_->WithLabels({name})};
    }
  }
  for (int32_t node = 0; node < spec_.num_nodes(); ++node) {
    const sched::CreditWindow& f = sends_.window(node);
    node_gauges_[node].in_flight->Set(static_cast<double>(f.in_flight));
    node_gauges_[node].max_in_flight->Set(static_cast<double>(f.max_in_flight));
    node_gauges_[node].credits->Set(static_cast<double>(f.credits));
  }
  const auto& c = st.ledger().counters();
  g_ledger_->WithLabels({"samples_committed"}).Set(static_cast<double>(c.samples_committed));
  g_ledger_->WithLabels({"duplicates"}).Set(static_cast<double>(c.duplicates));
  g_ledger_->WithLabels({"lost"}).Set(static_cast<double>(c.lost));
  g_ledger_->WithLabels({"retries"}).Set(static_cast<double>(c.retries));
  g_ledger_->WithLabels({"epochs_completed"}).Set(static_cast<double>(c.epochs_completed));
  g_ledger_->WithLabels({"unavailable"}).Set(static_cast<double>(driver_->state().unavailable()));
  g_ledger_->WithLabels({"lost_to_eviction"}).Set(static_cast<double>(driver_->state().lost_to_eviction()));
  g_ledger_->WithLabels({"held_out"}).Set(static_cast<double>(driver_->state().held_out()));
  return OkStatus();
}

}  // namespace loft::server
