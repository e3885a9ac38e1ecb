#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "sim/event_queue.h"
#include "sim/flow_network.h"
#include "sim/summary.h"

namespace loft::sim {
namespace {

TEST_CASE("events run in (time, insertion) order", "[sim][engine]") {
  EventQueue q;
  std::vector<std::string> order;
  q.At(5, [&] { order.push_back("b5"); });
  q.At(1, [&] { order.push_back("a1"); });
  q.At(5, [&] { order.push_back("c5"); });
  q.At(3, [&] {
    order.push_back("x3");
    q.After(0, [&] { order.push_back("y3"); });  // same time, later seq
  });
  REQUIRE(q.RunUntil(4) == 3);
  CHECK(q.now_ms() == 4);
  q.RunUntil(100);
  CHECK(order == std::vector<std::string>{"a1", "x3", "y3", "b5", "c5"});
  CHECK(q.empty());
  CHECK(q.events_run() == 5);
}

TEST_CASE("one flow alone runs at the slower of uplink and downlink", "[sim][network]") {
  EventQueue q;
  FlowNetwork net(&q, {10.0, 4.0}, {6.0, 8.0});
  double done_at = -1;
  net.Start(0, 1, 80.0, [&](bool ok) {
    CHECK(ok);
    done_at = q.now_ms();
  });
  q.RunUntil(1e9);
  CHECK(done_at == Approx(80.0 / 8.0));  // min(up0 = 10, down1 = 8)
}

TEST_CASE("a link's token bucket lets a burst through at once, then refills while idle", "[sim][network]") {
  EventQueue q;
  FlowNetwork net(&q, {10.0, 4.0}, {6.0, 8.0});
  net.SetBursts({20.0, 0.0}, {0.0, 30.0});  // up of 0: 20 bytes; down of 1: 30 bytes
  std::vector<double> done;
  auto record = [&](bool ok) {
    CHECK(ok);
    done.push_back(q.now_ms());
  };
  net.Start(0, 1, 80.0, record);  // 20 at once (the smaller bucket), 60 at rate 8
  q.RunUntil(1e9);
  REQUIRE(done.size() == 1);
  CHECK(done[0] == Approx(60.0 / 8.0));
  // Idle 1 ms: the uplink's bucket holds 0 + 10 of 20, the downlink's 10 + 8 of 30.
  q.At(done[0] + 1.0, [&] { net.Start(0, 1, 8.0, record); });
  q.RunUntil(1e9);
  REQUIRE(done.size() == 2);
  CHECK(done[1] == Approx(done[0] + 1.0));  // all 8 bytes at once
  // Back to back: the uplink has 10 - 8 = 2 left: 2 at once, 14 at rate 8.
  net.Start(0, 1, 16.0, record);
  q.RunUntil(1e9);
  REQUIRE(done.size() == 3);
  CHECK(done[2] == Approx(done[1] + 14.0 / 8.0));
  // A flow started without burst (the ring's) is held to the rate even
  // with full buckets, and leaves the tokens to the next flow.
  q.At(done[2] + 100.0, [&] { net.Start(0, 1, 16.0, record, /*burst=*/false); });
  q.RunUntil(1e9);
  REQUIRE(done.size() == 4);
  CHECK(done[3] == Approx(done[2] + 100.0 + 16.0 / 8.0));
  net.Start(0, 1, 16.0, record);
  q.RunUntil(1e9);
  REQUIRE(done.size() == 5);
  CHECK(done[4] == Approx(done[3]));  // 16 of the uplink's 20 tokens at once
}

TEST_CASE("without bursts a small flow is held to the rate", "[sim][network]") {
  EventQueue q;
  FlowNetwork net(&q, {10.0, 4.0}, {6.0, 8.0});
  double done_at = -1;
  net.Start(0, 1, 8.0, [&](bool) { done_at = q.now_ms(); });
  q.RunUntil(1e9);
  CHECK(done_at == Approx(1.0));
}

TEST_CASE("two equal flows on one link each get half the rate", "[sim][network]") {
  EventQueue q;
  // Node 0 serves nodes 1 and 2; its uplink (10) is the bottleneck.
  FlowNetwork net(&q, {10.0, 100.0, 100.0}, {100.0, 100.0, 100.0});
  std::vector<double> done;
  const uint64_t f1 = net.Start(0, 1, 50.0, [&](bool) { done.push_back(q.now_ms()); });
  const uint64_t f2 = net.Start(0, 2, 50.0, [&](bool) { done.push_back(q.now_ms()); });
  CHECK(net.RateOf(f1) == Approx(5.0));
  CHECK(net.RateOf(f2) == Approx(5.0));
  q.RunUntil(1e9);
  REQUIRE(done.size() == 2);
  CHECK(done[0] == Approx(10.0));
  CHECK(done[1] == Approx(10.0));
}

TEST_CASE("max-min fairness gives leftover capacity to unconstrained flows", "[sim][network]") {
  EventQueue q;
  // Reader 2's downlink (12) is shared by flows from 0 and 1; server 0's
  // uplink is 2, so the flow from 1 gets the remaining 10.
  FlowNetwork net(&q, {2.0, 100.0, 100.0}, {100.0, 100.0, 12.0});
  const uint64_t a = net.Start(0, 2, 20.0, [](bool) {});
  const uint64_t b = net.Start(1, 2, 20.0, [](bool) {});
  CHECK(net.RateOf(a) == Approx(2.0));
  CHECK(net.RateOf(b) == Approx(10.0));
  // After b finishes (t = 2), a stays at 2 (its uplink); it ends at t = 10.
  q.RunUntil(1e9);
  CHECK(q.now_ms() == Approx(10.0));
}

TEST_CASE("a finishing flow frees bandwidth for the others", "[sim][network]") {
  EventQueue q;
  FlowNetwork net(&q, {10.0, 100.0, 100.0}, {100.0, 100.0, 100.0});
  double t_small = 0, t_big = 0;
  net.Start(0, 1, 10.0, [&](bool) { t_small = q.now_ms(); });
  net.Start(0, 2, 30.0, [&](bool) { t_big = q.now_ms(); });
  q.RunUntil(1e9);
  CHECK(t_small == Approx(2.0));  // 10 bytes at 5/ms
  CHECK(t_big == Approx(4.0));    // 10 bytes by t=2, then 20 at 10/ms
}

TEST_CASE("cancelling a node fails its flows", "[sim][network]") {
  EventQueue q;
  FlowNetwork net(&q, {10.0, 10.0, 10.0}, {10.0, 10.0, 10.0});
  int failed = 0, ok = 0;
  double t_ok = 0;
  net.Start(0, 1, 100.0, [&](bool k) { k ? ++ok : ++failed; });
  net.Start(2, 1, 100.0, [&](bool k) {
    k ? ++ok : ++failed;
    t_ok = q.now_ms();
  });
  q.At(1.0, [&] { net.CancelNode(0); });
  q.RunUntil(1e9);
  CHECK(failed == 1);
  CHECK(ok == 1);
  // 5 bytes in the first ms, then the whole downlink: 95 / 10 more.
  CHECK(t_ok == Approx(1.0 + 9.5));
}

TEST_CASE("flows started at one instant share one recomputation", "[sim][network]") {
  EventQueue q;
  std::vector<double> up(11, 1000.0), down(11, 1000.0);
  down[10] = 20.0;  // node 10 reads from nodes 0..9 through a 20 bytes/ms downlink
  FlowNetwork net(&q, up, down);
  double last = 0;
  int done = 0;
  for (int s = 0; s < 10; ++s) {
    net.Start(s, 10, 10.0 * (s + 1), [&](bool ok) {
      CHECK(ok);
      ++done;
      last = q.now_ms();
    });
  }
  q.RunUntil(0);
  CHECK(net.recomputes() == 1);
  q.RunUntil(1e9);
  CHECK(done == 10);
  // The downlink stays saturated until the last byte: 550 bytes / 20.
  CHECK(last == Approx(550.0 / 20.0));
}

TEST_CASE("summary.json round-trips and has the documented fields", "[sim][summary]") {
  SummaryFile s;
  PolicySummary p;
  sched::RunRecorder recorder;
  for (int64_t i = 0; i < 4; ++i) {
    sched::IterationRecord rec;
    rec.iteration = i;
    rec.start_ms = 100.0 * static_cast<double>(i);
    rec.makespan_ms = 10.0 * static_cast<double>(i + 1);
    recorder.Add(rec);
  }
  SetFigures(recorder.Figures(0), &p);
  CHECK(p.iterations == 4);
  CHECK(p.mean_iteration_ms == 25);
  CHECK(p.p95_iteration_ms == 40);
  p.local_bytes = 123;
  p.remote_bytes = 456;
  p.total_s = 0.1;
  s.policies["loft"] = p;
  s.bound_mean_iteration_ms = 9.5;
  const std::string text = SummaryToJson(s);
  for (const char* key :
       {"\"policies\"", "\"loft\"", "\"mean_iteration_ms\"", "\"p95_iteration_ms\"", "\"total_s\"",
        "\"straggler_wait_ms\"", "\"local_bytes\"", "\"remote_bytes\"", "\"bound_mean_iteration_ms\""}) {
    CHECK(text.find(key) != std::string::npos);
  }
  auto back = ParseSummaryJson(text);
  REQUIRE(back.ok());
  CHECK(back->policies.at("loft").remote_bytes == 456);
  CHECK(*back->bound_mean_iteration_ms == 9.5);
  CHECK(SummaryToJson(*back) == text);
  auto bad = ParseSummaryJson(R"({"policies": {"x": {"mean_iteration_ms": "fast"}}})");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("policies.x.mean_iteration_ms") != std::string::npos);
}

}  // namespace
}  // namespace loft::sim
