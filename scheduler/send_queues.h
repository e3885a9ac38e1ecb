// SendQueues: the scheduler's send side, per node: the planned partitions
// waiting for a credit (FIFO, in plan order) and the node's CreditWindow
// (flow_control.h), with the one streaming rule both engines run (the
// loft-scheduler daemon, server/service_loop.cc SendQueued, and loft-sim,
// sim/simulator.cc SendQueued): nodes in ascending order; for each, while
// its window has a credit, its oldest queued partition is offered to the
// engine, which sends it, drops it (no longer planned), or stops that
// node's queue until the next call (no route, held after a restart, not
// yet sendable). A sent partition takes a credit.
//
// Only nodes with a non-empty queue are visited (a sorted list of them),
// so a call costs what it sends, not the cluster's size.
//
// Not responsible for: sending (the engine's callbacks), the ledger.
// Thread-safety: not thread-safe; one caller. The callbacks must not push
// to or clear the queues.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "core/status.h"
#include "scheduler/flow_control.h"

namespace loft::sched {

class SendQueues {
 public:
  explicit SendQueues(int nodes)
      : queue_(static_cast<size_t>(nodes)),
        window_(static_cast<size_t>(nodes)),
        listed_(static_cast<size_t>(nodes)) {}

  void Push(int32_t node, uint64_t partition);
  // Drops the node's queue (its death, its re-registration).
  void Clear(int32_t node);
  // What a session's end and start do to the send side, in both engines:
  // a node that leaves (dead or evicted) loses its queue and its window
  // closes (no credit until it registers again); a new session (a
  // registration that is not a reconnect, sched::TakeRegistration) opens
  // its window with the registration's credits and starts an empty queue.
  void Depart(int32_t node) {
    Clear(node);
    window(node).Close();
  }
  void StartSession(int32_t node, int64_t credits) {
    window(node).Open(credits);
    Clear(node);
  }
  CreditWindow& window(int32_t node) { return window_[static_cast<size_t>(node)]; }
  const CreditWindow& window(int32_t node) const { return window_[static_cast<size_t>(node)]; }
  size_t queued(int32_t node) const { return queue_[static_cast<size_t>(node)].size(); }
  bool empty() const { return queued_ == 0; }
  int nodes() const { return static_cast<int>(window_.size()); }

  enum class Offer { kSend, kDrop, kWait };
  // The rule above. `offer(node, partition)` decides (and for kSend has
  // sent it); then the partition leaves the queue and takes a credit, and
  // `sent(node, partition)` records it. Stops at the first non-OK `sent`.
  template <typename OfferFn, typename SentFn>
  Status Stream(OfferFn&& offer, SentFn&& sent);

 private:
  void SortListed();

  std::vector<std::deque<uint64_t>> queue_;
  std::vector<CreditWindow> window_;
  std::vector<char> listed_;         // node in with_queue_
  std::vector<int32_t> with_queue_;  // nodes with a non-empty queue (sorted before a stream)
  bool sorted_ = true;
  size_t queued_ = 0;
};

template <typename OfferFn, typename SentFn>
Status SendQueues::Stream(OfferFn&& offer, SentFn&& sent) {
  SortListed();
  size_t keep = 0;
  Status status;
  for (size_t k = 0; k < with_queue_.size(); ++k) {
    const int32_t node = with_queue_[k];
    std::deque<uint64_t>& q = queue_[static_cast<size_t>(node)];
    CreditWindow& w = window_[static_cast<size_t>(node)];
    while (status.ok() && !q.empty() && w.CanSend()) {
      const uint64_t id = q.front();
      const Offer o = offer(node, id);
      if (o == Offer::kWait) break;
      q.pop_front();
      --queued_;
      if (o == Offer::kDrop) continue;
      w.OnSent();
      status = sent(node, id);
    }
    if (!q.empty())
      with_queue_[keep++] = node;
    else
      listed_[static_cast<size_t>(node)] = 0;
  }
  with_queue_.resize(keep);
  return status;
}

}  // namespace loft::sched
