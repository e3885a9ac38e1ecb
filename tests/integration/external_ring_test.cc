// ExternalRing (training.model external) against ring peers that send what
// they like, over real tcp loopback: rank 0 is the ring, ranks 1 (and 2) raw
// ZmqTransports. The external ring speaks the built-in trainer's protocol
// (edge_agent/ring_round.h): RingHello, the guard window, the f+1 join
// quorum, the verified ring and its offences.
#include "edge_agent/external_ring.h"

#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/cluster_spec.h"
#include "core/codec.h"
#include "core/zmq_util.h"
#include "edge_agent/external_trainer.h"
#include "edge_agent/ring_hello.h"
#include "edge_agent/zmq_transport.h"
#include "models/reducers.h"
#include "models/ring_allreduce.h"
#include "models/transport.h"
#include "tests/integration/raw_ring_peer.h"

using namespace loft;
using namespace loft::agent;

namespace {

// exchange: the spec's training.exchange ("" = the default, period 1).
ClusterSpec Spec(int tolerance, int nodes, const std::string& exchange = "") {
  auto spec = ParseClusterSpec(
      "dataset: {name: fashion-mnist, samples: 60000, sample_bytes: 784}\n"
      "training: {global_batch: 30, min_batch: 1, model: external, aggregation: mean, "
      "byzantine_tolerance: " +
          std::to_string(tolerance) + (exchange.empty() ? "" : ", exchange: " + exchange) +
          "}\n"
          "nodes:\n"
          "  - name: edge\n"
          "    count: " +
          std::to_string(nodes) + "\n",
      "ring.yaml");
  REQUIRE(spec.ok());
  return *spec;
}

std::unique_ptr<ExternalRing> MakeRing(const ClusterSpec& spec, zmq::context_t* ctx) {
  ExternalRingOptions o;
  o.node = 0;
  o.context = ctx;
  o.ring_timeout_ms = 400;
  o.view_wait_ms = 200;
  o.state_timeout_ms = 200;
  o.idle_join_grace_ms = 10;
  auto r = ExternalRing::Create(spec, o);
  REQUIRE(r.ok());
  return std::move(*r);
}

MemberHello Hello(double b, int64_t last_round, uint64_t partition, uint64_t length, uint64_t hash = 0) {
  MemberHello h;
  h.b = b;
  h.last_round = last_round;
  h.partition = partition;
  h.length = length;
  h.hash = hash;
  return h;
}

struct Ring {
  zmq::context_t ctx{1};
  std::unique_ptr<ExternalRing> ring;
  std::unique_ptr<ZmqTransport> peer;

  explicit Ring(int tolerance = 0, int nodes = 2) {
    ring = MakeRing(Spec(tolerance, nodes), &ctx);
    peer = testing::RawPeer(&ctx, nodes, ring->ring_endpoint());
    ring->OnView(testing::TwoMembers(1, ring->ring_endpoint(), peer->endpoint()));
  }

  // Rank 1's hello of `round` of view 1.
  void Send(uint32_t round, const MemberHello& h) {
    REQUIRE(peer->Send(0, models::MakeTag(1, round, kHelloPhase), EncodeHello(h)).ok());
  }

  // What ExternalTrainer::Idle does for `ms`: joins (with weight 0, no
  // consumer) every round PendingJoin gives. Returns the rounds joined.
  std::vector<uint32_t> IdleFor(int ms) {
    std::vector<uint32_t> joined;
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < end) {
      if (auto j = ring->PendingJoin()) {
        joined.push_back(j->second);
        auto r = ring->Round(j->first, j->second, 0, 0, {}, /*consumer=*/false);
        if (!r.ok() && ring->round_done() < static_cast<int64_t>(j->second))
          ring->RefuseIdle(j->first, j->second);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return joined;
  }
};

}  // namespace

TEST_CASE("external ring: a member that skipped the round (its later hello came) is not waited for") {
  Ring r;
  r.Send(6, Hello(4, -1, 88, 3));  // rank 1 holds no round: it skipped round 5 and is in round 6
  const std::vector<float> grad{1.0f, 2.0f, 3.0f};
  auto out = r.ring->Round(1, 5, 4, 77, grad, /*consumer=*/true);
  REQUIRE(out.ok());
  CHECK(out->kind == ExternalRing::Kind::kApplied);
  CHECK(out->members == 1);
  CHECK(out->attempts == 1);
  CHECK(out->aggregate == grad);  // its own gradient alone
  REQUIRE(out->applied.size() == 1);
  CHECK(out->applied[0].first == 77);
}

TEST_CASE("external ring: a member holding the round in its later hello is still waited for") {
  Ring r;
  r.Send(6, Hello(4, 5, 88, 3));  // rank 1 holds round 5: this ring does not take such a result over
  const std::vector<float> grad{1.0f, 2.0f, 3.0f};
  auto out = r.ring->Round(1, 5, 4, 77, grad, /*consumer=*/true);
  REQUIRE_FALSE(out.ok());  // the ring timeout, and no newer view to restart in
  CHECK(out.status().code() == StatusCode::kDeadlineExceeded);
}

TEST_CASE("external ring: a round in which no member has samples is an error outcome, not retried") {
  Ring r;
  r.Send(5, Hello(0, -1, 0, 0));  // rank 1 has no samples either
  auto out = r.ring->Round(1, 5, 0, 0, {}, /*consumer=*/false);
  REQUIRE(out.ok());
  CHECK(out->kind == ExternalRing::Kind::kError);
  CHECK(out->message == "round 5: no member has samples");
  CHECK(out->members == 2);
  CHECK(out->attempts == 1);
  // The round is done: a second partition of it is carried, not run again.
  const std::vector<float> grad{1.0f, 2.0f, 3.0f};
  auto late = r.ring->Round(1, 5, 4, 78, grad, /*consumer=*/true);
  REQUIRE(late.ok());
  CHECK(late->kind == ExternalRing::Kind::kCarried);
}

TEST_CASE("external ring attack: a phantom round one member announces is never joined (f = 1)") {
  Ring r(/*tolerance=*/1, /*nodes=*/3);
  r.Send(1000, Hello(5, -1, 99, 3));  // nobody planned round 1000
  CHECK(r.IdleFor(600).empty());
  CHECK(r.ring->round_done() == -1);
}

TEST_CASE("external ring attack: a weight-0 hello cannot create a round, even in a trusted ring") {
  Ring r(/*tolerance=*/0);
  r.Send(7, Hello(0, -1, 0, 0));
  CHECK(r.IdleFor(600).empty());
  CHECK(r.ring->round_done() == -1);
}

TEST_CASE("external ring attack: rounds 2^31 ahead are dropped, counted and the sender reported") {
  Ring r(/*tolerance=*/0);
  r.ring->Planned(3);  // the scheduler gave this agent iteration 3
  const uint32_t far = 3u + (1u << 31);
  for (uint32_t k = 0; k < 8; ++k) r.Send(far + k, Hello(5, -1, 99, 3));
  CHECK(r.IdleFor(400).empty());
  CHECK(r.ring->round_done() == -1);  // later partitions are not "carried"
  auto offences = r.ring->TakeOffences();
  REQUIRE(offences.size() == 8);
  for (const auto& o : offences) {
    CHECK(o.node == 1);
    CHECK(o.reason == "out_of_window");
  }
  CHECK_FALSE(offences[6].report);
  CHECK(offences[7].report);  // the 8th offence is reported
  // Round 4 is not carried: it runs (rank 1 skipped it and is in round 5).
  r.Send(5, Hello(4, -1, 88, 3));
  const std::vector<float> grad{1.0f, 2.0f, 3.0f};
  auto out = r.ring->Round(1, 4, 4, 77, grad, /*consumer=*/true);
  REQUIRE(out.ok());
  CHECK(out->kind == ExternalRing::Kind::kApplied);
}

TEST_CASE("external ring attack: a lone member with weight cannot set the whole result (f = 1)") {
  Ring r(/*tolerance=*/1, /*nodes=*/3);
  // Rank 1 starts round 3 alone with a gradient and all-reduces it with
  // anyone who joins: with rank 0 at weight 0 its gradient would be the
  // whole update.
  std::atomic<bool> done{false};
  std::atomic<bool> reduced{false};
  std::thread attacker([&] {
    r.Send(3, Hello(5, -1, 99, 3));
    while (!done) {
      auto hello = r.peer->Recv(0, models::MakeTag(1, 3, kHelloPhase), 20);
      if (!hello.ok()) continue;
      std::vector<float> g{100.0f, 100.0f, 100.0f};
      models::AllReduceOptions ao;
      ao.timeout_ms = 400;
      ao.tolerance = 1;
      models::RingAllReduce ring(r.peer.get(), ao);
      const std::vector<double> w{0.0, 1.0};
      if (ring.Run(models::RingView{1, {0, 1}}, 3, g, w).ok()) reduced = true;
      return;
    }
  });
  const auto joined = r.IdleFor(800);
  done = true;
  attacker.join();
  CHECK(joined.empty());
  CHECK_FALSE(reduced);
  CHECK(r.ring->round_done() == -1);
}

TEST_CASE("external ring attack: a garbage reduced chunk is detected (chunk_mismatch) and reported") {
  zmq::context_t ctx{1};
  auto ring = MakeRing(Spec(/*tolerance=*/1, /*nodes=*/3), &ctx);
  std::unique_ptr<ZmqTransport> peers[3];
  for (int rank : {1, 2}) {
    ZmqTransportOptions to;
    to.rank = rank;
    to.world_size = 3;
    auto p = ZmqTransport::Create(&ctx, to);
    REQUIRE(p.ok());
    peers[rank] = std::move(*p);
  }
  const std::map<int, std::string> eps{
      {0, ring->ring_endpoint()}, {1, peers[1]->endpoint()}, {2, peers[2]->endpoint()}};
  for (int rank : {1, 2}) {
    std::map<int, std::string> others = eps;
    others.erase(rank);
    REQUIRE(peers[rank]->SetPeers(others).ok());
  }
  v1::MembershipView v;
  v.set_view(1);
  for (const auto& [node, ep] : eps) {
    v1::Member* m = v.add_members();
    m->set_node(node);
    m->set_ring_endpoint(ep);
  }
  ring->OnView(v);
  const std::string blob = "the consumer's initial state";
  ring->PublishState(blob);
  const uint64_t hash = StateHash(std::as_bytes(std::span(blob.data(), blob.size())));
  const std::vector<float> grad{1.0f, 2.0f, 3.0f};
  std::vector<std::thread> threads;
  std::atomic<int> peers_ok{0};
  for (int rank : {1, 2}) {
    threads.emplace_back([&, rank] {
      ZmqTransport* t = peers[rank].get();
      if (!t->Send(0, models::MakeTag(1, 5, kHelloPhase), EncodeHello(Hello(4, -1, 80 + rank, 3, hash))).ok())
        return;
      if (!t->Recv(0, models::MakeTag(1, 5, kHelloPhase), 2000).ok()) return;
      models::AllReduceOptions ao;
      ao.timeout_ms = 2000;
      ao.tolerance = 1;
      if (rank == 2)
        ao.corrupt_owned_chunk = [](std::span<float> c) {
          for (float& x : c) x = 1e6f;  // garbage in place of its reduced chunk
        };
      std::vector<float> g = grad;
      const std::vector<double> b{4.0, 4.0, 4.0};
      const std::vector<double> w = models::AggregationWeights(models::ReducerKind::kMean, b);
      models::RingAllReduce rr(t, ao);
      if (rr.Run(models::RingView{1, {0, 1, 2}}, 5, g, w).ok()) ++peers_ok;
    });
  }
  auto out = ring->Round(1, 5, 4, 77, grad, /*consumer=*/true);
  for (auto& th : threads) th.join();
  REQUIRE(out.ok());
  CHECK(out->kind == ExternalRing::Kind::kApplied);
  REQUIRE(out->aggregate.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(std::fabs(out->aggregate[i] - grad[i]) < 1e-5);  // garbage not taken
  CHECK(peers_ok == 2);
  bool mismatch = false;
  for (const auto& o : ring->TakeOffences()) {
    CHECK(o.node == 2);
    mismatch |= o.reason == "chunk_mismatch";
  }
  CHECK(mismatch);
}

TEST_CASE("external trainer: the ring's offences go to the scheduler through TakeOffences") {
  Ring r(/*tolerance=*/0);
  ExternalTrainerOptions to;
  to.endpoint = "ipc:///tmp/loft-external-ring-test-" + std::to_string(::getpid());
  to.timeout_ms = 200;
  to.ring = std::move(r.ring);
  ExternalRing* ring = to.ring.get();
  auto t = ExternalTrainer::Create(SystemClock::Default(), std::move(to));
  REQUIRE(t.ok());
  ring->Planned(3);
  const uint32_t far = 3u + (1u << 31);
  r.Send(far, Hello(5, -1, 99, 3));
  std::vector<RingOffence> offences;
  for (int i = 0; i < 100 && offences.empty(); ++i) {
    (*t)->Idle();
    offences = (*t)->TakeOffences();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE(offences.size() == 1);
  CHECK(offences[0].node == 1);
  CHECK(offences[0].reason == "out_of_window");
  CHECK(ring->round_done() == -1);
}

namespace {

// Two real ExternalRings (nodes 0 and 1) of one spec, in one view.
struct TwoRings {
  zmq::context_t ctx{1};
  std::unique_ptr<ExternalRing> ring[2];

  explicit TwoRings(const ClusterSpec& spec) {
    for (int node : {0, 1}) {
      ExternalRingOptions o;
      o.node = node;
      o.context = &ctx;
      o.ring_timeout_ms = 3000;
      o.view_wait_ms = 200;
      o.state_timeout_ms = 500;
      auto r = ExternalRing::Create(spec, o);
      REQUIRE(r.ok());
      ring[node] = std::move(*r);
    }
    const auto v = testing::TwoMembers(1, ring[0]->ring_endpoint(), ring[1]->ring_endpoint());
    for (auto& r : ring) r->OnView(v);
  }

  // Both members' Round(view 1, round) with n[i] samples and vector[i].
  std::vector<StatusOr<ExternalRing::Outcome>> Round(uint32_t round, const size_t n[2],
                                                     const std::vector<float> vec[2]) {
    std::vector<StatusOr<ExternalRing::Outcome>> out(2, Internal("not run"));
    std::thread other([&] { out[1] = ring[1]->Round(1, round, n[1], 200 + round, vec[1], true); });
    out[0] = ring[0]->Round(1, round, n[0], 100 + round, vec[0], true);
    other.join();
    return out;
  }
};

}  // namespace

TEST_CASE("external ring: period 4 exchanges deltas weighted by each member's samples in the round") {
  TwoRings r(Spec(0, 2, "{period: 4, compression: int8}"));
  for (auto& ring : r.ring) {
    CHECK(ring->delta());
    ring->PublishState("the round's starting state");
  }
  // Three local steps each: 10 samples on node 0, 30 on node 1; the
  // round's last step has as many again. Weights: 40 / 160 and 120 / 160.
  for (int s = 0; s < 3; ++s) {
    r.ring[0]->LocalStepTaken(10);
    r.ring[1]->LocalStepTaken(30);
  }
  CHECK(r.ring[0]->LocalScale(10, 1) == Approx(10.0 * 2 / 30));  // b / (B / N)
  const size_t n[2] = {10, 30};
  const std::vector<float> delta[2] = {{4, 0, 0, 8}, {0, 4, 8, 0}};
  auto out = r.Round(3, n, delta);
  for (auto& o : out) {
    REQUIRE(o.ok());
    CHECK(o->kind == ExternalRing::Kind::kApplied);
    CHECK(o->included);
    CHECK(o->round_steps == 4);  // rounds 0..3: the momentum rule's learning rates
    REQUIRE(o->aggregate.size() == 4);
  }
  CHECK(out[0]->aggregate == out[1]->aggregate);  // the same bits on every member
  const float want[4] = {1, 3, 6, 2};             // 0.25 * delta0 + 0.75 * delta1
  for (size_t i = 0; i < 4; ++i) CHECK(std::fabs(out[0]->aggregate[i] - want[i]) < 0.03f);
  // A partition of round 3 arriving after its exchange is a local step of
  // the next round: carried, its samples weigh there.
  auto late = r.ring[0]->Round(1, 3, 10, 99, delta[0], true);
  REQUIRE(late.ok());
  CHECK(late->kind == ExternalRing::Kind::kCarried);
}

TEST_CASE("external ring: int8 chunks carry each member's rounding into its next delta (error feedback)") {
  // Chunks [1, 0.004]: scale 1/127, so 0.004 is sent as 1/127 = 0.00787
  // each time without feedback. With it, the rounding goes into the next
  // round and the aggregates sum to the exact sum.
  TwoRings r(Spec(0, 2, "{period: 4, compression: int8}"));
  const size_t n[2] = {10, 10};
  const std::vector<float> delta[2] = {{1, 0.004f, 1, 0.004f}, {1, 0.004f, 1, 0.004f}};
  const int rounds = 20;
  double sum1 = 0, sum3 = 0;
  for (int k = 0; k < rounds; ++k) {
    auto out = r.Round(static_cast<uint32_t>(4 * k + 3), n, delta);
    REQUIRE(out[0].ok());
    REQUIRE(out[1].ok());
    REQUIRE(out[0]->kind == ExternalRing::Kind::kApplied);
    REQUIRE(out[0]->aggregate == out[1]->aggregate);
    sum1 += out[0]->aggregate[1];
    sum3 += out[0]->aggregate[3];
    CHECK(out[0]->round_steps == 4);
  }
  const double exact = rounds * 0.004;  // without feedback: 20 * 0.00787 = 0.157
  CHECK(std::fabs(sum1 - exact) < 0.01);
  CHECK(std::fabs(sum3 - exact) < 0.01);
}

TEST_CASE("external trainer: a consumer of protocol 2 is refused when the spec exchanges deltas") {
  zmq::context_t ctx{1};
  ExternalTrainerOptions to;
  to.endpoint = "ipc:///tmp/loft-external-ring-test-p2-" + std::to_string(::getpid());
  to.timeout_ms = 200;
  to.ring = MakeRing(Spec(0, 2, "{period: 4}"), &ctx);
  auto t = ExternalTrainer::Create(SystemClock::Default(), std::move(to));
  REQUIRE(t.ok());
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect((*t)->endpoint());
  v1::Envelope hello;
  hello.mutable_consumer_hello()->set_consumer_protocol(kConsumerProtocolGradientOnly);
  auto frame = EnvelopeFrame(hello);
  REQUIRE(frame.ok());
  REQUIRE(dealer.send(std::move(*frame), zmq::send_flags::none));
  std::string reason;
  for (int i = 0; i < 200 && reason.empty(); ++i) {
    (*t)->Idle();
    zmq::message_t msg;
    if (dealer.recv(msg, zmq::recv_flags::dontwait)) {
      auto env = Decode(msg.to_string_view(), 1 << 20);
      REQUIRE(env.ok());
      REQUIRE(env->has_consumer_refused());
      reason = env->consumer_refused().reason();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(reason.find("training.exchange.period") != std::string::npos);
}
