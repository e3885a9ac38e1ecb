#include "edge_agent/model_trainer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "cache/idx_reader.h"
#include "models/checkpoint.h"
#include "models/ring_allreduce.h"

// OpenBLAS (the build requires BLA_VENDOR OpenBLAS): agents share the
// machine's cores, so each uses one BLAS thread.
extern "C" void openblas_set_num_threads(int num_threads);

namespace loft::agent {
namespace {

constexpr uint8_t kWeightsPhase = 0xFE;  // [f64 b][i64 last_round][u64 hash][u8 reports][u64 partition]
constexpr uint8_t kStatePhase =
    0xFD;  // request: [i64 want_round]; answer: [i64 last_round][u64 hash][checkpoint]
constexpr size_t kExchangeBytes = 8 + 8 + 8 + 1 + 8;

template <typename T>
void PutLe(std::vector<std::byte>* out, T v) {
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  out->insert(out->end(), p, p + sizeof v);
}
template <typename T>
T GetLe(std::span<const std::byte> in, size_t at) {
  T v{};
  std::memcpy(&v, in.data() + at, sizeof v);
  return v;
}

StatusOr<models::ReducerOptions> ReducerFor(const std::string& aggregation) {
  std::string name = aggregation;
  if (name == "krum") name = "multi_krum";
  if (name == "centered_clip") name = "centered_clipping";
  models::ReducerOptions r;
  LOFT_ASSIGN_OR_RETURN(r.kind, models::ParseReducerKind(name));
  return r;
}

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::pair<int64_t, uint64_t> AgreedState(std::span<const int64_t> last_round,
                                         std::span<const uint64_t> hash) {
  // A member with no progress (a restarted agent: round -1; a malformed
  // exchange: below that) votes only when nobody has progress: a majority
  // of restarted agents must not roll a survivor back to the initial state.
  const size_t n = std::min(last_round.size(), hash.size());
  const bool progress =
      std::any_of(last_round.begin(), last_round.begin() + static_cast<ptrdiff_t>(n),
                  [](int64_t r) { return r >= 0 && r <= int64_t{std::numeric_limits<uint32_t>::max()}; });
  std::map<std::pair<int64_t, uint64_t>, int> votes;
  for (size_t i = 0; i < n; ++i) {
    // Rounds are 32-bit (ring tags): a later "round" is a lie that would
    // make this agent treat every later partition as already done.
    if (last_round[i] > int64_t{std::numeric_limits<uint32_t>::max()}) continue;
    if (!progress || last_round[i] >= 0) ++votes[{last_round[i], hash[i]}];
  }
  std::pair<int64_t, uint64_t> target{-1, 0};
  int best = 0;
  for (const auto& [k, c] : votes) {
    if (c > best || (c == best && k.first > target.first)) {
      best = c;
      target = k;
    }
  }
  return target;
}

Status AdoptState(std::span<const std::byte> answer, int64_t want_round, uint64_t want_hash,
                  const std::string& source, models::Model* model, models::Sgd* sgd) {
  if (answer.size() < 16)
    return DataLoss("state from " + source + ": " + std::to_string(answer.size()) + " bytes");
  const int64_t lr = GetLe<int64_t>(answer, 0);
  const uint64_t hash = GetLe<uint64_t>(answer, 8);
  if (lr != want_round || hash != want_hash) {
    return FailedPrecondition(source + " now holds round " + std::to_string(lr) + ", not the agreed round " +
                              std::to_string(want_round));
  }
  std::span<const char> ck(reinterpret_cast<const char*>(answer.data()) + 16, answer.size() - 16);
  // Decode installs what passes its own checks; keep ours to put back if
  // the result is not the agreed state.
  const std::vector<float> own_params(model->params().begin(), model->params().end());
  const std::vector<float> own_velocity(sgd->velocity().begin(), sgd->velocity().end());
  const int64_t own_step = sgd->step();
  LOFT_RETURN_IF_ERROR(models::DecodeCheckpoint(ck, "state from " + source, model, sgd));
  Status bad;
  if (models::ParameterHash(model->params()) != want_hash) {
    bad = DataLoss("state from " + source + " does not match its hash");
  } else if (want_round < 0 ? sgd->step() != 0 : sgd->step() - 1 > want_round) {
    // One optimizer step per applied round at most (the hash does not cover it).
    bad = DataLoss("state from " + source + ": optimizer step " + std::to_string(sgd->step()) +
                   " is impossible after round " + std::to_string(want_round));
  }
  if (bad.ok()) return OkStatus();
  std::copy(own_params.begin(), own_params.end(), model->params().begin());
  Status restored = sgd->Restore(own_step, own_velocity);
  if (!restored.ok()) return restored.WithContext(bad.ToString());
  return bad;
}

StatusOr<models::SgdOptions> SgdOptionsFromSpec(const TrainingSpec& tr) {
  models::SgdOptions so;
  so.learning_rate = tr.learning_rate;
  so.momentum = tr.momentum;
  const auto& ls = tr.lr_schedule;
  auto kind = models::ParseLrSchedule(ls.kind);
  if (!kind.ok()) return kind.status().WithContext("training.lr_schedule.kind");
  so.schedule = *kind;
  so.step_every = ls.step_every;
  so.step_gamma = ls.gamma;
  so.total_steps = ls.total_steps > 0 ? ls.total_steps : tr.iterations;
  so.min_learning_rate = ls.min_learning_rate;
  so.warmup_steps = ls.warmup_steps;
  if (so.schedule != models::LrSchedule::kCosine && so.total_steps == 0) so.total_steps = 1;
  Status st = so.Validate();
  if (!st.ok()) return st.WithContext("training.lr_schedule");
  return so;
}

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

  auto test = cache::LoadFashionMnist(options.test_data_dir, "test");
  if (!test.ok()) return test.status().WithContext("model trainer: test set");
  if (test->rows * test->cols != t->model_->input_dim()) {
    return InvalidArgument("model trainer: test images have " + std::to_string(test->rows * test->cols) +
                           " pixels, the model expects " + std::to_string(t->model_->input_dim()));
  }
  t->test_images_ = std::move(test->images);
  t->test_labels_ = std::move(test->labels);

  zmq::context_t* ctx = options.context;
  if (ctx == nullptr) {
    if (options.curve_own) return InvalidArgument("model trainer: CURVE needs the agent's context (ZAP)");
    t->ctx_ = std::make_unique<zmq::context_t>(1);
    ctx = t->ctx_.get();
  }
  ZmqTransportOptions to;
  to.rank = options.node;
  to.world_size = spec.num_nodes();
  to.bind = options.ring_bind;
  to.max_message_bytes = options.max_message_bytes;
  to.curve_own = options.curve_own;
  to.public_keys = options.public_keys;
  to.rank_names = options.rank_names;
  LOFT_ASSIGN_OR_RETURN(t->transport_, ZmqTransport::Create(ctx, to));
  ModelTrainer* self = t.get();
  t->transport_->SetRequestHandler(kStatePhase, [self](int from, uint64_t tag, std::span<const std::byte>) {
    return self->ServeState(from, tag);
  });
  spdlog::info(
      "training {} ({} params, aggregation {}, lr {} ({} schedule), momentum {}{}); ring endpoint {} ({})",
      t->model_->name(), t->model_->num_params(), spec.training.aggregation, so.learning_rate,
      spec.training.lr_schedule.kind, so.momentum, me.byzantine == ByzantineKind::kNone ? "" : ", BYZANTINE",
      t->ring_endpoint(), options.curve_own ? "CURVE" : "plain TCP");
  return t;
}

void ModelTrainer::OnView(const v1::MembershipView& view) {
  {
    std::lock_guard lock(mu_);
    views_[view.view()] = view;
    while (views_.size() > 64) views_.erase(views_.begin());
  }
  cv_.notify_all();
}

template <typename Pred>
bool ModelTrainer::WaitViews(std::unique_lock<std::mutex>& lock, Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.view_wait_ms);
  while (!pred()) {
    if (Stopping() || std::chrono::steady_clock::now() >= deadline) return pred();
    cv_.wait_for(lock, std::chrono::milliseconds(100), pred);
  }
  return true;
}

StatusOr<ModelTrainer::Members> ModelTrainer::ViewMembers(int64_t v) {
  std::unique_lock lock(mu_);
  if (!WaitViews(lock, [&] { return views_.count(v) > 0; })) {
    if (Stopping()) return Aborted("shutting down");
    return Unavailable("membership view " + std::to_string(v) + " never arrived within " +
                       std::to_string(options_.view_wait_ms) + " ms");
  }
  const v1::MembershipView& mv = views_.at(v);
  if (v < 0 || v >= (int64_t{1} << 24)) return OutOfRange("view " + std::to_string(v) + " exceeds 2^24");
  Members m;
  m.view = static_cast<uint32_t>(v);
  std::map<int, std::string> eps;
  for (int i = 0; i < mv.live_nodes_size(); ++i) {
    int n = mv.live_nodes(i);
    m.nodes.push_back(n);
    if (i < mv.ring_endpoints_size()) eps[n] = mv.ring_endpoints(i);
  }
  std::sort(m.nodes.begin(), m.nodes.end());
  lock.unlock();
  if (std::find(m.nodes.begin(), m.nodes.end(), options_.node) == m.nodes.end()) {
    return FailedPrecondition("this node is not live in view " + std::to_string(v));
  }
  eps.erase(options_.node);
  for (int n : m.nodes) {
    if (n != options_.node && eps[n].empty())
      return Unavailable("node " + std::to_string(n) + " has no ring endpoint in view " + std::to_string(v));
  }
  LOFT_RETURN_IF_ERROR(transport_->SetPeers(eps));
  m.endpoints = std::move(eps);
  return m;
}

Status ModelTrainer::CheckMembersAlive(const Members& m) {
  if (Stopping()) return Aborted("shutting down");
  std::lock_guard lock(mu_);
  if (views_.empty() || views_.rbegin()->first <= static_cast<int64_t>(m.view)) return OkStatus();
  const v1::MembershipView& nv = views_.rbegin()->second;
  for (int n : m.nodes) {
    if (n == options_.node) continue;
    int at = -1;
    for (int i = 0; i < nv.live_nodes_size(); ++i) {
      if (nv.live_nodes(i) == n) at = i;
    }
    if (at < 0)
      return Unavailable("node " + std::to_string(n) + " is not live in view " + std::to_string(nv.view()));
    auto it = m.endpoints.find(n);
    if (at < nv.ring_endpoints_size() && it != m.endpoints.end() && nv.ring_endpoints(at) != it->second) {
      return Unavailable("node " + std::to_string(n) + " restarted (new ring endpoint in view " +
                         std::to_string(nv.view()) + ")");
    }
  }
  return OkStatus();
}

std::optional<v1::MembershipView> ModelTrainer::NewerView(int64_t v) {
  std::unique_lock lock(mu_);
  auto newer = [&] { return !views_.empty() && views_.rbegin()->first > v; };
  if (!WaitViews(lock, newer)) return std::nullopt;
  return views_.rbegin()->second;
}

StatusOr<ModelTrainer::Exchange> ModelTrainer::ExchangeState(const Members& m, uint32_t round, double b,
                                                             bool reports, uint64_t partition_id) {
  const uint64_t tag = models::MakeTag(m.view, round, kWeightsPhase);
  const uint64_t hash = models::ParameterHash(model_->params());
  std::vector<std::byte> buf;
  PutLe(&buf, b);
  PutLe(&buf, last_round_);
  PutLe(&buf, hash);
  PutLe(&buf, static_cast<uint8_t>(reports ? 1 : 0));
  PutLe(&buf, partition_id);
  for (int n : m.nodes) {
    if (n != options_.node) LOFT_RETURN_IF_ERROR(transport_->Send(n, tag, buf));
  }
  Exchange ex;
  for (int n : m.nodes) {
    double x = b;
    int64_t lr = last_round_;
    uint64_t h = hash;
    bool rep = reports;
    uint64_t pid = partition_id;
    if (n != options_.node) {
      LOFT_ASSIGN_OR_RETURN(auto bytes, transport_->Recv(n, tag, options_.ring_timeout_ms));
      if (bytes.size() != kExchangeBytes) {
        // Malformed: no weight, and a state nobody else holds.
        x = 0;
        lr = std::numeric_limits<int64_t>::min();
        h = 0;
        rep = false;
        pid = 0;
      } else {
        x = GetLe<double>(bytes, 0);
        lr = GetLe<int64_t>(bytes, 8);
        h = GetLe<uint64_t>(bytes, 16);
        rep = GetLe<uint8_t>(bytes, 24) != 0;
        pid = GetLe<uint64_t>(bytes, 25);
      }
      // A lying member cannot poison the weights with NaN or negatives.
      if (!std::isfinite(x) || x < 0) x = 0;
    }
    ex.b.push_back(x);
    ex.last_round.push_back(lr);
    ex.hash.push_back(h);
    ex.reports.push_back(rep);
    ex.partition.push_back(pid);
  }
  return ex;
}

std::vector<std::byte> ModelTrainer::ServeState(int from, uint64_t tag) {
  std::vector<std::byte> out;
  auto enc = models::EncodeCheckpoint(*model_, *sgd_);
  if (!enc.ok()) {
    spdlog::warn("cannot serve state to node {}: {}", from, enc.status().ToString());
    return out;  // an empty answer: the requester tries another holder
  }
  PutLe(&out, last_round_);
  PutLe(&out, models::ParameterHash(model_->params()));
  const auto* p = reinterpret_cast<const std::byte*>(enc->data());
  out.insert(out.end(), p, p + enc->size());
  spdlog::info("served state (round {}, {} bytes) to node {} for round {}", last_round_, out.size(), from,
               models::TagRound(tag));
  return out;
}

Status ModelTrainer::SyncState(const Members& m, uint32_t round, int64_t want_round, uint64_t want_hash,
                               const std::vector<int>& holders) {
  const uint64_t tag = models::MakeTag(m.view, round, kStatePhase);
  std::vector<std::byte> req;
  PutLe(&req, want_round);
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

void ModelTrainer::Corrupt(std::span<float> g) {
  switch (byzantine_) {
    case ByzantineKind::kNone:
    case ByzantineKind::kPoisonServe: return;  // attacks the data it serves, not its gradient
    case ByzantineKind::kSignFlip:
      for (float& x : g) x = static_cast<float>(-byzantine_scale_ * x);
      return;
    case ByzantineKind::kRandom: {
      std::normal_distribution<float> d(0.0f, static_cast<float>(byzantine_scale_));
      for (float& x : g) x = d(rng_);
      return;
    }
    case ByzantineKind::kNaN: std::fill(g.begin(), g.end(), std::numeric_limits<float>::quiet_NaN()); return;
  }
}

double ModelTrainer::ComputeGradient(size_t n) {
  const size_t dim = static_cast<size_t>(model_->input_dim());
  models::BatchView bv{std::span<const uint8_t>(images_.data(), n * dim),
                       std::span<const uint8_t>(labels_.data(), n)};
  double loss = std::numeric_limits<double>::quiet_NaN();
  auto l = model_->LossAndGradient(bv, grad_);
  if (l.ok()) {
    loss = *l;
  } else {
    // Diverged parameters: contribute a NaN gradient (robust reducers drop it).
    std::fill(grad_.begin(), grad_.end(), std::numeric_limits<float>::quiet_NaN());
  }
  Corrupt(grad_);
  return loss;
}

StatusOr<ModelTrainer::RoundResult> ModelTrainer::RunRound(int64_t view, uint32_t round, size_t n,
                                                           uint64_t partition_id, bool reports,
                                                           double* loss) {
  auto t0 = std::chrono::steady_clock::now();
  RoundResult res;
  LOFT_ASSIGN_OR_RETURN(Members m, ViewMembers(view));
  std::vector<float> data;
  while (true) {
    ++res.attempts;
    transport_->SetAbortCheck([this, &m] { return CheckMembersAlive(m); });
    Status st = [&]() -> Status {
      LOFT_ASSIGN_OR_RETURN(Exchange ex, ExchangeState(m, round, static_cast<double>(n) + carry_b_, reports,
                                                       n > 0 ? partition_id : 0));
      // 2. State check: the (last_round, hash) most members hold; ties -> the later round.
      const std::pair<int64_t, uint64_t> target = AgreedState(ex.last_round, ex.hash);
      int best = 0;
      for (size_t i = 0; i < m.nodes.size(); ++i)
        best += (ex.last_round[i] == target.first && ex.hash[i] == target.second) ? 1 : 0;
      const std::pair<int64_t, uint64_t> mine{last_round_, models::ParameterHash(model_->params())};
      if (mine != target) {
        std::vector<int> holders;
        for (size_t i = 0; i < m.nodes.size(); ++i) {
          if (m.nodes[i] != options_.node && std::pair{ex.last_round[i], ex.hash[i]} == target)
            holders.push_back(m.nodes[i]);
        }
        spdlog::info(
            "round {}: this node holds round {} (hash {:016x}), {} of {} members hold round {} "
            "(hash {:016x}): fetching their state",
            round, mine.first, mine.second, best, m.nodes.size(), target.first, target.second);
        LOFT_RETURN_IF_ERROR(SyncState(m, round, target.first, target.second, holders));
        if (n > 0) *loss = ComputeGradient(n);  // the gradient at the agreed parameters
      }
      if (last_round_ >= static_cast<int64_t>(round)) {
        res.carried = true;  // the others finished this round already
        return OkStatus();
      }
      // 3. All-reduce this node's mean gradient over its n + carried samples.
      const double b = static_cast<double>(n) + carry_b_;
      data.assign(grad_.size(), 0.0f);
      if (b > 0) {
        for (size_t j = 0; j < data.size(); ++j) {
          const double sum =
              (n > 0 ? static_cast<double>(n) * grad_[j] : 0.0) + (carry_b_ > 0 ? carry_[j] : 0.0);
          data[j] = static_cast<float>(sum / b);
        }
      }
      std::vector<double> w = models::AggregationWeights(reducer_.kind, ex.b);
      const int present = static_cast<int>(std::count_if(w.begin(), w.end(), [](double x) { return x > 0; }));
      if (present == 0) return DataLoss("round " + std::to_string(round) + ": no member has samples");
      models::AllReduceOptions ao;
      ao.reducer = reducer_;
      if (ao.reducer.kind == models::ReducerKind::kTrimmedMean) {
        // Trim at least one per side when there are enough members with samples.
        int k = std::max(1, static_cast<int>(std::floor(0.2 * present)));
        while (k > 0 && present <= 2 * k) --k;
        ao.reducer.trim_count = k;
      }
      if (ao.reducer.kind == models::ReducerKind::kMultiKrum && present < ao.reducer.krum_f + 3)
        ao.reducer.krum_f = 0;
      ao.timeout_ms = options_.ring_timeout_ms;
      models::RingAllReduce ring(transport_.get(), ao);
      LOFT_RETURN_IF_ERROR(ring.Run(models::RingView{m.view, m.nodes}, round, data, w));
      // The partitions whose samples this update holds: members with
      // weight and a partition of this round (carried samples belong to
      // partitions already reported).
      res.applied.clear();
      for (size_t i = 0; i < m.nodes.size(); ++i) {
        if (w[i] > 0 && ex.partition[i] != 0) res.applied.emplace_back(ex.partition[i], m.nodes[i]);
      }
      std::sort(res.applied.begin(), res.applied.end());
      for (size_t i = 0; i < m.nodes.size(); ++i) {
        if (ex.reports[i]) {
          res.evaluator = m.nodes[i] == options_.node;
          break;
        }
      }
      return OkStatus();
    }();
    transport_->SetAbortCheck(nullptr);
    if (st.ok()) break;
    if (st.code() != StatusCode::kDeadlineExceeded && st.code() != StatusCode::kUnavailable &&
        st.code() != StatusCode::kFailedPrecondition) {
      return st.WithContext("all-reduce of round " + std::to_string(round));
    }
    spdlog::warn("all-reduce of round {} in view {} failed ({}); waiting for a new view", round, m.view,
                 st.ToString());
    auto nv = NewerView(m.view);
    if (!nv) return st.WithContext("all-reduce of round " + std::to_string(round) + ", no newer view");
    std::vector<int> survivors;
    for (int node : m.nodes) {
      if (std::find(nv->live_nodes().begin(), nv->live_nodes().end(), node) != nv->live_nodes().end())
        survivors.push_back(node);
    }
    LOFT_ASSIGN_OR_RETURN(Members next, ViewMembers(nv->view()));
    next.nodes = survivors;
    if (std::find(survivors.begin(), survivors.end(), options_.node) == survivors.end())
      return FailedPrecondition("this node left the view during the all-reduce");
    spdlog::info("restarting the all-reduce of round {} among {} survivors (view {})", round,
                 survivors.size(), next.view);
    m = next;
  }
  res.members = static_cast<int>(m.nodes.size());
  res.allreduce_ms = MsSince(t0);
  if (res.carried) {
    // Keep this node's samples for the next round.
    if (n > 0) {
      if (carry_.empty()) carry_.assign(grad_.size(), 0.0f);
      for (size_t j = 0; j < grad_.size(); ++j) carry_[j] += static_cast<float>(n) * grad_[j];
      carry_b_ += static_cast<double>(n);
    }
    return res;
  }
  carry_.clear();
  carry_b_ = 0;
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

StatusOr<double> ModelTrainer::Compute(const Batch& batch) {
  report_.reset();
  const int dim = model_->input_dim();
  const size_t n = batch.samples.size();
  Status decoded = [&]() -> Status {
    if (n == 0) return InvalidArgument("partition " + std::to_string(batch.partition_id) + " has no samples");
    images_.resize(n * static_cast<size_t>(dim));
    labels_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const cache::Sample& s = batch.samples[i];
      if (s.payload.size() != static_cast<size_t>(dim)) {
        return DataLoss("sample " + std::to_string(s.id) + " has " + std::to_string(s.payload.size()) +
                        " bytes, the model expects " + std::to_string(dim));
      }
      if (s.label >= model_->num_classes())
        return DataLoss("sample " + std::to_string(s.id) + " has label " + std::to_string(s.label));
      std::memcpy(images_.data() + i * static_cast<size_t>(dim), s.payload.data(), static_cast<size_t>(dim));
      labels_[i] = static_cast<uint8_t>(s.label);
    }
    if (batch.iteration < 0 || batch.iteration > std::numeric_limits<uint32_t>::max())
      return OutOfRange("iteration " + std::to_string(batch.iteration) +
                        " does not fit the ring's 32-bit round");
    return OkStatus();
  }();
  if (!decoded.ok()) {
    Skip(batch.view, batch.iteration);  // the ring must not wait for this member's round
    return decoded;
  }
  const uint32_t round = static_cast<uint32_t>(batch.iteration);
  double loss = ComputeGradient(n);
  v1::TrainingReport rep;
  bool evaluator = false;
  if (batch.iteration <= last_round_) {
    // This round is already all-reduced here (a second partition of the
    // iteration, or one that came after a weight-0 join): carry it.
    if (carry_.empty()) carry_.assign(grad_.size(), 0.0f);
    for (size_t j = 0; j < grad_.size(); ++j) carry_[j] += static_cast<float>(n) * grad_[j];
    carry_b_ += static_cast<double>(n);
    spdlog::info("partition {} of round {} arrived after the round: its {} samples go into the next round",
                 batch.partition_id, round, n);
  } else {
    LOFT_ASSIGN_OR_RETURN(RoundResult r,
                          RunRound(batch.view, round, n, batch.partition_id, /*reports=*/true, &loss));
    rep.set_allreduce_ms(r.allreduce_ms);
    rep.set_ring_members(r.members);
    rep.set_ring_attempts(r.attempts);
    if (!r.carried) {
      for (const auto& [id, node] : r.applied) {
        rep.add_applied_partitions(id);
        rep.add_applied_nodes(node);
      }
    }
    evaluator = r.evaluator;
  }
  rep.set_loss(loss);
  rep.set_param_hash(models::ParameterHash(model_->params()));
  bool eval_now = (options_.eval_every > 0 && (batch.iteration + 1) % options_.eval_every == 0) ||
                  batch.iteration == options_.last_iteration;
  if (eval_now && evaluator) {
    auto acc = model_->Evaluate(models::BatchView{test_images_, test_labels_});
    if (acc.ok()) {
      rep.set_evaluated(true);
      rep.set_test_accuracy(*acc);
      spdlog::info("iteration {}: test accuracy {:.4f} (loss {:.4f})", batch.iteration, *acc, loss);
    } else {
      spdlog::warn("iteration {}: evaluation failed: {}", batch.iteration, acc.status().ToString());
    }
  }
  spdlog::debug("iteration {}: loss {:.4f} hash {:016x} all-reduce {:.1f} ms", batch.iteration, loss,
                rep.param_hash(), rep.allreduce_ms());
  report_ = rep;
  return loss;
}

void ModelTrainer::Skip(int64_t view, int64_t iteration) {
  if (iteration <= last_round_ || iteration > std::numeric_limits<uint32_t>::max() || view < 0) return;
  const auto round = static_cast<uint32_t>(iteration);
  spdlog::info("partition of round {} failed before compute: joining the round with weight 0", round);
  double loss = 0;
  auto r = RunRound(view, round, 0, /*partition_id=*/0, /*reports=*/false, &loss);
  if (!r.ok())
    spdlog::warn("weight-0 join of round {} (view {}) failed: {}", round, view, r.status().ToString());
}

void ModelTrainer::Idle() {
  Status st = transport_->Poll(0);  // serves state requests too
  if (!st.ok()) {
    spdlog::warn("ring poll: {}", st.ToString());
    return;
  }
  const int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  std::optional<std::pair<int, uint64_t>> join;
  std::set<std::pair<int, uint64_t>> present;
  for (const auto& [from, tag] : transport_->Buffered()) {
    if ((tag & 0xFF) != kWeightsPhase) continue;
    if (static_cast<int64_t>(models::TagRound(tag)) <= last_round_) {
      transport_->Discard(from, tag);  // a round this node has done
      continue;
    }
    if (idle_refused_.count(tag & ~uint64_t{0xFF})) continue;
    present.insert({from, tag});
    auto [it, fresh] = idle_seen_us_.emplace(std::pair{from, tag}, now);
    if (!fresh && now - it->second >= options_.idle_join_grace_ms * 1000 && !join) join = {from, tag};
  }
  for (auto it = idle_seen_us_.begin(); it != idle_seen_us_.end();) {
    it = present.count(it->first) ? std::next(it) : idle_seen_us_.erase(it);
  }
  if (!join) return;
  const uint64_t tag = join->second;
  const uint32_t view = models::TagView(tag), round = models::TagRound(tag);
  spdlog::info("node {} started round {} (view {}) and this node has no partition: joining with weight 0",
               join->first, round, view);
  double loss = 0;
  auto r = RunRound(view, round, 0, /*partition_id=*/0, /*reports=*/false, &loss);
  if (!r.ok()) {
    spdlog::warn("weight-0 join of round {} (view {}) failed: {}", round, view, r.status().ToString());
    idle_refused_.insert(tag & ~uint64_t{0xFF});
    if (idle_refused_.size() > 256) idle_refused_.erase(idle_refused_.begin());
  }
  idle_seen_us_.clear();
}

std::optional<v1::TrainingReport> ModelTrainer::TakeReport() {
  auto r = std::move(report_);
  report_.reset();
  return r;
}

}  // namespace loft::agent
