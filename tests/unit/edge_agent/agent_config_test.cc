#include "edge_agent/agent_config.h"

#include <catch2/catch.hpp>

#include "edge_agent/external_trainer.h"

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
  c.block_cache = "clock";
  CHECK(c.Validate().message() == "block_cache must be 'hyper_clock' or 'lru' (got 'clock')");
  c.block_cache = "lru";
  CHECK(c.Validate().ok());
  c.compute_mode = "gpu";
  CHECK(c.Validate().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("AgentConfigToYaml writes every key and ParseAgentConfig reads it back") {
  AgentConfig c;
  c.node_name = "edge-b-1";
  c.cluster_spec = "/tmp/spec with space.yaml";
  c.cache_dir = "/var/lib/loft/cache/edge-b-1";
  c.block_cache = "lru";
  c.check_cache = false;
  c.scheduler_endpoint = "tcp://10.0.0.1:7400";
  c.peer_bind = "tcp://10.0.0.3:0";
  c.peer_advertise = "tcp://10.0.0.3:7401";
  c.consumer_endpoint = "ipc:///tmp/consumer-edge-b-1.sock";
  c.consumer_timeout_ms = 30000;
  c.consumer_token = "s3cret: with colon";
  c.keys_dir = "";
  c.insecure = true;
  c.credits = 5;
  c.compute_mode = "external";
  c.link_emulation = true;
  c.link_rate_emulation = false;
  c.metrics_port = 9102;
  c.metrics_address = "0.0.0.0";
  c.log_level = "debug";
  c.heartbeat_interval_ms = 250;
  c.scheduler_timeout_ms = 4000;
  c.fetch_timeout_ms = 7000;
  c.fetch_batch = 16;
  c.preprocess_threads = 5;
  c.max_message_bytes = 1 << 22;
  c.max_grants = 77;
  c.request_tos = 0;
  c.seed = 18446744073709551615ull;
  c.ring_bind = "tcp://10.0.0.3:0";
  c.ring_advertise = "tcp://10.0.0.3:7500";
  c.test_data_dir = "/data/fm";
  c.eval_every = 0;
  c.last_iteration = 299;
  c.ring_timeout_ms = 1234;
  const std::string yaml = AgentConfigToYaml(c);
  auto back = ParseAgentConfig(yaml, "gen");
  REQUIRE(back.ok());
  // Re-serialising the parsed struct gives the same text: every field made the trip.
  CHECK(AgentConfigToYaml(*back) == yaml);
  CHECK(back->node_name == c.node_name);
  CHECK(back->cluster_spec == c.cluster_spec);
  CHECK(back->block_cache == "lru");
  CHECK_FALSE(back->check_cache);
  CHECK(back->consumer_token == c.consumer_token);
  CHECK(back->keys_dir.empty());
  CHECK(back->insecure);
  CHECK(back->credits == 5);
  CHECK_FALSE(back->link_rate_emulation);
  CHECK(back->max_message_bytes == c.max_message_bytes);
  CHECK(back->seed == c.seed);
  CHECK(back->ring_advertise == c.ring_advertise);
  CHECK(back->last_iteration == 299);
  CHECK(back->ring_timeout_ms == 1234);
  CHECK(back->preprocess_threads == 5);
  CHECK(back->request_tos == 0);
  // Defaults round-trip too (a fresh struct writes and reads back unchanged).
  auto defaults = ParseAgentConfig(AgentConfigToYaml(AgentConfig{}), "defaults");
  REQUIRE(defaults.ok());
  CHECK(AgentConfigToYaml(*defaults) == AgentConfigToYaml(AgentConfig{}));
  CHECK(defaults->check_cache);
  CHECK(defaults->last_iteration == -1);
}

TEST_CASE("request_tos: low delay by default, a byte, anything else refused with the range") {
  CHECK(AgentConfig{}.request_tos == 0x10);
  auto c = ParseAgentConfig(
      "node_name: a\ncache_dir: /tmp/x\ncluster_spec: s.yaml\ninsecure: true\nrequest_tos: 0\n");
  REQUIRE(c.ok());
  CHECK(c->request_tos == 0);
  CHECK(c->Validate().ok());
  c->request_tos = 256;
  CHECK(c->Validate().message() ==
        "request_tos must be an IP type-of-service byte 0..255 (got 256; 16 = low delay, 0 = unmarked)");
  c->request_tos = -1;
  CHECK_FALSE(c->Validate().ok());
}

TEST_CASE("a consumer endpoint other local users can reach needs a token") {
  using loft::agent::CheckConsumerAccess;
  CHECK(CheckConsumerAccess("ipc:///run/loft/agent.sock", "").ok());  // owner-only socket file
  CHECK(CheckConsumerAccess("ipc:///run/loft/agent.sock", "t").ok());
  CHECK(CheckConsumerAccess("tcp://127.0.0.1:7500", "s3cret").ok());
  CHECK(CheckConsumerAccess("ipc://@loft-agent", "s3cret").ok());
  const loft::Status tcp = CheckConsumerAccess("tcp://127.0.0.1:7500", "");
  CHECK(tcp.code() == loft::StatusCode::kInvalidArgument);
  CHECK(tcp.message().find("tcp://127.0.0.1:7500 needs consumer_token") != std::string::npos);
  CHECK(tcp.message().find("any local user") != std::string::npos);
  const loft::Status abstract = CheckConsumerAccess("ipc://@loft-agent", "");
  CHECK(abstract.code() == loft::StatusCode::kInvalidArgument);
  CHECK(abstract.message().find("no file permissions") != std::string::npos);
}

TEST_CASE("preprocess_threads: 2 by default, from the file or the flag, 1 … 256") {
  auto d = ParseAgentConfig("node_name: a\n");
  REQUIRE(d.ok());
  CHECK(d->preprocess_threads == 2);
  auto c = ParseAgentConfig(
      "node_name: a\ncache_dir: /tmp/x\ninsecure: true\ncluster_spec: s.yaml\n"
      "preprocess_threads: 4\n");
  REQUIRE(c.ok());
  CHECK(c->preprocess_threads == 4);
  CHECK(c->Validate().ok());
  c->preprocess_threads = 0;
  CHECK(c->Validate().message() == "preprocess_threads must be 1 … 256 (got 0)");
  c->preprocess_threads = 257;
  CHECK_FALSE(c->Validate().ok());
}
