// Registration checks of loft-scheduler: advertised endpoints
// (server/endpoint_check.h) and the re-registration backoff
// (server/register_backoff.h).
#include <catch2/catch.hpp>
#include <string>

#include "server/endpoint_check.h"
#include "server/register_backoff.h"

using loft::StatusCode;
using loft::server::CheckAdvertisedEndpoint;
using loft::server::RegisterBackoff;

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

TEST_CASE("re-registration backoff doubles until the node is stable") {
  RegisterBackoff b({.min_ms = 1000, .max_ms = 8000, .stable_ms = 60000});
  CHECK(b.Admit(1, 0) == 0);
  CHECK(b.Admit(2, 10) == 0);  // per node
  CHECK(b.Admit(1, 5) == 0);   // one re-registration (a restart) is free
  CHECK(b.Admit(1, 405) == 600);
  CHECK(b.Admit(1, 1005) == 0);  // waited min_ms; the next wait doubles
  CHECK(b.Admit(1, 2505) == 500);
  CHECK(b.Admit(1, 3005) == 0);
  CHECK(b.Admit(1, 7004) > 0);
  CHECK(b.Admit(1, 7005) == 0);
  CHECK(b.Admit(1, 15005) == 0);  // capped at max_ms
  CHECK(b.Admit(1, 23004) > 0);
  CHECK(b.Admit(1, 200000) == 0);  // stable for stable_ms: back to min_ms
  CHECK(b.Admit(1, 200500) > 0);
  CHECK(b.Admit(1, 201000) == 0);
}
