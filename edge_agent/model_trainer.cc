#include "edge_agent/model_trainer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "cache/idx_reader.h"
#include "models/ring_allreduce.h"

// OpenBLAS (the build requires BLA_VENDOR OpenBLAS): agents share the
// machine's cores, so each uses one BLAS thread.
extern "C" void openblas_set_num_threads(int num_threads);

namespace loft::agent {
namespace {

constexpr uint8_t kWeightsPhase = 0xFE;

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
  models::SgdOptions so;
  so.learning_rate = spec.training.learning_rate;
  so.momentum = spec.training.momentum;
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

  t->ctx_ = std::make_unique<zmq::context_t>(1);
  ZmqTransportOptions to;
  to.rank = options.node;
  to.world_size = spec.num_nodes();
  to.bind = options.ring_bind;
  to.max_message_bytes = options.max_message_bytes;
  LOFT_ASSIGN_OR_RETURN(t->transport_, ZmqTransport::Create(t->ctx_.get(), to));
  spdlog::info("training {} ({} params, aggregation {}, lr {}, momentum {}{}); ring endpoint {}",
               t->model_->name(), t->model_->num_params(), spec.training.aggregation, so.learning_rate,
               so.momentum, me.byzantine == ByzantineKind::kNone ? "" : ", BYZANTINE", t->ring_endpoint());
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

StatusOr<ModelTrainer::Members> ModelTrainer::ViewMembers(int64_t v) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, std::chrono::milliseconds(options_.view_wait_ms),
                    [&] { return views_.count(v) > 0; })) {
    return Unavailable("membership view " + std::to_string(v) + " never arrived");
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
  return m;
}

std::optional<v1::MembershipView> ModelTrainer::NewerView(int64_t v) {
  std::unique_lock lock(mu_);
  auto newer = [&] { return !views_.empty() && views_.rbegin()->first > v; };
  if (!cv_.wait_for(lock, std::chrono::milliseconds(options_.view_wait_ms), newer)) return std::nullopt;
  return views_.rbegin()->second;
}

StatusOr<std::vector<double>> ModelTrainer::ExchangeWeights(const Members& m, uint32_t round, double b) {
  uint64_t tag = models::MakeTag(m.view, round, kWeightsPhase);
  std::byte buf[sizeof(double)];
  std::memcpy(buf, &b, sizeof b);
  for (int n : m.nodes) {
    if (n != options_.node) LOFT_RETURN_IF_ERROR(transport_->Send(n, tag, buf));
  }
  std::vector<double> w;
  for (int n : m.nodes) {
    if (n == options_.node) {
      w.push_back(b);
      continue;
    }
    LOFT_ASSIGN_OR_RETURN(auto bytes, transport_->Recv(n, tag, options_.ring_timeout_ms));
    double x = 0;
    if (bytes.size() != sizeof x)
      return DataLoss("batch size from node " + std::to_string(n) + " is malformed");
    std::memcpy(&x, bytes.data(), sizeof x);
    // A lying member cannot poison the weights: clamp to a sane range.
    if (!std::isfinite(x) || x < 0) x = 0;
    w.push_back(x);
  }
  double sum = 0;
  for (double x : w) sum += x;
  if (!(sum > 0)) return DataLoss("all batch sizes are zero");
  return w;
}

void ModelTrainer::Corrupt(std::span<float> g) {
  switch (byzantine_) {
    case ByzantineKind::kNone: return;
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

StatusOr<double> ModelTrainer::Compute(const Batch& batch) {
  report_.reset();
  const int dim = model_->input_dim();
  const size_t n = batch.samples.size();
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
  models::BatchView bv{images_, labels_};
  double loss = std::numeric_limits<double>::quiet_NaN();
  {
    auto l = model_->LossAndGradient(bv, grad_);
    if (l.ok()) {
      loss = *l;
    } else {
      // Diverged parameters: contribute a NaN gradient (robust reducers drop it).
      std::fill(grad_.begin(), grad_.end(), std::numeric_limits<float>::quiet_NaN());
    }
  }
  Corrupt(grad_);

  if (batch.iteration < 0 || batch.iteration > std::numeric_limits<uint32_t>::max())
    return OutOfRange("iteration " + std::to_string(batch.iteration) +
                      " does not fit the ring's 32-bit round");
  const uint32_t round = static_cast<uint32_t>(batch.iteration);
  auto t0 = std::chrono::steady_clock::now();
  LOFT_ASSIGN_OR_RETURN(Members m, ViewMembers(batch.view));
  int attempts = 0;
  std::vector<float> data;
  while (true) {
    ++attempts;
    data = grad_;
    Status st = [&]() -> Status {
      LOFT_ASSIGN_OR_RETURN(std::vector<double> w, ExchangeWeights(m, round, static_cast<double>(n)));
      models::AllReduceOptions ao;
      ao.reducer = reducer_;
      const int N = static_cast<int>(m.nodes.size());
      if (ao.reducer.kind == models::ReducerKind::kTrimmedMean) {
        // Trim at least one per side when there are enough members.
        int k = std::max(1, static_cast<int>(std::floor(0.2 * N)));
        while (k > 0 && N <= 2 * k) --k;
        ao.reducer.trim_count = k;
      }
      if (ao.reducer.kind == models::ReducerKind::kMultiKrum && N < ao.reducer.krum_f + 3)
        ao.reducer.krum_f = 0;
      ao.timeout_ms = options_.ring_timeout_ms;
      models::RingAllReduce ring(transport_.get(), ao);
      return ring.Run(models::RingView{m.view, m.nodes}, round, data, w);
    }();
    if (st.ok()) break;
    if (st.code() != StatusCode::kDeadlineExceeded && st.code() != StatusCode::kUnavailable) {
      return st.WithContext("all-reduce of iteration " + std::to_string(batch.iteration));
    }
    spdlog::warn("all-reduce of iteration {} in view {} failed ({}); waiting for a new view", batch.iteration,
                 m.view, st.ToString());
    auto nv = NewerView(m.view);
    if (!nv)
      return st.WithContext("all-reduce of iteration " + std::to_string(batch.iteration) + ", no newer view");
    std::vector<int> survivors;
    for (int node : m.nodes) {
      if (std::find(nv->live_nodes().begin(), nv->live_nodes().end(), node) != nv->live_nodes().end())
        survivors.push_back(node);
    }
    LOFT_ASSIGN_OR_RETURN(Members next, ViewMembers(nv->view()));
    next.nodes = survivors;
    if (std::find(survivors.begin(), survivors.end(), options_.node) == survivors.end())
      return FailedPrecondition("this node left the view during the all-reduce");
    spdlog::info("restarting the all-reduce of iteration {} among {} survivors (view {})", batch.iteration,
                 survivors.size(), next.view);
    m = next;
  }
  v1::TrainingReport rep;
  rep.set_allreduce_ms(MsSince(t0));
  rep.set_ring_members(static_cast<int32_t>(m.nodes.size()));
  rep.set_ring_attempts(attempts);
  Status step = sgd_->Step(model_->params(), data);
  if (!step.ok()) {
    // Every member got the same non-finite vector and refuses it alike, so
    // parameters stay identical; the run goes on and shows the divergence.
    spdlog::warn("iteration {}: update refused: {}", batch.iteration, step.ToString());
    loss = std::numeric_limits<double>::quiet_NaN();
  }
  rep.set_loss(loss);
  rep.set_param_hash(models::ParameterHash(model_->params()));
  bool eval_now = (options_.eval_every > 0 && (batch.iteration + 1) % options_.eval_every == 0) ||
                  batch.iteration == options_.last_iteration;
  if (eval_now && options_.node == m.nodes.front()) {
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

std::optional<v1::TrainingReport> ModelTrainer::TakeReport() {
  auto r = std::move(report_);
  report_.reset();
  return r;
}

}  // namespace loft::agent
