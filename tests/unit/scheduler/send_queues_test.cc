#include "scheduler/send_queues.h"

#include <catch2/catch.hpp>
#include <utility>
#include <vector>

using loft::sched::SendQueues;
using Offer = loft::sched::SendQueues::Offer;
using Sent = std::vector<std::pair<int32_t, uint64_t>>;

namespace {
// Streams, offering every partition as `decide` says; returns what was sent.
template <typename F>
Sent Stream(SendQueues& q, F decide) {
  Sent sent;
  REQUIRE(q.Stream(decide, [&](int32_t node, uint64_t id) {
             sent.emplace_back(node, id);
             return loft::OkStatus();
           }).ok());
  return sent;
}
Offer SendAll(int32_t, uint64_t) {
  return Offer::kSend;
}
}  // namespace

TEST_CASE("send queues stream in node order, plan order, one credit each", "[send_queues]") {
  SendQueues q(3);
  for (int32_t n = 0; n < 3; ++n) q.window(n).Open(2);
  q.Push(2, 10);
  q.Push(0, 11);
  q.Push(2, 12);
  q.Push(2, 13);  // node 2 has two credits: 13 waits
  q.Push(1, 14);
  CHECK(q.Stream([](int32_t, uint64_t) { return Offer::kSend; },
                 [](int32_t, uint64_t) { return loft::OkStatus(); })
            .ok());
  CHECK(q.queued(2) == 1);
  CHECK_FALSE(q.empty());
  CHECK(q.window(2).credits == 0);
  CHECK(q.window(2).in_flight == 2);
  q.window(2).OnFinished(false);
  q.window(2).Grant(1);
  CHECK(Stream(q, SendAll) == Sent{{2, 13}});
  CHECK(q.empty());
}

TEST_CASE("send queues: drop, wait, clear, and an error stops the stream", "[send_queues]") {
  SendQueues q(2);
  q.window(0).Open(4);
  q.window(1).Open(4);
  for (uint64_t id : {1, 2, 3}) q.Push(0, id);
  q.Push(1, 4);
  // 1 is no longer planned (dropped, no credit taken); 2 waits, and so does
  // the rest of node 0's queue; node 1 still streams.
  const Sent sent = Stream(q, [](int32_t, uint64_t id) {
    return id == 1 ? Offer::kDrop : id == 2 ? Offer::kWait : Offer::kSend;
  });
  CHECK(sent == Sent{{1, 4}});
  CHECK(q.queued(0) == 2);
  CHECK(q.window(0).credits == 4);
  // Node 0 dies: its queue goes; pushed again later, it streams once.
  q.Clear(0);
  CHECK(q.empty());
  q.Push(0, 7);
  CHECK(Stream(q, SendAll) == Sent{{0, 7}});
  // An error from the engine stops at that partition (it left the queue).
  q.Push(1, 8);
  q.Push(1, 9);
  int calls = 0;
  const loft::Status s = q.Stream(SendAll, [&](int32_t, uint64_t) {
    ++calls;
    return loft::Internal("journal");
  });
  CHECK(s.code() == loft::StatusCode::kInternal);
  CHECK(calls == 1);
  CHECK(q.queued(1) == 1);
}
