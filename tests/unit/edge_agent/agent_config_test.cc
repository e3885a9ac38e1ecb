#include "edge_agent/agent_config.h"

#include <catch2/catch.hpp>

using namespace loft;
using namespace loft::agent;

TEST_CASE("Agent config parses every key") {
  auto c = ParseAgentConfig(R"(
node_name: edge-a-0
cluster_spec: /etc/loft/cluster.yaml
cache_dir: /var/lib/loft/cache
scheduler_endpoint: tcp://10.0.0.1:7400
peer_bind: tcp://0.0.0.0:7401
peer_advertise: tcp://10.0.0.2:7401
keys_dir: /etc/loft/keys
credits: 3
compute_mode: synthetic
link_emulation: true
metrics_port: 9101
log_level: debug
fetch_batch: 32
seed: 9
)");
  REQUIRE(c.ok());
  CHECK(c->node_name == "edge-a-0");
  CHECK(c->peer_advertise == "tcp://10.0.0.2:7401");
  CHECK(c->credits == 3);
  CHECK(c->link_emulation);
  CHECK(c->metrics_port == 9101);
  CHECK(c->fetch_batch == 32);
  CHECK(c->seed == 9);
  CHECK(c->Validate().ok());
}

TEST_CASE("link_rate_emulation: rates on by default, off keeps link_emulation's latency only") {
  auto d = ParseAgentConfig("node_name: a\nlink_emulation: true\n");
  REQUIRE(d.ok());
  CHECK(d->link_rate_emulation);
  auto c = ParseAgentConfig("node_name: a\nlink_emulation: true\nlink_rate_emulation: false\n");
  REQUIRE(c.ok());
  CHECK(c->link_emulation);
  CHECK_FALSE(c->link_rate_emulation);
}

TEST_CASE("Agent config errors name the file, line and key") {
  auto c = ParseAgentConfig("node_name: a\ncredit: 3\n", "agent.yaml");
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().message() == "agent.yaml:2: unknown agent setting 'credit'");
  auto t = ParseAgentConfig("node_name: a\ncredits: many\n", "agent.yaml");
  REQUIRE_FALSE(t.ok());
  CHECK(t.status().message() == "agent.yaml:2: credits has the wrong type");
}

TEST_CASE("Agent config validation") {
  AgentConfig c;
  c.node_name = "a";
  c.cache_dir = "/tmp/x";
  c.cluster_spec = "spec.yaml";
  CHECK(c.Validate().message() == "keys_dir is required unless insecure: true");
  c.insecure = true;
  CHECK(c.Validate().ok());
  c.credits = 0;
  CHECK(c.Validate().message() == "credits must be >= 1 (got 0)");
  c.credits = 1;
  c.compute_mode = "gpu";
  CHECK(c.Validate().code() == StatusCode::kInvalidArgument);
}
