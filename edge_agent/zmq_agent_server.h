// ZmqAgentServer: the socket layer of loft-agent. Owns the ZeroMQ
// context, the ZAP authenticator (CURVE), the peer-fetch ROUTER, the
// scheduler DEALER, the metrics HTTP server, and runs the poll thread
// (Run): peer requests → AgentService::HandlePeer → reply; scheduler
// messages → AgentService::HandleScheduler; heartbeats; re-registration;
// sends partition reports + CreditGrants. Accepted partitions go to its
// PartitionPipeline (partition_pipeline.h: the reader and compute
// threads), accepted decoded fetches to its DecodedServer
// (decoded_server.h: preprocessed off the poll thread, the replies sent by
// it), the ring member is made by MakeRingMember (ring_member.h).
//
// Not responsible for: what a message means (AgentService), reading or
// computing partitions (PartitionPipeline), planning.
// Thread-safety: Create, then Run on one thread; Stop() and the accessors
// are thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "core/clock.h"
#include "core/metrics.h"
#include "core/status.h"
#include "edge_agent/agent_config.h"

namespace loft::agent {

class ZmqAgentServer {
 public:
  // Opens the cache, loads the spec and keys, binds the peer socket and
  // connects to the scheduler. Does not start serving until Run.
  static StatusOr<std::unique_ptr<ZmqAgentServer>> Create(const AgentConfig& config, Clock* clock,
                                                          metrics::Registry* registry);
  ~ZmqAgentServer();

  // Serves until Stop(), `*interrupt` becomes true, or a Shutdown from the
  // scheduler has been honoured. Returns the first fatal error.
  Status Run(const std::atomic<bool>* interrupt = nullptr);
  void Stop();

  // The advertised peer endpoint (resolved port).
  const std::string& peer_endpoint() const;
  // The metrics HTTP port, or 0 when disabled.
  int metrics_port() const;

  struct Impl;

 private:
  explicit ZmqAgentServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace loft::agent
