// MakeSocket's options that reach the socket (no connection needed).
#include "core/zmq_util.h"

#include <catch2/catch.hpp>

using namespace loft;

TEST_CASE("MakeSocket: ZMQ_TOS is set when asked and left at 0 otherwise") {
  zmq::context_t ctx(1);
  SocketOptions marked;
  marked.tos = 0x10;
  auto dealer = MakeSocket(ctx, zmq::socket_type::dealer, marked);
  REQUIRE(dealer.ok());
  CHECK(dealer->get(zmq::sockopt::tos) == 0x10);
  auto router = MakeSocket(ctx, zmq::socket_type::router, marked);  // applies to accepted connections
  REQUIRE(router.ok());
  CHECK(router->get(zmq::sockopt::tos) == 0x10);
  auto plain = MakeSocket(ctx, zmq::socket_type::dealer, SocketOptions{});
  REQUIRE(plain.ok());
  CHECK(plain->get(zmq::sockopt::tos) == 0);
}
