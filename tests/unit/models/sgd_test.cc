#include "models/sgd.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

using namespace loft;
using namespace loft::models;

TEST_CASE("sgd momentum update follows the formula", "[sgd]") {
  SgdOptions o;
  o.learning_rate = 0.5;
  o.momentum = 0.9;
  auto sgd = Sgd::Create(o, 2);
  REQUIRE(sgd.ok());
  std::vector<float> p = {1.0f, -1.0f}, g = {0.2f, 0.4f};
  REQUIRE(sgd->Step(p, g).ok());  // v = g; p -= 0.5 g
  CHECK(p[0] == Approx(0.9));
  CHECK(p[1] == Approx(-1.2));
  REQUIRE(sgd->Step(p, g).ok());  // v = 0.9 g + g = 1.9 g
  CHECK(p[0] == Approx(0.9 - 0.5 * 1.9 * 0.2));
  CHECK(sgd->step() == 2);
  CHECK(sgd->velocity()[1] == Approx(1.9 * 0.4));
}

TEST_CASE("learning-rate schedules", "[sgd]") {
  SgdOptions o;
  o.learning_rate = 1.0;
  o.schedule = LrSchedule::kStep;
  o.step_every = 10;
  o.step_gamma = 0.5;
  auto s = Sgd::Create(o, 1);
  REQUIRE(s.ok());
  CHECK(s->LearningRateAt(0) == 1.0);
  CHECK(s->LearningRateAt(9) == 1.0);
  CHECK(s->LearningRateAt(10) == 0.5);
  CHECK(s->LearningRateAt(25) == 0.25);

  o.schedule = LrSchedule::kCosine;
  o.total_steps = 100;
  o.min_learning_rate = 0.1;
  auto c = Sgd::Create(o, 1);
  REQUIRE(c.ok());
  CHECK(c->LearningRateAt(0) == Approx(1.0));
  CHECK(c->LearningRateAt(50) == Approx(0.55));
  CHECK(c->LearningRateAt(100) == Approx(0.1));
  CHECK(c->LearningRateAt(1000) == Approx(0.1));

  o.schedule = LrSchedule::kConstant;
  o.warmup_steps = 4;
  auto w = Sgd::Create(o, 1);
  REQUIRE(w.ok());
  CHECK(w->LearningRateAt(0) == Approx(0.25));
  CHECK(w->LearningRateAt(3) == Approx(1.0));
  CHECK(w->LearningRateAt(4) == Approx(1.0));
  CHECK(*ParseLrSchedule("cosine") == LrSchedule::kCosine);
  CHECK(!ParseLrSchedule("linear").ok());
}

TEST_CASE("sgd refuses bad options and non-finite gradients", "[sgd]") {
  SgdOptions o;
  o.momentum = 1.0;
  CHECK(!Sgd::Create(o, 3).ok());
  o = {};
  o.schedule = LrSchedule::kCosine;  // total_steps missing
  CHECK(Sgd::Create(o, 3).status().code() == StatusCode::kInvalidArgument);
  o = {};
  CHECK(!Sgd::Create(o, 0).ok());
  auto s = Sgd::Create({}, 2);
  REQUIRE(s.ok());
  std::vector<float> p = {1, 2}, g = {0.1f, std::numeric_limits<float>::quiet_NaN()};
  Status st = s->Step(p, g);
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK(p[0] == 1.0f);
  CHECK(s->step() == 0);
  std::vector<float> wrong(3);
  CHECK(s->Step(p, wrong).code() == StatusCode::kInvalidArgument);
}
