// ZmqTransport: the ZeroMQ implementation of models::Transport used by the
// agents' ring all-reduce. One ROUTER per rank bound on its ring endpoint;
// one DEALER per peer (routing id = "<rank>/<128-bit random hex>", unique
// per connection so no one can take over another's id) connected on
// demand to the endpoint given by SetPeers. Send = two frames
// [8-byte tag little-endian][payload] on the DEALER to `to` (non-blocking:
// a full queue gives Unavailable). Recv polls the ROUTER, buffers messages
// keyed by (sender, tag), drops those below the tag floor and returns the
// first match, or DeadlineExceeded.
//
// Authentication (CURVE, unless the options carry no key pair): the
// ROUTER is a CURVE server (the context's ZapAuthenticator holds the
// allow-list, so an unlisted key never completes its handshake), every
// DEALER a CURVE client using the peer rank's public key, and a message is
// accepted only if its ZAP User-Id is the node name of the rank it claims
// as routing id (`rank_names`): a listed key cannot speak for another rank.
//
// Inbox bounds: every rank has its own quota (messages and bytes), tags
// beyond a window of views and rounds ahead of the current one are
// dropped, and a sender check (SetSenderCheck, e.g. the membership view)
// may refuse a rank: a jamming peer, even a member, fills only its own
// quota and never evicts another rank's message. Each drop is counted
// (stats()).
//
// Requests: messages whose tag has the phase given to SetRequestHandler
// are not buffered; the handler's answer goes back over the ROUTER to the
// requester's DEALER with the same tag, at most request_burst at once and
// then one per request_interval_ms per requester (the rest go unanswered). Request() sends one and waits
// (bounded) for that answer on the DEALER, pumping the ROUTER meanwhile.
// Used for state transfer to a restarted agent (model_trainer.h).
//
// Not responsible for: membership (callers pass endpoints from the
// scheduler's view), retries, what requests mean.
// Thread-safety: not thread-safe; one thread uses an instance (it may be
// created on another thread before use).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "core/curve.h"
#include "core/status.h"
#include "edge_agent/link_emulator.h"
#include "models/transport.h"

namespace loft::agent {

struct ZmqTransportOptions {
  int rank = 0;
  int world_size = 1;
  std::string bind = "tcp://127.0.0.1:0";  // ":0" = any free port
  size_t max_message_bytes = 16u << 20;
  // Inbox bounds per sending rank (one rank cannot crowd out another's
  // messages): a message that would take its sender beyond either is
  // dropped on arrival (counted), never one already buffered.
  size_t max_buffered_per_sender = 1024;
  size_t max_buffered_bytes_per_sender = 64u << 20;
  // The tag window: once this rank has a current tag (the floor, or the
  // highest tag it waited for), a message more than view_window views or
  // round_window rounds ahead of it is dropped on arrival (counted).
  // round_window 0 = no round window: the caller judges rounds (the
  // ModelTrainer's RingGuard drops far-future rounds AND reports their
  // sender, which a drop here would hide).
  uint32_t view_window = 16;
  uint32_t round_window = 0;
  // Requests (SetRequestHandler) answered per requesting rank: a burst of
  // request_burst, then one per request_interval_ms; the rest are dropped
  // unanswered (counted), so no peer makes this rank copy and send its
  // state in a loop.
  int request_burst = 4;
  int64_t request_interval_ms = 500;
  // CURVE: this node's key pair; unset = plain TCP (loopback only, checked
  // by the caller). With CURVE, `public_keys` gives each peer rank's public
  // key and `rank_names` each rank's node name (= its key name, the User-Id
  // the ZAP handler reports); both are indexed by rank.
  std::optional<CurveKeyPair> curve_own;
  std::vector<std::string> public_keys;
  std::vector<std::string> rank_names;
  // Link EMULATION of this node's links for every message (ring chunks,
  // hellos, state transfer): see RingLinkEmulation. Default: off.
  RingLinkEmulation link;
};

// The transport of a ring member of `world_size` ranks, from its options
// (ModelTrainerOptions, ExternalRingOptions: node = rank, ring_bind,
// max_message_bytes, curve_own, public_keys, rank_names, link).
template <typename RingMemberOptions>
ZmqTransportOptions RingTransportOptions(const RingMemberOptions& options, int world_size) {
  ZmqTransportOptions to;
  to.rank = options.node;
  to.world_size = world_size;
  to.bind = options.ring_bind;
  to.max_message_bytes = options.max_message_bytes;
  to.curve_own = options.curve_own;
  to.public_keys = options.public_keys;
  to.rank_names = options.rank_names;
  to.link = options.link;
  return to;
}

// The rank of a DEALER routing id "<rank>/<nonce>" (or a bare "<rank>");
// -1 if malformed.
int RankOfRoutingId(std::string_view id);

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
  // One copy, from the received ZeroMQ message into `out`.
  StatusOr<size_t> RecvInto(int from_rank, uint64_t tag, int64_t timeout_ms,
                            std::span<std::byte> out) override;
  void SetTagFloor(uint64_t floor) override;

  // Answers requests whose tag has `phase` (see above). The handler runs on
  // the thread that pumps (Recv, Poll, Request).
  using RequestHandler =
      std::function<std::vector<std::byte>(int from_rank, uint64_t tag, std::span<const std::byte> body)>;
  void SetRequestHandler(uint8_t phase, RequestHandler handler);
  // Sends a request to `to_rank` and waits up to timeout_ms for its answer.
  StatusOr<std::vector<std::byte>> Request(int to_rank, uint64_t tag, std::span<const std::byte> body,
                                           int64_t timeout_ms);

  // Recv of (from_rank, tag), except that the wait ends early once the
  // sender has a message of the same view and phase but a later round
  // buffered (the lowest such tag), it has waited grace_ms and `usable`
  // accepts it: that message's tag and a copy of its body are returned,
  // and it stays buffered for the round it belongs to. ZeroMQ keeps one
  // sender's messages in order, so a sender whose later round's message
  // came and this one's did not has moved past this round (the opening
  // exchange of a ring round: edge_agent/model_trainer.h).
  struct Taken {
    uint64_t tag = 0;
    std::vector<std::byte> body;
  };
  using LaterUsable = std::function<bool(uint64_t tag, std::span<const std::byte> body)>;
  StatusOr<Taken> RecvOrLater(int from_rank, uint64_t tag, int64_t timeout_ms, int64_t grace_ms,
                              const LaterUsable& usable);
  // Reads what is waiting (up to timeout_ms for the first message), serving requests.
  Status Poll(int64_t timeout_ms) { return Pump(timeout_ms); }
  // Checked while Recv or Request waits (about every 50 ms): a non-OK status
  // ends the wait with it (e.g. "a member left the view": fail fast instead of
  // waiting for the deadline). Empty = none.
  void SetAbortCheck(std::function<Status()> check) { abort_check_ = std::move(check); }
  // (sender, tag) of every buffered message.
  std::vector<std::pair<int, uint64_t>> Buffered() const;
  // The first buffered message of (sender, tag), or nullopt (valid until
  // the next call that receives or discards).
  std::optional<std::span<const std::byte>> Peek(int from_rank, uint64_t tag) const;
  // Drops the buffered messages of (sender, tag).
  void Discard(int from_rank, uint64_t tag);
  // Messages dropped because their CURVE identity did not match the rank they claimed.
  uint64_t rejected_identity() const { return rejected_identity_; }

  // Whether `rank` may have a message of view `view` (the tag's 24 bits)
  // buffered (request = false) or a request answered (request = true).
  // Runs on the pumping thread for every message. Empty = every rank.
  using SenderCheck = std::function<bool(int rank, uint32_t view, bool request)>;
  void SetSenderCheck(SenderCheck check) { sender_check_ = std::move(check); }
  // Messages dropped on arrival, by reason, and requests left unanswered.
  struct InboxStats {
    uint64_t out_of_window = 0;     // beyond the view/round window
    uint64_t over_quota = 0;        // its sender's quota was full
    uint64_t refused_sender = 0;    // the sender check said no
    uint64_t requests_limited = 0;  // over its requester's rate
  };
  const InboxStats& stats() const { return stats_; }
  // Messages buffered from `rank`.
  size_t buffered_from(int rank) const;

 private:
  ZmqTransport(zmq::context_t* ctx, ZmqTransportOptions options) : ctx_(ctx), options_(std::move(options)) {}
  // Reads every message waiting on the ROUTER (waits up to timeout_ms for the first).
  Status Pump(int64_t timeout_ms);
  // The first buffered message of (from_rank, tag), waiting up to timeout_ms
  // (the emulated link's wait included): Recv and RecvInto.
  StatusOr<zmq::message_t> Take(int from_rank, uint64_t tag, int64_t timeout_ms);
  // Whether a message of `tag` from `from` (bytes long) may be buffered;
  // counts the reason when not.
  bool Admit(int from, uint64_t tag, size_t bytes);
  // Whether a request from `from` is answered now (its rate; counted when not).
  bool AdmitRequest(int from, uint64_t tag);
  // Answers one request on the ROUTER (to routing id `id`).
  void Answer(const zmq::message_t& id, int from, uint64_t tag, const zmq::message_t& body);
  // Accounts for buffered messages leaving (taken, discarded or floored).
  void Forget(int from, size_t count, size_t bytes);

  struct Peer {
    std::string endpoint;
    zmq::socket_t sock;
  };
  zmq::context_t* ctx_;
  ZmqTransportOptions options_;
  zmq::socket_t router_;
  std::string endpoint_;
  std::map<int, Peer> peers_;
  struct Buffered1 {
    zmq::message_t body;     // as received: no copy until Recv / RecvInto
    int64_t arrived_us = 0;  // link.clock's time (0 without link emulation)
  };
  int64_t NowUs() const { return options_.link.clock->NowMicros(); }
  std::map<std::pair<int, uint64_t>, std::vector<Buffered1>> inbox_;
  struct Usage {
    size_t messages = 0;
    size_t bytes = 0;
  };
  std::map<int, Usage> usage_;  // per sender, of what inbox_ holds
  uint64_t floor_ = 0;
  uint64_t current_ = 0;  // max(floor_, the highest tag waited for): the window's anchor
  struct Bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point last;
  };
  std::map<int, Bucket> request_buckets_;
  SenderCheck sender_check_;
  InboxStats stats_;
  uint8_t request_phase_ = 0;
  RequestHandler handler_;
  std::function<Status()> abort_check_;
  uint64_t rejected_identity_ = 0;
};

}  // namespace loft::agent
