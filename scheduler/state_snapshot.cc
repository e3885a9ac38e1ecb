// SchedulerState::ToSnapshot / RestoreSnapshot: the state as one
// loft.v1.StateSnapshot (scheduler/proto/state.proto), which the journal
// stores in place of the entries it covers (scheduler/journal.h).
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/cost_model.h"
#include "scheduler/scheduler_state.h"

namespace loft::sched {

namespace {

void RlsToProto(const RlsState& s, loft::v1::RlsSnapshot* out) {
  out->set_theta0(s.theta[0]);
  out->set_theta1(s.theta[1]);
  out->set_p00(s.p[0][0]);
  out->set_p01(s.p[0][1]);
  out->set_p10(s.p[1][0]);
  out->set_p11(s.p[1][1]);
  out->mutable_residuals()->Add(s.residuals.begin(), s.residuals.end());
  out->set_consecutive_rejections(s.consecutive_rejections);
  out->set_accepted(s.accepted);
  out->set_rejected(s.rejected);
}

RlsState RlsFromProto(const loft::v1::RlsSnapshot& p) {
  RlsState s;
  s.theta[0] = p.theta0();
  s.theta[1] = p.theta1();
  s.p[0][0] = p.p00();
  s.p[0][1] = p.p01();
  s.p[1][0] = p.p10();
  s.p[1][1] = p.p11();
  s.residuals.assign(p.residuals().begin(), p.residuals().end());
  s.consecutive_rejections = p.consecutive_rejections();
  s.accepted = p.accepted();
  s.rejected = p.rejected();
  return s;
}

void ObservationToProto(const Observation& o, loft::v1::ObservationSnapshot* out) {
  out->set_node(o.node);
  out->set_batch(o.batch);
  out->set_local(o.local);
  out->set_remote(o.remote);
  out->set_local_read_ms(o.local_read_ms);
  out->set_remote_read_ms(o.remote_read_ms);
  out->set_compute_ms(o.compute_ms);
  out->set_iteration_ms(o.iteration_ms);
}

void SamplerToProto(const EpochSampler& es, loft::v1::SamplerSnapshot* sp) {
  sp->set_epoch(es.epoch());
  const auto n = static_cast<uint64_t>(es.num_samples());
  std::string* states = sp->mutable_states();
  states->resize(n);
  for (uint64_t id = 0; id < n; ++id) {
    (*states)[id] = static_cast<char>(es.state(id));
    if (es.with_origin() > 0 && es.origin(id) != 0) {
      auto* o = sp->add_origins();
      o->set_sample(id);
      o->set_partition(es.origin(id));
    }
  }
}

Status SamplerFromProto(const loft::v1::SamplerSnapshot& sp, EpochSampler& es) {
  std::vector<std::pair<uint64_t, uint64_t>> origins;
  origins.reserve(static_cast<size_t>(sp.origins_size()));
  for (const auto& o : sp.origins()) origins.emplace_back(o.sample(), o.partition());
  const auto* states = reinterpret_cast<const uint8_t*>(sp.states().data());
  return es.Restore(sp.epoch(), std::span<const uint8_t>(states, sp.states().size()), origins);
}

Status Mismatch(const std::string& field, const std::string& snapshot, const std::string& here) {
  return FailedPrecondition("snapshot was taken with " + field + " " + snapshot + ", this scheduler has " +
                            here);
}

// A part of a snapshot that does not restore. Each part validates before it
// changes; errors are DataLoss (the bytes passed their CRC, so the contents
// are what was written).
Status SnapshotLoss(const std::string& part, const Status& st) {
  return DataLoss("snapshot " + part + ": " + st.message());
}

// The ledger's records of a snapshot; DataLoss on a state out of range.
StatusOr<std::vector<PartitionRecord>> LedgerRecordsFromProto(const loft::v1::LedgerSnapshot& lp) {
  std::vector<PartitionRecord> records;
  records.reserve(static_cast<size_t>(lp.records_size()));
  for (const auto& rp : lp.records()) {
    if (rp.state() < 0 || rp.state() > static_cast<int32_t>(PartitionState::kTimedOut)) {
      return DataLoss("snapshot ledger: record " + std::to_string(rp.partition().id()) + " has state " +
                      std::to_string(rp.state()));
    }
    PartitionRecord& r = records.emplace_back();
    r.partition = rp.partition();
    r.state = static_cast<PartitionState>(rp.state());
    r.planned_ms = rp.planned_ms();
    r.sent_ms = rp.sent_ms();
    r.finished_ms = rp.finished_ms();
    r.deadline_ms = rp.deadline_ms();
  }
  return records;
}

LedgerCounters LedgerCountersFromProto(const loft::v1::LedgerCountersSnapshot& cp) {
  LedgerCounters c;
  c.partitions = cp.partitions();
  c.retries = cp.retries();
  c.samples_committed = cp.samples_committed();
  c.duplicates = cp.duplicates();
  c.lost = cp.lost();
  c.failed = cp.failed();
  c.timed_out = cp.timed_out();
  c.acks_ignored = cp.acks_ignored();
  c.epochs_completed = cp.epochs_completed();
  return c;
}

// `current`: the restoring model's own state, whose decode law (its prior)
// stays when the snapshot has none (written before the law existed).
CostModelState CostModelFromProto(const loft::v1::CostModelSnapshot& p, const CostModelState& current) {
  CostModelState cs;
  cs.decode = p.has_decode() ? RlsFromProto(p.decode()) : current.decode;
  cs.compute = RlsFromProto(p.compute());
  cs.local = RlsFromProto(p.local());
  cs.remote = RlsFromProto(p.remote());
  cs.uplink_per_sample_ms = p.uplink_per_sample_ms();
  cs.uplink_rejections = p.uplink_rejections();
  cs.observations = p.observations();
  return cs;
}

}  // namespace

loft::v1::StateSnapshot SchedulerState::ToSnapshot() const {
  loft::v1::StateSnapshot out;
  out.set_job_id(options_.job_id);
  out.set_policy(std::string(policy_->name()));
  out.set_num_nodes(spec_.num_nodes());
  out.set_num_samples(sampler_.num_samples());
  out.set_seed(sampler_.seed());
  out.set_global_batch(global_batch_);
  out.set_view(view_);
  out.set_next_iteration(next_iteration_);
  for (int32_t i = 0; i < spec_.num_nodes(); ++i) {
    auto* n = out.add_nodes();
    n->set_node(i);
    n->set_registered(registered_[i]);
    n->set_alive(alive_[i]);
    n->set_distrusted(distrusted(i));
    n->set_evicted(evicted(i));
    n->set_dead_since_ms(dead_since_ms_[i]);
    n->set_observations(observations_[i]);
    const CostModelState c = cost_model(i).state();
    auto* cp = n->mutable_cost();
    RlsToProto(c.compute, cp->mutable_compute());
    RlsToProto(c.local, cp->mutable_local());
    RlsToProto(c.remote, cp->mutable_remote());
    RlsToProto(c.decode, cp->mutable_decode());
    cp->set_uplink_per_sample_ms(c.uplink_per_sample_ms);
    cp->set_uplink_rejections(c.uplink_rejections);
    cp->set_observations(c.observations);
  }
  out.set_rejected_observations(rejected_observations_);
  out.set_reads_left_out_of_fits(reads_left_out_of_fits_);
  out.mutable_round_pending()->Add(round_pending_.begin(), round_pending_.end());
  out.set_policy_failures(policy_failures_);
  out.set_distrusted_reads_committed(distrusted_reads_committed_);
  out.set_lost_to_eviction(lost_to_eviction_);
  out.set_held_out(held_out_);
  out.set_abandoned_at_iteration_plus_one(abandoned_at_iteration_ + 1);

  SamplerToProto(sampler_, out.mutable_sampler());
  if (prev_ != nullptr) SamplerToProto(*prev_, out.mutable_previous_sampler());
  if (!spec_.training.exchange.is_default()) exchange_.Save(out.mutable_exchange());

  auto* lp = out.mutable_ledger();
  ledger_.ForEachRecord([lp](const PartitionRecord& r) {
    auto* rp = lp->add_records();
    *rp->mutable_partition() = r.partition;
    rp->set_state(static_cast<int32_t>(r.state));
    rp->set_planned_ms(r.planned_ms);
    rp->set_sent_ms(r.sent_ms);
    rp->set_finished_ms(r.finished_ms);
    rp->set_deadline_ms(r.deadline_ms);
  });
  const LedgerCounters& c = ledger_.counters();
  auto* cp = lp->mutable_counters();
  cp->set_partitions(c.partitions);
  cp->set_retries(c.retries);
  cp->set_samples_committed(c.samples_committed);
  cp->set_duplicates(c.duplicates);
  cp->set_lost(c.lost);
  cp->set_failed(c.failed);
  cp->set_timed_out(c.timed_out);
  cp->set_acks_ignored(c.acks_ignored);
  cp->set_epochs_completed(c.epochs_completed);
  lp->set_last_id(ledger_.last_id());

  auto* qp = out.mutable_quarantine();
  for (const auto& [id, pending] : quarantine_.pending_reports()) {
    auto* r = qp->add_reports();
    r->set_sample(id);
    r->set_reports(pending.reports);
    r->mutable_reporters()->Add(pending.reporters.begin(), pending.reporters.end());
    r->mutable_holders()->Add(pending.holders.begin(), pending.holders.end());
  }
  qp->mutable_samples()->Add(quarantine_.samples().begin(), quarantine_.samples().end());
  qp->set_unavailable(quarantine_.unavailable());

  for (const auto& [iteration, pending] : pending_observations_) {
    auto* pp = out.add_pending_observations();
    pp->set_iteration(iteration);
    for (int32_t node : pending.nodes) {
      ObservationToProto(pending.by_node[static_cast<size_t>(node)], pp->add_observations());
    }
  }

  for (const auto& [table, values] : policy_->SaveMemory()) {
    auto* t = out.mutable_policy_memory()->add_tables();
    t->set_name(table);
    for (const auto& [node, v] : values) {
      auto* nv = t->add_values();
      nv->set_node(node);
      nv->set_value(v);
    }
  }
  return out;
}

Status SchedulerState::CheckSnapshotFits(const loft::v1::StateSnapshot& s) const {
  if (view_ != 0 || next_iteration_ != 0 || ledger_.last_id() != 0 || sampler_.committed() != 0 ||
      sampler_.taken() != 0) {
    return FailedPrecondition("snapshot: restore into a state that already applied updates");
  }
  // Created alike?
  if (s.job_id() != options_.job_id) {
    return Mismatch("job id", std::to_string(s.job_id()), std::to_string(options_.job_id));
  }
  if (s.policy() != policy_->name()) return Mismatch("policy", s.policy(), std::string(policy_->name()));
  if (s.num_nodes() != spec_.num_nodes()) {
    return Mismatch("nodes", std::to_string(s.num_nodes()), std::to_string(spec_.num_nodes()));
  }
  if (s.num_samples() != sampler_.num_samples()) {
    return Mismatch("samples", std::to_string(s.num_samples()), std::to_string(sampler_.num_samples()));
  }
  if (s.seed() != sampler_.seed()) {
    return Mismatch("seed", std::to_string(s.seed()), std::to_string(sampler_.seed()));
  }
  if (s.global_batch() != global_batch_) {
    return Mismatch("global batch", std::to_string(s.global_batch()), std::to_string(global_batch_));
  }
  // Consistent?
  const int num_nodes = spec_.num_nodes();
  if (s.nodes_size() != num_nodes) {
    return DataLoss("snapshot nodes: " + std::to_string(s.nodes_size()) + " entries for " +
                    std::to_string(num_nodes) + " nodes");
  }
  if (s.view() < 0 || s.next_iteration() < 0) return DataLoss("snapshot: negative view or iteration");
  if (s.reads_left_out_of_fits() < 0) return DataLoss("snapshot: negative reads_left_out_of_fits");
  for (int i = 0; i < num_nodes; ++i) {
    if (s.nodes(i).node() != i) {
      return DataLoss("snapshot nodes: entry " + std::to_string(i) + " is node " +
                      std::to_string(s.nodes(i).node()));
    }
  }
  return OkStatus();
}

Status SchedulerState::RestoreNodes(const loft::v1::StateSnapshot& s) {
  const int num_nodes = spec_.num_nodes();
  bool any_distrusted = false, any_evicted = false;
  for (int i = 0; i < num_nodes; ++i) {
    const auto& n = s.nodes(i);
    registered_[i] = n.registered();
    alive_[i] = n.alive();
    dead_since_ms_[i] = n.dead_since_ms();
    any_evicted = any_evicted || n.evicted();
    observations_[i] = n.observations();
    any_distrusted = any_distrusted || n.distrusted();
    if (Status st = cost_model(i).Restore(CostModelFromProto(n.cost(), cost_model(i).state())); !st.ok()) {
      return SnapshotLoss("cost model of node " + std::to_string(i), st);
    }
  }
  distrusted_.clear();
  if (any_distrusted) {
    distrusted_.assign(static_cast<size_t>(num_nodes), false);
    for (int i = 0; i < num_nodes; ++i) distrusted_[i] = s.nodes(i).distrusted();
  }
  evicted_.clear();
  if (any_evicted) {
    evicted_.assign(static_cast<size_t>(num_nodes), false);
    for (int i = 0; i < num_nodes; ++i) evicted_[i] = s.nodes(i).evicted();
  }
  return OkStatus();
}

Status SchedulerState::RestorePendingObservations(const loft::v1::StateSnapshot& s) {
  const int num_nodes = spec_.num_nodes();
  pending_observations_.clear();
  for (const auto& pp : s.pending_observations()) {
    PendingObservations& pending = pending_observations_[pp.iteration()];
    Observation none;
    none.node = -1;
    pending.by_node.assign(static_cast<size_t>(num_nodes), none);
    for (const auto& op : pp.observations()) {
      if (op.node() < 0 || op.node() >= num_nodes || pending.by_node[op.node()].node >= 0) {
        return DataLoss("snapshot pending observations of iteration " + std::to_string(pp.iteration()) +
                        ": node " + std::to_string(op.node()) + " out of range or repeated");
      }
      Observation& o = pending.by_node[op.node()];
      o.node = op.node();
      o.batch = op.batch();
      o.local = op.local();
      o.remote = op.remote();
      o.local_read_ms = op.local_read_ms();
      o.remote_read_ms = op.remote_read_ms();
      o.compute_ms = op.compute_ms();
      o.iteration_ms = op.iteration_ms();
      pending.nodes.push_back(op.node());
    }
  }
  return OkStatus();
}

Status SchedulerState::RestoreRoundPending(const loft::v1::StateSnapshot& s) {
  round_pending_.clear();
  for (uint64_t id : s.round_pending()) {
    const PartitionRecord* rec = ledger_.Find(id);
    auto bad = [id](const std::string& why) {
      return DataLoss("snapshot round_pending: partition " + std::to_string(id) + " " + why);
    };
    if (rec == nullptr) return bad("is not in the ledger");
    if (rec->state != PartitionState::kDone || !rec->partition.delta_exchange()) {
      return bad("is not a done step of a delta exchange");
    }
    const EpochSampler* es = SamplerOfEpoch(rec->partition.epoch());
    if (es == nullptr) return bad("is of epoch " + std::to_string(rec->partition.epoch()) + ", not open");
    for (uint64_t sample : rec->partition.sample_ids()) {
      if (sample >= static_cast<uint64_t>(es->num_samples()) ||
          es->state(sample) != EpochSampler::SampleState::kTaken) {
        return bad("has sample " + std::to_string(sample) +
                   " that is not taken (pending samples stay taken)");
      }
    }
    if (!round_pending_.insert(id).second) return bad("is named twice");
  }
  return OkStatus();
}

Status SchedulerState::RestoreSnapshot(const loft::v1::StateSnapshot& s) {
  LOFT_RETURN_IF_ERROR(CheckSnapshotFits(s));

  // Sampler.
  if (Status st = SamplerFromProto(s.sampler(), sampler_); !st.ok()) return SnapshotLoss("sampler", st);
  if (s.has_previous_sampler()) {
    auto prev = std::make_unique<EpochSampler>(&placement_, sampler_.seed());
    if (Status st = SamplerFromProto(s.previous_sampler(), *prev); !st.ok())
      return SnapshotLoss("previous sampler", st);
    if (prev->epoch() + 1 != sampler_.epoch() || prev->EpochDone()) {
      return DataLoss("snapshot previous sampler: epoch " + std::to_string(prev->epoch()) + " with " +
                      std::to_string(prev->num_samples() - prev->committed()) +
                      " uncommitted samples next to current epoch " + std::to_string(sampler_.epoch()) +
                      " (an open previous epoch is the one before, with samples uncommitted)");
    }
    prev_ = std::move(prev);
  }

  // Ledger.
  LOFT_ASSIGN_OR_RETURN(std::vector<PartitionRecord> records, LedgerRecordsFromProto(s.ledger()));
  const LedgerCounters c = LedgerCountersFromProto(s.ledger().counters());
  if (Status st = ledger_.Restore(std::move(records), c, s.ledger().last_id()); !st.ok()) {
    return SnapshotLoss("ledger", st);
  }

  if (s.has_exchange()) {
    if (Status st = exchange_.Restore(s.exchange()); !st.ok()) return SnapshotLoss("exchange", st);
  }

  // Quarantine.
  std::map<uint64_t, SampleQuarantine::Pending> reports;
  for (const auto& r : s.quarantine().reports()) {
    if (r.reporters_size() == 0 && r.holders_size() == 0) continue;  // written before reporters were kept
    SampleQuarantine::Pending& p = reports[r.sample()];
    p.reports = r.reports();
    p.reporters.assign(r.reporters().begin(), r.reporters().end());
    p.holders.assign(r.holders().begin(), r.holders().end());
  }
  std::set<uint64_t> quarantined(s.quarantine().samples().begin(), s.quarantine().samples().end());
  if (Status st =
          quarantine_.Restore(std::move(reports), std::move(quarantined), s.quarantine().unavailable());
      !st.ok()) {
    return SnapshotLoss("quarantine", st);
  }

  // Nodes: membership, distrust, cost models.
  LOFT_RETURN_IF_ERROR(RestoreNodes(s));
  if (s.lost_to_eviction() < 0 || s.held_out() < 0 || s.abandoned_at_iteration_plus_one() < 0) {
    return DataLoss("snapshot: negative lost_to_eviction, held_out or abandoned_at_iteration");
  }
  lost_to_eviction_ = s.lost_to_eviction();
  held_out_ = s.held_out();
  abandoned_at_iteration_ = s.abandoned_at_iteration_plus_one() - 1;

  // Pending observations and local steps.
  LOFT_RETURN_IF_ERROR(RestorePendingObservations(s));
  LOFT_RETURN_IF_ERROR(RestoreRoundPending(s));

  // The policy's memory.
  PolicyMemory memory;
  for (const auto& t : s.policy_memory().tables()) {
    auto& table = memory[t.name()];
    for (const auto& nv : t.values()) table[nv.node()] = nv.value();
  }
  if (Status st = policy_->RestoreMemory(memory); !st.ok()) return SnapshotLoss("policy memory", st);

  view_ = s.view();
  next_iteration_ = s.next_iteration();
  rejected_observations_ = s.rejected_observations();
  reads_left_out_of_fits_ = s.reads_left_out_of_fits();
  policy_failures_ = s.policy_failures();
  distrusted_reads_committed_ = s.distrusted_reads_committed();
  return OkStatus();
}

}  // namespace loft::sched
