#include <catch2/catch.hpp>

#include "edge_agent/external_ring.h"
#include "edge_agent/model_trainer.h"
#include "edge_agent/zmq_transport.h"

using namespace loft;
using namespace loft::agent;

namespace {
template <typename O>
void FillRingFields(O* o) {
  o->node = 2;
  o->ring_bind = "tcp://127.0.0.1:7788";
  o->max_message_bytes = 12345;
  o->curve_own = CurveKeyPair{"pub", "sec"};
  o->public_keys = {"k0", "k1", "k2"};
  o->rank_names = {"a", "b", "c"};
  o->link.self = 2;
  o->link.up_mbps = {1, 2, 3};
}

void CheckTransport(const ZmqTransportOptions& to) {
  CHECK(to.rank == 2);
  CHECK(to.world_size == 3);
  CHECK(to.bind == "tcp://127.0.0.1:7788");
  CHECK(to.max_message_bytes == 12345);
  REQUIRE(to.curve_own.has_value());
  CHECK(to.curve_own->public_key == "pub");
  CHECK(to.public_keys == std::vector<std::string>{"k0", "k1", "k2"});
  CHECK(to.rank_names == std::vector<std::string>{"a", "b", "c"});
  CHECK(to.link.self == 2);
  CHECK(to.link.up_mbps == std::vector<double>{1, 2, 3});
}
}  // namespace

TEST_CASE("RingTransportOptions: both ring members' options give the same transport") {
  ModelTrainerOptions mo;
  FillRingFields(&mo);
  CheckTransport(RingTransportOptions(mo, 3));
  ExternalRingOptions ro;
  FillRingFields(&ro);
  CheckTransport(RingTransportOptions(ro, 3));
}
