// last_decile_iteration_ms and bound_epoch_mean_iteration_ms in summary.json.
#include <catch2/catch.hpp>
#include <vector>

#include "sim/summary.h"

namespace loft::sim {
namespace {

TEST_CASE("LastDecileMs averages each completed epoch's last tenth", "[sim][summary]") {
  // Epoch 0: 20 iterations (last 2: 10, 30); epoch 1: 5 iterations (last 1:
  // 7); epoch 2 incomplete.
  std::vector<double> ms;
  std::vector<int64_t> epoch;
  for (int i = 0; i < 18; ++i) {
    ms.push_back(1);
    epoch.push_back(0);
  }
  ms.insert(ms.end(), {10, 30});
  epoch.insert(epoch.end(), {0, 0});
  for (int i = 0; i < 5; ++i) {
    ms.push_back(i == 4 ? 7 : 1);
    epoch.push_back(1);
  }
  ms.push_back(1000);
  epoch.push_back(2);
  CHECK(LastDecileMs(ms, epoch, 2) == Approx((10 + 30 + 7) / 3.0));
  // No completed epoch: every epoch counts.
  CHECK(LastDecileMs(ms, epoch, 0) == Approx((10 + 30 + 7 + 1000) / 4.0));
  CHECK(LastDecileMs({}, {}, 0) == 0);
}

TEST_CASE("summary.json carries the epoch fields", "[sim][summary]") {
  SummaryFile s;
  s.policies["loft"].mean_iteration_ms = 5;
  s.policies["loft"].last_decile_iteration_ms = 9.5;
  s.bound_epoch_mean_iteration_ms = 4.25;
  auto back = ParseSummaryJson(SummaryToJson(s));
  REQUIRE(back.ok());
  CHECK(back->policies["loft"].last_decile_iteration_ms.value() == 9.5);
  CHECK(back->bound_epoch_mean_iteration_ms.value() == 4.25);
  CHECK(SummaryTable(s).find("bound-epoch") != std::string::npos);
}

}  // namespace
}  // namespace loft::sim
