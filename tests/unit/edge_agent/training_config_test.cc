// training.lr_schedule in the cluster spec and its mapping onto the agent's
// optimiser (SgdOptionsFromSpec). No sockets.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/cluster_spec.h"
#include "edge_agent/model_trainer.h"
#include "models/checkpoint.h"
#include "models/state_hash.h"

using namespace loft;
using namespace loft::agent;

namespace {
std::string Spec(const std::string& training_extra) {
  return "dataset: {name: fashion-mnist, samples: 60000, sample_bytes: 784}\n"
         "training: {global_batch: 512, iterations: 400, model: mlp, learning_rate: 0.1" +
         training_extra +
         "}\n"
         "nodes:\n"
         "  - name: edge\n"
         "    count: 2\n";
}
}  // namespace

TEST_CASE("no lr_schedule keeps the constant learning rate of training.learning_rate") {
  auto spec = ParseClusterSpec(Spec(""), "c.yaml");
  REQUIRE(spec.ok());
  auto so = SgdOptionsFromSpec(spec->training);
  REQUIRE(so.ok());
  CHECK(so->schedule == models::LrSchedule::kConstant);
  auto sgd = models::Sgd::Create(*so, 1).value();
  CHECK(sgd.LearningRateAt(0) == Approx(0.1));
  CHECK(sgd.LearningRateAt(399) == Approx(0.1));
  CHECK(so->momentum == Approx(0.9));
}

TEST_CASE("a step schedule from the spec decays the agent's learning rate") {
  auto spec = ParseClusterSpec(Spec(", lr_schedule: {kind: step, step_every: 100, gamma: 0.5}"), "c.yaml");
  REQUIRE(spec.ok());
  auto so = SgdOptionsFromSpec(spec->training);
  REQUIRE(so.ok());
  auto sgd = models::Sgd::Create(*so, 1).value();
  CHECK(sgd.LearningRateAt(99) == Approx(0.1));
  CHECK(sgd.LearningRateAt(100) == Approx(0.05));
  CHECK(sgd.LearningRateAt(250) == Approx(0.025));
}

TEST_CASE("a cosine schedule defaults its length to training.iterations") {
  auto spec = ParseClusterSpec(
      Spec(", lr_schedule: {kind: cosine, min_learning_rate: 0.01, warmup_steps: 10}"), "c.yaml");
  REQUIRE(spec.ok());
  auto so = SgdOptionsFromSpec(spec->training);
  REQUIRE(so.ok());
  CHECK(so->total_steps == 400);
  auto sgd = models::Sgd::Create(*so, 1).value();
  CHECK(sgd.LearningRateAt(0) < 0.1);  // warm-up
  CHECK(sgd.LearningRateAt(200) == Approx(0.01 + 0.09 * 0.5).epsilon(0.05));
  CHECK(sgd.LearningRateAt(400) == Approx(0.01));
}

TEST_CASE("bad lr_schedule fields are errors naming file, line and field") {
  auto a = ParseClusterSpec(Spec(", lr_schedule: {kind: exponential}"), "c.yaml");
  REQUIRE_FALSE(a.ok());
  CHECK(a.status().message().find(
            "c.yaml:2: training.lr_schedule.kind must be one of constant, step, cosine") == 0);
  auto b = ParseClusterSpec(Spec(", lr_schedule: {kind: step, gamma: 2}"), "c.yaml");
  REQUIRE_FALSE(b.ok());
  CHECK(b.status().message().find("training.lr_schedule.gamma must be in (0, 1]") != std::string::npos);
  auto c = ParseClusterSpec(Spec(", lr_schedule: {kind: step, every: 5}"), "c.yaml");
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().message().find("training.lr_schedule.every is not a known field") != std::string::npos);
  auto d = ParseClusterSpec(Spec(", lr_schedule: {kind: cosine, min_learning_rate: 0.5}"), "c.yaml");
  REQUIRE_FALSE(d.ok());
  CHECK(d.status().message().find("min_learning_rate must be in [0, training.learning_rate]") !=
        std::string::npos);
}

TEST_CASE("the agreed state is the majority's (last_round, hash), ties go to the later round") {
  using P = std::pair<int64_t, uint64_t>;
  // A restarted member (-1, init hash) among three that agree.
  std::vector<int64_t> r{41, 41, -1, 41};
  std::vector<uint64_t> h{7, 7, 99, 7};
  CHECK(AgreedState(r, h) == P{41, 7});
  // One member claiming a far-ahead round loses against two that agree.
  r = {41, 41, 1000000};
  h = {7, 7, 5};
  CHECK(AgreedState(r, h) == P{41, 7});
  // Two members: the live one (later round) wins over the restarted one.
  r = {-1, 12};
  h = {99, 3};
  CHECK(AgreedState(r, h) == P{12, 3});
  // Same round, different hashes, 2 vs 1: the majority's hash.
  r = {5, 5, 5};
  h = {1, 2, 2};
  CHECK(AgreedState(r, h) == P{5, 2});
}

TEST_CASE("restarted members (round -1) never outvote a member with progress") {
  using P = std::pair<int64_t, uint64_t>;
  // Two of three agents restarted (same seed: same initial hash), one kept
  // training: the job's state is the survivor's, not the initial one
  // (otherwise the survivor rolls back to the initial parameters and all
  // progress is lost, against docs/deployment.md).
  std::vector<int64_t> r{-1, 50, -1};
  std::vector<uint64_t> h{99, 7, 99};
  CHECK(AgreedState(r, h) == P{50, 7});
  // A malformed exchange (INT64_MIN) never wins either.
  r = {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::min(), 3};
  h = {0, 0, 4};
  CHECK(AgreedState(r, h) == P{3, 4});
  // Everyone fresh: the initial state.
  r = {-1, -1};
  h = {99, 99};
  CHECK(AgreedState(r, h) == P{-1, 99});
  // Among members with progress the majority still wins (one far-ahead claim loses).
  r = {-1, -1, 41, 41, 1000000};
  h = {99, 99, 7, 7, 5};
  CHECK(AgreedState(r, h) == P{41, 7});
}

TEST_CASE("a last_round no 32-bit ring round can have never wins the tie") {
  using P = std::pair<int64_t, uint64_t>;
  // Two members: an impossible "later round" would otherwise win the tie,
  // and the agent would then treat every partition as already all-reduced.
  std::vector<int64_t> r{5, std::numeric_limits<int64_t>::max()};
  std::vector<uint64_t> h{1, 2};
  CHECK(AgreedState(r, h) == P{5, 1});
  r = {-1, int64_t{1} << 40};
  h = {99, 3};
  CHECK(AgreedState(r, h) == P{-1, 99});
}

namespace {
std::unique_ptr<models::Model> SmallModel(uint64_t seed) {
  models::ModelOptions o;
  o.kind = models::ModelKind::kMlp;
  o.input_dim = 10;
  o.hidden = {7};
  o.num_classes = 3;
  auto m = std::move(models::MakeModel(o).value());
  m->Init(seed);
  return m;
}
// A state answer as ModelTrainer::ServeState builds it: [i64 round][u64 hash][checkpoint].
std::vector<std::byte> Answer(int64_t round, uint64_t hash, const std::vector<char>& ckpt) {
  std::vector<std::byte> out(16 + ckpt.size());
  std::memcpy(out.data(), &round, 8);
  std::memcpy(out.data() + 8, &hash, 8);
  std::memcpy(out.data() + 16, ckpt.data(), ckpt.size());
  return out;
}
}  // namespace

TEST_CASE("AdoptState installs a matching state and leaves a bad one out entirely") {
  auto holder = SmallModel(3);
  auto hsgd = models::Sgd::Create(models::SgdOptions{}, holder->num_params()).value();
  std::vector<float> g(static_cast<size_t>(holder->num_params()), 0.125f);
  for (int i = 0; i < 3; ++i) REQUIRE(hsgd.Step(holder->params(), g).ok());
  const uint64_t want = models::TrainingStateHash(*holder, hsgd);
  auto good = models::EncodeCheckpoint(*holder, hsgd).value();

  auto me = SmallModel(9);
  auto msgd = models::Sgd::Create(models::SgdOptions{}, me->num_params()).value();
  REQUIRE(msgd.Step(me->params(), g).ok());
  const uint64_t mine = models::ParameterHash(me->params());  // parameters alone
  const std::vector<float> my_vel(msgd.velocity().begin(), msgd.velocity().end());
  auto unchanged = [&] {
    CHECK(models::ParameterHash(me->params()) == mine);
    CHECK(msgd.step() == 1);
    CHECK(std::equal(my_vel.begin(), my_vel.end(), msgd.velocity().begin()));
  };

  SECTION("a checkpoint whose parameters do not hash to the claimed hash") {
    auto other = SmallModel(4);  // decodes fine, but is not the agreed state
    auto osgd = models::Sgd::Create(models::SgdOptions{}, other->num_params()).value();
    auto lie = models::EncodeCheckpoint(*other, osgd).value();
    Status st = AdoptState(Answer(2, want, lie), 2, want, "node 1", me.get(), &msgd);
    CHECK(st.code() == StatusCode::kDataLoss);
    CHECK(st.message().find("node 1") != std::string::npos);
    unchanged();
  }
  SECTION("the agreed parameters with another momentum velocity or optimizer step") {
    // A Byzantine holder serves the majority's parameters (they match)
    // with a poisoned velocity, or an older step: the hash covers both.
    auto poisoned = models::Sgd::Create(models::SgdOptions{}, holder->num_params()).value();
    std::vector<float> vel(hsgd.velocity().begin(), hsgd.velocity().end());
    vel[0] = 1e30f;
    REQUIRE(poisoned.Restore(hsgd.step(), vel).ok());
    Status st = AdoptState(Answer(2, want, models::EncodeCheckpoint(*holder, poisoned).value()), 2, want,
                           "node 1", me.get(), &msgd);
    CHECK(st.code() == StatusCode::kDataLoss);
    CHECK(st.message().find("node 1") != std::string::npos);
    unchanged();
    auto older = models::Sgd::Create(models::SgdOptions{}, holder->num_params()).value();
    REQUIRE(older.Restore(hsgd.step() - 1, hsgd.velocity()).ok());
    st = AdoptState(Answer(2, want, models::EncodeCheckpoint(*holder, older).value()), 2, want, "node 1",
                    me.get(), &msgd);
    CHECK(st.code() == StatusCode::kDataLoss);
    unchanged();
  }
  SECTION("an optimizer step no run of round 2 can have (one step per applied round)") {
    auto bsgd = models::Sgd::Create(models::SgdOptions{}, holder->num_params()).value();
    REQUIRE(bsgd.Restore(std::numeric_limits<int64_t>::max(), hsgd.velocity()).ok());
    auto bad = models::EncodeCheckpoint(*holder, bsgd).value();
    Status st = AdoptState(Answer(2, want, bad), 2, want, "node 1", me.get(), &msgd);
    CHECK(st.code() == StatusCode::kDataLoss);
    CHECK(st.message().find("step") != std::string::npos);
    unchanged();
  }
  SECTION("short, other-round and corrupt answers") {
    std::vector<std::byte> tiny(7);
    CHECK(AdoptState(tiny, 2, want, "node 1", me.get(), &msgd).code() == StatusCode::kDataLoss);
    CHECK(AdoptState(Answer(5, want, good), 2, want, "node 1", me.get(), &msgd).code() ==
          StatusCode::kFailedPrecondition);
    auto flipped = good;
    flipped[flipped.size() / 2] ^= 0x01;
    CHECK(AdoptState(Answer(2, want, flipped), 2, want, "node 1", me.get(), &msgd).code() ==
          StatusCode::kDataLoss);
    unchanged();
  }
  SECTION("a huge agreed round does not overflow the step bound") {
    Status st = AdoptState(Answer(std::numeric_limits<int64_t>::max(), want, good),
                           std::numeric_limits<int64_t>::max(), want, "node 1", me.get(), &msgd);
    CHECK(st.ok());  // (AgreedState never agrees on it; the bound itself must not overflow)
  }
  SECTION("the agreed state is installed") {
    REQUIRE(AdoptState(Answer(2, want, good), 2, want, "node 1", me.get(), &msgd).ok());
    CHECK(models::ParameterHash(me->params()) == models::ParameterHash(holder->params()));
    CHECK(models::TrainingStateHash(*me, msgd) == want);
    CHECK(msgd.step() == 3);
  }
}
