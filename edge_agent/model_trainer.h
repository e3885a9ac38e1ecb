// ModelTrainer: the real compute step of a training agent.
// For each partition it decodes the samples (784 uint8 + label), computes
// the mean cross-entropy gradient of the model on them, optionally
// corrupts it (a Byzantine node of the spec: sign_flip / random / nan,
// scaled by byzantine_scale), all-reduces it with the other members of the
// partition's membership view over a ZmqTransport (RingAllReduce with the
// spec's robust reducer), applies the SGD update (spec learning rate,
// momentum and lr_schedule), and — on the lowest-index member that reports
// this iteration, every `eval_every` iterations and at `last_iteration` —
// evaluates the model on the test set. TakeReport returns loss,
// state hash (models::TrainingStateHash), accuracy.
//
// One round per iteration (round = iteration). Ring members = the live
// nodes of the view the partition was planned in. Each round:
//  1. exchange: every member sends a RingHello (edge_agent/ring_hello.h):
//     b_i, last_round, state hash, reports, partition id of this round
//     (0 = none) (b_i = samples this round, 0 for a member without a partition);
//     A member whose hello of a later round (same view) came instead is
//     past this round: it finished it while this member's attempt failed
//     and is waiting in its next round, or it skipped it. It gets no weight
//     and no place in the all-reduce (both would wait for each other's
//     round until the ring timeout), but its (last_round, hash) votes below.
//     If at least f+1 such members hold this round, they finished an
//     earlier attempt of it that this member planned and took part in:
//     this member takes their state and that attempt's applied list
//     instead of all-reducing the round again (round_decision.h
//     FindFinishedElsewhere);
//  2. state check: the (last_round, hash) pair held by most members (ties:
//     the later round) is the job's state; a member holding anything else
//     (a restarted agent starts from the seed's initial parameters; one
//     whose last round failed) fetches parameters + optimizer state +
//     last_round from a member holding it (ZmqTransport::Request, phase
//     kStatePhase; every wait bounded by state_timeout_ms) and recomputes
//     its gradient on them. Every member therefore all-reduces from the
//     same parameters and applies the same update;
//  3. RingAllReduce with models::AggregationWeights(b) (b_i for the means,
//     1 per member with samples for the robust reducers, 0 = absent);
//  4. SGD step; last_round = round.
// A live member with no partition takes part with weight 0 (Idle(): when
// a ring message of a newer round has waited idle_join_grace_ms, at least
// f+1 live members announce that round with a partition, and this agent
// has nothing pending). Malformed and out-of-window ring messages are
// dropped and counted per sender (edge_agent/ring_guard.h, TakeOffences). A partition of a round this agent
// already all-reduced (a second partition of the same iteration, e.g. a retried child, or one that arrived
// after the weight-0 join) is not all-reduced again: its b·g is carried into the next round's contribution.
// If an attempt fails (a member is silent or gone) the trainer waits for a
// newer view, keeps the survivors and restarts the same round with that
// view's number; if no newer view arrives the partition fails.
// Exchange modes (training.exchange, Partition.local_step/delta_exchange):
// with period > 1 or auto, a round is several planned steps. A local step
// (local_step) computes the gradient of its partition and applies an SGD
// step to this member's own parameters; no ring. The round's last step
// does the same and then exchanges the round's model delta (parameters
// minus the round's starting parameters, the anchor) through the same
// hellos, state check and verified robust ring, weighted by the member's
// samples in the round (models::AggregationWeights, as for gradients);
// every member sets parameters = anchor + aggregate delta, so the hash
// check holds after every round. A member's Byzantine mode corrupts its
// delta instead of its gradient. Momentum: local steps use the member's
// own velocity, starting from the round's shared one; after the exchange
// every member sets the velocity to the round's mean update per unit of
// learning rate, -aggregate / (sum of the round's learning rates), and the
// optimizer's step to round + 1. That keeps velocity identical on every
// member without exchanging it (which would double the bytes), keeps the
// direction momentum carries from round to round, and is exactly the
// gradient exchange's velocity for a round of one step under the mean.
// A local step's gradient is scaled by the member's share of the global
// batch, b / (B / N) (B = training.global_batch, N = the live members of
// the step's view): a member with a small batch (loft's slow or data-poor
// nodes) takes a proportionally smaller step, as its gradient stands for
// fewer samples; unscaled, its noisy full-size steps made loft's rounds
// learn less than lbbsp's (docs/exchange.md, "Local steps at a member's
// share of the batch").
// compression: int8 (either exchange) sends each chunk as a scale and int8
// values (models/chunk_codec.h); this member adds the rounding it kept from
// its previous contribution to the next one (error feedback; the residual
// is replaced only when an all-reduce succeeds).
// A member whose state had to be fetched at the exchange (restarted, or
// its last exchange failed) contributes a zero delta: its steps were
// taken from other parameters; its report says so (delta_dropped) and the
// scheduler retries the round's partitions of this member instead of
// committing them. A partition arriving after its round's exchange is a
// local step of the next round (reported in_next_round: the scheduler
// commits it with that round; docs/exchange.md "Round-level lineage").
// Rooms: the pure decisions of a round (sync source, carried, weights,
// reducer settings, applied list, evaluator) are edge_agent/round_decision.h,
// the carried samples edge_agent/gradient_carry.h, the retry loop
// edge_agent/round_retry.h, the views edge_agent/view_book.h; this class
// does the I/O between them. The gradient a round all-reduces is grad_
// (ComputeGradient); an external gradient source would fill it instead.
//
// Not responsible for: reading samples, deciding membership, Byzantine
// state: the state fetched on rejoin is the majority's (last_round, hash)
// pair, but the bytes come from one holder and are checked against that
// hash only.
// Thread-safety: Compute/Idle/TakeReport from one thread; OnView from any thread.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "core/cluster_spec.h"
#include "core/curve.h"
#include "core/log_limiter.h"
#include "core/proto/loft.pb.h"
#include "edge_agent/gradient_carry.h"
#include "edge_agent/ring_guard.h"
#include "edge_agent/ring_round.h"
#include "edge_agent/round_decision.h"
#include "edge_agent/trainer.h"
#include "edge_agent/trainer_state.h"
#include "edge_agent/view_book.h"
#include "edge_agent/zmq_transport.h"
#include "models/model.h"
#include "models/reducers.h"
#include "models/ring_allreduce.h"
#include "models/sgd.h"

namespace loft::agent {

struct ModelTrainerOptions {
  int node = 0;       // this agent's index in the spec (its ring rank)
  int num_nodes = 1;  // ranks in the spec
  std::string ring_bind = "tcp://127.0.0.1:0";
  std::string test_data_dir = "/usr/share/datasets/fashion-mnist";
  int64_t eval_every = 50;      // 0 = only at last_iteration
  int64_t last_iteration = -1;  // evaluate after this iteration too; -1 = none
  int64_t ring_timeout_ms = 20000;
  int64_t view_wait_ms = 8000;      // how long to wait for a (newer) membership view
  int64_t state_timeout_ms = 5000;  // per state-transfer request
  int64_t idle_join_grace_ms = 50;  // a newer round's message waits this long before a weight-0 join
  // A member's later round's hello waits this long before it counts as past
  // the round being exchanged (see step 1 above).
  int64_t past_grace_ms = 200;
  size_t max_message_bytes = 16u << 20;
  // The ZeroMQ context to use (with its ZapAuthenticator when CURVE is on);
  // null = the trainer makes its own (plain TCP only).
  zmq::context_t* context = nullptr;
  // CURVE on the ring (see ZmqTransportOptions); unset = plain TCP.
  std::optional<CurveKeyPair> curve_own;
  std::vector<std::string> public_keys;  // per rank
  std::vector<std::string> rank_names;   // per rank
  // When set and true, every wait of the trainer ends early with Aborted (shutdown).
  const std::atomic<bool>* stop =
      nullptr;  // Link emulation of the ring's messages (the agent's token buckets; default off).
  RingLinkEmulation link;
};

class ModelTrainer final : public Trainer {
 public:
  // spec: training.model (softmax|mlp), aggregation, learning_rate,
  // momentum, seed; nodes[node].byzantine / byzantine_scale.
  static StatusOr<std::unique_ptr<ModelTrainer>> Create(const ClusterSpec& spec, ModelTrainerOptions options);
  ~ModelTrainer() override;

  const std::string& ring_endpoint() const { return transport_->endpoint(); }
  // Records a membership view from the scheduler (thread-safe).
  void OnView(const v1::MembershipView& view);

  StatusOr<double> Compute(const Batch& batch) override;
  std::optional<v1::TrainingReport> TakeReport() override;
  // Serves state requests and joins, with weight 0, a newer round that
  // peers have started (the caller has no partition pending).
  void Idle() override;
  // Joins round `iteration` with weight 0 unless this node is past it.
  void Skip(int64_t view, int64_t iteration, bool local_step) override;
  std::vector<RingOffence> TakeOffences() override;

  std::span<const float> params() const { return model_->params(); }
  int64_t last_round() const { return last_round_; }

 private:
  ModelTrainer() = default;
  // Sends this member's hello to the others of m and receives theirs (a
  // malformed one gives that member no weight and a state nobody holds).
  StatusOr<RoundHellos> ExchangeHellos(const RingMembers& m, uint32_t round, const MemberHello& mine);
  // Fetches the state (last_round, hash) from a member holding it.
  Status SyncState(const RingMembers& m, uint32_t round, int64_t want_round, uint64_t want_hash,
                   const std::vector<int>& holders);
  std::vector<std::byte> ServeState(int from, uint64_t tag);
  // The gradient of the current batch (images_/labels_, n samples) into
  // grad_, corrupted if Byzantine (gradient exchange only: a delta
  // exchange corrupts the delta).
  double ComputeGradient(size_t n);
  // Delta exchange: one local SGD step on the current batch (n samples,
  // planned in view `view`; its gradient scaled as above); returns its loss.
  double LocalStep(size_t n, int64_t view);
  // Delta exchange: this member's contribution (parameters - anchor,
  // corrupted if Byzantine) into *data.
  void FillDelta(std::vector<float>* data);
  // Delta exchange: applies the round's aggregate delta (see above).
  void ApplyDelta(uint32_t round, const std::vector<float>& delta);
  // Delta exchange: the current parameters and velocity start a new round
  // (keep_samples: the open round's sample count stays, for its weight).
  void StartRound(bool keep_samples = false);
  // The hash members agree on: the parameters, or with a delta exchange
  // the round's start (the last exchange's result).
  uint64_t AgreedHash() const;
  // The samples this member weighs with in the round's exchange.
  double ContributionSamples(size_t n) const;
  struct RoundResult {
    int members = 0, attempts = 0;  // members: of the all-reduce (members past the round left out)
    double allreduce_ms = 0;
    bool evaluator = false;
    bool carried = false;  // the round was already done (state fetched past it)
    // Members past the round finished it with this node's contribution: their state was taken.
    bool adopted = false;
    // (partition, member that named it) whose samples the applied update holds.
    std::vector<std::pair<uint64_t, int32_t>> applied;
    // Delta exchange: this member fetched the agreed state, so its round's
    // steps did not reach the update (TrainingReport.delta_dropped).
    bool delta_dropped = false;
  };
  // Runs round `round` starting in view `view` with this node's n samples
  // (grad_ holds their mean gradient when n > 0), retrying in newer views
  // (edge_agent/round_retry.h). On OK the update is applied, or the
  // samples are carried (res.carried). `partition_id`: this member's
  // partition of the round (0 = none, a weight-0 join); exchanged so every
  // member can report which partitions the update holds.
  StatusOr<RoundResult> RunRound(int64_t view, uint32_t round, size_t n, uint64_t partition_id, bool reports,
                                 double* loss);
  // One attempt among m: hellos, state sync, the round decision
  // (edge_agent/round_decision.h) and the all-reduce into *data.
  Status Attempt(const RingMembers& m, uint32_t round, size_t n, uint64_t partition_id, bool reports,
                 double* loss, RoundResult* res, std::vector<float>* data);
  // Copies a partition's samples into images_/labels_ (checked), or, for a
  // preprocessed batch (Batch::inputs), its floats into inputs_.
  Status DecodeBatch(const Batch& batch);
  // dataset.encoding jpeg: the test set as the agents' records hold it,
  // each image JPEG-encoded as ingest does and decoded by the same
  // Preprocessor (no augmentation) into test_inputs_.
  Status EncodeTestSet(const ClusterSpec& spec);
  // Whether the round ending at `iteration` evaluates (eval_every,
  // last_iteration); `prev_round`: the last round before it.
  bool EvaluateNow(int64_t iteration, int64_t prev_round) const;
  void Corrupt(std::span<float> g);
  // byzantine: chunk_garbage (uniform in +-byzantine_scale) / chunk_scale
  // (times byzantine_scale): this member's reduced chunk before it is sent.
  void CorruptChunk(std::span<float> c);
  // byzantine: phantom_round: announces two rounds nobody planned (one near,
  // one 2^31 ahead) with only its own weight.
  void AnnouncePhantoms(int64_t view);
  // Records an offence by ring member `from` (edge_agent/ring_guard.h).
  void Offend(int from, const char* reason);

  ModelTrainerOptions options_;
  std::unique_ptr<models::Model> model_;
  std::optional<models::Sgd> sgd_;
  models::ReducerOptions reducer_;
  ByzantineKind byzantine_ = ByzantineKind::kNone;
  double byzantine_scale_ = 1.0;
  std::mt19937_64 rng_;
  std::vector<float> grad_;
  std::vector<uint8_t> images_, labels_;
  std::vector<float> inputs_;  // a preprocessed batch's floats (empty: images_)
  std::vector<uint8_t> test_images_, test_labels_;
  std::vector<float> test_inputs_;  // encoding jpeg: the decoded test set (empty: test_images_)

  std::unique_ptr<zmq::context_t> ctx_;  // only when options_.context is null
  std::unique_ptr<ZmqTransport> transport_;

  int64_t last_round_ = -1;  // the last round whose update this node applied
  GradientCarry carry_;      // samples of partitions of rounds already done
  int tolerance_ = 0;        // training.byzantine_tolerance: verified chunks when > 0
  // The plan of this round's latest attempt that got past its exchange
  // (RunRound resets it): what a member that finished that attempt applied.
  std::optional<RoundPlan> last_plan_;
  int last_plan_members_ = 0;
  RingOffenceLog offences_;  // the guard and the offences since the last TakeOffences
  IdleJoinState idle_;       // hellos seen while idle, rounds not to join

  std::unique_ptr<ViewBook> views_;

  // training.exchange (see "Exchange modes" above).
  bool delta_ = false;                  // period > 1 or auto: deltas, not gradients
  std::vector<float> anchor_;           // parameters at the round's start
  std::vector<float> anchor_velocity_;  // the optimizer's velocity at the round's start
  double round_samples_ = 0;            // samples of this member's steps in the open round
  models::Compression compression_ = models::Compression::kNone;  // training.exchange.compression
  // int8 error feedback: this member's rounding, carried to its next exchange.
  std::vector<float> residual_;
  double global_batch_ = 0;  // training.global_batch (trimmed_mean's weight cap, local-step scale)
  int num_nodes_ = 1;        // the spec's nodes (the local-step scale before a view arrived)

  std::optional<v1::TrainingReport> report_;
  // ServeState's lines, which any member's state requests cause (10 per
  // 10 s per requester; the transport answers at most request_burst at
  // once and then one per request_interval_ms).
  PeerLogLimits serve_log_{nullptr};
};

}  // namespace loft::agent
