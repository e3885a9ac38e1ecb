// ConsumerSession: the C API consumer (loft_consumer_*) behind the shim.
// A ZeroMQ DEALER connected to an agent's consumer_endpoint (compute_mode
// external, edge_agent/external_trainer.h). On open it sends ConsumerHello;
// Next() waits for one [ConsumerBatch][payload]* message and returns it as a
// ConsumerBatchData that owns the received zmq frames, so payload pointers
// are zero-copy and valid until the batch is destroyed; Report() sends
// ConsumerReport{partition_id, compute_ms} (the acknowledgement).
//
// Not responsible for: training, retries (the agent fails a partition that
// is not reported in time and the scheduler retries it), authentication
// (the endpoint is ipc:// or loopback tcp://, no CURVE).
// Thread-safety: not thread-safe; use a session and its batches from one
// thread at a time. Batches must be destroyed before their session.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "core/status.h"

namespace loft::capi {

struct ConsumerBatchData {
  uint64_t partition_id = 0;
  std::vector<uint64_t> sample_ids;
  std::vector<int32_t> labels;
  std::vector<zmq::message_t> payloads;  // one per sample, in sample_ids order
  bool reported = false;
};

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

 private:
  ConsumerSession() = default;
  zmq::context_t ctx_{1};
  zmq::socket_t sock_;
  std::string endpoint_;
};

}  // namespace loft::capi
