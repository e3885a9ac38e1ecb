#include "models/model.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "models/dense_net.h"
#include "models/sgd.h"
#include "models/state_hash.h"

using namespace loft;
using namespace loft::models;

namespace {

// Central finite differences on DenseNet<double> against its analytic gradient.
void CheckGradient(const std::vector<int>& sizes, uint64_t seed) {
  DenseNet<double> net(sizes);
  std::vector<double> p(net.num_params());
  InitDenseParams<double>(sizes, seed, p);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  for (double& v : p) v += 0.1 * u(rng);  // non-zero biases, no symmetry
  const int n = 5;
  std::vector<double> x(static_cast<size_t>(n) * sizes[0]);
  for (double& v : x) v = u(rng) + 0.5;
  std::vector<uint8_t> y(n);
  for (int i = 0; i < n; ++i) y[i] = static_cast<uint8_t>(i % sizes.back());

  std::vector<double> g(p.size());
  const double loss = net.LossAndGradient(p, x.data(), y.data(), n, g);
  REQUIRE(std::isfinite(loss));
  const double eps = 1e-6;
  double worst = 0;
  for (size_t k = 0; k < p.size(); ++k) {
    const double keep = p[k];
    p[k] = keep + eps;
    const double lp = net.LossAndGradient(p, x.data(), y.data(), n, {});
    p[k] = keep - eps;
    const double lm = net.LossAndGradient(p, x.data(), y.data(), n, {});
    p[k] = keep;
    const double fd = (lp - lm) / (2 * eps);
    worst = std::max(worst, std::abs(fd - g[k]) / std::max(1e-3, std::abs(fd) + std::abs(g[k])));
  }
  INFO("worst relative error " << worst);
  CHECK(worst < 1e-5);
}

std::vector<uint8_t> RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng() & 0xFF);
  return v;
}

}  // namespace

TEST_CASE("finite-difference gradient check, small MLP in double", "[models]") {
  CheckGradient({7, 6, 5, 4}, 1);
  CheckGradient({7, 6, 5, 4}, 2);
}

TEST_CASE("finite-difference gradient check, softmax regression in double", "[models]") {
  CheckGradient({9, 3}, 3);
}

TEST_CASE("float model gradient matches the double reference", "[models]") {
  ModelOptions o;
  o.input_dim = 12;
  o.hidden = {8, 6};
  o.num_classes = 4;
  auto m = MakeModel(o);
  REQUIRE(m.ok());
  Model& model = **m;
  model.Init(11);
  const int n = 6;
  std::vector<uint8_t> img = RandomBytes(static_cast<size_t>(n) * o.input_dim, 5);
  std::vector<uint8_t> lab = {0, 1, 2, 3, 1, 2};
  std::vector<float> g(model.num_params());
  auto loss = model.LossAndGradient({img, lab}, g);
  REQUIRE(loss.ok());

  DenseNet<double> ref(o.LayerSizes());
  std::vector<double> p(model.params().begin(), model.params().end());
  std::vector<double> x(img.size());
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<double>(static_cast<float>(img[i]) * (1.0f / 255.0f));
  std::vector<double> gd(p.size());
  const double ld = ref.LossAndGradient(p, x.data(), lab.data(), n, gd);
  CHECK(*loss == Approx(ld).epsilon(1e-5));
  for (size_t k = 0; k < gd.size(); ++k) REQUIRE(g[k] == Approx(gd[k]).margin(1e-5));
}

TEST_CASE("initialisation is deterministic and seed-dependent", "[models]") {
  auto a = MakeModel(ModelKind::kMlp, Device::kCpu);
  auto b = MakeModel(ModelKind::kMlp, Device::kCpu);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK((*a)->name() == "mlp-784-256-128-10");
  CHECK((*a)->num_params() == 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
  (*a)->Init(7);
  (*b)->Init(7);
  CHECK(std::equal((*a)->params().begin(), (*a)->params().end(), (*b)->params().begin()));
  CHECK(ParameterHash((*a)->params()) == ParameterHash((*b)->params()));
  (*b)->Init(8);
  CHECK(ParameterHash((*a)->params()) != ParameterHash((*b)->params()));
  CHECK(!std::equal((*a)->params().begin(), (*a)->params().end(), (*b)->params().begin()));
  // He: first-layer weights have std ~ sqrt(2/784).
  std::span<const float> w1 = (*a)->params().subspan(0, 784 * 256);
  double s2 = 0;
  for (float v : w1) s2 += static_cast<double>(v) * v;
  CHECK(std::sqrt(s2 / w1.size()) == Approx(std::sqrt(2.0 / 784)).epsilon(0.02));
  // Biases start at zero.
  CHECK((*a)->params()[784 * 256] == 0.0f);
}

TEST_CASE("models learn a separable synthetic task with SGD", "[models]") {
  // 3 classes: each a fixed random 20-byte prototype plus noise.
  const int dim = 20, classes = 3, n = 300;
  std::mt19937_64 rng(3);
  std::vector<uint8_t> proto = RandomBytes(static_cast<size_t>(dim) * classes, 9);
  std::vector<uint8_t> img(static_cast<size_t>(n) * dim), lab(n);
  std::normal_distribution<double> noise(0, 30);
  for (int i = 0; i < n; ++i) {
    lab[i] = static_cast<uint8_t>(i % classes);
    for (int j = 0; j < dim; ++j) {
      img[i * dim + j] = static_cast<uint8_t>(std::clamp(proto[lab[i] * dim + j] + noise(rng), 0.0, 255.0));
    }
  }
  for (ModelKind kind : {ModelKind::kSoftmax, ModelKind::kMlp}) {
    ModelOptions o;
    o.kind = kind;
    o.input_dim = dim;
    o.num_classes = classes;
    o.hidden = {16};
    auto m = MakeModel(o);
    REQUIRE(m.ok());
    (*m)->Init(1);
    SgdOptions so;
    so.learning_rate = 0.2;
    auto sgd = Sgd::Create(so, (*m)->num_params());
    REQUIRE(sgd.ok());
    std::vector<float> g((*m)->num_params());
    const BatchView all{img, lab};
    const double before = *(*m)->Loss(all);
    for (int step = 0; step < 100; ++step) {
      REQUIRE((*m)->LossAndGradient(all, g).ok());
      REQUIRE(sgd->Step((*m)->params(), g).ok());
    }
    CHECK(*(*m)->Loss(all) < before * 0.5);
    CHECK(*(*m)->Evaluate(all) > 0.95);
  }
}

TEST_CASE("bad batches and options are rejected with clear errors", "[models]") {
  auto m = MakeModel(ModelKind::kSoftmax, Device::kCpu);
  REQUIRE(m.ok());
  std::vector<uint8_t> img(784 * 2, 1), lab = {1, 10};
  std::vector<float> g((*m)->num_params());
  auto r = (*m)->LossAndGradient({img, lab}, g);
  REQUIRE(!r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK(r.status().message().find("label 10") != std::string::npos);
  lab = {1, 2};
  CHECK((*m)->LossAndGradient({std::span<const uint8_t>(img).first(100), lab}, g).status().code() ==
        StatusCode::kInvalidArgument);
  std::vector<float> small(3);
  CHECK(!(*m)->LossAndGradient({img, lab}, small).ok());
  CHECK(!(*m)->Evaluate({}).ok());
  ModelOptions o;
  o.hidden = {0};
  CHECK(!MakeModel(o).ok());
  CHECK(!ParseModelKind("cnn").ok());
  CHECK(*ParseModelKind("mlp") == ModelKind::kMlp);
  CHECK(*ParseDevice("cuda") == Device::kCuda);
}

TEST_CASE("cuda model agrees with the cpu model (skipped without a GPU)", "[models][cuda]") {
  std::string why;
  if (!CudaAvailable(&why)) {
    WARN("GPU test skipped: " << why);
    auto m = MakeModel(ModelKind::kMlp, Device::kCuda);
    REQUIRE(!m.ok());
    CHECK(m.status().code() == StatusCode::kUnavailable);
    return;
  }
  auto cpu = MakeModel(ModelKind::kMlp, Device::kCpu);
  auto gpu = MakeModel(ModelKind::kMlp, Device::kCuda);
  REQUIRE(cpu.ok());
  REQUIRE(gpu.ok());
  (*cpu)->Init(5);
  (*gpu)->Init(5);
  const int n = 32;
  std::vector<uint8_t> img = RandomBytes(static_cast<size_t>(n) * 784, 4), lab(n);
  for (int i = 0; i < n; ++i) lab[i] = static_cast<uint8_t>(i % 10);
  std::vector<float> gc((*cpu)->num_params()), gg((*gpu)->num_params());
  auto lc = (*cpu)->LossAndGradient({img, lab}, gc);
  auto lg = (*gpu)->LossAndGradient({img, lab}, gg);
  REQUIRE(lc.ok());
  REQUIRE(lg.ok());
  CHECK(*lc == Approx(*lg).epsilon(1e-4));
  for (size_t k = 0; k < gc.size(); ++k) REQUIRE(gg[k] == Approx(gc[k]).margin(1e-4));
}
