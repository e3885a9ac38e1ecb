// The pure pieces of a ring round (edge_agent/round_decision.h,
// gradient_carry.h, ring_hello.h). No sockets.
#include "edge_agent/round_decision.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>

#include "core/codec.h"
#include "core/proto/loft.pb.h"
#include "edge_agent/gradient_carry.h"
#include "edge_agent/ring_guard.h"
#include "edge_agent/ring_hello.h"

using namespace loft;
using namespace loft::agent;

namespace {
MemberHello H(double b, int64_t last_round, uint64_t hash, uint64_t partition = 0, bool reports = false) {
  MemberHello h;
  h.b = b;
  h.last_round = last_round;
  h.hash = hash;
  h.partition = partition;
  h.reports = reports;
  return h;
}
std::vector<std::byte> Bytes(const std::string& s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}
}  // namespace

TEST_CASE("DecideSync: a member off the majority's state fetches it from the holders in ring order") {
  RoundHellos x{{0, 2, 5}, {H(3, 7, 0xAA), H(3, 7, 0xAA), H(3, -1, 0x11)}, {}};
  SyncDecision d = DecideSync(5, x, {-1, 0x11});
  CHECK(d.needed);
  CHECK(d.target == std::pair<int64_t, uint64_t>{7, 0xAA});
  CHECK(d.agreeing == 2);
  CHECK(d.holders == std::vector<int>{0, 2});
  SyncDecision ok = DecideSync(2, x, {7, 0xAA});
  CHECK_FALSE(ok.needed);
  CHECK(ok.holders == std::vector<int>{0});  // never itself
}

TEST_CASE("DecideSync: one member claiming a far-ahead round does not move two that agree") {
  RoundHellos x{{0, 1, 2}, {H(1, 4, 0xA), H(1, 4, 0xA), H(1, 4000000000, 0xB)}, {}};
  SyncDecision d = DecideSync(0, x, {4, 0xA});
  CHECK_FALSE(d.needed);
  CHECK(d.target.first == 4);
}

TEST_CASE("RoundCarried: a round at or below the last applied one is carried") {
  CHECK(RoundCarried(5, 5));
  CHECK(RoundCarried(6, 5));
  CHECK_FALSE(RoundCarried(4, 5));
  CHECK_FALSE(RoundCarried(-1, 0));
}

TEST_CASE("PlanRound: batch-size weights for mean, one per member with samples for robust reducers") {
  RoundHellos x{{0, 1, 2}, {H(4, 1, 1, 40), H(0, 1, 1), H(2, 1, 1, 20)}, {}};
  models::ReducerOptions mean;
  auto p = PlanRound(1, 2, x, mean);
  REQUIRE(p.ok());
  CHECK(p->weights == std::vector<double>{4, 0, 2});
  CHECK(p->present == 2);
  models::ReducerOptions med;
  med.kind = models::ReducerKind::kMedian;
  auto q = PlanRound(1, 2, x, med);
  REQUIRE(q.ok());
  CHECK(q->weights == std::vector<double>{1, 0, 1});
}

TEST_CASE("PlanRound: trimmed_mean weights capped at the even share of the global batch") {
  RoundHellos x{
      {0, 1, 2, 3, 4}, {H(8, 1, 1, 10), H(8, 1, 1, 11), H(480, 1, 1, 12), H(0, 1, 1), H(16, 1, 1, 13)}, {}};
  models::ReducerOptions trim;
  trim.kind = models::ReducerKind::kTrimmedMean;
  auto p = PlanRound(0, 2, x, trim, 512);
  REQUIRE(p.ok());
  CHECK(p->weights == std::vector<double>{8, 8, 128, 0, 16});  // four present: cap 512 / 4
  CHECK(p->present == 4);
  CHECK(p->reducer.trim_count == 1);
  auto q = PlanRound(0, 2, x, trim);  // no global batch: one per member with samples
  REQUIRE(q.ok());
  CHECK(q->weights == std::vector<double>{1, 1, 1, 0, 1});
}

TEST_CASE("PlanRound: the applied list holds partitions of members with weight, sorted") {
  RoundHellos x{{0, 1, 2}, {H(4, 1, 1, 40), H(0, 1, 1), H(2, 1, 1, 20)}, {}};
  auto p = PlanRound(0, 2, x, {});
  REQUIRE(p.ok());
  CHECK(p->applied == std::vector<std::pair<uint64_t, int32_t>>{{20, 2}, {40, 0}});
  // Carried samples only (b > 0, no partition): weight, but nothing applied.
  RoundHellos c{{0, 1}, {H(3, 1, 1, 0), H(2, 1, 1, 9)}, {}};
  auto q = PlanRound(0, 2, c, {});
  REQUIRE(q.ok());
  CHECK(q->weights == std::vector<double>{3, 2});
  CHECK(q->applied == std::vector<std::pair<uint64_t, int32_t>>{{9, 1}});
}

TEST_CASE("PlanRound: the first reporting member in ring order evaluates") {
  RoundHellos x{{0, 3, 4}, {H(1, 1, 1, 1, false), H(1, 1, 1, 2, true), H(1, 1, 1, 3, true)}, {}};
  CHECK(PlanRound(3, 1, x, {})->evaluator);
  CHECK_FALSE(PlanRound(4, 1, x, {})->evaluator);
  CHECK_FALSE(PlanRound(0, 1, x, {})->evaluator);
}

TEST_CASE("PlanRound: trimmed_mean trims max(1, 0.2 N) per side while N > 2k, krum f fits N") {
  models::ReducerOptions tm;
  tm.kind = models::ReducerKind::kTrimmedMean;
  RoundHellos six{{0, 1, 2, 3, 4, 5}, std::vector<MemberHello>(6, H(1, 0, 0, 1)), {}};
  CHECK(PlanRound(0, 1, six, tm)->reducer.trim_count == 1);
  RoundHellos two{{0, 1}, std::vector<MemberHello>(2, H(1, 0, 0, 1)), {}};
  CHECK(PlanRound(0, 1, two, tm)->reducer.trim_count == 0);
  models::ReducerOptions krum;
  krum.kind = models::ReducerKind::kMultiKrum;
  krum.krum_f = 1;
  RoundHellos three{{0, 1, 2}, std::vector<MemberHello>(3, H(1, 0, 0, 1)), {}};
  CHECK(PlanRound(0, 1, three, krum)->reducer.krum_f == 0);
  CHECK(PlanRound(0, 1, six, krum)->reducer.krum_f == 1);
}

TEST_CASE("PlanRound: a round where no member has samples is DataLoss") {
  RoundHellos x{{0, 1}, {H(0, 1, 1), H(0, 1, 1)}, {}};
  auto p = PlanRound(0, 7, x, {});
  CHECK(p.status().code() == StatusCode::kDataLoss);
  CHECK(p.status().message() == "round 7: no member has samples");
}

TEST_CASE("GradientCarry mixes carried samples into the next contribution as one mean") {
  GradientCarry c;
  std::vector<float> out;
  c.Mix(0, std::vector<float>{9, 9}, &out);
  CHECK(out == std::vector<float>{0, 0});  // nothing at all: zeros
  c.Add(2, std::vector<float>{1, 2});
  c.Add(0, std::vector<float>{100, 100});  // no samples: nothing kept
  CHECK(c.samples() == 2);
  c.Mix(2, std::vector<float>{3, 4}, &out);  // (2*[1,2] + 2*[3,4]) / 4
  CHECK(out[0] == Approx(2));
  CHECK(out[1] == Approx(3));
  c.Mix(0, std::vector<float>{0, 0}, &out);  // a weight-0 join carrying samples
  CHECK(out[0] == Approx(1));
  c.Clear();
  CHECK(c.samples() == 0);
  c.Mix(1, std::vector<float>{5, 6}, &out);
  CHECK(out == std::vector<float>{5, 6});
}

TEST_CASE("RingHello round-trips and stamps this build's protocol version") {
  MemberHello h = H(12.5, 41, 0xDEADBEEFCAFEull, 77, true);
  auto bytes = EncodeHello(h);
  v1::RingHello m;
  REQUIRE(m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())));
  CHECK(m.protocol_version() == kProtocolVersion);
  auto d = DecodeHello(bytes);
  REQUIRE(d.ok());
  CHECK(d->b == 12.5);
  CHECK(d->last_round == 41);
  CHECK(d->hash == 0xDEADBEEFCAFEull);
  CHECK(d->partition == 77);
  CHECK(d->reports);
  auto r = DecodeHello(EncodeHello(H(0, -1, 0)));
  REQUIRE(r.ok());
  CHECK(r->last_round == -1);
}

TEST_CASE(
    "RingHello carries an external member's vector length as field 7, the built-in hello is unchanged") {
  MemberHello h = H(4, 2, 9, 5);
  const auto plain = EncodeHello(h);
  h.length = 123456789;
  const auto with_length = EncodeHello(h);
  CHECK(with_length.size() > plain.size());
  auto d = DecodeHello(with_length);
  REQUIRE(d.ok());
  CHECK(d->length == 123456789);
  CHECK(d->partition == 5);
  auto p = DecodeHello(plain);
  REQUIRE(p.ok());
  CHECK(p->length == 0);
  // Field 7 with another wire type is no length: protobuf keeps it aside
  // as an unknown field and the length reads as not said.
  std::string bytes(reinterpret_cast<const char*>(plain.data()), plain.size());
  bytes += std::string("\x3d\x01\x02\x03\x04", 5);  // field 7, fixed32
  auto odd = DecodeHello(Bytes(bytes));
  REQUIRE(odd.ok());
  CHECK(odd->length == 0);
}

TEST_CASE("RingHello: other versions, garbage and impossible values are refused, naming what was wrong") {
  v1::RingHello m;
  m.set_protocol_version(2);
  m.set_samples(1);
  m.set_partition(1);
  auto old = DecodeHello(Bytes(m.SerializeAsString()));
  CHECK(old.status().message() ==
        "ring hello: protocol version 2 is not supported (this build speaks version " +
            std::to_string(kProtocolVersion) + ")");
  // The version-2 packed bytes (33 bytes) are not a RingHello of this version.
  std::vector<std::byte> packed(33, std::byte{0x41});
  CHECK_FALSE(DecodeHello(packed).ok());
  m.set_protocol_version(kProtocolVersion);
  m.set_samples(std::numeric_limits<double>::quiet_NaN());
  CHECK(DecodeHello(Bytes(m.SerializeAsString())).status().message().find("sample count") !=
        std::string::npos);
  m.set_samples(-1);
  CHECK_FALSE(DecodeHello(Bytes(m.SerializeAsString())).ok());
  m.set_samples(0);
  m.set_partition(5);
  CHECK(DecodeHello(Bytes(m.SerializeAsString())).status().message() ==
        "ring hello: partition 5 with no samples");
  m.set_partition(0);
  m.set_last_round(int64_t{1} << 40);
  CHECK(DecodeHello(Bytes(m.SerializeAsString())).status().message().find("is no ring round") !=
        std::string::npos);
  m.set_last_round(-2);
  CHECK_FALSE(DecodeHello(Bytes(m.SerializeAsString())).ok());
}

TEST_CASE("RingGuard: the window follows what this agent knows, nothing is judged before it knows anything") {
  RingGuard g(RingGuardOptions{1, 100, 3});
  CHECK_FALSE(g.OutOfWindow(-1, 4000000000));  // a fresh agent cannot tell
  g.Planned(10);
  g.Planned(4);  // planned only rises
  CHECK(g.planned() == 10);
  CHECK_FALSE(g.OutOfWindow(-1, 110));
  CHECK(g.OutOfWindow(-1, 111));
  CHECK_FALSE(g.OutOfWindow(500, 600));  // the applied round counts too
  CHECK(g.OutOfWindow(500, 601));
}

TEST_CASE("RingGuard: f+1 announcers for a weight-0 join, a sender is reported every report_after offences") {
  CHECK(RingGuard(RingGuardOptions{0, 100, 3}).JoinQuorum() == 1);
  RingGuard g(RingGuardOptions{2, 100, 3});
  CHECK(g.JoinQuorum() == 3);
  CHECK_FALSE(g.Offence(4));
  CHECK_FALSE(g.Offence(4));
  CHECK_FALSE(g.Offence(5));
  CHECK(g.Offence(4));  // third by node 4
  CHECK(g.offences(4) == 3);
  CHECK(g.offences(5) == 1);
  CHECK(g.offences(6) == 0);
  CHECK_FALSE(g.Offence(4));
  CHECK_FALSE(g.Offence(4));
  CHECK(g.Offence(4));  // resent at the sixth
  CHECK(g.total_offences() == 7);
}

TEST_CASE("Participants: members past the round vote with their state but leave the all-reduce") {
  // Node 2 finished round 7 while 0 and 5 restart it: 0 and 5 all-reduce
  // round 7 between them; node 2's state (round 7) is one vote of three.
  MemberHello past;
  past.last_round = 7;
  past.hash = 0xBB;
  RoundHellos x{{0, 2, 5}, {H(3, 6, 0xAA, 40), past, H(2, 6, 0xAA, 41)}, {2}};
  SyncDecision d = DecideSync(0, x, {6, 0xAA});
  CHECK_FALSE(d.needed);
  CHECK(d.agreeing == 2);
  RoundHellos p = Participants(x);
  CHECK(p.members == std::vector<int>{0, 5});
  REQUIRE(p.hellos.size() == 2);
  CHECK(p.hellos[1].partition == 41);
  CHECK(p.past.empty());
  auto plan = PlanRound(0, 7, p, {});
  REQUIRE(plan.ok());
  CHECK(plan->weights == std::vector<double>{3, 2});
  // With only one member left to restart it, the past member's state wins
  // the tie (the later round): the member fetches it and carries its samples.
  RoundHellos two{{0, 2}, {H(3, 6, 0xAA, 40), past}, {2}};
  SyncDecision t = DecideSync(0, two, {6, 0xAA});
  CHECK(t.needed);
  CHECK(t.target == std::pair<int64_t, uint64_t>{7, 0xBB});
  CHECK(t.holders == std::vector<int>{2});
  CHECK(RoundCarried(t.target.first, 7));
}

TEST_CASE("FindFinishedElsewhere: f+1 members past the round holding it vouch for its result") {
  MemberHello done;
  done.last_round = 7;
  done.hash = 0xBB;
  MemberHello skipped;  // past the round without having applied it
  skipped.last_round = 6;
  skipped.hash = 0xAA;
  MemberHello liar = done;
  liar.hash = 0xCC;
  RoundHellos x{{0, 2, 5}, {H(3, 6, 0xAA, 40), done, H(2, 6, 0xAA, 41)}, {2}};
  auto f0 = FindFinishedElsewhere(x, 7, 1);
  REQUIRE(f0);
  CHECK(f0->hash == 0xBB);
  CHECK(f0->holders == std::vector<int>{2});
  CHECK_FALSE(FindFinishedElsewhere(x, 7, 2));  // f = 1: one member alone is not believed
  CHECK_FALSE(FindFinishedElsewhere(x, 8, 1));  // it holds round 7, not 8
  RoundHellos two{{0, 2, 3, 5}, {H(3, 6, 0xAA, 40), done, done, liar}, {2, 3, 5}};
  auto f1 = FindFinishedElsewhere(two, 7, 2);
  REQUIRE(f1);
  CHECK(f1->hash == 0xBB);
  CHECK(f1->holders == std::vector<int>{2, 3});
  RoundHellos skip{{0, 2}, {H(3, 6, 0xAA, 40), skipped}, {2}};
  CHECK_FALSE(FindFinishedElsewhere(skip, 7, 1));  // it skipped the round: it is left out, nothing to take
  // A member not past the round never counts, whatever it holds.
  RoundHellos none{{0, 2}, {H(3, 6, 0xAA, 40), done}, {}};
  CHECK_FALSE(FindFinishedElsewhere(none, 7, 1));
}

TEST_CASE("LocalStepScale: a local step counts as the member's share of the global batch") {
  // B = 512 over 4 members: an even share (128) steps at full size.
  CHECK(LocalStepScale(128, 512, 4) == Approx(1.0));
  // loft's small batch on a slow node: a quarter of the share, a quarter step.
  CHECK(LocalStepScale(32, 512, 4) == Approx(0.25));
  CHECK(LocalStepScale(256, 512, 4) == Approx(2.0));
  CHECK(LocalStepScale(0, 512, 4) == 0.0);
  // Nothing to scale by: the step as computed.
  CHECK(LocalStepScale(32, 0, 4) == 1.0);
  CHECK(LocalStepScale(32, 512, 0) == 1.0);
}
