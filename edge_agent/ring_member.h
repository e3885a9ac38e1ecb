// The agent's ring member, as the spec's training.model asks for it
// (README "Training"): a ModelTrainer (softmax, mlp: the agent's own
// model), an ExternalRing (external: the consumer's model) or none.
// Checks that training.model and compute_mode agree, that a ring without
// CURVE is bound to loopback, and reads every rank's CURVE public key from
// keys_dir (a missing key is logged: that node cannot join the ring).
//
// Not responsible for: the sockets of peer fetch or the scheduler
// (ZmqAgentServer), what the member does in a round.
// Thread-safety: a plain function.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <zmq.hpp>

#include "core/cluster_spec.h"
#include "core/curve.h"
#include "core/status.h"
#include "edge_agent/agent_config.h"
#include "edge_agent/external_ring.h"
#include "edge_agent/model_trainer.h"

namespace loft::agent {

struct RingMember {
  std::unique_ptr<ModelTrainer> model;     // training.model softmax | mlp
  std::unique_ptr<ExternalRing> external;  // training.model external
};

// node: this agent's index in `spec`. ctx: the agent's context (with its
// ZAP handler when `own` is set). own unset = no CURVE (cfg.insecure).
// link: the node's link emulation of ring messages. stop: ends the
// member's waits early at shutdown. ctx and stop must outlive the member.
StatusOr<RingMember> MakeRingMember(const ClusterSpec& spec, int node, const AgentConfig& cfg,
                                    zmq::context_t* ctx, const std::optional<CurveKeyPair>& own,
                                    const RingLinkEmulation& link, const std::atomic<bool>* stop);

}  // namespace loft::agent
