// ZmqSchedulerServer: the socket layer of loft-scheduler. Owns the ZeroMQ
// context, the ROUTER socket agents connect to (CURVE server with a ZAP
// allow-list unless insecure), the metrics HTTP endpoint, and the poll
// loop. Each received message is [routing id][envelope]; the envelope is
// decoded by core/codec.h (size, parse, version, body checks). Bad frames
// are counted in loft_scheduler_dropped_total{reason} and, when they came
// with a routing id, answered with an Error (best effort, never blocking).
// Good envelopes go to SchedulerService, which replies and sends through
// this server's SchedulerTransport (routing node -> latest routing id).
//
// Not responsible for: any scheduling decision, the journal, membership
// (SchedulerService and scheduler/ do those).
// Thread-safety: one thread runs Run(); the metrics server has its own
// thread and only reads the (thread-safe) registry.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <zmq.hpp>

#include "core/clock.h"
#include "core/curve.h"
#include "core/log_limiter.h"
#include "core/metrics.h"
#include "core/metrics_http.h"
#include "core/status.h"
#include "server/options.h"
#include "server/service.h"
#include "server/service_clock.h"
#include "server/transport.h"

namespace loft::server {

class ZmqSchedulerServer : public SchedulerTransport {
 public:
  static StatusOr<std::unique_ptr<ZmqSchedulerServer>> Create(const SchedulerOptions& opts, Clock* clock);
  ~ZmqSchedulerServer() override;

  // Serves until `stop()` returns true (checked at least every 50 ms).
  Status Run(const std::function<bool()>& stop);

  // The bound endpoint (resolves tcp://...:* to the real port).
  const std::string& endpoint() const { return endpoint_; }
  // The metrics port actually bound (0 = metrics off).
  int metrics_port() const;

  Status Send(int32_t node, const v1::Envelope& env) override;

 private:
  ZmqSchedulerServer(const SchedulerOptions& opts, Clock* clock);
  Status Init();
  // Handles one received multipart message.
  void HandleMessage(std::vector<zmq::message_t>& frames);
  void Drop(const std::string& reason);
  void ReplyError(const zmq::message_t& routing_id, const Status& st);

  SchedulerOptions opts_;
  Clock* clock_;
  ServiceClock time_;  // the service's now_ms (service_clock.h)
  zmq::context_t ctx_{1};
  std::unique_ptr<ZapAuthenticator> zap_;
  zmq::socket_t router_;
  std::string endpoint_;
  std::map<int32_t, std::string> routes_;  // node -> routing id of its latest message

  metrics::Registry registry_;
  metrics::CounterFamily* received_ = nullptr;
  metrics::CounterFamily* dropped_ = nullptr;
  metrics::CounterFamily* sent_ = nullptr;
  metrics::CounterFamily* send_failed_ = nullptr;
  std::unique_ptr<MetricsHttpServer> http_;
  PeerLogLimits rejected_log_{nullptr};  // "rejected ..." lines (debug), per key
  std::unique_ptr<SchedulerService> service_;
};

}  // namespace loft::server
