// Data-parallel training over the in-memory ring: the wiring the agent
// trainer uses (gradient on the local batch -> RingAllReduce with weights
// b_i -> identical SGD step on every replica).
#include <algorithm>
#include <catch2/catch.hpp>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "models/in_memory_transport.h"
#include "models/model.h"
#include "models/ring_allreduce.h"
#include "models/sgd.h"
#include "models/state_hash.h"

using namespace loft;
using namespace loft::models;

namespace {

constexpr int kDim = 20, kClasses = 3, kSamples = 600;

struct Data {
  std::vector<uint8_t> img, lab;
};

Data MakeData(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> proto(kDim * kClasses);
  for (auto& p : proto) p = static_cast<uint8_t>(rng() & 0xFF);
  std::normal_distribution<double> noise(0, 40);
  Data d{std::vector<uint8_t>(kSamples * kDim), std::vector<uint8_t>(kSamples)};
  for (int i = 0; i < kSamples; ++i) {
    d.lab[i] = static_cast<uint8_t>(rng() % kClasses);
    for (int j = 0; j < kDim; ++j) {
      d.img[i * kDim + j] =
          static_cast<uint8_t>(std::clamp(proto[d.lab[i] * kDim + j] + noise(rng), 0.0, 255.0));
    }
  }
  return d;
}

ModelOptions Opts() {
  ModelOptions o;
  o.input_dim = kDim;
  o.num_classes = kClasses;
  o.hidden = {16};
  return o;
}

struct Outcome {
  std::vector<uint64_t> hashes;  // per iteration, per rank (flattened)
  std::vector<double> accuracy;  // per rank, at the end
  std::vector<Status> errors;
};

// n workers with uneven batches; `byzantine` (or -1) sends -10x its gradient.
Outcome Train(int n, ReducerKind kind, int byzantine, int iterations) {
  const Data data = MakeData(17);
  InMemoryNetwork net(n);
  std::vector<int> batch(n), members(n);
  std::vector<double> weights(n);
  for (int r = 0; r < n; ++r) {
    batch[r] = 8 + 6 * r;  // uneven b_i
    weights[r] = batch[r];
    members[r] = r;
  }
  weights = AggregationWeights(kind, weights);  // what the agents pass (b_i for the means, 1 otherwise)
  Outcome out;
  out.hashes.assign(static_cast<size_t>(iterations) * n, 0);
  out.accuracy.assign(n, 0);
  out.errors.assign(n, OkStatus());
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto model = std::move(MakeModel(Opts()).value());
      model->Init(42);  // same seed on every replica
      SgdOptions so;
      so.learning_rate = 0.1;
      auto sgd = Sgd::Create(so, model->num_params());
      AllReduceOptions ao;
      ao.reducer.kind = kind;
      ao.timeout_ms = 5000;
      RingAllReduce ring(net.endpoint(r), ao);
      std::vector<float> grad(model->num_params());
      int64_t cursor = 0;
      for (int it = 0; it < iterations; ++it) {
        // Disjoint slices of the data set per worker and iteration.
        int64_t start = (cursor + std::accumulate(batch.begin(), batch.begin() + r, 0)) % (kSamples - 64);
        cursor += std::accumulate(batch.begin(), batch.end(), 0);
        BatchView b{std::span<const uint8_t>(data.img).subspan(start * kDim, batch[r] * kDim),
                    std::span<const uint8_t>(data.lab).subspan(start, batch[r])};
        auto loss = model->LossAndGradient(b, grad);
        if (!loss.ok()) {
          out.errors[r] = loss.status();
          return;
        }
        if (r == byzantine) {
          for (float& g : grad) g *= -10.0f;
        }
        Status s = ring.Run({1, members}, static_cast<uint32_t>(it), grad, weights);
        if (s.ok()) s = sgd->Step(model->params(), grad);
        if (!s.ok()) {
          out.errors[r] = s;
          return;
        }
        out.hashes[static_cast<size_t>(it) * n + r] = ParameterHash(model->params());
      }
      out.accuracy[r] = model->Evaluate({data.img, data.lab}).value_or(0);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

}  // namespace

TEST_CASE("data-parallel replicas stay identical and learn", "[data_parallel]") {
  const int n = 4, iters = 60;
  Outcome o = Train(n, ReducerKind::kWeightedMean, -1, iters);
  for (const Status& s : o.errors) REQUIRE(s.ok());
  for (int it = 0; it < iters; ++it) {
    for (int r = 1; r < n; ++r) REQUIRE(o.hashes[it * n + r] == o.hashes[it * n]);
  }
  for (double a : o.accuracy) CHECK(a > 0.9);
}

TEST_CASE("one Byzantine worker: trimmed mean still learns, mean does not", "[data_parallel]") {
  const int n = 6, iters = 60;
  Outcome robust = Train(n, ReducerKind::kTrimmedMean, 2, iters);
  for (const Status& s : robust.errors) REQUIRE(s.ok());
  for (int r = 1; r < n; ++r) CHECK(robust.hashes.back() == robust.hashes[(iters - 1) * n + r]);
  for (double a : robust.accuracy) CHECK(a > 0.9);

  Outcome naive = Train(n, ReducerKind::kMean, 2, iters);
  // Either the update diverged (a non-finite gradient is refused) or the
  // model ended far below the robust one.
  bool failed = false;
  for (const Status& s : naive.errors) failed |= !s.ok();
  if (!failed) {
    for (double a : naive.accuracy) CHECK(a < 0.6);
  }
}
