#include "edge_agent/agent_flags.h"

#include <catch2/catch.hpp>

using namespace loft;
using namespace loft::agent;

namespace {
// Parses argv into flags and applies them over `file` (what main.cc does).
AgentConfig Apply(AgentConfig file, std::vector<std::string> args) {
  CLI::App app{"t"};
  AgentFlags flags(app);
  std::vector<const char*> argv{"loft-agent"};
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  flags.ApplyTo(file);
  return file;
}
}  // namespace

TEST_CASE("Flag consumer-timeout-ms overrides the config file, absent flags keep the file's values") {
  auto file = ParseAgentConfig("consumer_timeout_ms: 3000\ncredits: 5\nmetrics_port: 9101\n", "agent.yaml");
  REQUIRE(file.ok());
  AgentConfig c = Apply(*file, {"--consumer-timeout-ms", "750"});
  CHECK(c.consumer_timeout_ms == 750);
  CHECK(c.credits == 5);
  CHECK(c.metrics_port == 9101);
  AgentConfig d = Apply(*file, {});
  CHECK(d.consumer_timeout_ms == 3000);
  AgentConfig e = Apply(*file, {"--metrics-port", "0", "--insecure", "--ring-timeout-ms", "1234"});
  CHECK(e.metrics_port == 0);
  CHECK(e.insecure);
  CHECK(e.ring_timeout_ms == 1234);
  CHECK(e.consumer_timeout_ms == 3000);
  CHECK(e.preprocess_threads == 2);
  AgentConfig f = Apply(*file, {"--preprocess-threads", "3"});
  CHECK(f.preprocess_threads == 3);
}

TEST_CASE("Flag help: consumer-endpoint no longer says reserved") {
  CLI::App app{"t"};
  AgentFlags flags(app);
  std::string help = app.help();
  CHECK(help.find("--consumer-timeout-ms") != std::string::npos);
  CHECK(help.find("reserved") == std::string::npos);
}

TEST_CASE("metrics_port: 0 = off like the scheduler, -1 still accepted as off, others refused") {
  AgentConfig c;
  c.node_name = "a";
  c.cache_dir = "/tmp/x";
  c.cluster_spec = "spec.yaml";
  c.insecure = true;
  CHECK(c.metrics_port == 0);  // default: off
  CHECK(c.Validate().ok());
  c.metrics_port = -1;
  CHECK(c.Validate().ok());
  c.metrics_port = -2;
  CHECK(c.Validate().message().find("metrics_port must be 0 (off)") == 0);
  c.metrics_port = 70000;
  CHECK_FALSE(c.Validate().ok());
  c.metrics_port = 9465;
  CHECK(c.Validate().ok());
}
