// ConsumerSession: the C API consumer (loft_consumer_*) behind the shim.
// A ZeroMQ DEALER connected to an agent's consumer_endpoint (compute_mode
// external, edge_agent/external_trainer.h). On open it sends ConsumerHello
// (consumer protocol 3, the token from $LOFT_CONSUMER_TOKEN if set). Next()
// waits for one [ConsumerBatch][payloads] message and returns it as a
// ConsumerBatchData that owns the received payload frame (every payload
// back to back), so payload pointers are zero-copy and valid until the
// batch is destroyed; Report() sends ConsumerReport (the acknowledgement).
//
// Training (the agent's spec says training.model external): AllReduce()
// sends the batch's gradient and waits for the round's ConsumerAggregate;
// PutState() publishes the consumer's state blob; SyncState() fetches the
// ring majority's. Batches that arrive while a call waits for its answer
// are queued for Next(). A ConsumerRefused (another consumer is live, a
// wrong token) makes every later call fail with its reason.
//
// Not responsible for: training, retries (the agent fails a partition that
// is not reported in time and the scheduler retries it), authentication
// beyond the token (the endpoint is ipc:// (mode 0600) or loopback tcp://).
// A signal that interrupts a wait (the program's timers, SIGCHLD of its
// data loader workers) does not end it: the wait resumes until its
// deadline.
// Thread-safety: not thread-safe; use a session and its batches from one
// thread at a time. Batches must be destroyed before their session.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "core/proto/loft.pb.h"
#include "core/status.h"

namespace loft::capi {

inline constexpr uint32_t kConsumerProtocol = 3;  // = edge_agent/external_trainer.h

struct ConsumerBatchData {
  uint64_t partition_id = 0;
  int64_t round = -1;
  bool ring = false;  // the agent all-reduces this batch's gradient
  // training.exchange (ConsumerBatch): a local step (no all-reduce), the
  // round exchanges model deltas, the factor on a local step's gradient.
  bool local_step = false;
  bool delta_exchange = false;
  double local_scale = 1.0;
  int64_t round_steps = 0;  // after AllReduce returned 1 or 2: planned steps the aggregate spans
  std::vector<uint64_t> sample_ids;
  std::vector<int32_t> labels;
  std::vector<size_t> offsets;  // payload i = [offsets[i], offsets[i+1]) of `payload`
  zmq::message_t payload;
  std::string state;  // AllReduce outcome 2: the majority's state to load first
  bool reported = false;
  bool allreduced = false;
  std::optional<double> loss, test_accuracy;
  std::optional<uint64_t> param_hash;
};

// AllReduce outcomes.
inline constexpr int kAggregateApplied = 1;  // data holds the aggregate: apply it
inline constexpr int kAggregateCarried = 0;  // nothing to apply (the round was done; gradient carried)
inline constexpr int kAggregateStale = 2;    // load batch->state first, then apply data

class ConsumerSession {
 public:
  // endpoint: ipc://path or tcp://host:port. client: a name for agent logs.
  static StatusOr<std::unique_ptr<ConsumerSession>> Open(const std::string& endpoint,
                                                         const std::string& client);
  ~ConsumerSession();

  // The next batch; DeadlineExceeded ("timeout after N ms") when none
  // arrives within timeout_ms (< 0 = wait forever).
  StatusOr<std::unique_ptr<ConsumerBatchData>> Next(int timeout_ms);
  // Acknowledges `batch` with its compute time. A batch is reported once.
  Status Report(ConsumerBatchData* batch, double compute_ms);
  // In place: data (n floats, the batch's mean gradient; ignored by the
  // agent for an empty batch) -> the round's aggregate. Returns an outcome
  // above; errors carry the agent's reason. Waits up to timeout_ms.
  StatusOr<int> AllReduce(ConsumerBatchData* batch, float* data, size_t n, int timeout_ms);
  Status PutState(const void* blob, size_t len);
  // The majority's state: (round, blob); round -1 and an empty blob when no member has progress.
  StatusOr<std::pair<int64_t, std::string>> SyncState(int timeout_ms);

 private:
  ConsumerSession() = default;
  // Receives messages (queuing batches) until `want` returns true for one;
  // DeadlineExceeded after timeout_ms (< 0 = forever).
  template <typename Want>
  StatusOr<std::vector<zmq::message_t>> Await(int timeout_ms, const std::string& what, Want want,
                                              v1::Envelope* env);
  StatusOr<std::unique_ptr<ConsumerBatchData>> ToBatch(const v1::Envelope& env,
                                                       std::vector<zmq::message_t> extra);

  zmq::context_t ctx_{1};
  zmq::socket_t sock_;
  std::string endpoint_;
  std::string refused_;
  std::deque<std::pair<v1::Envelope, std::vector<zmq::message_t>>> queued_;
};

}  // namespace loft::capi
