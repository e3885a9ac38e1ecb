// The ring round's I/O pieces shared by both ring members of an agent:
// ModelTrainer (training.model softmax | mlp: the agent's own model) and
// ExternalRing (training.model external: a consumer's model, e.g. PyTorch
// through libloft's loft_batch_allreduce). One ring protocol: both speak
// RingHello, decide the round alike and run the verified ring.
//
// What the external path takes from the built-in one, as is:
//  - hello exchange (ExchangeHellos below): RingHello (ring_hello.h) on
//    phase 0xFE, strict decoding, the guard window (ring_guard.h) on the
//    round and on last_round, malformed/out-of-window hellos dropped and
//    counted, silence counted, members past the round left out;
//  - idle joins (ScanIdleJoin): a weight-0 join only of a round at least
//    f+1 live members announce with a partition, in window; a weight-0
//    hello never creates a round;
//  - round decision (round_decision.h): AgreedState (the majority's
//    (last_round, hash); a last_round beyond 2^32 never votes) and
//    PlanRound (models::AggregationWeights of the spec's aggregation,
//    trimmed_mean / multi_krum fitted to the members with weight, the
//    applied list); retries in newer views (round_retry.h);
//  - the verified RingAllReduce (VerifiedAllReduce) with f =
//    training.byzantine_tolerance, its malformed_chunk / chunk_mismatch
//    senders recorded as offences (RingOffenceLog), reported to the
//    scheduler through Trainer::TakeOffences;
//  - state sync from a holder of the majority's (round, hash), the answer
//    checked against a BLAKE2b hash (models/state_hash.h), the ring's
//    sender check (ViewBook::MayRing) on every message and request.
// What differs on the external path:
//  - the parameters and optimizer state live in the consumer: the state
//    is an opaque blob the consumer publishes, hashed with
//    models::BlobStateHash instead of TrainingStateHash, and a stale
//    member hands the majority's blob to its consumer instead of
//    installing a checkpoint (AdoptState);
//  - the vector to all-reduce is the consumer's gradient, so its length
//    travels in the hello (RingHello.length) and a member whose length is
//    not the majority's, or whose state is not the majority's, gets no
//    weight;
//  - a member past the round holding it is waited for (the external ring
//    does not take another member's result over, FindFinishedElsewhere).
//
// Not responsible for: what a round computes or applies (the members).
// Thread-safety: not thread-safe; the member's ring thread uses them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "core/status.h"
#include "edge_agent/ring_guard.h"
#include "edge_agent/round_decision.h"
#include "edge_agent/trainer.h"
#include "edge_agent/view_book.h"
#include "edge_agent/zmq_transport.h"
#include "models/ring_allreduce.h"

namespace loft::agent {

// The offences one ring member saw, with the guard that counts them.
class RingOffenceLog {
 public:
  explicit RingOffenceLog(RingGuardOptions options = {}) : guard_(options) {}
  RingGuard& guard() { return guard_; }
  const RingGuard& guard() const { return guard_; }
  // Records an offence by ring member `from` (ring_guard.h).
  void Offend(int from, const char* reason);
  // Ring member `from` sent no hello of `round` within timeout_ms (ring_guard.h, silence).
  void Silent(int from, uint32_t round, int64_t timeout_ms);
  // The offences since the last call.
  std::vector<RingOffence> Take();

 private:
  RingGuard guard_;
  std::vector<RingOffence> offences_;
};

struct HelloExchangeOptions {
  int self = 0;
  int64_t last_round = -1;  // this member's last round (the guard window)
  int64_t ring_timeout_ms = 20000;
  int64_t past_grace_ms = 200;
  // A later round's hello stands for "past this round" only when its
  // last_round is before the round (the external ring waits for a member
  // that holds the round).
  bool past_only_behind = false;
};

// Sends `mine` to the other members of m (phase kHelloPhase of round) and
// receives theirs (a malformed one gives that member no weight and a state
// nobody holds). A member silent until the ring timeout fails the attempt
// (DeadlineExceeded) after every silent member is counted.
StatusOr<RoundHellos> ExchangeHellos(ZmqTransport* transport, RingOffenceLog* log,
                                     const HelloExchangeOptions& o, const RingMembers& m, uint32_t round,
                                     const MemberHello& mine);

// The buffered hellos an idle member looks at.
struct IdleJoinState {
  std::map<std::pair<int, uint64_t>, int64_t> seen_us;  // (from, tag) first seen
  std::set<uint64_t> refused;                           // (view, round) keys not to join
  void Refuse(uint64_t key);
};
struct IdleJoin {
  uint32_t view = 0, round = 0;
  uint64_t key = 0;    // the (view, round) tag with phase 0
  int announcers = 0;  // live members announcing it with a partition
};
// Polls the transport (serving requests) and returns the lowest round of a
// newer round's hellos that waited grace_ms and that at least the guard's
// JoinQuorum live members announce with a partition. Drops (and counts)
// malformed and out-of-window hellos and those of rounds <= last_round.
std::optional<IdleJoin> ScanIdleJoin(ZmqTransport* transport, ViewBook* views, RingOffenceLog* log,
                                     int64_t last_round, int64_t grace_ms, IdleJoinState* state);

// models::RingAllReduce of `data` among `view` with `weights` (ao.tolerance
// > 0: verified chunks); its malformed_chunk / chunk_mismatch senders are
// recorded in `log`.
Status VerifiedAllReduce(ZmqTransport* transport, const models::AllReduceOptions& ao,
                         const models::RingView& view, uint32_t round, std::vector<float>& data,
                         const std::vector<double>& weights, RingOffenceLog* log,
                         std::vector<float>* residual = nullptr);

// VerifiedAllReduce with the spec's training.exchange.compression (ao.compression):
// with int8, error feedback: `residual` (this member's rounding kept from
// its previous contribution; resized to data, zeros when its length
// changed) is added to data before the ring, and replaced by this
// contribution's rounding only when the all-reduce succeeds. Both ring
// members (ModelTrainer, ExternalRing) exchange through it.
Status CompressedAllReduce(ZmqTransport* transport, const models::AllReduceOptions& ao,
                           const models::RingView& view, uint32_t round, std::vector<float>& data,
                           const std::vector<double>& weights, RingOffenceLog* log,
                           std::vector<float>* residual);

}  // namespace loft::agent
