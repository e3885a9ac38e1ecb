#include "edge_agent/model_trainer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "cache/idx_reader.h"
#include "edge_agent/ring_bytes.h"
#include "edge_agent/ring_round.h"
#include "edge_agent/round_retry.h"
#include "models/checkpoint.h"
#include "models/ring_allreduce.h"
#include "models/state_hash.h"
#include "preprocess/jpeg_codec.h"
#include "preprocess/preprocessor.h"

// OpenBLAS (the build requires BLA_VENDOR OpenBLAS): agents share the
// machine's cores, so each uses one BLAS thread.
extern "C" void openblas_set_num_threads(int num_threads);

namespace loft::agent {
namespace {

constexpr uint8_t kStatePhase =
    0xFD;  // request: [i64 want_round]; answer: [i64 last_round][u64 hash][checkpoint]

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

ModelTrainer::~ModelTrainer() = default;

StatusOr<std::unique_ptr<ModelTrainer>> ModelTrainer::Create(const ClusterSpec& spec,
                                                             ModelTrainerOptions options) {
  if (options.node < 0 || options.node >= spec.num_nodes()) {
    return InvalidArgument("model trainer: node " + std::to_string(options.node) + " is not in the spec");
  }
  std::unique_ptr<ModelTrainer> t(new ModelTrainer());
  t->options_ = options;
  openblas_set_num_threads(1);
  LOFT_ASSIGN_OR_RETURN(models::ModelKind kind, models::ParseModelKind(spec.training.model));
  LOFT_ASSIGN_OR_RETURN(t->model_, models::MakeModel(kind, models::Device::kCpu));
  t->model_->Init(spec.training.seed);
  LOFT_ASSIGN_OR_RETURN(models::SgdOptions so, SgdOptionsFromSpec(spec.training));
  LOFT_ASSIGN_OR_RETURN(models::Sgd sgd, models::Sgd::Create(so, t->model_->num_params()));
  t->sgd_.emplace(std::move(sgd));
  auto red = ReducerFor(spec.training.aggregation);
  if (!red.ok()) return red.status().WithContext("training.aggregation");
  t->reducer_ = *red;
  const NodeSpec& me = spec.nodes[options.node];
  t->byzantine_ = me.byzantine;
  t->byzantine_scale_ = me.byzantine_scale;
  t->rng_.seed(spec.training.seed * 1000003u + static_cast<uint64_t>(options.node));
  t->grad_.assign(static_cast<size_t>(t->model_->num_params()), 0.0f);
  t->views_ = std::make_unique<ViewBook>(ViewBookOptions{options.node, options.view_wait_ms, options.stop});
  t->offences_ = RingOffenceLog(RingGuardOptions{spec.training.byzantine_tolerance});
  t->tolerance_ = spec.training.byzantine_tolerance;
  t->global_batch_ = static_cast<double>(spec.training.global_batch);
  t->num_nodes_ = spec.num_nodes();
  t->delta_ = spec.training.exchange.period_auto || spec.training.exchange.period > 1;
  auto compression = models::ParseCompression(spec.training.exchange.compression);
  if (!compression.ok()) return compression.status().WithContext("training.exchange.compression");
  t->compression_ = *compression;
  if (t->delta_) t->StartRound();

  auto test = cache::LoadFashionMnist(options.test_data_dir, "test");
  if (!test.ok()) return test.status().WithContext("model trainer: test set");
  if (test->rows * test->cols != t->model_->input_dim()) {
    return InvalidArgument("model trainer: test images have " + std::to_string(test->rows * test->cols) +
                           " pixels, the model expects " + std::to_string(t->model_->input_dim()));
  }
  t->test_images_ = std::move(test->images);
  t->test_labels_ = std::move(test->labels);
  if (spec.dataset.encoding == DatasetEncoding::kJpeg) LOFT_RETURN_IF_ERROR(t->EncodeTestSet(spec));

  zmq::context_t* ctx = options.context;
  if (ctx == nullptr) {
    if (options.curve_own) return InvalidArgument("model trainer: CURVE needs the agent's context (ZAP)");
    t->ctx_ = std::make_unique<zmq::context_t>(1);
    ctx = t->ctx_.get();
  }
  LOFT_ASSIGN_OR_RETURN(t->transport_,
                        ZmqTransport::Create(ctx, RingTransportOptions(options, spec.num_nodes())));
  ModelTrainer* self = t.get();
  t->transport_->SetRequestHandler(kStatePhase, [self](int from, uint64_t tag, std::span<const std::byte>) {
    return self->ServeState(from, tag);
  });
  // The ring follows the membership view: an evicted node is not heard.
  t->transport_->SetSenderCheck(
      [self](int from, uint32_t view, bool request) { return self->views_->MayRing(from, view, request); });
  spdlog::info(
      "training {} ({} params, aggregation {}, lr {} ({} schedule), momentum {}{}); ring endpoint {} ({})",
      t->model_->name(), t->model_->num_params(), spec.training.aggregation, so.learning_rate,
      spec.training.lr_schedule.kind, so.momentum, me.byzantine == ByzantineKind::kNone ? "" : ", BYZANTINE",
      t->ring_endpoint(), options.curve_own ? "CURVE" : "plain TCP");
  return t;
}

void ModelTrainer::OnView(const v1::MembershipView& view) {
  views_->OnView(view);
}

StatusOr<RoundHellos> ModelTrainer::ExchangeHellos(const RingMembers& m, uint32_t round,
                                                   const MemberHello& mine) {
  HelloExchangeOptions o;
  o.self = options_.node;
  o.last_round = last_round_;
  o.ring_timeout_ms = options_.ring_timeout_ms;
  o.past_grace_ms = options_.past_grace_ms;
  return agent::ExchangeHellos(transport_.get(), &offences_, o, m, round, mine);
}

std::vector<std::byte> ModelTrainer::ServeState(int from, uint64_t tag) {
  std::vector<std::byte> out;
  // A delta exchange serves the agreed state (the round's start), not this
  // member's local steps: install it for the encoding, then put them back
  // (this runs on the trainer's thread, inside its ring waits).
  std::vector<float> local_params, local_velocity;
  int64_t local_step = 0;
  if (delta_) {
    local_params.assign(model_->params().begin(), model_->params().end());
    local_velocity.assign(sgd_->velocity().begin(), sgd_->velocity().end());
    local_step = sgd_->step();
    std::copy(anchor_.begin(), anchor_.end(), model_->params().begin());
    (void)sgd_->Restore(last_round_ + 1, anchor_velocity_);
  }
  auto enc = models::EncodeCheckpoint(*model_, *sgd_);
  if (delta_) {
    std::copy(local_params.begin(), local_params.end(), model_->params().begin());
    (void)sgd_->Restore(local_step, local_velocity);
  }
  if (!enc.ok()) {
    serve_log_.Log(spdlog::level::warn, "serve_state", std::to_string(from), std::chrono::steady_clock::now(),
                   "cannot serve state to node {}: {}", from, enc.status().ToString());
    return out;  // an empty answer: the requester tries another holder
  }
  AppendLe(&out, last_round_);
  AppendLe(&out, AgreedHash());
  const auto* p = reinterpret_cast<const std::byte*>(enc->data());
  out.insert(out.end(), p, p + enc->size());
  serve_log_.Log(spdlog::level::info, "serve_state", std::to_string(from), std::chrono::steady_clock::now(),
                 "served state (round {}, {} bytes) to node {} for round {}", last_round_, out.size(), from,
                 models::TagRound(tag));
  return out;
}

Status ModelTrainer::SyncState(const RingMembers& m, uint32_t round, int64_t want_round, uint64_t want_hash,
                               const std::vector<int>& holders) {
  const uint64_t tag = models::MakeTag(m.view, round, kStatePhase);
  std::vector<std::byte> req;
  AppendLe(&req, want_round);
  Status last = Unavailable("no member holds the state");
  for (int h : holders) {
    auto ans = transport_->Request(h, tag, req, options_.state_timeout_ms);
    if (!ans.ok()) {
      last = ans.status().WithContext("state from node " + std::to_string(h));
      spdlog::warn("state transfer: {}", last.ToString());
      continue;
    }
    Status st = AdoptState(*ans, want_round, want_hash, "node " + std::to_string(h), model_.get(), &*sgd_);
    if (!st.ok()) {
      last = st;
      continue;  // another holder (or the round fails)
    }
    spdlog::info("state transfer: took round {} (hash {:016x}, optimizer step {}) from node {}", want_round,
                 want_hash, sgd_->step(), h);
    last_round_ = want_round;
    return OkStatus();
  }
  return last;
}

// Evaluation sees what training sees: with encoding jpeg every test image
// goes through ingest's encoder (same image_size and quality) and the
// agents' decode path (Preprocessor, augment none: evaluation does not
// augment), so the accuracy measures the model on JPEG-degraded inputs of
// the same kind rather than on pixels no agent ever trains on.
Status ModelTrainer::EncodeTestSet(const ClusterSpec& spec) {
  LOFT_ASSIGN_OR_RETURN(preprocess::PreprocessOptions po, preprocess::PreprocessOptions::FromSpec(spec));
  po.augment = AugmentKind::kNone;
  const auto dim = static_cast<size_t>(model_->input_dim());
  if (static_cast<size_t>(po.input_size()) != dim)
    return InvalidArgument("model trainer: preprocessed inputs have " + std::to_string(po.input_size()) +
                           " floats, the model expects " + std::to_string(dim));
  const size_t n = test_labels_.size();
  const int side = po.input_width;
  preprocess::JpegEncoder encoder;
  preprocess::Preprocessor pre(po);
  test_inputs_.resize(n * dim);
  for (size_t i = 0; i < n; ++i) {
    LOFT_ASSIGN_OR_RETURN(std::span<const uint8_t> jpeg,
                          encoder.EncodeGrey(std::span<const uint8_t>(test_images_).subspan(i * dim, dim),
                                             side, side, spec.dataset.image_size, spec.dataset.jpeg_quality));
    LOFT_RETURN_IF_ERROR(pre.Run(i, /*epoch=*/0, jpeg, std::span<float>(test_inputs_).subspan(i * dim, dim))
                             .WithContext("model trainer: test set"));
  }
  test_images_.clear();
  test_images_.shrink_to_fit();
  spdlog::info("test set: {} images JPEG-encoded ({}x{}, quality {}) and decoded like the training records",
               n, spec.dataset.image_size, spec.dataset.image_size, spec.dataset.jpeg_quality);
  return OkStatus();
}

double ModelTrainer::ComputeGradient(size_t n) {
  const size_t dim = static_cast<size_t>(model_->input_dim());
  models::BatchView bv{std::span<const uint8_t>(images_.data(), inputs_.empty() ? n * dim : 0),
                       std::span<const uint8_t>(labels_.data(), n),
                       std::span<const float>(inputs_.data(), inputs_.empty() ? 0 : n * dim)};
  double loss = std::numeric_limits<double>::quiet_NaN();
  auto l = model_->LossAndGradient(bv, grad_);
  if (l.ok()) {
    loss = *l;
  } else {
    // Diverged parameters: contribute a NaN gradient (robust reducers drop it).
    std::fill(grad_.begin(), grad_.end(), std::numeric_limits<float>::quiet_NaN());
  }
  if (!delta_) Corrupt(grad_);
  return loss;
}

double ModelTrainer::LocalStep(size_t n, int64_t view) {
  const double loss = ComputeGradient(n);
  // The member's share of the global batch (see the header).
  const int live = views_->LiveCount(view);
  const auto scale = static_cast<float>(LocalStepScale(n, global_batch_, live > 0 ? live : num_nodes_));
  if (scale != 1.0f)
    for (float& g : grad_) g *= scale;
  Status st = sgd_->Step(model_->params(), grad_);
  if (!st.ok()) spdlog::warn("local step refused: {}", st.ToString());  // parameters unchanged
  round_samples_ += static_cast<double>(n);
  return loss;
}

void ModelTrainer::StartRound(bool keep_samples) {
  const auto p = model_->params();
  anchor_.assign(p.begin(), p.end());
  const auto v = sgd_->velocity();
  anchor_velocity_.assign(v.begin(), v.end());
  if (!keep_samples) round_samples_ = 0;
}

uint64_t ModelTrainer::AgreedHash() const {
  // What ServeState serves: the round's start in a delta exchange.
  if (delta_) return models::TrainingStateHash(anchor_, last_round_ + 1, anchor_velocity_);
  return models::TrainingStateHash(*model_, *sgd_);
}

double ModelTrainer::ContributionSamples(size_t n) const {
  return delta_ ? round_samples_ : static_cast<double>(n) + carry_.samples();
}

void ModelTrainer::FillDelta(std::vector<float>* data) {
  const auto p = model_->params();
  data->resize(p.size());
  for (size_t i = 0; i < p.size(); ++i) (*data)[i] = p[i] - anchor_[i];
  Corrupt(*data);
}

void ModelTrainer::ApplyDelta(uint32_t round, const std::vector<float>& delta) {
  // The optimizer's step after this round: one per planned step so far,
  // as the gradient exchange counts them, so the learning-rate schedule
  // runs on steps whatever the period.
  const int64_t steps_before = last_round_ + 1, steps_after = static_cast<int64_t>(round) + 1;
  double lr_sum = 0;
  for (int64_t s = steps_before; s < steps_after; ++s) lr_sum += sgd_->LearningRateAt(s);
  const bool finite = std::all_of(delta.begin(), delta.end(), [](float v) { return std::isfinite(v); });
  auto p = model_->params();
  std::vector<float> velocity(p.size(), 0.0f);
  if (finite && lr_sum > 0) {
    for (size_t i = 0; i < p.size(); ++i) {
      p[i] = anchor_[i] + delta[i];
      velocity[i] = static_cast<float>(-static_cast<double>(delta[i]) / lr_sum);
    }
  } else {
    // Every member got the same vector and refuses it alike: the round's
    // start stays the state (as a refused gradient leaves it).
    spdlog::warn("round {}: aggregate delta refused (not finite)", round);
    std::copy(anchor_.begin(), anchor_.end(), p.begin());
    velocity = anchor_velocity_;
  }
  Status st = sgd_->Restore(steps_after, velocity);
  if (!st.ok()) spdlog::warn("round {}: optimizer state not restored: {}", round, st.ToString());
  StartRound();
}

Status ModelTrainer::Attempt(const RingMembers& m, uint32_t round, size_t n, uint64_t partition_id,
                             bool reports, double* loss, RoundResult* res, std::vector<float>* data) {
  // 1. Exchange hellos.
  const std::pair<int64_t, uint64_t> mine{last_round_, AgreedHash()};
  MemberHello hello;
  hello.b = ContributionSamples(n);
  hello.last_round = mine.first;
  hello.hash = mine.second;
  hello.reports = reports;
  hello.partition = n > 0 ? partition_id : 0;
  LOFT_ASSIGN_OR_RETURN(RoundHellos x, ExchangeHellos(m, round, hello));
  // 1b. Members past this round that finished it (an earlier attempt this
  // node planned and took part in, whose end it missed): take their result.
  if (!x.past.empty() && last_plan_) {
    if (auto done = FindFinishedElsewhere(x, round, tolerance_ + 1)) {
      spdlog::info(
          "round {}: {} member(s) past it finished it (hash {:016x}) in an attempt this node took part in: "
          "taking their result",
          round, done->holders.size(), done->hash);
      LOFT_RETURN_IF_ERROR(SyncState(m, round, round, done->hash, done->holders));
      res->adopted = true;
      res->applied = last_plan_->applied;
      res->evaluator = last_plan_->evaluator;
      res->members = last_plan_members_;
      return OkStatus();
    }
  }
  // 2. State check: fetch the agreed state if this member does not hold it.
  const SyncDecision sync = DecideSync(options_.node, x, mine);
  if (sync.needed) {
    spdlog::info(
        "round {}: this node holds round {} (hash {:016x}), {} of {} members hold round {} "
        "(hash {:016x}): fetching their state",
        round, mine.first, mine.second, sync.agreeing, m.nodes.size(), sync.target.first, sync.target.second);
    LOFT_RETURN_IF_ERROR(SyncState(m, round, sync.target.first, sync.target.second, sync.holders));
    if (delta_) {
      StartRound(/*keep_samples=*/true);  // the taken state starts the round: a zero delta (see the header)
      res->delta_dropped = true;
    } else if (n > 0) {
      *loss = ComputeGradient(n);  // the gradient at the agreed parameters
    }
  }
  if (RoundCarried(last_round_, round)) {
    res->carried = true;  // the others finished this round already
    return OkStatus();
  }
  // 3. All-reduce this node's mean gradient over its n + carried samples,
  // among the members not past the round.
  const RoundHellos px = x.past.empty() ? x : Participants(x);
  if (!x.past.empty()) {
    spdlog::info("round {}: all-reducing among the {} member(s) not past it (view {})", round,
                 px.members.size(), m.view);
  }
  // trimmed_mean caps each member's weight at an even share of the samples
  // the exchange holds (models::AggregationWeights): the global batch per
  // step, times the round's steps for a delta exchange.
  const double steps = delta_ ? static_cast<double>(static_cast<int64_t>(round) - last_round_) : 1.0;
  LOFT_ASSIGN_OR_RETURN(RoundPlan plan,
                        PlanRound(options_.node, round, px, reducer_, global_batch_ * std::max(1.0, steps)));
  last_plan_ = plan;  // what a member finishing this attempt without this node applies
  last_plan_members_ = static_cast<int>(px.members.size());
  if (delta_) {
    FillDelta(data);
  } else {
    carry_.Mix(n, grad_, data);
  }
  models::AllReduceOptions ao;
  ao.reducer = plan.reducer;
  ao.timeout_ms = options_.ring_timeout_ms;
  ao.tolerance = tolerance_;
  if (byzantine_ == ByzantineKind::kChunkGarbage || byzantine_ == ByzantineKind::kChunkScale)
    ao.corrupt_owned_chunk = [this](std::span<float> c) { CorruptChunk(c); };
  ao.compression = compression_;
  // Error feedback (int8): what rounding kept from this member's last
  // contribution goes into this one; the residual is replaced only once
  // the all-reduce succeeded (ring_round.h CompressedAllReduce).
  LOFT_RETURN_IF_ERROR(CompressedAllReduce(transport_.get(), ao, models::RingView{m.view, px.members}, round,
                                           *data, plan.weights, &offences_, &residual_));
  res->members = static_cast<int>(px.members.size());
  res->applied = std::move(plan.applied);
  res->evaluator = plan.evaluator;
  return OkStatus();
}

StatusOr<ModelTrainer::RoundResult> ModelTrainer::RunRound(int64_t view, uint32_t round, size_t n,
                                                           uint64_t partition_id, bool reports,
                                                           double* loss) {
  auto t0 = std::chrono::steady_clock::now();
  RoundResult res;
  std::vector<float> data;
  last_plan_.reset();
  auto connect = [this](const RingMembers& m) { return transport_->SetPeers(m.endpoints); };
  auto attempt = [&](const RingMembers& m) {
    transport_->SetAbortCheck([this, &m] { return views_->CheckAlive(m); });
    Status st = Attempt(m, round, n, partition_id, reports, loss, &res, &data);
    transport_->SetAbortCheck(nullptr);
    return st;
  };
  LOFT_ASSIGN_OR_RETURN(RetryResult rr,
                        RunWithViewRetry(views_.get(), options_.node, view, round, connect, attempt));
  if (res.carried) res.members = static_cast<int>(rr.members.nodes.size());
  res.attempts = rr.attempts;
  res.allreduce_ms = MsSince(t0);
  if (res.adopted) {
    carry_.Clear();  // the carried samples were in the contribution the result holds
    if (delta_) StartRound();
    return res;  // SyncState installed the round's parameters and optimizer state
  }
  if (res.carried) {
    if (delta_) {
      StartRound();  // the state taken is past this round: this member's steps in it are lost
    } else {
      carry_.Add(n, grad_);  // keep this node's samples for the next round
    }
    return res;
  }
  carry_.Clear();
  if (delta_) {
    ApplyDelta(round, data);
    last_round_ = round;
    return res;
  }
  Status step = sgd_->Step(model_->params(), data);
  if (!step.ok()) {
    // Every member got the same non-finite vector and refuses it alike, so
    // parameters stay identical; the run goes on and shows the divergence.
    spdlog::warn("round {}: update refused: {}", round, step.ToString());
    *loss = std::numeric_limits<double>::quiet_NaN();
  }
  last_round_ = round;
  return res;
}

Status ModelTrainer::DecodeBatch(const Batch& batch) {
  const int dim = model_->input_dim();
  const size_t n = batch.samples.size();
  if (n == 0) return InvalidArgument("partition " + std::to_string(batch.partition_id) + " has no samples");
  const bool floats = !batch.inputs.empty();
  if (floats) {
    if (batch.inputs.size() != n * static_cast<size_t>(dim))
      return InvalidArgument("partition " + std::to_string(batch.partition_id) + " has " +
                             std::to_string(batch.inputs.size()) + " preprocessed floats for " +
                             std::to_string(n) + " samples of " + std::to_string(dim));
    inputs_.assign(batch.inputs.begin(), batch.inputs.end());
    images_.clear();
  } else {
    inputs_.clear();
    images_.resize(n * static_cast<size_t>(dim));
  }
  labels_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const cache::Sample& s = batch.samples[i];
    if (!floats && s.payload.size() != static_cast<size_t>(dim)) {
      return DataLoss("sample " + std::to_string(s.id) + " has " + std::to_string(s.payload.size()) +
                      " bytes, the model expects " + std::to_string(dim));
    }
    if (s.label >= model_->num_classes())
      return DataLoss("sample " + std::to_string(s.id) + " has label " + std::to_string(s.label));
    if (!floats)
      std::memcpy(images_.data() + i * static_cast<size_t>(dim), s.payload.data(), static_cast<size_t>(dim));
    labels_[i] = static_cast<uint8_t>(s.label);
  }
  if (batch.iteration < 0 || batch.iteration > std::numeric_limits<uint32_t>::max())
    return OutOfRange("iteration " + std::to_string(batch.iteration) +
                      " does not fit the ring's 32-bit round");
  return OkStatus();
}

bool ModelTrainer::EvaluateNow(int64_t iteration, int64_t prev_round) const {
  if (iteration == options_.last_iteration) return true;
  const int64_t e = options_.eval_every;
  if (e <= 0) return false;
  // A delta exchange evaluates at the first exchange at or after each
  // multiple of eval_every (local steps hold no agreed model).
  if (delta_) return (iteration + 1) / e > (prev_round + 1) / e;
  return (iteration + 1) % e == 0;
}

StatusOr<double> ModelTrainer::Compute(const Batch& batch) {
  report_.reset();
  const size_t n = batch.samples.size();
  if (Status decoded = DecodeBatch(batch); !decoded.ok()) {
    // The ring must not wait for this member's round.
    Skip(batch.view, batch.iteration, batch.local_step);
    return decoded;
  }
  const uint32_t round = static_cast<uint32_t>(batch.iteration);
  offences_.guard().Planned(batch.iteration);
  const int64_t prev_round = last_round_;
  double loss = delta_ ? LocalStep(n, batch.view) : ComputeGradient(n);
  v1::TrainingReport rep;
  bool evaluator = false, exchanged = false;
  if (delta_ && batch.local_step) {
    // A local step of the open round: no exchange after it.
  } else if (batch.iteration <= last_round_) {
    // This round is already all-reduced here (a second partition of the
    // iteration, or one that came after a weight-0 join): carry it (a
    // delta exchange took its step already: it is in the next round).
    if (!delta_) carry_.Add(n, grad_);
    rep.set_in_next_round(delta_);
    spdlog::info("partition {} of round {} arrived after the round: its {} samples go into the next round",
                 batch.partition_id, round, n);
  } else {
    LOFT_ASSIGN_OR_RETURN(RoundResult r,
                          RunRound(batch.view, round, n, batch.partition_id, /*reports=*/true, &loss));
    rep.set_allreduce_ms(r.allreduce_ms);
    rep.set_ring_members(r.members);
    rep.set_ring_attempts(r.attempts);
    rep.set_delta_dropped(delta_ && r.delta_dropped);
    if (!r.carried) {
      for (const auto& [id, node] : r.applied) {
        rep.add_applied_partitions(id);
        rep.add_applied_nodes(node);
      }
    }
    evaluator = r.evaluator;
    exchanged = true;
  }
  rep.set_loss(loss);
  // The agreed parameters: after a local step, the round's start.
  rep.set_param_hash(AgreedHash());
  if (exchanged && evaluator && EvaluateNow(batch.iteration, prev_round)) {
    auto acc = model_->Evaluate(models::BatchView{test_images_, test_labels_, test_inputs_});
    if (acc.ok()) {
      rep.set_evaluated(true);
      rep.set_test_accuracy(*acc);
      spdlog::info("iteration {}: test accuracy {:.4f} (loss {:.4f})", batch.iteration, *acc, loss);
    } else {
      spdlog::warn("iteration {}: evaluation failed: {}", batch.iteration, acc.status().ToString());
    }
  }
  if (byzantine_ == ByzantineKind::kPhantomRound) AnnouncePhantoms(batch.view);
  spdlog::debug("iteration {}: loss {:.4f} hash {:016x} all-reduce {:.1f} ms", batch.iteration, loss,
                rep.param_hash(), rep.allreduce_ms());
  report_ = rep;
  return loss;
}

void ModelTrainer::Skip(int64_t view, int64_t iteration, bool local_step) {
  offences_.guard().Planned(iteration);
  if (delta_ && local_step) return;  // no exchange after a local step
  if (iteration <= last_round_ || iteration > std::numeric_limits<uint32_t>::max() || view < 0) return;
  const auto round = static_cast<uint32_t>(iteration);
  spdlog::info("partition of round {} failed before compute: joining the round with weight 0", round);
  double loss = 0;
  auto r = RunRound(view, round, 0, /*partition_id=*/0, /*reports=*/false, &loss);
  if (!r.ok())
    spdlog::warn("weight-0 join of round {} (view {}) failed: {}", round, view, r.status().ToString());
}

void ModelTrainer::Offend(int from, const char* reason) {
  offences_.Offend(from, reason);
}

std::vector<RingOffence> ModelTrainer::TakeOffences() {
  return offences_.Take();
}

void ModelTrainer::Idle() {
  const std::optional<IdleJoin> join = ScanIdleJoin(transport_.get(), views_.get(), &offences_, last_round_,
                                                    options_.idle_join_grace_ms, &idle_);
  if (!join) return;
  spdlog::info(
      "{} member(s) started round {} (view {}) and this node has no partition: joining with weight 0",
      join->announcers, join->round, join->view);
  double loss = 0;
  auto r = RunRound(join->view, join->round, 0, /*partition_id=*/0, /*reports=*/false, &loss);
  if (!r.ok()) {
    spdlog::warn("weight-0 join of round {} (view {}) failed: {}", join->round, join->view,
                 r.status().ToString());
    idle_.Refuse(join->key);
  }
}

std::optional<v1::TrainingReport> ModelTrainer::TakeReport() {
  auto r = std::move(report_);
  report_.reset();
  return r;
}

}  // namespace loft::agent
