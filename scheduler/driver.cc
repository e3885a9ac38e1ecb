#include "scheduler/driver.h"

#include <string>

#include "scheduler/holder_wait.h"
#include "scheduler/liveness.h"

namespace loft::sched {

StatusOr<std::unique_ptr<JobDriver>> JobDriver::CreateWithPolicy(const ClusterSpec& spec,
                                                                 std::unique_ptr<Policy> policy,
                                                                 StateOptions options) {
  LOFT_ASSIGN_OR_RETURN(std::unique_ptr<SchedulerState> state,
                        SchedulerState::Create(spec, std::move(policy), options));
  return std::unique_ptr<JobDriver>(new JobDriver(std::move(state)));
}

StatusOr<std::unique_ptr<JobDriver>> JobDriver::RecoverWithPolicy(
    const ClusterSpec& spec, std::unique_ptr<Policy> policy, StateOptions options,
    std::span<const loft::v1::StateUpdate> journal) {
  LOFT_ASSIGN_OR_RETURN(std::unique_ptr<JobDriver> d, CreateWithPolicy(spec, std::move(policy), options));
  LOFT_RETURN_IF_ERROR(d->state_->Replay(journal));
  return d;
}

Status JobDriver::Replay(std::span<const loft::v1::StateUpdate> journal) {
  return state_->Replay(journal);
}

Status JobDriver::Restore(const loft::v1::StateSnapshot& snapshot) {
  return state_->RestoreSnapshot(snapshot);
}

Status JobDriver::ApplyAndAppend(loft::v1::StateUpdate u, Updates& out) {
  LOFT_RETURN_IF_ERROR(state_->Apply(u));
  out.push_back(std::move(u));
  return OkStatus();
}

Status JobDriver::AdvanceEpoch(Updates& out) {
  loft::v1::StateUpdate adv;
  adv.mutable_epoch_advanced()->set_epoch(state_->epoch() + 1);
  return ApplyAndAppend(std::move(adv), out);
}

namespace {
Status CheckNode(const SchedulerState& s, int32_t node) {
  if (node < 0 || node >= s.spec().num_nodes()) {
    return InvalidArgument("node " + std::to_string(node) + " is not in the cluster spec (" +
                           std::to_string(s.spec().num_nodes()) + " nodes)");
  }
  return OkStatus();
}

loft::v1::StateUpdate FailedUpdate(const PartitionRecord& r, std::string reason, double now_ms) {
  loft::v1::StateUpdate u;
  auto* f = u.mutable_partition_failed();
  f->set_now_ms(now_ms);
  f->mutable_failed()->set_partition_id(r.partition.id());
  f->mutable_failed()->set_attempt(r.partition.attempt());
  f->mutable_failed()->set_node(r.partition.worker());
  f->mutable_failed()->set_reason(std::move(reason));
  return u;
}
}  // namespace

StatusOr<Updates> JobDriver::RegisterWorker(int32_t node, double now_ms) {
  LOFT_RETURN_IF_ERROR(CheckNode(*state_, node));
  Updates out;
  if (state_->alive(node)) {
    for (uint64_t id : state_->ledger().InFlightOf(node)) {
      LOFT_RETURN_IF_ERROR(
          ApplyAndAppend(FailedUpdate(*state_->ledger().Find(id), "worker re-registered", now_ms), out));
    }
  }
  loft::v1::StateUpdate u;
  u.mutable_worker_registered()->set_node(node);
  u.mutable_worker_registered()->set_view(state_->view() + 1);
  LOFT_RETURN_IF_ERROR(ApplyAndAppend(std::move(u), out));
  return out;
}

StatusOr<Updates> JobDriver::OnWorkerAlive(int32_t node, double now_ms) {
  LOFT_RETURN_IF_ERROR(CheckNode(*state_, node));
  if (!state_->registered(node)) {
    return FailedPrecondition("node " + std::to_string(node) + " is alive but never registered");
  }
  Updates out;
  if (state_->alive(node)) return out;
  loft::v1::StateUpdate u;
  u.mutable_worker_alive()->set_node(node);
  u.mutable_worker_alive()->set_view(state_->view() + 1);
  LOFT_RETURN_IF_ERROR(ApplyAndAppend(std::move(u), out));
  return out;
}

StatusOr<Updates> JobDriver::DistrustSource(int32_t node, int32_t reporters, double now_ms) {
  LOFT_RETURN_IF_ERROR(CheckNode(*state_, node));
  Updates out;
  if (state_->distrusted(node)) return out;
  loft::v1::StateUpdate u;
  auto* d = u.mutable_source_distrusted();
  d->set_node(node);
  d->set_reporters(reporters);
  d->set_now_ms(now_ms);
  LOFT_RETURN_IF_ERROR(ApplyAndAppend(std::move(u), out));
  return out;
}

StatusOr<Updates> JobDriver::OnWorkerDead(int32_t node, std::string_view reason, double now_ms) {
  LOFT_RETURN_IF_ERROR(CheckNode(*state_, node));
  Updates out;
  if (!state_->alive(node)) return out;
  loft::v1::StateUpdate u;
  u.mutable_worker_dead()->set_node(node);
  u.mutable_worker_dead()->set_view(state_->view() + 1);
  u.mutable_worker_dead()->set_reason(std::string(reason));
  u.mutable_worker_dead()->set_now_ms(now_ms);
  LOFT_RETURN_IF_ERROR(ApplyAndAppend(std::move(u), out));
  // Fail the node's own partitions and those reading from it (liveness.h).
  for (uint64_t id : AffectedPartitions(state_->ledger(), node)) {
    const PartitionRecord& r = *state_->ledger().Find(id);
    const std::string why = r.partition.worker() == node ? "worker " + std::to_string(node) + " dead"
                                                         : "source " + std::to_string(node) + " dead";
    LOFT_RETURN_IF_ERROR(ApplyAndAppend(FailedUpdate(r, why, now_ms), out));
  }
  return out;
}

StatusOr<Updates> JobDriver::OnWorkerEvicted(int32_t node, std::string_view reason, double now_ms) {
  LOFT_RETURN_IF_ERROR(CheckNode(*state_, node));
  Updates out;
  if (state_->evicted(node)) return out;
  if (state_->alive(node)) {
    LOFT_ASSIGN_OR_RETURN(out, OnWorkerDead(node, reason, now_ms));
  }
  loft::v1::StateUpdate u;
  auto* e = u.mutable_worker_evicted();
  e->set_node(node);
  e->set_reason(std::string(reason));
  e->set_now_ms(now_ms);
  LOFT_RETURN_IF_ERROR(ApplyAndAppend(std::move(u), out));
  // Leaving its samples out may complete the epoch.
  if (state_->EpochComplete()) {
    LOFT_RETURN_IF_ERROR(AdvanceEpoch(out));
  }
  return out;
}

StatusOr<Updates> JobDriver::PlanNextIteration(double now_ms) {
  Updates out;
  blocked_reason_.clear();
  // The current epoch is committed, or (StateOptions::overlap_epochs) all
  // handed out: the next iteration starts the next epoch.
  if (state_->EpochAdvanceDue()) {
    LOFT_RETURN_IF_ERROR(AdvanceEpoch(out));
  }
  LOFT_ASSIGN_OR_RETURN(IterationProposal p, state_->ProposeIteration(now_ms));
  if (!p.update) {
    // Blocked on dead holders past the wait (holder_wait.h): leave their
    // samples out of the epoch and plan again.
    const HolderWait w = CheckHolderWait(*state_, now_ms, /*only_if_expired=*/true);
    if (w.expired()) {
      loft::v1::StateUpdate u;
      auto* a = u.mutable_holders_abandoned();
      a->set_samples(w.samples);
      a->set_now_ms(now_ms);
      a->mutable_dead_holders()->Add(w.dead_holders.begin(), w.dead_holders.end());
      LOFT_RETURN_IF_ERROR(ApplyAndAppend(std::move(u), out));
      if (state_->EpochAdvanceDue()) {
        LOFT_RETURN_IF_ERROR(AdvanceEpoch(out));
      }
      LOFT_ASSIGN_OR_RETURN(p, state_->ProposeIteration(now_ms));
    }
  }
  if (!p.update) {
    blocked_reason_ = p.blocked_reason;
    return out;
  }
  // The update (B sample ids) is moved, not copied, into `out`.
  LOFT_RETURN_IF_ERROR(ApplyAndAppend(std::move(*p.update), out));
  p.update.reset();
  last_proposal_ = std::move(p);
  return out;
}

StatusOr<Updates> JobDriver::OnPartitionSent(uint64_t partition_id, int32_t attempt, double now_ms) {
  Updates out;
  loft::v1::StateUpdate u;
  u.mutable_partition_sent()->set_partition_id(partition_id);
  u.mutable_partition_sent()->set_attempt(attempt);
  u.mutable_partition_sent()->set_now_ms(now_ms);
  LOFT_RETURN_IF_ERROR(ApplyAndAppend(std::move(u), out));
  return out;
}

StatusOr<Updates> JobDriver::OnPartitionDone(const loft::v1::PartitionDone& done, double now_ms) {
  Updates out;
  loft::v1::StateUpdate u;
  *u.mutable_partition_done()->mutable_done() = done;
  u.mutable_partition_done()->set_now_ms(now_ms);
  LOFT_RETURN_IF_ERROR(ApplyAndAppend(std::move(u), out));
  if (state_->EpochComplete()) {
    LOFT_RETURN_IF_ERROR(AdvanceEpoch(out));
  }
  return out;
}

StatusOr<Updates> JobDriver::OnPartitionFailed(const loft::v1::PartitionFailed& failed, double now_ms) {
  Updates out;
  loft::v1::StateUpdate u;
  *u.mutable_partition_failed()->mutable_failed() = failed;
  u.mutable_partition_failed()->set_now_ms(now_ms);
  LOFT_RETURN_IF_ERROR(ApplyAndAppend(std::move(u), out));
  // Quarantining the epoch's last uncommitted sample completes the epoch.
  if (failed.bad_samples_size() > 0 && state_->EpochComplete()) {
    LOFT_RETURN_IF_ERROR(AdvanceEpoch(out));
  }
  return out;
}

StatusOr<Updates> JobDriver::CheckTimeouts(double now_ms) {
  Updates out;
  for (uint64_t id : state_->ledger().Expired(now_ms)) {
    loft::v1::StateUpdate u;
    auto* t = u.mutable_partition_timed_out();
    t->set_partition_id(id);
    t->set_attempt(state_->ledger().Find(id)->partition.attempt());
    t->set_now_ms(now_ms);
    LOFT_RETURN_IF_ERROR(ApplyAndAppend(std::move(u), out));
  }
  return out;
}

std::vector<loft::v1::Partition> JobDriver::PartitionsToSend(std::span<const loft::v1::StateUpdate> updates) {
  size_t count = 0;
  for (const auto& u : updates) {
    if (u.has_iteration_planned()) count += static_cast<size_t>(u.iteration_planned().partitions_size());
  }
  std::vector<loft::v1::Partition> out;
  out.reserve(count);  // no regrowth moving the copies around
  for (const auto& u : updates) {
    if (!u.has_iteration_planned()) continue;
    for (const auto& pp : u.iteration_planned().partitions()) out.push_back(pp.partition());
  }
  return out;
}

}  // namespace loft::sched
