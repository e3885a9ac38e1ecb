// ZmqTransport: the ZeroMQ implementation of models::Transport used by the
// agents' ring all-reduce. One ROUTER per rank bound on its ring endpoint;
// one DEALER per peer (routing id = this rank as decimal text) connected on
// demand to the endpoint given by SetPeers. Send = two frames
// [8-byte tag little-endian][payload] on the DEALER to `to` (non-blocking:
// a full queue gives Unavailable). Recv polls the ROUTER, buffers messages
// keyed by (sender, tag), drops those below the tag floor and returns the
// first match, or DeadlineExceeded.
//
// Not responsible for: authentication (the ring sockets are plain TCP: use
// them on loopback or a trusted network; see edge_agent/README.md),
// membership (callers pass endpoints from the scheduler's view), retries.
// Thread-safety: not thread-safe; one thread uses an instance (it may be
// created on another thread before use).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "core/status.h"
#include "models/transport.h"

namespace loft::agent {

struct ZmqTransportOptions {
  int rank = 0;
  int world_size = 1;
  std::string bind = "tcp://127.0.0.1:0";  // ":0" = any free port
  size_t max_message_bytes = 16u << 20;
  size_t max_buffered_messages = 4096;  // beyond this the oldest buffered message is dropped
};

class ZmqTransport final : public models::Transport {
 public:
  // Binds the ROUTER. `ctx` must outlive the transport.
  static StatusOr<std::unique_ptr<ZmqTransport>> Create(zmq::context_t* ctx, ZmqTransportOptions options);

  // The resolved bound endpoint (what peers connect to).
  const std::string& endpoint() const { return endpoint_; }

  // rank -> endpoint. Reconnects a rank whose endpoint changed; ranks not
  // listed keep their sockets. Errors name the rank.
  Status SetPeers(const std::map<int, std::string>& endpoints);

  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }
  Status Send(int to_rank, uint64_t tag, std::span<const std::byte> payload) override;
  StatusOr<std::vector<std::byte>> Recv(int from_rank, uint64_t tag, int64_t timeout_ms) override;
  void SetTagFloor(uint64_t floor) override;

 private:
  ZmqTransport(zmq::context_t* ctx, ZmqTransportOptions options) : ctx_(ctx), options_(std::move(options)) {}
  // Reads every message waiting on the ROUTER (waits up to timeout_ms for the first).
  Status Pump(int64_t timeout_ms);

  struct Peer {
    std::string endpoint;
    zmq::socket_t sock;
  };
  zmq::context_t* ctx_;
  ZmqTransportOptions options_;
  zmq::socket_t router_;
  std::string endpoint_;
  std::map<int, Peer> peers_;
  std::map<std::pair<int, uint64_t>, std::vector<std::vector<std::byte>>> inbox_;
  size_t buffered_ = 0;
  uint64_t floor_ = 0;
};

}  // namespace loft::agent
