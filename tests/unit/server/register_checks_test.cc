// Registration checks of loft-scheduler: advertised endpoints
// (server/endpoint_check.h).

#include <catch2/catch.hpp>
#include <string>

#include "server/endpoint_check.h"

using loft::StatusCode;
using loft::server::CheckAdvertisedEndpoint;

TEST_CASE("advertised endpoints: usable ones pass") {
  for (const char* ep :
       {"tcp://127.0.0.1:5555", "tcp://edge-1.lan:1", "tcp://[::1]:65535", "ipc:///tmp/a.sock"})
    CHECK(CheckAdvertisedEndpoint("ring_endpoint", ep, true).ok());
  CHECK(CheckAdvertisedEndpoint("ring_endpoint", "", false).ok());
}

TEST_CASE("advertised endpoints: bad ones are refused naming the field") {
  const std::string huge = "tcp://" + std::string(1 << 20, 'a') + ":1";
  for (const std::string& ep :
       {std::string(""), std::string("garbage"), std::string("tcp://127.0.0.1"), std::string("tcp://:5555"),
        std::string("tcp://*:5555"), std::string("tcp://0.0.0.0:5555"), std::string("tcp://host:0"),
        std::string("tcp://host:70000"), std::string("tcp://ho st:1"), std::string("ipc://"),
        std::string("udp://1.2.3.4:5"), huge}) {
    auto st = CheckAdvertisedEndpoint("peer_endpoint", ep, true);
    INFO(ep.substr(0, 40));
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK(st.message().find("peer_endpoint") != std::string::npos);
    CHECK(st.message().size() < 400);  // a megabyte value is not echoed
  }
}
