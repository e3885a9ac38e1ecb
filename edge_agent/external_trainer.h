// ExternalTrainer: compute_mode `external`. The partition's compute is done
// by a local consumer program (C API: loft_consumer_*, capi/README.md)
// connected to a ZeroMQ ROUTER bound on `consumer_endpoint`.
//
// Compute(batch) sends the current consumer
//   [ConsumerBatch{partition_id, sample_ids, labels, payload_sizes, ring, round}][payloads]
// (every payload back to back in ONE raw frame, in sample_ids order, so a
// batch of any size is two frames) and waits for
// ConsumerReport{partition_id, compute_ms}. The consumer's compute_ms is then
// what the agent reports to the scheduler (ReportedComputeMs()).
// Compute returns Unavailable — the agent sends PartitionFailed and the
// scheduler retries the samples through lineage — when
//   - no consumer said ConsumerHello within the deadline,
//   - the consumer disconnects (ZMQ socket monitor: its connection's fd
//     closed) or its ROUTER send fails,
//   - no matching report arrives within the deadline.
//
// Training (an ExternalRing, spec training.model external): the consumer
// may, before reporting, send ConsumerAllReduce + its gradient; the agent
// runs the round (external_ring.h) and answers ConsumerAggregate. A
// partition whose gradient did not make it into the round's update (stale
// state, length mismatch, the consumer died or reported without an
// all-reduce) is failed and retried; the agent then takes part in the
// round alone with weight 0, so the ring never waits for a dead consumer
// longer than this deadline. A round this agent has no partition for is
// sent to the consumer as an empty batch (partition 0) so it applies the
// aggregate too. ConsumerState publishes the consumer's state blob;
// ConsumerSyncRequest fetches the ring majority's (ExternalRing::FetchState).
// training.exchange period > 1 or auto (ExternalRing::delta()): a batch
// the scheduler marked local_step is sent with local_step set and its
// local_scale; the consumer applies its own scaled gradient and reports it
// without an all-reduce (an all-reduce request for it is answered ERROR);
// the agent counts its samples for the round's weight
// (ExternalRing::LocalStepTaken). The round's last step carries
// delta_exchange: the consumer takes it as a local step, then all-reduces
// its model delta; the aggregate's answer carries round_steps (the
// momentum rule). A failed local step's partition is failed and retried;
// there is no round to join for it (Skip).
//
// Access: one consumer at a time. A hello while the current consumer's
// connection is open is refused (ConsumerRefused), as is a hello with
// another consumer protocol or (when `token` is set) another token. An
// ipc:// socket file is created with mode 0600 (owner only: another user's
// connect is refused by the kernel), so a token is optional there; a
// tcp:// endpoint (loopback: checked by the server) is open to every local
// user and an abstract ipc://@name has no file permissions, so both need
// a token (CheckConsumerAccess: Create refuses them without one).
//
// Not responsible for: reading samples, choosing the endpoint's policy.
// Thread-safety: not thread-safe; Compute/Idle/Skip are called by one thread
// at a time (the sockets may move between threads across a happens-before edge).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "core/clock.h"
#include "core/log_limiter.h"
#include "core/status.h"
#include "edge_agent/external_ring.h"
#include "edge_agent/trainer.h"

namespace loft::agent {

// The consumer wire revision ConsumerHello carries (3: local steps and
// delta exchange, ConsumerBatch.local_step / delta_exchange / local_scale).
inline constexpr uint32_t kConsumerProtocol = 3;
// The oldest revision this agent accepts (2: payloads in one frame,
// gradient exchange only), refused when the spec exchanges deltas
// (training.exchange.period > 1 or auto): such a consumer would all-reduce
// a gradient every step.
inline constexpr uint32_t kConsumerProtocolGradientOnly = 2;

// OK when `endpoint` keeps other local users out: an ipc:// socket file
// (created 0600), or any endpoint with a non-empty token. Otherwise
// InvalidArgument saying why and what to set.
Status CheckConsumerAccess(const std::string& endpoint, const std::string& token);

struct ExternalTrainerOptions {
  std::string endpoint;                     // ipc://path or tcp://127.0.0.1:port (port 0/* = any)
  int timeout_ms = 10000;                   // deadline for a consumer + its report, per partition
  size_t max_message_bytes = 16 << 20;      // ZMQ_MAXMSGSIZE of the ROUTER
  std::string token;                        // required in ConsumerHello when set; required for tcp://
  const std::atomic<bool>* stop = nullptr;  // optional: abandon a wait when set
  std::unique_ptr<ExternalRing> ring;       // training.model external: the all-reduce ring
  // {kind}: the consumer's log lines held back (may be null: not counted).
  metrics::CounterFamily* log_suppressed = nullptr;
};

class ExternalTrainer final : public Trainer {
 public:
  static StatusOr<std::unique_ptr<ExternalTrainer>> Create(Clock* clock, ExternalTrainerOptions opts);
  ~ExternalTrainer() override;

  StatusOr<double> Compute(const Batch& batch) override;
  std::optional<double> ReportedComputeMs() override;
  std::optional<v1::TrainingReport> TakeReport() override;
  void Idle() override;
  void Skip(int64_t view, int64_t iteration, bool local_step) override;
  // The ring's offences (ExternalRing::TakeOffences), reported like ModelTrainer's.
  std::vector<RingOffence> TakeOffences() override;

  // The bound endpoint (tcp port resolved).
  const std::string& endpoint() const { return endpoint_; }

 private:
  ExternalTrainer(Clock* clock, ExternalTrainerOptions opts);
  struct Wait {
    uint64_t partition_id = 0;
    int64_t round = -1;
    std::optional<v1::ConsumerReport> report;
    std::optional<v1::ConsumerAllReduce> allreduce;
    zmq::message_t gradient;
    bool lost = false;
  };
  // Handles every queued monitor event and ROUTER message without blocking;
  // what `wait` (if any) awaits is put in it.
  void Drain(Wait* wait);
  void OnHello(const std::string& id, int fd, const v1::ConsumerHello& h, Wait* wait);
  void Reply(const std::string& id, const v1::Envelope& env, zmq::message_t* data = nullptr);
  // Waits up to `ms` for anything on the sockets.
  void PollFor(int ms);
  // Sends a batch (or, with `batch` null, an empty training batch of
  // `round`) and waits for its report, running the all-reduce it asks for.
  StatusOr<double> RunBatch(const Batch* batch, int64_t view, int64_t round, uint64_t partition_id);
  // RunBatch's frames for the consumer: its routing id, the ConsumerBatch
  // envelope and the batch's payloads in one frame.
  StatusOr<std::vector<zmq::message_t>> BatchFrames(const Batch* batch, int64_t round, uint64_t partition_id,
                                                    bool ring);
  // A local step's report (delta exchange): its samples join the open round.
  StatusOr<double> LocalStepReport(const Wait& w, size_t n);
  // Answers the all-reduce request in `w`: the ring round of the batch's
  // gradient (once per batch; its outcome or error kept), replied to the consumer.
  void AnswerAllReduce(const Wait& w, int64_t view, int64_t round, uint64_t partition_id, size_t n,
                       std::optional<ExternalRing::Outcome>* outcome, Status* ring_error);
  // Round `round` by the agent alone with weight 0 (no consumer takes it).
  void JoinAlone(int64_t view, int64_t round);

  Clock* clock_;
  ExternalTrainerOptions opts_;
  PeerLogLimits log_{opts_.log_suppressed};  // every line a consumer's frames cause
  zmq::context_t ctx_;
  zmq::socket_t router_;
  zmq::socket_t monitor_;
  std::string endpoint_;
  std::optional<std::string> consumer_;  // routing id of the current consumer
  int consumer_fd_ = -1;                 // its connection (ZMQ_SRCFD), -1 = unknown
  std::set<int> live_fds_;               // accepted, not yet disconnected
  std::optional<double> last_ms_;
  std::optional<v1::TrainingReport> report_;
};

}  // namespace loft::agent
