// ViewBook: the membership views a training agent has received from the
// scheduler (the last 64 by number) and the ring members they give.
//
// Not responsible for: connecting to members (the caller passes the
// endpoints to its transport), deciding membership (the scheduler does).
// Thread-safety: OnView from any thread; the rest from the trainer thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/proto/loft.pb.h"
#include "core/status.h"

namespace loft::agent {

struct RingMembers {
  uint32_t view = 0;
  std::vector<int> nodes;                // sorted, includes this node
  std::map<int, std::string> endpoints;  // ring endpoints of the other nodes in `view`
};

struct ViewBookOptions {
  int node = 0;                 // this agent's rank
  int64_t view_wait_ms = 8000;  // how long to wait for a (newer) view
  // When set and true, every wait ends early (shutdown).
  const std::atomic<bool>* stop = nullptr;
};

class ViewBook {
 public:
  explicit ViewBook(ViewBookOptions options) : options_(options) {}

  void OnView(const v1::MembershipView& view);
  // The live nodes of view v (waits up to view_wait_ms for it). Aborted on
  // shutdown, Unavailable if it never comes or a member has no endpoint,
  // FailedPrecondition if this node is not live in it.
  StatusOr<RingMembers> Members(int64_t v);
  // Unavailable when a view newer than m's drops a member or gives it a new
  // ring endpoint (it restarted): an attempt among m can never complete.
  Status CheckAlive(const RingMembers& m);
  // A view newer than v, after waiting up to view_wait_ms.
  std::optional<v1::MembershipView> NewerView(int64_t v);
  // Whether view v has arrived (no wait), and the newest view's number (-1: none).
  bool Has(int64_t v);
  // Whether `node` is live in view v (false when v has not arrived).
  bool IsLive(int64_t v, int node);
  // How many nodes are live in view v (no wait; 0 when v has not arrived).
  int LiveCount(int64_t v);
  int64_t Latest();
  // The ring's sender check (ZmqTransport::SetSenderCheck): whether `node`
  // may have a ring message of view `tag_view` (a tag's low 24 bits of the
  // view number) buffered, or a request answered. Yes when it is live in
  // the newest view; a message (not a request) also when its view is newer
  // than every view received so far (its sender got that view first).
  // Before any view: messages yes, requests no. An evicted node's messages
  // and state requests are so refused even on a connection it opened
  // while it was listed.
  bool MayRing(int node, uint32_t tag_view, bool request);
  bool Stopping() const { return options_.stop != nullptr && options_.stop->load(); }

 private:
  template <typename Pred>
  bool Wait(std::unique_lock<std::mutex>& lock, Pred pred);

  ViewBookOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, v1::MembershipView> views_;
};

}  // namespace loft::agent
