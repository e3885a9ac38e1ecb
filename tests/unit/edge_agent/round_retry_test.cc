// RunWithViewRetry (edge_agent/round_retry.h): a failed attempt restarts
// among the live members of the newest view, the same set on every member
// whichever views it saw in between; and ViewBook::MayRing, the ring's
// sender check, which follows the newest view. No sockets.
#include "edge_agent/round_retry.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "core/proto/loft.pb.h"
#include "edge_agent/view_book.h"

using namespace loft;
using namespace loft::agent;

namespace {

v1::MembershipView View(int64_t number, const std::vector<std::pair<int, std::string>>& members) {
  v1::MembershipView v;
  v.set_view(number);
  for (const auto& [node, ring] : members) {
    v1::Member* m = v.add_members();
    m->set_node(node);
    m->set_ring_endpoint(ring);
  }
  return v;
}

// Node 3 dies (view 5) and rejoins with a new ring endpoint (view 6).
const v1::MembershipView kV4 = View(4, {{0, "r0"}, {1, "r1"}, {2, "r2"}, {3, "r3"}});
const v1::MembershipView kV5 = View(5, {{0, "r0"}, {1, "r1"}, {2, "r2"}});
const v1::MembershipView kV6 = View(6, {{0, "r0"}, {1, "r1"}, {2, "r2"}, {3, "r3b"}});

struct Trace {
  std::vector<std::pair<uint32_t, std::vector<int>>> attempts;  // view, nodes
};

}  // namespace

TEST_CASE("a restarted round takes the newest view's live members, whatever views came between") {
  // Member A sees view 5 before view 6: its first restart is among {0,1,2}
  // in view 5, which fails once view 6 arrives; member B sees views 5 and 6
  // together and goes from view 4 straight to 6. Both must end with the same
  // members in view 6, the rejoined node 3 included.
  auto run = [](bool sees_view_5_alone) {
    ViewBook views({/*node=*/0, /*view_wait_ms=*/200, nullptr});
    views.OnView(kV4);
    Trace t;
    auto connect = [](const RingMembers&) { return OkStatus(); };
    auto attempt = [&](const RingMembers& m) -> Status {
      t.attempts.emplace_back(m.view, m.nodes);
      if (m.view == 4) {
        views.OnView(kV5);
        if (!sees_view_5_alone) views.OnView(kV6);
        return Unavailable("node 3 is not live in view 5");
      }
      if (m.view == 5) {
        views.OnView(kV6);
        return DeadlineExceeded("nothing from rank 2");
      }
      return OkStatus();
    };
    auto r = RunWithViewRetry(&views, 0, 4, 153, connect, attempt);
    INFO(r.status().ToString());
    REQUIRE(r.ok());
    CHECK(r->members.view == 6);
    CHECK(r->members.nodes == std::vector<int>{0, 1, 2, 3});
    CHECK(r->members.endpoints.at(3) == "r3b");
    return t;
  };
  const Trace a = run(true);
  const Trace b = run(false);
  REQUIRE(a.attempts.size() == 3);
  CHECK(a.attempts[1] == std::pair<uint32_t, std::vector<int>>{5, {0, 1, 2}});
  CHECK(a.attempts[2] == std::pair<uint32_t, std::vector<int>>{6, {0, 1, 2, 3}});
  REQUIRE(b.attempts.size() == 2);
  CHECK(b.attempts[1] == a.attempts[2]);
}

TEST_CASE("a round whose node left the newer view, or that gets no newer view, fails") {
  ViewBook views({/*node=*/3, /*view_wait_ms=*/50, nullptr});
  views.OnView(kV4);
  auto connect = [](const RingMembers&) { return OkStatus(); };
  int calls = 0;
  auto leave = [&](const RingMembers&) -> Status {
    ++calls;
    views.OnView(kV5);  // node 3 is not in it
    return Unavailable("gone");
  };
  auto r = RunWithViewRetry(&views, 3, 4, 7, connect, leave);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kFailedPrecondition);
  CHECK(calls == 1);
  // No newer view within the wait: the attempt's error, with the round.
  ViewBook alone({/*node=*/0, /*view_wait_ms=*/50, nullptr});
  alone.OnView(kV4);
  auto silent = [](const RingMembers&) -> Status { return DeadlineExceeded("nothing from rank 1"); };
  auto s = RunWithViewRetry(&alone, 0, 4, 9, connect, silent);
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().code() == StatusCode::kDeadlineExceeded);
  CHECK(s.status().message().find("round 9") != std::string::npos);
  CHECK(s.status().message().find("no newer view") != std::string::npos);
  // Not retryable: ends at once.
  auto bad = [](const RingMembers&) -> Status { return InvalidArgument("bad chunk"); };
  auto b = RunWithViewRetry(&alone, 0, 4, 9, connect, bad);
  REQUIRE_FALSE(b.ok());
  CHECK(b.status().code() == StatusCode::kInvalidArgument);
}

// The ring's sender check (ZmqTransport::SetSenderCheck): an evicted
// node's messages and state requests are refused even on a connection it
// opened while it was listed, because the check reads the newest view on
// every message, not the allow-list of the connection's handshake.
TEST_CASE(
    "ViewBook::MayRing follows the newest view: an evicted node is refused, a newer view's sender is not") {
  ViewBook book(ViewBookOptions{});
  // Before any view: messages yes (a member may get its view first), requests no.
  CHECK(book.MayRing(3, 4, /*request=*/false));
  CHECK_FALSE(book.MayRing(3, 4, /*request=*/true));
  book.OnView(kV4);
  CHECK(book.MayRing(3, 4, false));
  CHECK(book.MayRing(3, 4, true));
  book.OnView(kV5);                        // node 3 evicted
  CHECK_FALSE(book.MayRing(3, 4, false));  // its messages of the old view
  CHECK_FALSE(book.MayRing(3, 5, false));
  CHECK_FALSE(book.MayRing(3, 5, true));  // and its state requests
  CHECK(book.MayRing(2, 5, true));        // a member's are answered
  // A message of a view newer than every view received: its sender got
  // that view first, so it is kept (and judged again when it is read).
  CHECK(book.MayRing(3, 6, false));
  CHECK_FALSE(book.MayRing(3, 6, true));
}
