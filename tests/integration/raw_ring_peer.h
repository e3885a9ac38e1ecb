// Test helpers for a ring under test at rank 0 and a raw ZmqTransport at
// rank 1 that sends what the test likes (ring_guard_test, external_ring_test).
#pragma once

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <zmq.hpp>

#include "core/proto/loft.pb.h"
#include "edge_agent/zmq_transport.h"

namespace loft::agent::testing {

// Rank 1 of `world_size`, connected to rank 0 at `endpoint0`.
inline std::unique_ptr<ZmqTransport> RawPeer(zmq::context_t* ctx, int world_size,
                                             const std::string& endpoint0) {
  ZmqTransportOptions to;
  to.rank = 1;
  to.world_size = world_size;
  auto p = ZmqTransport::Create(ctx, to);
  REQUIRE(p.ok());
  REQUIRE((*p)->SetPeers({{0, endpoint0}}).ok());
  return std::move(*p);
}

// View `view` with members 0 (at `endpoint0`) and 1 (at `endpoint1`).
inline v1::MembershipView TwoMembers(int64_t view, const std::string& endpoint0,
                                     const std::string& endpoint1) {
  v1::MembershipView v;
  v.set_view(view);
  for (int node : {0, 1}) {
    v1::Member* m = v.add_members();
    m->set_node(node);
    m->set_ring_endpoint(node == 0 ? endpoint0 : endpoint1);
  }
  return v;
}

}  // namespace loft::agent::testing
