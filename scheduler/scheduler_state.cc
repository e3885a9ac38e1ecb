#include "scheduler/scheduler_state.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "scheduler/cost_model.h"
#include "scheduler/cost_profile.h"

namespace loft::sched {

using WorkerCostModel = CostModel;

struct SchedulerState::CostModels {
  std::vector<WorkerCostModel> models;
};

namespace {
bool Finite(double x) {
  return std::isfinite(x) && x >= 0;
}

// Fallback when the policy fails: B split evenly within [min, max], samples
// from the global shuffle.
Plan EvenPlan(const PlanRequest& req) {
  Plan plan;
  plan.policy = "even-fallback";
  const auto n = static_cast<int64_t>(req.workers.size());
  int64_t left = req.global_batch;
  for (int64_t i = 0; i < n; ++i) {
    WorkerPlan w;
    w.node = req.workers[i].node;
    w.batch = std::min(left, std::clamp(left / (n - i), req.workers[i].min_batch, req.workers[i].max_batch));
    left -= w.batch;
    plan.workers.push_back(w);
  }
  for (int64_t i = 0; i < n && left > 0; ++i) {
    const int64_t add = std::min(left, req.workers[i].max_batch - plan.workers[i].batch);
    plan.workers[i].batch += add;
    left -= add;
  }
  return plan;
}

// How far ahead per-sample loops prefetch their random reads.
constexpr size_t kPrefetchAhead = 16;

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}
}  // namespace

Status StateOptions::Validate() const {
  if (!(timeout_min_ms >= 0) || !std::isfinite(timeout_min_ms)) {
    return InvalidArgument("scheduler options: timeout_min_ms must be finite and >= 0");
  }
  if (!(timeout_factor >= 0) || !std::isfinite(timeout_factor)) {
    return InvalidArgument("scheduler options: timeout_factor must be finite and >= 0");
  }
  if (global_batch < 0) return InvalidArgument("scheduler options: global_batch must be >= 0");
  if (iterations < 0) return InvalidArgument("scheduler options: iterations must be >= 0");
  return OkStatus();
}

SchedulerState::SchedulerState(const ClusterSpec& spec, Placement placement, std::unique_ptr<Policy> policy,
                               StateOptions options)
    : spec_(spec),
      placement_(std::move(placement)),
      policy_(std::move(policy)),
      options_(options),
      global_batch_(options.global_batch > 0 ? options.global_batch : spec.training.global_batch),
      sampler_(&placement_, options.seed != 0 ? options.seed : spec.training.seed),
      exchange_(spec.training.exchange,
                (options.iterations > 0 ? options.iterations : spec.training.iterations) - 1,
                ExchangePriorMs(spec)),
      // More distinct reporters than f Byzantine nodes can muster (f =
      // training.byzantine_tolerance; scheduler/quarantine.h).
      quarantine_(options.quarantine_after > 0
                      ? std::max(options.quarantine_after, spec.training.byzantine_tolerance + 1)
                      : 0) {
  const int n = spec_.num_nodes();
  cost_models_ = std::make_unique<CostModels>();
  cost_models_->models.reserve(n);
  for (int i = 0; i < n; ++i)
    cost_models_->models.emplace_back(PriorFromSpec(spec_, i), DecodePriorFromSpec(spec_, i));
  observations_.assign(n, 0);
  registered_.assign(n, false);
  alive_.assign(n, false);
  dead_since_ms_.assign(n, 0.0);
}

SchedulerState::~SchedulerState() = default;

CostModel& SchedulerState::cost_model(int node) const {
  return cost_models_->models[node];
}

CostParams SchedulerState::cost(int node) const {
  return cost_models_->models[node].params();
}

StatusOr<std::unique_ptr<SchedulerState>> SchedulerState::Create(const ClusterSpec& spec,
                                                                 std::unique_ptr<Policy> policy,
                                                                 StateOptions options) {
  LOFT_RETURN_IF_ERROR(options.Validate());
  if (policy == nullptr) return InvalidArgument("scheduler state: policy is null");
  if (spec.num_nodes() == 0) return InvalidArgument("scheduler state: cluster spec has no nodes");
  const int64_t b = options.global_batch > 0 ? options.global_batch : spec.training.global_batch;
  if (b <= 0) return InvalidArgument("scheduler state: global batch must be > 0");
  LOFT_ASSIGN_OR_RETURN(Placement placement, Placement::FromSpec(spec));
  return std::unique_ptr<SchedulerState>(
      new SchedulerState(spec, std::move(placement), std::move(policy), options));
}

std::vector<int32_t> SchedulerState::LiveNodes() const {
  std::vector<int32_t> out;
  for (int i = 0; i < spec_.num_nodes(); ++i) {
    if (alive_[i]) out.push_back(i);
  }
  return out;
}

bool SchedulerState::IterationComplete() const {
  return next_iteration_ == 0 || ledger_.OpenInIteration(next_iteration_ - 1) == 0;
}

bool SchedulerState::Assignable(uint64_t id) const {
  for (int32_t h : placement_.Holders(id)) {
    if (alive_[h]) return true;
  }
  return false;
}

const EpochSampler& SchedulerState::planning_sampler() const {
  if (prev_ != nullptr && prev_->pooled() > 0) {
    const bool all_alive = std::all_of(alive_.begin(), alive_.end(), [](bool a) { return a; });
    if (all_alive || prev_->CountAssignable([this](uint64_t id) { return Assignable(id); }) > 0)
      return *prev_;
  }
  return sampler_;
}

bool SchedulerState::EpochAdvanceDue() const {
  if (prev_ != nullptr) return false;
  return sampler_.EpochDone() || (options_.overlap_epochs && sampler_.pooled() == 0);
}

EpochSampler* SchedulerState::SamplerOfEpoch(int64_t epoch) {
  if (epoch == sampler_.epoch()) return &sampler_;
  if (prev_ != nullptr && epoch == prev_->epoch()) return prev_.get();
  return nullptr;
}

void SchedulerState::RetirePreviousEpochIfDone() {
  if (prev_ != nullptr && prev_->EpochDone()) {
    ledger_.CountEpochCompleted();
    prev_.reset();
  }
}

// ---------------------------------------------------------------------------
// Apply

Status SchedulerState::Apply(const loft::v1::StateUpdate& u) {
  using K = loft::v1::StateUpdate::KindCase;
  switch (u.kind_case()) {
    case K::kWorkerRegistered: {
      const int32_t node = u.worker_registered().node();
      LOFT_RETURN_IF_ERROR(ApplyMembership(node, u.worker_registered().view(), true, true));
      // A restarted worker's parameters, and its round's local steps, are gone.
      return ResolveRound(node, std::numeric_limits<int64_t>::max(), /*applied=*/false, /*now_ms=*/-1);
    }
    case K::kWorkerAlive:
      return ApplyMembership(u.worker_alive().node(), u.worker_alive().view(), false, true);
    case K::kWorkerDead: {
      const auto& d = u.worker_dead();
      LOFT_RETURN_IF_ERROR(ApplyMembership(d.node(), d.view(), false, false));
      dead_since_ms_[d.node()] = d.now_ms();
      // Its round's local steps die with its parameters (round-level lineage).
      return ResolveRound(d.node(), std::numeric_limits<int64_t>::max(), /*applied=*/false, d.now_ms());
    }
    case K::kIterationPlanned: return ApplyIterationPlanned(u.iteration_planned());
    case K::kPartitionSent: {
      const auto& s = u.partition_sent();
      ledger_.MarkSent(s.partition_id(), s.attempt(), s.now_ms());
      return OkStatus();
    }
    case K::kPartitionDone: return ApplyDone(u.partition_done());
    case K::kPartitionFailed: {
      const auto& f = u.partition_failed();
      return ApplyFailed(
          f.failed().partition_id(), f.failed().attempt(), f.failed().node(), f.now_ms(), false,
          std::span<const uint64_t>(f.failed().bad_samples().data(), f.failed().bad_samples_size()));
    }
    case K::kPartitionTimedOut: {
      const auto& t = u.partition_timed_out();
      return ApplyFailed(t.partition_id(), t.attempt(), -1, t.now_ms(), true);
    }
    case K::kEpochAdvanced: return ApplyEpochAdvanced(u.epoch_advanced());
    case K::kSourceDistrusted: return ApplySourceDistrusted(u.source_distrusted());
    case K::kWorkerEvicted: return ApplyWorkerEvicted(u.worker_evicted());
    case K::kHoldersAbandoned: return ApplyHoldersAbandoned(u.holders_abandoned());
    case K::KIND_NOT_SET: break;
  }
  return InvalidArgument("state update has no kind set");
}

Status SchedulerState::ApplyMembership(int32_t node, int64_t view, bool registered_event, bool alive) {
  if (node < 0 || node >= spec_.num_nodes()) {
    return InvalidArgument("membership update: node " + std::to_string(node) +
                           " is not in the cluster spec (" + std::to_string(spec_.num_nodes()) + " nodes)");
  }
  if (view <= view_) {
    return InvalidArgument("membership update: view " + std::to_string(view) +
                           " is not greater than current " + std::to_string(view_));
  }
  if (!registered_event && !registered_[node]) {
    return FailedPrecondition("membership update: node " + std::to_string(node) + " never registered");
  }
  if (registered_event) registered_[node] = true;
  alive_[node] = alive;
  view_ = view;
  return OkStatus();
}

Status SchedulerState::ApplyIterationPlanned(const loft::v1::IterationPlanned& u) {
  // Error messages are built only on the error paths (this runs once per
  // iteration over every sample id).
  auto where = [&u] { return "iteration_planned " + std::to_string(u.iteration()); };
  if (u.iteration() != next_iteration_) {
    return InvalidArgument(where() + ": expected iteration " + std::to_string(next_iteration_));
  }
  EpochSampler* const sp = SamplerOfEpoch(u.epoch());
  if (sp == nullptr) {
    return InvalidArgument(where() + ": epoch " + std::to_string(u.epoch()) + " but the current epoch is " +
                           std::to_string(sampler_.epoch()) +
                           (prev_ != nullptr ? " (and " + std::to_string(prev_->epoch()) + " is open)" : ""));
  }
  EpochSampler& es = *sp;
  // Times come from the service's clock: a NaN deadline would never expire.
  if (!std::isfinite(u.now_ms())) return InvalidArgument(where() + ": now_ms is not finite");
  for (const auto& pp : u.partitions()) {
    if (!std::isfinite(pp.deadline_ms())) {
      return InvalidArgument(where() + ": partition " + std::to_string(pp.partition().id()) +
                             ": deadline_ms is not finite");
    }
  }
  // Validate everything before changing anything. The ids of all
  // partitions are gathered with their (validated) sources, which the
  // sampler uses as holder hints.
  size_t total = 0;
  for (const auto& pp : u.partitions()) total += static_cast<size_t>(pp.partition().sample_ids_size());
  std::vector<uint64_t>& all = apply_ids_;
  std::vector<int32_t>& sources = apply_sources_;
  all.clear();
  sources.clear();
  all.reserve(total);
  sources.reserve(total);
  const bool any_origin = es.with_origin() > 0;  // else origin(id) == 0 for every id
  const auto num_samples = static_cast<uint64_t>(placement_.num_samples());
  const int num_nodes = spec_.num_nodes();
  uint64_t last = ledger_.last_id();
  for (const auto& pp : u.partitions()) {
    const auto& p = pp.partition();
    auto pw = [&] { return where() + ": partition " + std::to_string(p.id()); };
    if (p.id() <= last) return InvalidArgument(pw() + ": id not greater than " + std::to_string(last));
    last = p.id();
    if (p.epoch() != u.epoch() || p.iteration() != u.iteration() || p.job() != options_.job_id) {
      return InvalidArgument(pw() + ": job/epoch/iteration do not match the update");
    }
    if (p.worker() < 0 || p.worker() >= spec_.num_nodes() || !alive_[p.worker()]) {
      return InvalidArgument(pw() + ": worker " + std::to_string(p.worker()) + " is not a live node");
    }
    if (p.sample_ids_size() == 0 || p.sources_size() != p.sample_ids_size()) {
      return InvalidArgument(pw() + ": needs sample ids and one source per sample");
    }
    int32_t expected_attempt = 0;
    if (p.parent() != 0) {
      const PartitionRecord* parent = ledger_.Find(p.parent());
      if (parent == nullptr ||
          (parent->state != PartitionState::kFailed && parent->state != PartitionState::kTimedOut)) {
        return InvalidArgument(pw() + ": parent " + std::to_string(p.parent()) +
                               " is not a failed partition");
      }
      expected_attempt = parent->partition.attempt() + 1;
    }
    if (p.attempt() != expected_attempt) {
      return InvalidArgument(pw() + ": attempt " + std::to_string(p.attempt()) + ", expected " +
                             std::to_string(expected_attempt));
    }
    const uint64_t* ids = p.sample_ids().data();
    const int32_t* srcs = p.sources().data();
    const auto count = static_cast<size_t>(p.sample_ids_size());
    for (size_t k = 0; k < count; ++k) {
      // The holder reads are random; start them a few ids ahead.
      if (k + kPrefetchAhead < count && ids[k + kPrefetchAhead] < num_samples) {
        __builtin_prefetch(placement_.Holders(ids[k + kPrefetchAhead]).data());
      }
      const uint64_t id = ids[k];
      const int32_t src = srcs[k];
      if (id >= num_samples) {
        return InvalidArgument(pw() + ": sample id " + std::to_string(id) + " out of range");
      }
      if (src < 0 || src >= num_nodes || !alive_[src] || !placement_.Holds(src, id)) {
        return InvalidArgument(pw() + ": source " + std::to_string(src) + " is not a live holder of sample " +
                               std::to_string(id));
      }
      if (src != p.worker() && distrusted(src)) {
        return InvalidArgument(pw() + ": source " + std::to_string(src) + " of sample " + std::to_string(id) +
                               " is distrusted (serves only itself)");
      }
      const uint64_t origin = any_origin ? es.origin(id) : 0;
      if (origin != p.parent() && es.state(id) == EpochSampler::SampleState::kPooled) {
        return InvalidArgument(pw() + ": sample " + std::to_string(id) + " came back from partition " +
                               std::to_string(origin) + ", not from parent " + std::to_string(p.parent()));
      }
    }
    all.insert(all.end(), ids, ids + count);
    sources.insert(sources.end(), srcs, srcs + count);
  }
  if (Status s = es.MarkTaken(all, sources); !s.ok()) return s.WithContext(where());
  for (const auto& pp : u.partitions()) {
    Status s = ledger_.AddPlanned(pp.partition(), u.now_ms(), pp.deadline_ms());
    if (!s.ok()) return Internal(where() + ": ledger rejected a validated partition: " + s.ToString());
  }
  if (!u.policy_error().empty()) ++policy_failures_;
  exchange_.OnPlanned(u.iteration(), u.round_period(), u.ends_round(), u.makespan_ms());
  ++next_iteration_;
  return OkStatus();
}

Status SchedulerState::ApplyDone(const loft::v1::PartitionDoneUpdate& u) {
  const auto& d = u.done();
  if (ledger_.MarkDone(d.partition_id(), d.attempt(), d.node(), u.now_ms()) != AckOutcome::kAccepted) {
    return OkStatus();  // ignored and counted by the ledger
  }
  const PartitionRecord* rec = ledger_.Find(d.partition_id());
  const auto& p = rec->partition;
  LOFT_RETURN_IF_ERROR(CommitOrHold(*rec, d, u.now_ms()));
  if (!d.has_timings()) {
    // Committed without a measurement (the scheduler's own ack for a
    // partition the ring applied): nothing to learn the worker's costs from.
    MaybeDeliverObservations(p.iteration());
    return OkStatus();
  }

  const auto& t = d.timings();
  if (t.has_training()) {
    exchange_.OnReport(p.iteration(), t.training().loss(), !p.local_step(), t.training().allreduce_ms());
  }
  Observation obs;
  obs.node = p.worker();
  obs.batch = p.sample_ids_size();
  for (int32_t s : p.sources()) (s == p.worker() ? obs.local : obs.remote)++;
  obs.local_read_ms = t.local_read_ms();
  obs.remote_read_ms = t.remote_read_ms();
  obs.compute_ms = t.compute_ms();
  // The samples this worker preprocessed: all but those its holders
  // decoded (Partition.decoded_from), plus the spot check's records.
  const int64_t own_decoded = obs.batch - t.remote_decoded_samples();
  if (spec_.dataset.encoding != DatasetEncoding::kRaw && t.preprocess_ms() > 0 && Finite(t.preprocess_ms()) &&
      own_decoded > 0) {
    const int64_t own_bytes = t.local_bytes() + t.remote_bytes() - t.remote_decoded_bytes();
    obs.decode_ms = t.preprocess_ms();
    obs.decode_samples = own_decoded + t.spot_checked_samples();
    obs.decode_bytes = own_bytes + own_bytes * t.spot_checked_samples() / own_decoded;
  }
  const double read = std::max(obs.local_read_ms, obs.remote_read_ms);
  obs.iteration_ms = spec_.training.overlap ? std::max(read, obs.compute_ms) : read + obs.compute_ms;
  if (Finite(obs.local_read_ms) && Finite(obs.remote_read_ms) && Finite(obs.compute_ms)) {
    // With a delta exchange, reads that ran during the worker's exchange
    // shared its links (and CPU) with it: they describe the exchange, not
    // the read a round's steps make, and a read cost fitted on them would
    // inflate every planned step (and period: auto's step time S). Their
    // compute still counts. loft-sim sets the flag by the same rule.
    Observation fit = obs;
    if (exchange_.delta_exchange() && t.read_during_exchange()) {
      fit.local_read_ms = 0;
      fit.remote_read_ms = 0;
      ++reads_left_out_of_fits_;
    }
    cost_models_->models[obs.node].Observe(fit);
    ++observations_[obs.node];
    PendingObservations& pending = pending_observations_[p.iteration()];
    if (pending.by_node.empty()) {
      Observation none;
      none.node = -1;
      pending.by_node.assign(static_cast<size_t>(spec_.num_nodes()), none);
    }
    Observation& merged = pending.by_node[static_cast<size_t>(obs.node)];
    if (merged.node < 0) {
      merged = Observation{};
      pending.nodes.push_back(obs.node);
    }
    merged.node = obs.node;
    merged.batch += obs.batch;
    merged.local += obs.local;
    merged.remote += obs.remote;
    merged.local_read_ms += obs.local_read_ms;
    merged.remote_read_ms += obs.remote_read_ms;
    merged.compute_ms += obs.compute_ms;
    merged.iteration_ms += obs.iteration_ms;
  } else {
    ++rejected_observations_;
  }
  MaybeDeliverObservations(p.iteration());
  return OkStatus();
}

Status SchedulerState::CommitSamples(const loft::v1::Partition& p) {
  EpochSampler* const es = SamplerOfEpoch(p.epoch());
  if (es == nullptr) {
    return Internal("partition " + std::to_string(p.id()) + " of epoch " + std::to_string(p.epoch()) +
                    " was in flight but its epoch is not open");
  }
  int64_t dups = 0;
  if (Status s = es->Commit(std::span<const uint64_t>(p.sample_ids().data(), p.sample_ids_size()), &dups);
      !s.ok()) {
    return s.WithContext("partition " + std::to_string(p.id()));
  }
  ledger_.CountCommitted(p.sample_ids_size(), dups);
  RetirePreviousEpochIfDone();
  if (!distrusted_.empty()) {
    for (int32_t src : p.sources()) distrusted_reads_committed_ += distrusted(src) ? 1 : 0;
  }
  return OkStatus();
}

// Round-level lineage (scheduler_state.h): a local step's samples reach the
// agreed model only with its worker's delta at the round's exchange, so a
// done local step waits for that exchange; the worker's round-ending step
// commits it, or fails it when the report says the delta was dropped.
Status SchedulerState::CommitOrHold(const PartitionRecord& rec, const loft::v1::PartitionDone& d,
                                    double now_ms) {
  const auto& p = rec.partition;
  if (SamplerOfEpoch(p.epoch()) == nullptr) {
    return Internal("partition " + std::to_string(p.id()) + " of epoch " + std::to_string(p.epoch()) +
                    " was in flight but its epoch is not open");
  }
  if (!p.delta_exchange()) return CommitSamples(p);  // period 1: the step's gradient was all-reduced
  const bool report = d.has_timings() && d.timings().has_training();
  if (p.local_step() || (report && d.timings().training().in_next_round())) {
    round_pending_.insert(p.id());
    return OkStatus();
  }
  if (report && d.timings().training().delta_dropped()) {
    // Neither this step nor the round's local steps reached the model.
    LOFT_RETURN_IF_ERROR(ResolveRound(p.worker(), p.iteration(), /*applied=*/false, now_ms));
    ledger_.MarkRoundLost(p.id(), now_ms);
    LOFT_RETURN_IF_ERROR(ReturnToPool(p.id(), {}));
  } else {
    LOFT_RETURN_IF_ERROR(CommitSamples(p));
    LOFT_RETURN_IF_ERROR(ResolveRound(p.worker(), p.iteration(), /*applied=*/true, now_ms));
  }
  return MaybeCloseRound(p, now_ms);
}

Status SchedulerState::ResolveRound(int32_t worker, int64_t before_iteration, bool applied, double now_ms) {
  std::vector<uint64_t> ids;
  for (uint64_t id : round_pending_) {
    const auto& p = ledger_.Find(id)->partition;
    if ((worker < 0 || p.worker() == worker) && p.iteration() < before_iteration) ids.push_back(id);
  }
  for (uint64_t id : ids) {
    round_pending_.erase(id);
    if (applied) {
      LOFT_RETURN_IF_ERROR(CommitSamples(ledger_.Find(id)->partition));
    } else {
      ledger_.MarkRoundLost(id, now_ms);
      LOFT_RETURN_IF_ERROR(ReturnToPool(id, {}));
    }
  }
  return OkStatus();
}

Status SchedulerState::MaybeCloseRound(const loft::v1::Partition& p, double now_ms) {
  if (round_pending_.empty() || !p.delta_exchange() || p.local_step()) return OkStatus();
  const int64_t round_end = p.iteration();
  if (ledger_.OpenInIteration(round_end) != 0) return OkStatus();
  // The round's exchange is over. A worker with a step in it whose step
  // failed or timed out joined the exchange with weight 0, carrying its
  // delta: its next round's report confirms (done) or refutes
  // (delta_dropped) that. A worker without a step in it is not waited for:
  // its pending steps of the round fail.
  std::set<int32_t> in_round;
  for (uint64_t id = p.id(); id > 0; --id) {  // an iteration's ids are consecutive
    const PartitionRecord* r = ledger_.Find(id);
    if (r == nullptr || r->partition.iteration() != round_end) break;
    in_round.insert(r->partition.worker());
  }
  for (uint64_t id = p.id() + 1;; ++id) {
    const PartitionRecord* r = ledger_.Find(id);
    if (r == nullptr || r->partition.iteration() != round_end) break;
    in_round.insert(r->partition.worker());
  }
  for (int32_t node = 0; node < spec_.num_nodes(); ++node) {
    if (in_round.count(node) == 0)
      LOFT_RETURN_IF_ERROR(ResolveRound(node, round_end, /*applied=*/false, now_ms));
  }
  return OkStatus();
}

Status SchedulerState::ApplyFailed(uint64_t id, int32_t attempt, int32_t node, double now_ms, bool timed_out,
                                   std::span<const uint64_t> bad_samples) {
  const AckOutcome o =
      timed_out ? ledger_.MarkTimedOut(id, attempt, now_ms) : ledger_.MarkFailed(id, attempt, node, now_ms);
  if (o != AckOutcome::kAccepted) return OkStatus();
  LOFT_RETURN_IF_ERROR(ReturnToPool(id, bad_samples));
  const auto& p = ledger_.Find(id)->partition;
  LOFT_RETURN_IF_ERROR(MaybeCloseRound(p, now_ms));
  MaybeDeliverObservations(p.iteration());
  return OkStatus();
}

Status SchedulerState::ReturnToPool(uint64_t id, std::span<const uint64_t> bad_samples) {
  const auto& p = ledger_.Find(id)->partition;
  EpochSampler* const es = SamplerOfEpoch(p.epoch());
  if (es == nullptr) {
    return Internal("partition " + std::to_string(id) + " of epoch " + std::to_string(p.epoch()) +
                    " was in flight but its epoch is not open");
  }
  if (Status s = es->Return(std::span<const uint64_t>(p.sample_ids().data(), p.sample_ids_size()), id);
      !s.ok()) {
    return s.WithContext("partition " + std::to_string(id));
  }
  if (!bad_samples.empty()) {
    // Each sample of this partition named once; other ids do not count.
    // The reporter is the partition's worker (the ledger accepted the
    // report from it); the holder is the node it read the record from.
    std::set<uint64_t> named(bad_samples.begin(), bad_samples.end());
    for (int k = 0; k < p.sample_ids_size(); ++k) {
      const uint64_t sample = p.sample_ids(k);
      if (named.count(sample) == 0) continue;
      const int holders = static_cast<int>(placement_.Holders(sample).size());
      if (!quarantine_.Report(sample, p.worker(), p.sources(k), holders)) continue;
      if (Status s = SetAside(*es, sample); !s.ok()) return s.WithContext("partition " + std::to_string(id));
      quarantine_.CountUnavailable(1);
      // The other open epoch, if it still pools it, drops it too.
      EpochSampler* other = es == &sampler_ ? prev_.get() : &sampler_;
      if (other != nullptr && other->state(sample) == EpochSampler::SampleState::kPooled) {
        if (Status s = SetAside(*other, sample); !s.ok()) {
          return s.WithContext("partition " + std::to_string(id));
        }
        quarantine_.CountUnavailable(1);
      }
    }
  }
  if (!quarantine_.samples().empty()) {
    // A sample quarantined through the other open epoch while it was in
    // flight here (that epoch may be retired by now) comes back set
    // aside, not pooled.
    for (uint64_t sample : p.sample_ids()) {
      if (quarantine_.quarantined(sample) && es->state(sample) == EpochSampler::SampleState::kPooled) {
        if (Status s = SetAside(*es, sample); !s.ok())
          return s.WithContext("partition " + std::to_string(id));
        quarantine_.CountUnavailable(1);
      }
    }
  }
  if (!evicted_.empty()) {
    // Samples whose every holder was evicted never come back to the pool.
    for (uint64_t sample : p.sample_ids()) {
      if (es->state(sample) != EpochSampler::SampleState::kPooled || !LostToEviction(sample)) continue;
      if (Status s = SetAside(*es, sample); !s.ok()) return s.WithContext("partition " + std::to_string(id));
      ++lost_to_eviction_;
    }
  }
  RetirePreviousEpochIfDone();  // setting its last samples aside completes an epoch
  return OkStatus();
}

Status SchedulerState::ApplyEpochAdvanced(const loft::v1::EpochAdvanced& u) {
  if (u.epoch() != sampler_.epoch() + 1) {
    return InvalidArgument("epoch_advanced: epoch " + std::to_string(u.epoch()) + ", expected " +
                           std::to_string(sampler_.epoch() + 1));
  }
  if (prev_ != nullptr) {
    return FailedPrecondition("epoch_advanced: epoch " + std::to_string(prev_->epoch()) + " still has " +
                              std::to_string(prev_->num_samples() - prev_->committed()) +
                              " uncommitted samples (at most two epochs are open)");
  }
  if (sampler_.EpochDone()) {
    ledger_.CountEpochCompleted();
    sampler_.StartEpoch(u.epoch());
    ledger_.PruneBefore(u.epoch());
  } else if (options_.overlap_epochs && sampler_.pooled() == 0) {
    // Its last samples are in flight: it stays open as the previous epoch.
    prev_ = sampler_.SplitOffEpoch(u.epoch());
    ledger_.PruneBefore(prev_->epoch());
  } else {
    return FailedPrecondition(
        "epoch_advanced: epoch " + std::to_string(sampler_.epoch()) + " has " +
        std::to_string(sampler_.num_samples() - sampler_.committed()) + " uncommitted samples" +
        (options_.overlap_epochs ? " (" + std::to_string(sampler_.pooled()) + " not handed out yet)" : ""));
  }
  for (uint64_t id : quarantine_.samples()) {
    if (Status s = SetAside(sampler_, id); !s.ok()) return s.WithContext("epoch_advanced");
    quarantine_.CountUnavailable(1);
  }
  if (!evicted_.empty()) {
    Status s = SetAsideWhere(
        sampler_, [this](uint64_t id) { return LostToEviction(id); }, &lost_to_eviction_);
    if (!s.ok()) return s.WithContext("epoch_advanced");
  }
  return OkStatus();
}

Status SchedulerState::SetAside(EpochSampler& es, uint64_t id) {
  const uint64_t ids[1] = {id};
  LOFT_RETURN_IF_ERROR(es.MarkTaken(ids));
  int64_t dups = 0;
  return es.Commit(ids, &dups);
}

Status SchedulerState::SetAsideWhere(EpochSampler& es, const std::function<bool(uint64_t)>& pred,
                                     int64_t* counter) {
  std::vector<uint64_t> ids;
  for (uint64_t id = 0; id < static_cast<uint64_t>(es.num_samples()); ++id) {
    if (es.state(id) == EpochSampler::SampleState::kPooled && pred(id)) ids.push_back(id);
  }
  if (ids.empty()) return OkStatus();
  LOFT_RETURN_IF_ERROR(es.MarkTaken(ids));
  int64_t dups = 0;
  LOFT_RETURN_IF_ERROR(es.Commit(ids, &dups));
  *counter += static_cast<int64_t>(ids.size());
  return OkStatus();
}

bool SchedulerState::LostToEviction(uint64_t id) const {
  for (int32_t h : placement_.Holders(id)) {
    if (!evicted(h)) return false;
  }
  return true;
}

bool SchedulerState::HeldOnlyByDeadNodes(uint64_t id) const {
  return !Assignable(id);
}

int64_t SchedulerState::CountHeldOnlyByDeadNodes() const {
  int64_t n = 0;
  for (const EpochSampler* es :
       {static_cast<const EpochSampler*>(&sampler_), static_cast<const EpochSampler*>(prev_.get())}) {
    if (es != nullptr && es->pooled() > 0)
      n += es->CountAssignable([this](uint64_t id) { return HeldOnlyByDeadNodes(id); });
  }
  return n;
}

Status SchedulerState::ApplyWorkerEvicted(const loft::v1::WorkerEvicted& u) {
  if (u.node() < 0 || u.node() >= spec_.num_nodes()) {
    return InvalidArgument("worker_evicted: node " + std::to_string(u.node()) +
                           " is not in the cluster spec (" + std::to_string(spec_.num_nodes()) + " nodes)");
  }
  if (evicted(u.node()))
    return FailedPrecondition("worker_evicted: node " + std::to_string(u.node()) + " is already evicted");
  if (alive_[u.node()])
    return FailedPrecondition("worker_evicted: node " + std::to_string(u.node()) +
                              " is live (WorkerDead first)");
  if (evicted_.empty()) evicted_.assign(static_cast<size_t>(spec_.num_nodes()), false);
  evicted_[u.node()] = true;
  auto lost = [this](uint64_t id) { return LostToEviction(id); };
  for (EpochSampler* es : {&sampler_, prev_.get()}) {
    if (es == nullptr) continue;
    if (Status s = SetAsideWhere(*es, lost, &lost_to_eviction_); !s.ok())
      return s.WithContext("worker_evicted");
  }
  RetirePreviousEpochIfDone();  // its last pooled samples may have been the evicted node's
  return OkStatus();
}

Status SchedulerState::ApplyHoldersAbandoned(const loft::v1::HoldersAbandoned& u) {
  // Validate before changing anything: the count must match.
  const int64_t n = CountHeldOnlyByDeadNodes();
  if (n == 0 || n != u.samples()) {
    return InvalidArgument("holders_abandoned: " + std::to_string(u.samples()) + " samples, but " +
                           std::to_string(n) + " pooled samples have no live holder");
  }
  auto dead_held = [this](uint64_t id) { return HeldOnlyByDeadNodes(id); };
  for (EpochSampler* es : {&sampler_, prev_.get()}) {
    if (es == nullptr) continue;
    if (Status s = SetAsideWhere(*es, dead_held, &held_out_); !s.ok())
      return s.WithContext("holders_abandoned");
  }
  abandoned_at_iteration_ = next_iteration_;
  RetirePreviousEpochIfDone();
  return OkStatus();
}

Status SchedulerState::ApplySourceDistrusted(const loft::v1::SourceDistrusted& u) {
  if (u.node() < 0 || u.node() >= spec_.num_nodes()) {
    return InvalidArgument("source_distrusted: node " + std::to_string(u.node()) +
                           " is not in the cluster spec (" + std::to_string(spec_.num_nodes()) + " nodes)");
  }
  if (distrusted(u.node())) {
    return FailedPrecondition("source_distrusted: node " + std::to_string(u.node()) +
                              " is already distrusted");
  }
  if (distrusted_.empty()) distrusted_.assign(static_cast<size_t>(spec_.num_nodes()), false);
  distrusted_[u.node()] = true;
  return OkStatus();
}

std::vector<int32_t> SchedulerState::PendingObservations::SortedNodes() const {
  std::vector<int32_t> sorted = nodes;
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

void SchedulerState::MaybeDeliverObservations(int64_t iteration) {
  if (ledger_.OpenInIteration(iteration) != 0) return;
  auto it = pending_observations_.find(iteration);
  if (it == pending_observations_.end()) return;
  std::vector<Observation> obs;
  obs.reserve(it->second.nodes.size());
  for (int32_t node : it->second.SortedNodes()) obs.push_back(it->second.by_node[static_cast<size_t>(node)]);
  pending_observations_.erase(it);
  policy_->Observe(obs);
}

// ---------------------------------------------------------------------------
// Planning

StatusOr<PlanRequest> SchedulerState::BuildPlanRequest() const {
  const std::vector<int32_t> live = LiveNodes();
  if (live.empty()) return Unavailable("no live workers");
  const EpochSampler& sampler = planning_sampler();
  if (sampler.EpochDone()) {
    if (prev_ != nullptr) {
      return Unavailable("epoch " + std::to_string(sampler.epoch()) + " is complete; waiting for epoch " +
                         std::to_string(prev_->epoch()) + "'s " + std::to_string(prev_->taken()) +
                         " samples in flight");
    }
    return FailedPrecondition("epoch " + std::to_string(sampler.epoch()) +
                              " is complete; apply EpochAdvanced first");
  }
  const bool all_alive = static_cast<int64_t>(live.size()) == spec_.num_nodes();
  const int64_t assignable =
      all_alive ? sampler.pooled() : sampler.CountAssignable([this](uint64_t id) { return Assignable(id); });
  if (assignable == 0) {
    if (sampler.pooled() == 0) {
      return Unavailable("epoch " + std::to_string(sampler.epoch()) + ": pool empty, waiting for " +
                         std::to_string(ledger_.in_flight()) + " partitions in flight");
    }
    return Unavailable("epoch " + std::to_string(sampler.epoch()) + ": " + std::to_string(sampler.pooled()) +
                       " unconsumed samples are held only by dead nodes; waiting for a holder to come back "
                       "(at most scheduler.holder_wait_s = " +
                       fmt::format("{:g}", spec_.scheduler.holder_wait_s) +
                       " s after the last of them died, then they are left out of the epoch)");
  }
  int64_t b = std::min(global_batch_, assignable);
  int64_t sum_max = 0;
  for (int32_t n : live) sum_max += std::min(spec_.MaxBatch(n), b);
  b = std::min(b, sum_max);

  PlanRequest req;
  req.global_batch = b;
  req.overlap = spec_.training.overlap;
  req.epoch = sampler.epoch();
  req.iteration = next_iteration_;
  req.unconsumed_in_epoch = sampler.pooled();
  req.pipelined = ledger_.in_flight() > 0;
  req.iterations_left_in_epoch = std::max<int64_t>(1, (sampler.pooled() + global_batch_ - 1) / global_batch_);
  // Encoded samples: dataset.decode_placement auto is planned only while
  // every live agent serves decoded samples (RegisterRequest.serves_decoded,
  // SetServesDecoded): an older agent would not honour decoded_from.
  req.coding = CodingFromSpec(spec_);
  if (req.coding.placement == DecodePlacement::kAuto) {
    for (int32_t n : live) {
      if (!serves_decoded(n)) {
        req.coding.placement = DecodePlacement::kTrainer;
        break;
      }
    }
  }
  const int64_t min_batch =
      std::min<int64_t>(spec_.training.min_batch, b / static_cast<int64_t>(live.size()));
  for (int32_t n : live) {
    WorkerInput w;
    w.node = n;
    w.cost = cost(n);
    if (req.coding.encoded) w.decode = cost_models_->models[static_cast<size_t>(n)].decode_params();
    w.max_batch = std::min(spec_.MaxBatch(n), b);
    w.min_batch = std::min(min_batch, w.max_batch);
    w.local_available = sampler.available(n);
    // Without replication a sample has one holder, so what a live worker
    // holds nobody else does; with replicas see FillExclusiveAvailable.
    if (placement_.replication() == 1) w.exclusive_available = w.local_available;
    req.workers.push_back(w);
  }
  return req;
}

void SchedulerState::FillExclusiveAvailable(PlanRequest& req) const {
  const EpochSampler& sampler = planning_sampler();
  std::vector<int64_t> exclusive(static_cast<size_t>(spec_.num_nodes()), 0);
  for (uint64_t id = 0; id < static_cast<uint64_t>(sampler.num_samples()); ++id) {
    if (sampler.state(id) != EpochSampler::SampleState::kPooled) continue;
    int32_t only = -1;
    int live_holders = 0;
    for (int32_t h : placement_.Holders(id)) {
      if (alive_[h]) {
        only = h;
        ++live_holders;
      }
    }
    if (live_holders == 1) ++exclusive[static_cast<size_t>(only)];
  }
  for (WorkerInput& w : req.workers) {
    if (w.node >= 0 && w.node < spec_.num_nodes()) {
      w.exclusive_available = std::min(w.local_available, exclusive[static_cast<size_t>(w.node)]);
    }
  }
}

Plan SchedulerState::PlanOrEvenSplit(const PlanRequest& req, std::string* policy_error) {
  const std::string pname(policy_->name());
  StatusOr<Plan> plan = policy_->PlanIteration(req);
  if (plan.ok()) {
    int64_t sum = 0;
    bool parallel = plan->workers.size() == req.workers.size();
    for (size_t i = 0; i < plan->workers.size(); ++i) {
      sum += plan->workers[i].batch;
      parallel = parallel && plan->workers[i].node == req.workers[i].node;
    }
    if (sum != req.global_batch || !parallel) {
      plan = Internal("policy " + pname + " planned " + std::to_string(sum) + " samples for " +
                      std::to_string(plan->workers.size()) + " workers, asked for " +
                      std::to_string(req.global_batch) + " over " + std::to_string(req.workers.size()));
    }
  }
  if (plan.ok()) return std::move(plan).value();
  *policy_error = plan.status().ToString();
  // Visible, but not flooding: the 1st, 2nd, 4th, 8th … fallback of this
  // state is logged (the count is policy_failures() + 1 once applied and
  // is in ToJson as "policy_failures").
  const int64_t nth = policy_failures_ + 1;
  if ((nth & (nth - 1)) == 0) {
    int64_t local_sum = 0;
    for (const WorkerInput& w : req.workers) local_sum += w.local_available;
    spdlog::warn(
        "scheduler: policy {} failed for epoch {} iteration {} (B={}, {} live workers, min_batch={}, "
        "sum local_available={}, unconsumed={}); planned by an even split instead (fallback #{}, "
        "logged at #1, 2, 4, 8 ...): {}",
        pname, req.epoch, req.iteration, req.global_batch, req.workers.size(),
        req.workers.empty() ? 0 : req.workers[0].min_batch, local_sum, req.unconsumed_in_epoch, nth,
        *policy_error);
  }
  return EvenPlan(req);
}

void SchedulerState::AddPlannedPartitions(const Assignment& a, const PlanRequest& req,
                                          const EpochSampler& sampler, const ExchangeDecision& xd,
                                          double now_ms, loft::v1::IterationPlanned* ip) const {
  uint64_t next_id = ledger_.last_id() + 1;
  // Partitions per worker: one per origin (0 = fresh samples, else the
  // failed parent partition), ascending origin, samples in assignment
  // order within each. Without returned samples in the pool (the common
  // case: with_origin() == 0) every origin is 0 and no lookup is needed.
  const bool any_origin = sampler.with_origin() > 0;
  std::vector<uint64_t> origins, distinct;
  ip->mutable_partitions()->Reserve(static_cast<int>(a.workers.size()));
  for (const AssignedWorker& w : a.workers) {
    if (w.sample_ids.empty()) continue;
    const CostParams wcost = cost(w.node);
    const DecodeCost wdecode =
        req.coding.encoded ? cost_models_->models[static_cast<size_t>(w.node)].decode_params() : DecodeCost{};
    distinct.assign(1, 0);
    if (any_origin) {
      origins.resize(w.sample_ids.size());
      for (size_t k = 0; k < w.sample_ids.size(); ++k) origins[k] = sampler.origin(w.sample_ids[k]);
      distinct = origins;
      std::sort(distinct.begin(), distinct.end());
      distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    }
    const double timeout = options_.timeout_min_ms > 0
                               ? std::max(options_.timeout_min_ms, options_.timeout_factor * w.predicted_ms)
                               : 0.0;
    for (const uint64_t origin : distinct) {
      auto* pp = ip->add_partitions();
      auto* p = pp->mutable_partition();
      p->set_id(next_id++);
      p->set_job(options_.job_id);
      p->set_epoch(sampler.epoch());
      p->set_iteration(next_iteration_);
      p->set_worker(w.node);
      p->set_parent(origin);
      p->set_attempt(origin == 0 ? 0 : ledger_.Find(origin)->partition.attempt() + 1);
      p->set_plan_id(ip->plan_id());
      p->set_view(view_);
      p->set_local_step(!xd.ends_round);
      p->set_delta_exchange(exchange_.delta_exchange());
      int64_t local = 0, count = 0;
      auto* ids = p->mutable_sample_ids();
      auto* srcs = p->mutable_sources();
      if (distinct.size() == 1) {  // the whole worker's assignment
        ids->Add(w.sample_ids.begin(), w.sample_ids.end());
        srcs->Add(w.sources.begin(), w.sources.end());
        for (int32_t src : w.sources) local += src == w.node;
        count = static_cast<int64_t>(w.sample_ids.size());
      } else {
        for (size_t k = 0; k < w.sample_ids.size(); ++k) {
          if (origins[k] != origin) continue;
          ids->Add(w.sample_ids[k]);
          srcs->Add(w.sources[k]);
          local += w.sources[k] == w.node;
          ++count;
        }
      }
      // Holders that decode for the worker and serve this partition.
      for (const int32_t h : w.decoded_from)
        if (std::find(p->sources().begin(), p->sources().end(), h) != p->sources().end())
          p->add_decoded_from(h);
      p->set_predicted_ms(
          PredictMsDecodingAtTrainer(wcost, wdecode, req.coding, local, count - local, req.overlap));
      pp->set_deadline_ms(timeout > 0 ? now_ms + timeout : 0.0);
    }
  }
}

StatusOr<IterationProposal> SchedulerState::ProposeIteration(double now_ms) {
  IterationProposal out;
  StatusOr<PlanRequest> req = BuildPlanRequest();
  if (!req.ok()) {
    if (req.status().code() == StatusCode::kUnavailable ||
        req.status().code() == StatusCode::kFailedPrecondition) {
      out.blocked_reason = req.status().message();
      // The epoch's last samples are in flight (a scheduler planning
      // ahead asks now): get the next epoch's order ready meanwhile.
      if (prev_ == nullptr && sampler_.pooled() == 0 && !sampler_.EpochDone()) {
        sampler_.PrepareEpoch(sampler_.epoch() + 1);
      }
      return out;
    }
    return req.status();
  }
  // The epoch this iteration is planned from (BuildPlanRequest's).
  EpochSampler& sampler = planning_sampler_mut();
  const std::string pname(policy_->name());
  std::string policy_error;
  Plan plan = PlanOrEvenSplit(*req, &policy_error);
  const bool locality = policy_error.empty() && policy_->locality_aware();
  // Dry run: the assigner takes from the sampler inside a trial that is
  // rolled back (O(B)) on every exit path; Apply re-takes the same ids.
  struct TrialGuard {
    EpochSampler& s;
    ~TrialGuard() { s.RollbackTrial(); }
  } guard{sampler};
  sampler.BeginTrial();
  LOFT_ASSIGN_OR_RETURN(Assignment a, Assigner::Assign(plan, *req, locality, placement_, alive_, sampler,
                                                       distrusted_, &quarantine_));
  if (a.assigned == 0 && !distrusted_.empty()) {
    // What is left is held only by distrusted nodes (nobody else may read
    // it) and the policy gave them nothing (e.g. uniform's remainder went
    // to other workers): let each read its own, or the epoch never ends.
    Plan own;
    own.policy = plan.policy;
    int64_t left = req->global_batch;
    for (const WorkerInput& w : req->workers) {
      WorkerPlan wp;
      wp.node = w.node;
      if (distrusted(w.node)) wp.batch = std::min({left, w.max_batch, sampler.available(w.node)});
      left -= wp.batch;
      own.workers.push_back(std::move(wp));
    }
    LOFT_ASSIGN_OR_RETURN(
        a, Assigner::Assign(own, *req, false, placement_, alive_, sampler, distrusted_, &quarantine_));
  }

  loft::v1::StateUpdate update;
  auto* ip = update.mutable_iteration_planned();
  ip->set_iteration(next_iteration_);
  ip->set_epoch(sampler.epoch());
  ip->set_plan_id(static_cast<uint64_t>(next_iteration_) + 1);
  ip->set_now_ms(now_ms);
  ip->set_global_batch(a.assigned);
  ip->set_makespan_ms(a.makespan_ms);
  ip->set_policy(pname);
  ip->set_policy_error(policy_error);
  ExchangeDecision xd = exchange_.Decide(next_iteration_, a.makespan_ms);
  // A step that hands out its epoch's last pooled samples ends its round:
  // the epoch's local steps are committed only by an exchange (round-level
  // lineage), which must not wait on steps that cannot be planned.
  if (exchange_.delta_exchange() && !xd.ends_round && a.assigned > 0 && sampler.pooled() == 0) {
    xd.ends_round = true;
  }
  if (!spec_.training.exchange.is_default()) {  // else unset: old journals and digests stay as they were
    ip->set_round_period(xd.period);
    ip->set_ends_round(xd.ends_round);
  }
  AddPlannedPartitions(a, *req, sampler, xd, now_ms, ip);
  sampler.RollbackTrial();
  if (a.assigned == 0) {
    out.blocked_reason = "policy " + pname + " planned no assignable samples";
  } else {
    out.update = std::move(update);
  }
  out.plan = std::move(plan);
  out.assignment = std::move(a);
  return out;
}

Status SchedulerState::Replay(std::span<const loft::v1::StateUpdate> updates) {
  uint64_t seq = 0;
  for (const auto& u : updates) {
    if (u.has_iteration_planned()) {
      // Rebuild the policy's own memory: the same request it saw live.
      StatusOr<PlanRequest> req = BuildPlanRequest();
      if (req.ok()) policy_->PlanIteration(*req).status().IgnoreError();
    }
    LOFT_RETURN_IF_ERROR(Apply(u).WithContext("replay of update " + std::to_string(seq)));
    ++seq;
  }
  return OkStatus();
}

// ---------------------------------------------------------------------------
// Digest

std::string SchedulerState::ToJson() const {
  nlohmann::json j;
  j["job"] = options_.job_id;
  j["policy"] = std::string(policy_->name());
  j["global_batch"] = global_batch_;
  j["view"] = view_;
  j["next_iteration"] = next_iteration_;
  j["registered"] = std::vector<bool>(registered_.begin(), registered_.end());
  j["alive"] = std::vector<bool>(alive_.begin(), alive_.end());
  nlohmann::json costs = nlohmann::json::array();
  for (int i = 0; i < spec_.num_nodes(); ++i) {
    // The profile's fields under their short digest keys (cost_profile.h).
    const CostParams c = cost(i);
    nlohmann::json e = nlohmann::json::object();
    for (const CostField& f : kCostFields) e[std::string(f.digest_key)] = c.*f.member;
    e["observations"] = observations_[i];
    costs.push_back(std::move(e));
  }
  j["costs"] = std::move(costs);
  j["rejected_observations"] = rejected_observations_;
  // Only when some were (keeps ToJson/Digest of other runs unchanged).
  if (reads_left_out_of_fits_ > 0) j["reads_left_out_of_fits"] = reads_left_out_of_fits_;
  // Only when set: states without pending local steps digest as before.
  if (!round_pending_.empty())
    j["round_pending"] = std::vector<uint64_t>(round_pending_.begin(), round_pending_.end());
  j["policy_failures"] = policy_failures_;
  std::vector<int64_t> available;
  for (int i = 0; i < placement_.num_nodes(); ++i) available.push_back(sampler_.available(i));
  j["sampler"] = {{"epoch", sampler_.epoch()}, {"pooled", sampler_.pooled()},
                  {"taken", sampler_.taken()}, {"committed", sampler_.committed()},
                  {"available", available},    {"digest", sampler_.Digest()}};
  if (prev_ != nullptr) {  // only while two epochs are open (other digests unchanged)
    std::vector<int64_t> prev_available;
    for (int i = 0; i < placement_.num_nodes(); ++i) prev_available.push_back(prev_->available(i));
    j["previous_sampler"] = {{"epoch", prev_->epoch()},     {"pooled", prev_->pooled()},
                             {"taken", prev_->taken()},     {"committed", prev_->committed()},
                             {"available", prev_available}, {"digest", prev_->Digest()}};
  }
  nlohmann::json pending = nlohmann::json::object();
  for (const auto& [iteration, pending_it] : pending_observations_) {
    nlohmann::json arr = nlohmann::json::array();
    for (int32_t node : pending_it.SortedNodes()) {
      const Observation& o = pending_it.by_node[static_cast<size_t>(node)];
      arr.push_back({node, o.batch, o.local, o.remote, o.local_read_ms, o.remote_read_ms, o.compute_ms});
    }
    pending[std::to_string(iteration)] = std::move(arr);
  }
  j["pending_observations"] = std::move(pending);
  j["ledger"] = nlohmann::json::parse(ledger_.ToJson());
  if (!distrusted_.empty()) {  // absent until the first SourceDistrusted (older digests unchanged)
    j["distrusted"] = std::vector<bool>(distrusted_.begin(), distrusted_.end());
    j["distrusted_reads_committed"] = distrusted_reads_committed_;
  }
  // Only when set: states without quarantined samples digest as before.
  if (!quarantine_.samples().empty()) {
    j["quarantine"] = {
        {"samples", std::vector<uint64_t>(quarantine_.samples().begin(), quarantine_.samples().end())},
        {"unavailable", quarantine_.unavailable()}};
  }
  // Only when set: states without evictions or held-out samples digest as before.
  if (!evicted_.empty()) {
    j["evicted"] = std::vector<bool>(evicted_.begin(), evicted_.end());
    j["lost_to_eviction"] = lost_to_eviction_;
  }
  if (abandoned_at_iteration_ >= 0) {
    j["held_out"] = held_out_;
    j["abandoned_at_iteration"] = abandoned_at_iteration_;
  }
  return j.dump();
}

uint64_t SchedulerState::Digest() const {
  return Fnv1a(ToJson());
}

}  // namespace loft::sched
