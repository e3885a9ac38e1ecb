// MetricsHttpServer: a tiny HTTP/1.1 server (Boost.Beast) answering
// `GET /metrics` with a Registry's Prometheus text exposition
// (Content-Type: text/plain; version=0.0.4) and 404 for other paths.
// It runs one thread with its own io_context; each connection is served
// one request with a 5 s deadline, then closed.
//
// Not responsible for: authentication or TLS (bind it to a trusted
// interface; the default address is 127.0.0.1), the metrics themselves.
// Thread-safety: Start/Stop/port from one owning thread; the Registry is
// read concurrently (it is thread-safe).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/metrics.h"
#include "core/status.h"

namespace loft {

class MetricsHttpServer {
 public:
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // At most this many connections are open at once; more are closed as
  // soon as they are accepted (a flood of idle connections cannot exhaust
  // the daemon's file descriptors). Accept errors are logged at most 5
  // times per 10 s.
  static constexpr int kDefaultMaxConnections = 32;
  // Binds `address:port` (port 0 = any free port) and starts serving.
  static StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const metrics::Registry* registry,
                                                            const std::string& address, uint16_t port,
                                                            int max_connections = kDefaultMaxConnections);
  uint16_t port() const;
  void Stop();

 private:
  struct Impl;
  explicit MetricsHttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace loft
