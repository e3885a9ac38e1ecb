// AgentFlags: the command-line flags of loft-agent, one per AgentConfig
// key, registered on a CLI11 app. A flag overrides the config file only
// when it is given on the command line (ApplyTo).
//
// Not responsible for: reading the config file (agent_config.h), running
// the agent (main.cc).
// Thread-safety: not thread-safe; used once at start-up.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <utility>
#include <vector>

#include "edge_agent/agent_config.h"

namespace loft::agent {

class AgentFlags {
 public:
  // Registers every flag on `app`. `this` must outlive the parse.
  explicit AgentFlags(CLI::App& app);
  AgentFlags(const AgentFlags&) = delete;
  AgentFlags& operator=(const AgentFlags&) = delete;

  // Copies the flags that were given into `cfg` (after parsing).
  void ApplyTo(AgentConfig& cfg) const;

 private:
  AgentConfig values_;  // parsed flag values; only given ones are applied
  bool insecure_ = false, link_emulation_ = false, disk_emulation_ = false;
  std::vector<std::pair<CLI::Option*, std::function<void(AgentConfig&)>>> flags_;
};

}  // namespace loft::agent
