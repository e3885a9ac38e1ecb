// DecodedServer: answers the decoded fetches a holder has accepted
// (FetchRequest.decoded; README "Decoded serving") off the agent's poll
// thread, so that preprocessing them never delays its other peers' record
// replies or its scheduler traffic.
//
// The poll loop hands it each request AgentService::HandlePeer accepted
// (PeerReply::decoded) with the requester's route (Submit; never blocks).
// At most `max_in_flight` requests are served at once, each on one of this
// server's threads, which calls `serve` (AgentService::ServeDecoded: reads
// the records, waits for the agent's PreprocessPool to preprocess them,
// encodes the reply); the others wait in arrival order (none is dropped).
// A finished reply is queued with its route and wakes the poll loop
// through an inproc PAIR (wake_socket), which takes it (TakeFinished) and
// sends it on the ROUTER: only the poll thread touches the ROUTER. A reply
// whose requester has gone meanwhile is dropped by the ROUTER (or its send
// fails and is counted), like any reply to a peer that left.
//
// Memory: at most `max_in_flight` requests hold records and decoded levels
// at once (a 4,096-id request of 28x28 inputs: its records, plus 3.2 MB of
// levels and 3.3 MB of encoded reply until the poll loop has sent it);
// a waiting one holds its FetchRequest (at most 4,096 ids, every one
// granted and consumed, so the scheduler's grants bound the queue).
//
// Not responsible for: grants, authentication, metrics, the reply's
// contents (AgentService), sockets other than the wake pair.
// Thread-safety: Submit, TakeFinished and Stop may be called from any
// thread; wake_socket/DrainWakes from the poll loop only. `serve` runs on
// the server's threads, several at once.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "core/proto/loft.pb.h"
#include "core/status.h"
#include "edge_agent/agent_service.h"

namespace loft::agent {

// Decoded requests one agent serves at once (the rest wait): enough to keep
// a small pool busy between one request's reads and encoding and the next's
// preprocessing, few enough to bound the memory they hold.
inline constexpr int kDecodedInFlight = 4;

class DecodedServer {
 public:
  using Serve = std::function<PeerReply(const v1::FetchRequest&)>;

  // `ctx`: the wake pair's context (borrowed, outlives the server).
  // `serve` must stay callable until Stop returns. max_in_flight >= 1.
  static StatusOr<std::unique_ptr<DecodedServer>> Create(zmq::context_t* ctx, Serve serve,
                                                         int max_in_flight = kDecodedInFlight);
  ~DecodedServer();  // Stop()

  // Queues a request to be served; `route` is the requester's routing id.
  void Submit(std::string route, v1::FetchRequest request);

  struct Finished {
    std::string route;
    PeerReply reply;
  };
  // The replies served so far, oldest first.
  std::deque<Finished> TakeFinished();

  // Readable when a reply was queued; the poll loop polls it and then calls
  // DrainWakes (and TakeFinished).
  zmq::socket_t& wake_socket() { return wake_rx_; }
  void DrainWakes();

  // Requests waiting and being served (not yet finished).
  size_t pending() const;

  // Waits for the requests being served to finish (their replies are
  // queued, not sent), drops those still waiting and joins the threads.
  // Idempotent; Submit afterwards drops its request.
  void Stop();

 private:
  DecodedServer(Serve serve, int max_in_flight);
  void Work();

  Serve serve_;
  zmq::socket_t wake_rx_;  // poll loop only
  zmq::socket_t wake_tx_;  // under mu_ (the worker threads share it)

  mutable std::mutex mu_;
  std::condition_variable cv_;  // waiting_ or stop_
  struct Request {
    std::string route;
    v1::FetchRequest request;
  };
  std::deque<Request> waiting_;
  size_t serving_ = 0;
  std::deque<Finished> finished_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace loft::agent
