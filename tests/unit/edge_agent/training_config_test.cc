// training.lr_schedule in the cluster spec and its mapping onto the agent's
// optimiser (SgdOptionsFromSpec). No sockets.
#include <catch2/catch.hpp>
#include <cmath>

#include "core/cluster_spec.h"
#include "edge_agent/model_trainer.h"

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

TEST_CASE("the agreed state is the majority's (last_round, hash); ties go to the later round") {
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
