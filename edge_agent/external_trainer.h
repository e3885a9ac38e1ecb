// ExternalTrainer: compute_mode `external`. The partition's compute is done
// by a local consumer program (C API: loft_consumer_*, capi/README.md)
// connected to a ZeroMQ ROUTER bound on `consumer_endpoint`.
//
// Compute(batch) sends the current consumer
//   [ConsumerBatch{partition_id, sample_ids, labels}][payload]*   (one raw
// frame per sample, in sample_ids order) and waits for
// ConsumerReport{partition_id, compute_ms}. The consumer's compute_ms is then
// what the agent reports to the scheduler (ReportedComputeMs()).
// Compute returns Unavailable — the agent sends PartitionFailed and the
// scheduler retries the samples through lineage — when
//   - no consumer said ConsumerHello within the deadline,
//   - the consumer disconnects (ZMQ socket monitor: every accepted
//     connection gone) or its ROUTER send fails,
//   - no matching report arrives within the deadline.
// One consumer at a time: a new ConsumerHello replaces the previous one.
// The ROUTER has no CURVE: the endpoint must be ipc:// (file permissions
// protect it) or a loopback tcp:// address (checked by the server).
//
// Not responsible for: reading samples, choosing the endpoint's policy.
// Thread-safety: not thread-safe; Compute is called by one thread at a time
// (the sockets may move between threads across a happens-before edge).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "core/clock.h"
#include "core/status.h"
#include "edge_agent/trainer.h"

namespace loft::agent {

struct ExternalTrainerOptions {
  std::string endpoint;                     // ipc://path or tcp://127.0.0.1:port (port 0/* = any)
  int timeout_ms = 10000;                   // deadline for a consumer + its report, per partition
  size_t max_message_bytes = 16 << 20;      // ZMQ_MAXMSGSIZE of the ROUTER
  const std::atomic<bool>* stop = nullptr;  // optional: abandon a wait when set
};

class ExternalTrainer final : public Trainer {
 public:
  static StatusOr<std::unique_ptr<ExternalTrainer>> Create(Clock* clock, ExternalTrainerOptions opts);
  ~ExternalTrainer() override;

  StatusOr<double> Compute(const Batch& batch) override;
  std::optional<double> ReportedComputeMs() override;

  // The bound endpoint (tcp port resolved).
  const std::string& endpoint() const { return endpoint_; }

 private:
  ExternalTrainer(Clock* clock, ExternalTrainerOptions opts);
  // Handles every queued monitor event and ROUTER message without blocking.
  // Sets *report_ms when the report for `waiting_for` arrives.
  void Drain(std::optional<uint64_t> waiting_for, std::optional<double>* report_ms, bool* lost);
  // Waits up to `ms` for anything on the two sockets.
  void PollFor(int ms);

  Clock* clock_;
  ExternalTrainerOptions opts_;
  zmq::context_t ctx_;
  zmq::socket_t router_;
  zmq::socket_t monitor_;
  std::string endpoint_;
  std::optional<std::string> consumer_;  // routing id of the current consumer
  int64_t live_connections_ = 0;
  std::optional<double> last_ms_;
};

}  // namespace loft::agent
