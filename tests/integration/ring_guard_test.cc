// A ModelTrainer's ring against a Byzantine member,
// over real tcp loopback: rank 0 is the trainer, rank 1 a raw
// ZmqTransport that sends what it likes.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/cluster_spec.h"
#include "core/le_bytes.h"
#include "edge_agent/model_trainer.h"
#include "edge_agent/ring_hello.h"
#include "edge_agent/zmq_transport.h"
#include "models/checkpoint.h"
#include "models/model.h"
#include "models/sgd.h"
#include "models/state_hash.h"
#include "models/transport.h"
#include "tests/integration/raw_ring_peer.h"

using namespace loft;
using namespace loft::agent;

namespace {

// The state hash of a member that applied no round: step 0, no momentum yet.
uint64_t StartHash(std::span<const float> params) {
  return models::TrainingStateHash(params, 0, std::vector<float>(params.size(), 0.0f));
}

struct Ring {
  std::unique_ptr<ModelTrainer> trainer;
  zmq::context_t ctx{1};
  std::unique_ptr<ZmqTransport> attacker;

  explicit Ring(int tolerance) {
    auto spec = ParseClusterSpec(
        "dataset: {name: fashion-mnist, samples: 60000, sample_bytes: 784}\n"
        "training: {global_batch: 30, min_batch: 1, model: softmax, byzantine_tolerance: " +
            std::to_string(tolerance) +
            "}\n"
            "nodes:\n"
            "  - name: edge\n"
            "    count: 3\n",
        "ring.yaml");
    REQUIRE(spec.ok());
    ModelTrainerOptions o;
    o.node = 0;
    o.ring_timeout_ms = 400;
    o.view_wait_ms = 200;
    o.idle_join_grace_ms = 10;
    auto t = ModelTrainer::Create(*spec, o);
    REQUIRE(t.ok());
    trainer = std::move(*t);
    attacker = testing::RawPeer(&ctx, 3, trainer->ring_endpoint());
    trainer->OnView(testing::TwoMembers(1, trainer->ring_endpoint(), attacker->endpoint()));
  }

  // Sends a hello for `round` of view 1 claiming `b` samples of partition `partition`.
  void Announce(uint32_t round, double b, uint64_t partition) {
    MemberHello h;
    h.b = b;
    h.partition = partition;
    REQUIRE(attacker->Send(0, models::MakeTag(1, round, kHelloPhase), EncodeHello(h)).ok());
  }

  // A batch of `n` made-up samples for iteration `round` of view 1.
  static Batch MakeBatch(uint32_t round, int n) {
    Batch b;
    b.partition_id = 500 + round;
    b.iteration = round;
    b.view = 1;
    for (int i = 0; i < n; ++i) {
      cache::Sample s;
      s.id = static_cast<uint64_t>(i);
      s.label = static_cast<uint16_t>(i % 10);
      s.payload.assign(784, static_cast<uint8_t>(17 * i));
      b.samples.push_back(std::move(s));
    }
    return b;
  }

  // Lets the trainer idle for `ms`; true if it sent its own hello for `round` (it joined).
  bool Joined(uint32_t round, int ms) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < end) {
      trainer->Idle();
      if (attacker->Recv(0, models::MakeTag(1, round, kHelloPhase), 5).ok()) return true;
    }
    return false;
  }
};

}  // namespace

TEST_CASE("trusted ring (f = 0): an idle member joins a round one peer announces with weight") {
  Ring r(0);
  r.Announce(7, 5, 99);
  CHECK(r.Joined(7, 1500));
}

TEST_CASE("a single member cannot make the others join a round it made up (f = 1)") {
  Ring r(1);
  r.Announce(1000, 5, 99);
  CHECK_FALSE(r.Joined(1000, 600));
}

TEST_CASE("a weight-0 hello cannot create a round, even in a trusted ring") {
  Ring r(0);
  r.Announce(7, 0, 0);
  CHECK_FALSE(r.Joined(7, 600));
}

TEST_CASE("rounds far beyond the scheduler's iteration are dropped, counted and the sender reported") {
  Ring r(0);
  r.trainer->Skip(1, 0,
                  false);  // the scheduler planned iteration 0 (the weight-0 join fails: rank 1 is silent)
  for (uint32_t k = 0; k < 8; ++k) r.Announce(4000000000u + k, 5, 99);
  CHECK_FALSE(r.Joined(4000000000u, 400));
  std::vector<RingOffence> offences;
  int silent = 0;
  for (auto& o : r.trainer->TakeOffences()) {
    if (o.reason != "silent") {
      offences.push_back(o);
      continue;
    }
    ++silent;  // rank 1 sent no hello of round 0: counted, reported only at its 2nd silent round
    CHECK_FALSE(o.report);
  }
  CHECK(silent == 1);
  REQUIRE(offences.size() == 8);
  for (const auto& o : offences) {
    CHECK(o.node == 1);
    CHECK(o.reason == "out_of_window");
  }
  CHECK_FALSE(offences[6].report);
  CHECK(offences[7].report);  // the 8th offence is reported
  CHECK(offences[7].count == 8);
  CHECK(r.trainer->last_round() == -1);  // training did not move
  CHECK(r.trainer->TakeOffences().empty());
}

TEST_CASE("a malformed hello is dropped and counted, never joined") {
  Ring r(0);
  std::vector<std::byte> junk(33, std::byte{0x5A});
  REQUIRE(r.attacker->Send(0, models::MakeTag(1, 3, kHelloPhase), junk).ok());
  CHECK_FALSE(r.Joined(3, 400));
  auto offences = r.trainer->TakeOffences();
  REQUIRE(offences.size() == 1);
  CHECK(offences[0].reason == "malformed_hello");
  CHECK(offences[0].node == 1);
}

TEST_CASE("a member past the round (its later round's hello came instead) is not waited for") {
  // The ring-restart deadlock: rank 1 finished round 5 while rank 0's
  // attempt failed; rank 0 restarts round 5 and rank 1 waits in round 6.
  // Rank 0 must leave rank 1 out of round 5 instead of waiting for its
  // hello until the ring timeout (which fails the round: no newer view).
  Ring r(0);
  MemberHello h;  // rank 1 holds the same state (no round applied yet) and announces round 6
  h.b = 4;
  h.partition = 77;
  h.last_round = -1;
  h.hash = StartHash(r.trainer->params());
  REQUIRE(r.attacker->Send(0, models::MakeTag(1, 6, kHelloPhase), EncodeHello(h)).ok());
  auto loss = r.trainer->Compute(Ring::MakeBatch(5, 6));
  REQUIRE(loss.ok());
  CHECK(r.trainer->last_round() == 5);
  auto rep = r.trainer->TakeReport();
  REQUIRE(rep);
  CHECK(rep->ring_members() == 1);
  CHECK(rep->ring_attempts() == 1);
  REQUIRE(rep->applied_partitions_size() == 1);  // only its own partition: rank 1 had no part in round 5
  CHECK(rep->applied_partitions(0) == 505);
  for (const auto& o : r.trainer->TakeOffences()) CHECK(o.reason != "silent");
  // Rank 1's hello of round 6 is still there for round 6.
  auto got = r.attacker->Recv(0, models::MakeTag(1, 5, kHelloPhase), 0);
  CHECK(got.ok());  // rank 0 did send its own hello of round 5
}

TEST_CASE("a member that finished the round in an attempt this member took part in: its result is taken") {
  // The ring-restart race of integration:training_rejoin: rank 1 finished
  // round 5 in view 1 (this member's attempt timed out before the last
  // chunk) and waits in round 6 of view 2. Rank 0 must take rank 1's round
  // 5 (it holds rank 0's contribution; rank 1 reported its partition done),
  // not all-reduce round 5 again without rank 1 (that would roll rank 1
  // back and lose its partition's samples).
  Ring r(0);
  r.trainer->OnView(testing::TwoMembers(2, r.trainer->ring_endpoint(),
                                        r.attacker->endpoint()));  // before view 1's attempt fails
  const uint64_t h0 = StartHash(r.trainer->params());
  // Rank 1's round-5 result: other parameters, one optimizer step.
  auto model = models::MakeModel(models::ModelKind::kSoftmax, models::Device::kCpu);
  REQUIRE(model.ok());
  (*model)->Init(1);
  auto sgd = models::Sgd::Create(models::SgdOptions{}, (*model)->num_params());
  REQUIRE(sgd.ok());
  std::vector<float> grad(static_cast<size_t>((*model)->num_params()), 0.01f);
  REQUIRE(sgd->Step((*model)->params(), grad).ok());
  const uint64_t h5 = models::TrainingStateHash(**model, *sgd);
  auto ckpt = models::EncodeCheckpoint(**model, *sgd);
  REQUIRE(ckpt.ok());
  std::vector<std::byte> state;
  AppendLe(&state, int64_t{5});
  AppendLe(&state, h5);
  const auto* cp = reinterpret_cast<const std::byte*>(ckpt->data());
  state.insert(state.end(), cp, cp + ckpt->size());
  int served = 0;
  r.attacker->SetRequestHandler(0xFD, [&](int, uint64_t, std::span<const std::byte>) {
    ++served;
    return state;
  });
  MemberHello h;  // view 1: rank 1 takes part in round 5 (then goes silent towards rank 0)
  h.b = 4;
  h.partition = 77;
  h.last_round = -1;
  h.hash = h0;
  REQUIRE(r.attacker->Send(0, models::MakeTag(1, 5, kHelloPhase), EncodeHello(h)).ok());
  MemberHello next;  // view 2: rank 1 is in round 6, holding round 5
  next.b = 4;
  next.partition = 78;
  next.last_round = 5;
  next.hash = h5;
  REQUIRE(r.attacker->Send(0, models::MakeTag(2, 6, kHelloPhase), EncodeHello(next)).ok());
  std::atomic<bool> done{false};
  std::thread serve([&] {
    while (!done) (void)r.attacker->Poll(10);
  });
  auto loss = r.trainer->Compute(Ring::MakeBatch(5, 6));
  done = true;
  serve.join();
  REQUIRE(loss.ok());
  CHECK(served == 1);
  CHECK(r.trainer->last_round() == 5);
  CHECK(models::ParameterHash(r.trainer->params()) == models::ParameterHash((*model)->params()));
  auto rep = r.trainer->TakeReport();
  REQUIRE(rep);
  CHECK(rep->ring_attempts() == 2);
  CHECK(rep->ring_members() == 2);
  // View 1's plan: both partitions are in the result rank 1 applied.
  REQUIRE(rep->applied_partitions_size() == 2);
  CHECK(rep->applied_partitions(0) == 77);
  CHECK(rep->applied_partitions(1) == 505);
  CHECK(rep->param_hash() == h5);
}

TEST_CASE("a later round's hello claiming a round out of window never stands in for the member") {
  Ring r(0);
  MemberHello h;
  h.b = 4;
  h.partition = 77;
  h.last_round = std::numeric_limits<uint32_t>::max();  // a phantom: training pushed to the end of time
  REQUIRE(r.attacker->Send(0, models::MakeTag(1, 6, kHelloPhase), EncodeHello(h)).ok());
  auto loss = r.trainer->Compute(Ring::MakeBatch(5, 6));
  CHECK_FALSE(loss.ok());  // rank 1 stays awaited: silent, and no newer view to restart in
  CHECK(r.trainer->last_round() == -1);
  bool silent = false;
  for (const auto& o : r.trainer->TakeOffences()) silent |= o.node == 1 && o.reason == "silent";
  CHECK(silent);
}
