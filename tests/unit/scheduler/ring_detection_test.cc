#include "scheduler/ring_detection.h"

#include <catch2/catch.hpp>

using namespace loft;
using loft::sched::RingDetection;

namespace {
v1::TrainingReport Offences(std::vector<std::tuple<int32_t, std::string, int64_t>> entries) {
  v1::TrainingReport t;
  for (auto& [node, reason, count] : entries) {
    auto* o = t.add_ring_offences();
    o->set_node(node);
    o->set_reason(reason);
    o->set_count(count);
  }
  return t;
}
}  // namespace

TEST_CASE("Ring detection keeps each reporter's latest offence counts, by kind, with metrics") {
  metrics::Registry registry;
  auto d = RingDetection::Create(&registry);
  REQUIRE(d.ok());
  d->RecordOffences(0, Offences({{5, "chunk_mismatch", 3}}), 6);
  d->RecordOffences(0, Offences({{5, "chunk_mismatch", 7}, {5, "out_of_window", 1}}), 6);  // cumulative
  d->RecordOffences(0, Offences({{5, "chunk_mismatch", 6}}), 6);  // older report: no change
  d->RecordOffences(1, Offences({{5, "chunk_mismatch", 2}}), 6);
  CHECK(d->offences("chunk_mismatch") == 9);
  CHECK(d->offences("out_of_window") == 1);
  CHECK(d->offences() == 10);
  // Out of range, self, negative, unknown reason: ignored and counted.
  d->RecordOffences(
      1,
      Offences(
          {{9, "chunk_mismatch", 1}, {1, "chunk_mismatch", 1}, {5, "chunk_mismatch", -1}, {5, "bogus", 4}}),
      6);
  CHECK(d->ignored() == 4);
  CHECK(d->offences() == 10);
  d->RecordReport("chunk_mismatch");
  d->RecordReport("chunk_mismatch");
  d->RecordReport("made_up");
  d->RecordEviction(5);
  d->RecordEviction(5);  // once
  CHECK(d->reports() == 3);
  CHECK(d->evictions() == 1);
  const auto j = d->ToJson();
  CHECK(j["offences"] == 10);
  CHECK(j["offences_by_reason"]["chunk_mismatch"] == 9);
  CHECK(j["offences_by_reason"]["malformed_hello"] == 0);
  CHECK(j["offences_by_node"]["5"] == 10);
  CHECK(j["reports_by_reason"]["chunk_mismatch"] == 2);
  CHECK(j["reports_by_reason"]["other"] == 1);
  CHECK(j["evicted"] == std::vector<int32_t>{5});
  const std::string m = registry.Render();
  CHECK(m.find("loft_scheduler_ring_offences_total{reason=\"chunk_mismatch\"} 9") != std::string::npos);
  CHECK(m.find("loft_scheduler_ring_offences_total{reason=\"out_of_window\"} 1") != std::string::npos);
  CHECK(m.find("loft_scheduler_peer_reports_total{reason=\"chunk_mismatch\"} 2") != std::string::npos);
  CHECK(m.find("loft_scheduler_evictions_total 1") != std::string::npos);
}
