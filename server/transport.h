// SchedulerTransport: how SchedulerService sends a message to a node
// without knowing about sockets. ZmqSchedulerServer implements it over
// its ROUTER socket; tests and the overhead benchmark use fakes.
//
// Send returns OK when the transport accepted the message, Unavailable
// when the node has no route (never connected, or gone), and
// ResourceExhausted when the node's queue is full (backpressure).
// Thread-safety: implementations are used from one thread.
#pragma once

#include <cstdint>

#include "core/proto/loft.pb.h"
#include "core/status.h"

namespace loft::server {

class SchedulerTransport {
 public:
  virtual ~SchedulerTransport() = default;
  virtual Status Send(int32_t node, const v1::Envelope& env) = 0;
};

}  // namespace loft::server
