// ExternalRing: the all-reduce ring of an agent whose model lives in its
// consumer (compute_mode external + training.model external; e.g. a
// PyTorch process through libloft). The consumer computes the mean
// gradient of its batch and hands it over (loft_batch_allreduce); the
// agent runs one round per iteration with the other members of the
// partition's membership view and hands back the aggregate. Parameters
// and optimizer state stay in the consumer, as an opaque blob the agent
// only stores (the consumer publishes it before each all-reduce) and
// serves to restarted members.
//
// One round (round = iteration), ModelTrainer's ring protocol (the shared
// pieces and what differs: edge_agent/ring_round.h):
//  1. hellos (ring_hello.h, ring_round.h ExchangeHellos): b (samples incl.
//     carried ones, 0 = weight-0 join), state = (round, BLAKE2b hash of
//     the published blob, models::BlobStateHash) its consumer holds,
//     partition, length = gradient floats (0 when b = 0); the guard
//     window, malformed/out-of-window offences and silence as ModelTrainer;
//  2. the job's state is AgreedState (the majority; ties to the later
//     round; a round beyond 2^32 never votes) and the gradient length D
//     the one most members with samples sent (ties: the smaller). A member
//     whose state is not the majority's or whose length != D gets weight 0;
//     PlanRound gives the weights (models::AggregationWeights: b_i/B for
//     the means, 1 per member with samples for the robust reducers);
//  3. the verified RingAllReduce (f = training.byzantine_tolerance) on D
//     floats; chunk_mismatch / malformed_chunk senders are offences
//     (TakeOffences, reported to the scheduler by ExternalTrainer);
//  4. outcome for this member's consumer: APPLIED (the aggregate); STALE
//     when its state is not the majority's: the majority's blob fetched
//     from a holder (phase kStatePhase, hash checked) + the aggregate, so
//     the consumer loads the blob, applies the aggregate and is in step
//     again (its partition is failed and retried: its gradient was
//     computed on other parameters); ERROR on a length mismatch (message
//     names both lengths) or a non-finite aggregate (the plain means pass
//     a member's NaN/Inf on; every in-step member refuses it alike, so
//     parameters stay identical).
// A member whose hello of a later round (same view) came instead of
// this one's, holding a state before this round, skipped it: its state
// votes in 2., but it gets no weight and no place in 3. (A member holding
// this round finished it in an attempt whose end this member missed;
// unlike ModelTrainer, this ring does not take such a result over, and
// waits for that member until the ring timeout as before.)
// An idle member joins a round with weight 0 only when f+1 live members
// announce it with a partition, in the guard window (PendingJoin).
// A partition of a round already done here (a retried child) is carried:
// its b·g joins this member's next contribution (CARRIED).
// A failed attempt (a member silent or gone) waits for a newer view and
// restarts the round among that view's live members (the survivors and a
// node that rejoined, the same set on every member); no newer view within
// view_wait_ms fails it. Every wait is bounded (ring_timeout_ms per
// attempt, state_timeout_ms per state request, view_wait_ms per view).
//
// Exchange modes (training.exchange; ModelTrainer's rules, model_trainer.h
// "Exchange modes"): with period > 1 or auto (delta()) the consumer takes
// every step of a round as a local step on its own parameters (its
// gradient times LocalScale: agent::LocalStepScale) and only the round's
// last step exchanges: Round's vector is then the consumer's model delta
// (parameters minus the round's starting parameters, which are the
// published state), weighted by the samples of this member's steps in the
// round (LocalStepTaken adds a local step's, the last step's n the rest;
// models::AggregationWeights as for gradients). A partition arriving after
// its round's exchange is a local step of the next round (its samples are
// kept for the next round's weight, kCarried). A member whose state is not
// the majority's contributes a zero delta with its weight (its steps were
// taken from other parameters) and gets the majority's state + the
// aggregate (kStale). Outcome.round_steps: the planned steps the aggregate
// spans (round - the agreed state's round), for the consumer's momentum
// rule. compression int8 (either exchange): chunks as scale + int8
// (models/chunk_codec.h), digests of what was sent, this member's rounding
// carried into its next contribution (CompressedAllReduce, ring_round.h).
//
// Not responsible for: talking to the consumer (ExternalTrainer), deciding
// membership. A fetched blob comes from one holder of the majority's
// (round, hash) and is checked against that hash (BLAKE2b).
// Thread-safety: OnView from any thread; everything else from one thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "core/cluster_spec.h"
#include "core/curve.h"
#include "core/proto/loft.pb.h"
#include "core/status.h"
#include "edge_agent/ring_round.h"
#include "edge_agent/view_book.h"
#include "edge_agent/zmq_transport.h"
#include "models/chunk_codec.h"
#include "models/reducers.h"

namespace loft::agent {

struct ExternalRingOptions {
  int node = 0;
  std::string ring_bind = "tcp://127.0.0.1:0";
  int64_t ring_timeout_ms = 20000;
  int64_t view_wait_ms = 8000;
  int64_t state_timeout_ms = 5000;
  int64_t idle_join_grace_ms = 50;
  int64_t past_grace_ms = 200;  // a member's later round's exchange waits this long before it counts as past
  size_t max_message_bytes = 16u << 20;
  zmq::context_t* context = nullptr;  // required
  std::optional<CurveKeyPair> curve_own;
  std::vector<std::string> public_keys;
  std::vector<std::string> rank_names;
  const std::atomic<bool>* stop = nullptr;
  RingLinkEmulation link;  // link emulation of the ring's messages (default off)
};

// models::BlobStateHash (BLAKE2b) of a state blob (0 for an empty blob: "not published").
uint64_t StateHash(std::span<const std::byte> blob);

class ExternalRing {
 public:
  static StatusOr<std::unique_ptr<ExternalRing>> Create(const ClusterSpec& spec, ExternalRingOptions options);
  ~ExternalRing();

  const std::string& ring_endpoint() const { return transport_->endpoint(); }
  void OnView(const v1::MembershipView& view);

  enum class Kind { kApplied, kCarried, kStale, kError };
  struct Outcome {
    Kind kind = Kind::kError;
    std::string message;           // kStale, kError
    std::vector<float> aggregate;  // kApplied, kStale
    std::string state;             // kStale: the majority's blob to load first
    int64_t state_round = -1;      // kStale
    int members = 0, attempts = 0;
    double allreduce_ms = 0;
    bool included = false;  // this member's samples are in the applied update
    // (partition, member that named it) whose samples the update holds.
    std::vector<std::pair<uint64_t, int32_t>> applied;
    int64_t round_steps = 1;  // kApplied, kStale: planned steps the aggregate spans (delta exchange)
  };
  // Round `round` of view `view` with this member's n samples and their
  // mean gradient `grad` (ignored when n == 0; delta(): the consumer's
  // model delta, n the samples of the round's last step, ignored when the
  // round holds no samples of this member). `consumer` = a consumer
  // takes the outcome (else it is a weight-0 join by the agent alone: the
  // consumer, if one comes, is behind and will be brought in step).
  // Errors (not outcomes) = the round could not be run (no view, ring
  // failure without a newer view, shutdown).
  StatusOr<Outcome> Round(int64_t view, uint32_t round, size_t n, uint64_t partition,
                          std::span<const float> grad, bool consumer);

  // (view, round) of a round peers started that this member has not done,
  // once its first message waited idle_join_grace_ms; serves requests.
  std::optional<std::pair<int64_t, uint32_t>> PendingJoin();
  // Marks a round that could not be joined as not to be retried idle.
  void RefuseIdle(int64_t view, uint32_t round);
  // The scheduler gave this agent a partition of `iteration` (the guard window).
  void Planned(int64_t iteration);
  // training.exchange period > 1 or auto: rounds exchange model deltas.
  bool delta() const { return delta_; }
  // The factor on a local step's gradient of n samples planned in `view`
  // (agent::LocalStepScale with the view's live members); 1 without delta().
  double LocalScale(size_t n, int64_t view) const;
  // The consumer took a local step of n samples of the open round.
  void LocalStepTaken(size_t n);
  // The offences seen since the last call (edge_agent/ring_guard.h).
  std::vector<RingOffence> TakeOffences();
  // Serves state requests (between rounds).
  void Serve();

  // The consumer published its state (the state after state_round()).
  void PublishState(std::string blob);
  // A new consumer connected: its state is unknown until it publishes or syncs.
  void ResetConsumer();
  // The majority state among the latest view's members (outside a round):
  // (round, hash, blob); round -1 and an empty blob when no member has progress.
  struct State {
    int64_t round = -1;
    uint64_t hash = 0;
    std::string blob;
  };
  StatusOr<State> FetchState();

  int64_t round_done() const { return round_done_; }

 private:
  ExternalRing() = default;
  using Members = RingMembers;
  // The members of view v (ViewBook::Members), with the transport's peers set to them.
  StatusOr<Members> ViewMembers(int64_t v);
  bool Stopping() const { return options_.stop != nullptr && options_.stop->load(); }
  std::vector<std::byte> ServeState();
  // Fetches (want_round, want_hash) from one of `holders`.
  StatusOr<std::string> FetchFrom(const Members& m, uint32_t round, int64_t want_round, uint64_t want_hash,
                                  const std::vector<int>& holders);
  // Round's phases (external_ring.cc).
  struct RoundState;  // one round's inputs and what its successful attempt found
  // A partition of a round already done here: its samples join the next round (kCarried).
  Outcome CarryLate(uint32_t round, size_t n, uint64_t partition, std::span<const float> grad);
  // One attempt among m's members: exchange, agreement, the majority's state if stale, all-reduce.
  Status Attempt(const Members& m, RoundState& rs);
  // Sends this member's hello to m's members and receives theirs (step 1).
  StatusOr<RoundHellos> ExchangeWith(const Members& m, const RoundState& rs);
  // Fetches the majority's state into rs.out from a member of m that holds it.
  void FetchMajorityState(const Members& m, const RoundHellos& x, RoundState& rs);
  // The verified all-reduce of rs.data among px (the members not past the round) as `plan` says (step 3).
  Status AllReduce(const Members& m, const RoundHellos& px, RoundPlan& plan, bool mine_in, RoundState& rs);
  // The outcome for this member's consumer of a round that ran (step 4).
  Outcome Conclude(RoundState& rs);

  ExternalRingOptions options_;
  models::ReducerOptions reducer_;
  std::unique_ptr<ZmqTransport> transport_;

  int64_t round_done_ = -1;      // last round this member took part in
  int64_t consumer_round_ = -1;  // the last round the consumer's parameters hold
  // The consumer's last published blob and the round it holds.
  int64_t blob_round_ = -1;
  uint64_t blob_hash_ = 0;
  std::string blob_;
  std::vector<float> carry_;  // sum of b·g of partitions of rounds already done
  double carry_b_ = 0;

  // training.exchange (see "Exchange modes" above).
  bool delta_ = false;        // period > 1 or auto: deltas, not gradients
  double round_samples_ = 0;  // delta: samples of this member's local steps in the open round
  models::Compression compression_ = models::Compression::kNone;
  std::vector<float> residual_;  // int8 error feedback: this member's rounding, carried to its next exchange
  double global_batch_ = 0;      // training.global_batch (the local-step scale, trimmed_mean's cap)
  int num_nodes_ = 1;            // the spec's nodes (the local-step scale before a view arrived)

  int tolerance_ = 0;        // training.byzantine_tolerance: verified chunks when > 0
  RingOffenceLog offences_;  // the guard (window, join quorum) and the offences since TakeOffences
  IdleJoinState idle_;       // hellos seen while idle, rounds not to join

  std::unique_ptr<ViewBook> views_;  // membership views from the scheduler (set by Create)
};

}  // namespace loft::agent
