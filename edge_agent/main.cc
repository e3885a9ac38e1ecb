// loft-agent: the edge agent daemon. See edge_agent/README.md.
#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstdio>

#include "core/clock.h"
#include "core/logging.h"
#include "core/metrics.h"
#include "edge_agent/agent_config.h"
#include "edge_agent/agent_flags.h"
#include "edge_agent/zmq_agent_server.h"

namespace {
std::atomic<bool> g_interrupted{false};
void OnSignal(int) {
  g_interrupted = true;
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"loft-agent: serves this node's sample cache and runs its partitions"};
  std::string config_path;
  app.add_option("--config", config_path, "agent config YAML (see edge_agent/README.md)");
  loft::agent::AgentFlags flags(app);
  CLI11_PARSE(app, argc, argv);

  loft::agent::AgentConfig cfg;
  if (!config_path.empty()) {
    auto loaded = loft::agent::LoadAgentConfigFile(config_path);
    if (!loaded.ok()) {
      std::fprintf(stderr, "loft-agent: %s\n", loaded.status().ToString().c_str());
      return 2;
    }
    cfg = *loaded;
  }
  flags.ApplyTo(cfg);  // flags override the file
  if (auto st = loft::InitLogging(cfg.log_level, "loft-agent"); !st.ok()) {
    std::fprintf(stderr, "loft-agent: %s\n", st.ToString().c_str());
    return 2;
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  loft::metrics::Registry registry;
  auto server = loft::agent::ZmqAgentServer::Create(cfg, loft::SystemClock::Default(), &registry);
  if (!server.ok()) {
    spdlog::error("cannot start: {}", server.status().ToString());
    return 1;
  }
  std::printf("{\"peer_endpoint\": \"%s\", \"metrics_port\": %d}\n", (*server)->peer_endpoint().c_str(),
              (*server)->metrics_port());
  std::fflush(stdout);
  auto st = (*server)->Run(&g_interrupted);
  if (!st.ok()) {
    spdlog::error("stopped: {}", st.ToString());
    return 1;
  }
  return 0;
}
