// ExternalRing (training.model external) against a ring peer that is past
// the round, over real tcp loopback: rank 0 is the ring, rank 1 a raw
// ZmqTransport that sends what it likes.
#include "edge_agent/external_ring.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "core/cluster_spec.h"
#include "core/le_bytes.h"
#include "edge_agent/zmq_transport.h"
#include "models/transport.h"
#include "tests/integration/raw_ring_peer.h"

using namespace loft;
using namespace loft::agent;

namespace {

constexpr uint8_t kExchangePhase = 0xFE;

struct Ring {
  zmq::context_t ctx{1};
  std::unique_ptr<ExternalRing> ring;
  std::unique_ptr<ZmqTransport> peer;

  Ring() {
    auto spec = ParseClusterSpec(
        "dataset: {name: fashion-mnist, samples: 60000, sample_bytes: 784}\n"
        "training: {global_batch: 30, min_batch: 1, model: external}\n"
        "nodes:\n"
        "  - name: edge\n"
        "    count: 2\n",
        "ring.yaml");
    REQUIRE(spec.ok());
    ExternalRingOptions o;
    o.node = 0;
    o.context = &ctx;
    o.ring_timeout_ms = 400;
    o.view_wait_ms = 200;
    o.state_timeout_ms = 200;
    auto r = ExternalRing::Create(*spec, o);
    REQUIRE(r.ok());
    ring = std::move(*r);
    peer = testing::RawPeer(&ctx, 2, ring->ring_endpoint());
    ring->OnView(testing::TwoMembers(1, ring->ring_endpoint(), peer->endpoint()));
  }

  // Rank 1's exchange of `round`: [f64 b][i64 state_round][u64 hash][u64 partition][u64 d].
  void Exchange(uint32_t round, int64_t state_round, double b = 4.0) {
    std::vector<std::byte> buf;
    AppendLe(&buf, b);
    AppendLe(&buf, state_round);
    AppendLe(&buf, uint64_t{0});
    AppendLe(&buf, uint64_t{88});
    AppendLe(&buf, uint64_t{3});
    REQUIRE(peer->Send(0, models::MakeTag(1, round, kExchangePhase), buf).ok());
  }
};

}  // namespace

TEST_CASE("external ring: a member that skipped the round (its later exchange came) is not waited for") {
  Ring r;
  r.Exchange(6, -1);  // rank 1 holds no round: it skipped round 5 and is in round 6
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

TEST_CASE("external ring: a member holding the round in its later exchange is still waited for") {
  Ring r;
  r.Exchange(6, 5);  // rank 1 holds round 5: this ring does not take such a result over
  const std::vector<float> grad{1.0f, 2.0f, 3.0f};
  auto out = r.ring->Round(1, 5, 4, 77, grad, /*consumer=*/true);
  REQUIRE_FALSE(out.ok());  // the ring timeout, and no newer view to restart in
  CHECK(out.status().code() == StatusCode::kDeadlineExceeded);
}

TEST_CASE("external ring: a round in which no member has samples is an error outcome, not retried") {
  Ring r;
  r.Exchange(5, -1, /*b=*/0.0);  // rank 1 has no samples either
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
