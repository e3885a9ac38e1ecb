// PeerFetcher: the ZeroMQ PeerClient. For one partition it sends every
// FetchRequest (ids split into batches of `fetch_batch`) to every serving
// peer at once over one DEALER per peer, then collects the multipart
// replies ([FetchReply][record]*) until all arrive or the deadline passes.
// "No grant yet" (Unavailable) answers are retried after a short backoff;
// any other Error fails that peer's group. Records are returned raw; the
// PartitionRunner verifies each (CRC) before use.
//
// Link EMULATION (optional): the spec's latency_ms is slept once per
// partition's remote phase (ExactSleep: what a sleep overran is taken off
// the next one) and every received record byte is paid for in a down-link
// TokenBucket.
//
// Connections: a peer's DEALER is made (and connected) on first use, or
// earlier by Warm(view), which the agent calls whenever a membership view
// arrives: ZeroMQ then runs the TCP and CURVE handshakes in the background,
// so a worker's first fetch from a peer does not pay them (on the testbed
// they made the first remote read 6-13x its later ones, and the scheduler's
// cost model took that as the link's cost). Each connection is monitored
// (zmq_socket_monitor, HANDSHAKE_SUCCEEDED): HandshakenAmong tells how many
// of a view's members are ready, which the agent reports in its heartbeat
// so that the scheduler can start the job when they all are
// (start_peers_wait_ms).
//
// Not responsible for: deciding which peer serves which id (the
// scheduler), verifying records.
// Thread-safety: FetchAll is not thread-safe; one thread (the partition
// runner's fetch thread) uses it. Warm may be called from another thread at any
// time (it only adds connections, under a lock). `lookup` must be
// thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "core/clock.h"
#include "core/curve.h"
#include "core/zmq_util.h"
#include "edge_agent/agent_service.h"
#include "edge_agent/exact_sleep.h"
#include "edge_agent/link_emulator.h"

namespace loft::agent {

struct PeerFetcherOptions {
  size_t max_message_bytes = 16u << 20;  // largest envelope decoded
  // Receive bounds of each peer's DEALER. A reply is fetch_batch + 1 frames
  // and at most ceil(ids / fetch_batch) replies per peer are outstanding, so
  // legitimate traffic is bounded by our own requests; a lying peer can
  // also push frames nobody asked for. recv_hwm (frames) and max_frame_bytes
  // (ZMQ_MAXMSGSIZE, per frame; a larger one drops the connection) cap what
  // ZeroMQ queues for one peer at recv_hwm * max_frame_bytes (128 MiB with
  // the defaults) plus one multipart message; beyond that libzmq stops
  // reading the TCP connection, so the sender's own queue fills and its
  // sends block or fail (tests/unit/edge_agent/peer_fetcher_flood_test.cc).
  // Unsolicited frames still queued are read and dropped by the next
  // FetchAll (unknown request id), never used.
  int recv_hwm = 2048;
  size_t max_frame_bytes = 64u << 10;
  int fetch_batch = 64;
  int timeout_ms = 10000;
  int retry_backoff_ms = 1;  // "no grant yet": the grant is usually sub-ms behind (the scheduler sent both)
  // While replies are outstanding and no resend is due, the fetch wakes
  // at least this often to check the view (a serving peer that left it
  // or restarted fails at once rather than at the deadline). It used to
  // wake every millisecond: a slow link's fetch then cost its reader
  // thread 1,000 polls a second (about 6 % of a core per agent on the
  // testbed's edge-tiers8 spec, much of a 0.15-core node's quota).
  int view_check_ms = 20;
  // IP type of service of the connections to serving peers (ZMQ_TOS): the
  // requests and the ACKs of their replies. 0x10 (low delay) puts them
  // ahead of bulk traffic where a queue honours it (the testbed's links,
  // docs/testbed.md; DSCP-aware edge routers), so that a node's requests
  // do not wait behind the records it serves on its own uplink. 0 = unset.
  int request_tos = kLowDelayTos;
  std::optional<CurveKeyPair> own_keys;  // set = CURVE on
  std::string keys_dir;                  // <dir>/<peer name>.pub authenticates each peer
  TokenBucket* down = nullptr;           // emulation; not owned
  double latency_ms = 0;                 // emulation
};

class PeerFetcher final : public PeerClient {
 public:
  PeerFetcher(zmq::context_t* ctx, Clock* clock, PeerFetcherOptions options,
              std::function<std::optional<PeerInfo>(int32_t)> lookup)
      : ctx_(ctx), clock_(clock), options_(std::move(options)), lookup_(std::move(lookup)), latency_(clock) {}

  std::map<int32_t, PeerFetchResult> FetchAll(
      uint64_t partition_id, int32_t requester,
      const std::map<int32_t, std::vector<uint64_t>>& ids_by_peer) override;
  // The requests to `decoded_peers` say FetchRequest.decoded (with `epoch`).
  std::map<int32_t, PeerFetchResult> FetchAllDecoded(
      uint64_t partition_id, int32_t requester, const std::map<int32_t, std::vector<uint64_t>>& ids_by_peer,
      const std::vector<int32_t>& decoded_peers, int64_t epoch) override;

  // Connects to every member of `view` other than `self` that has a peer
  // endpoint and no connection yet (never replaces one). Errors (a missing
  // key file) are logged; the first fetch reports them as before.
  void Warm(const v1::MembershipView& view, int32_t self);
  // Peers with a connection (made by Warm or a fetch).
  size_t connections() const;
  // How many of `nodes` have a connection whose handshake has finished
  // (thread-safe, like Warm; reads the connections' monitor events).
  int HandshakenAmong(const std::vector<int32_t>& nodes);

 private:
  struct Conn {
    std::string endpoint;
    zmq::socket_t socket;
    zmq::socket_t monitor;  // PAIR on the socket's monitor (HANDSHAKE_SUCCEEDED events)
    bool handshaken = false;
  };
  StatusOr<zmq::socket_t*> SocketFor(const PeerInfo& peer);
  StatusOr<zmq::socket_t*> SocketForLocked(const PeerInfo& peer);  // conns_mu_ held
  // FetchAll's phases (peer_fetcher.cc):
  struct Fetch;  // one FetchAll's requests and results
  // Connects to each peer and sends its requests (fetch_batch ids each); a peer not reached fails.
  void StartRequests(Fetch& f, const std::map<int32_t, std::vector<uint64_t>>& ids_by_peer);
  // Fails the peers with requests open that the current view drops or gives a new endpoint.
  void FailPeersOutOfView(Fetch& f);
  // Takes the replies queued on `peer`'s socket (records, "no grant yet", errors).
  void ReadReplies(Fetch& f, int32_t peer);

  zmq::context_t* ctx_;
  Clock* clock_;
  PeerFetcherOptions options_;
  std::function<std::optional<PeerInfo>(int32_t)> lookup_;
  mutable std::mutex conns_mu_;  // guards conns_ (Warm adds from another thread)
  std::map<int32_t, Conn> conns_;
  uint64_t next_monitor_ = 0;  // inproc endpoint names of the monitors (conns_mu_ held)
  uint64_t next_request_id_ = 1;
  ExactSleep latency_;  // the emulated latency_ms
};

}  // namespace loft::agent
