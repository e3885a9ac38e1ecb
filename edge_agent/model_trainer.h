// ModelTrainer: the real compute step of a training agent (issue 6).
// For each partition it decodes the samples (784 uint8 + label), computes
// the mean cross-entropy gradient of the model on them, optionally
// corrupts it (a Byzantine node of the spec: sign_flip / random / nan,
// scaled by byzantine_scale), all-reduces it with the other members of the
// partition's membership view over a ZmqTransport (RingAllReduce with the
// spec's robust reducer, weights b_i exchanged first), applies the SGD
// update, and — on the member with the lowest node index, every
// `eval_every` iterations and at `last_iteration` — evaluates the model on
// the test set. TakeReport returns loss, ParameterHash, accuracy.
//
// Ring membership: the live nodes of the view the partition was planned in
// (the scheduler gives every live worker a partition in BSP iterations).
// Round = the iteration. If an attempt fails (a member is silent or gone),
// the trainer waits for a newer view, keeps the survivors and restarts the
// same round with that view's number; if no newer view arrives the
// partition fails.
//
// Not responsible for: reading samples, re-synchronising a restarted agent
// (it starts from the seed's initial parameters), authenticating ring
// traffic (plain TCP), learning-rate schedules beyond the spec's constant lr.
// Thread-safety: Compute/TakeReport from one thread; OnView from any thread.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "core/cluster_spec.h"
#include "core/proto/loft.pb.h"
#include "edge_agent/trainer.h"
#include "edge_agent/zmq_transport.h"
#include "models/model.h"
#include "models/reducers.h"
#include "models/sgd.h"

namespace loft::agent {

struct ModelTrainerOptions {
  int node = 0;       // this agent's index in the spec (its ring rank)
  int num_nodes = 1;  // ranks in the spec
  std::string ring_bind = "tcp://127.0.0.1:0";
  std::string test_data_dir = "/usr/share/datasets/fashion-mnist";
  int64_t eval_every = 50;      // 0 = only at last_iteration
  int64_t last_iteration = -1;  // evaluate after this iteration too; -1 = none
  int64_t ring_timeout_ms = 20000;
  int64_t view_wait_ms = 8000;  // how long to wait for a (newer) membership view
  size_t max_message_bytes = 16u << 20;
};

class ModelTrainer final : public Trainer {
 public:
  // spec: training.model (softmax|mlp), aggregation, learning_rate,
  // momentum, seed; nodes[node].byzantine / byzantine_scale.
  static StatusOr<std::unique_ptr<ModelTrainer>> Create(const ClusterSpec& spec, ModelTrainerOptions options);
  ~ModelTrainer() override;

  const std::string& ring_endpoint() const { return transport_->endpoint(); }
  // Records a membership view from the scheduler (thread-safe).
  void OnView(const v1::MembershipView& view);

  StatusOr<double> Compute(const Batch& batch) override;
  std::optional<v1::TrainingReport> TakeReport() override;

  std::span<const float> params() const { return model_->params(); }

 private:
  ModelTrainer() = default;
  struct Members {
    uint32_t view = 0;
    std::vector<int> nodes;
  };
  // The live nodes of view v (waits up to view_wait_ms for it).
  StatusOr<Members> ViewMembers(int64_t v);
  // A view newer than v, after waiting up to view_wait_ms.
  std::optional<v1::MembershipView> NewerView(int64_t v);
  StatusOr<std::vector<double>> ExchangeWeights(const Members& m, uint32_t round, double b);
  void Corrupt(std::span<float> g);

  ModelTrainerOptions options_;
  std::unique_ptr<models::Model> model_;
  std::optional<models::Sgd> sgd_;
  models::ReducerOptions reducer_;
  ByzantineKind byzantine_ = ByzantineKind::kNone;
  double byzantine_scale_ = 1.0;
  std::mt19937_64 rng_;
  std::vector<float> grad_;
  std::vector<uint8_t> images_, labels_;
  std::vector<uint8_t> test_images_, test_labels_;

  std::unique_ptr<zmq::context_t> ctx_;
  std::unique_ptr<ZmqTransport> transport_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, v1::MembershipView> views_;  // last few views by number

  std::optional<v1::TrainingReport> report_;
};

}  // namespace loft::agent
