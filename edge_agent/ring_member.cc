#include "edge_agent/ring_member.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <string>
#include <vector>

namespace loft::agent {
namespace fs = std::filesystem;

StatusOr<RingMember> MakeRingMember(const ClusterSpec& spec, int node, const AgentConfig& cfg,
                                    zmq::context_t* ctx, const std::optional<CurveKeyPair>& own,
                                    const RingLinkEmulation& link, const std::atomic<bool>* stop) {
  if (spec.training.model == "external" && cfg.compute_mode != "external")
    return InvalidArgument("training.model external needs compute_mode external (a consumer computes)");
  if (spec.training.model != "none" && spec.training.model != "external" && cfg.compute_mode == "external")
    return InvalidArgument(
        "compute_mode external trains the consumer's model: set training.model external (got '" +
        spec.training.model + "')");
  RingMember member;
  if (spec.training.model == "none") return member;

  ModelTrainerOptions mo;
  mo.link = link;
  if (cfg.insecure) {
    std::vector<std::string> ring_eps{cfg.ring_bind};
    if (!cfg.ring_advertise.empty()) ring_eps.push_back(cfg.ring_advertise);
    LOFT_RETURN_IF_ERROR(CheckInsecureAllowed(ring_eps).WithContext("ring_bind (insecure: no CURVE)"));
  } else {
    // CURVE on the ring with the same keys and allow-list as peer fetch.
    mo.curve_own = own;
    for (const NodeSpec& n : spec.nodes) {
      auto pub = ReadCurvePublicKey((fs::path(cfg.keys_dir) / (n.name + ".pub")).string());
      if (!pub.ok())
        spdlog::warn("ring: no public key for node {} ({}); it cannot join the ring", n.name,
                     pub.status().ToString());
      mo.public_keys.push_back(pub.ok() ? *pub : std::string());
      mo.rank_names.push_back(n.name);
    }
  }
  mo.context = ctx;
  mo.stop = stop;
  mo.node = node;
  mo.num_nodes = spec.num_nodes();
  mo.ring_bind = cfg.ring_bind;
  mo.test_data_dir = cfg.test_data_dir;
  mo.eval_every = cfg.eval_every;
  mo.last_iteration = cfg.last_iteration;
  mo.ring_timeout_ms = cfg.ring_timeout_ms;
  mo.max_message_bytes = static_cast<size_t>(cfg.max_message_bytes);
  if (spec.training.model == "external") {
    ExternalRingOptions ro;
    ro.node = node;
    ro.ring_bind = cfg.ring_bind;
    ro.ring_timeout_ms = cfg.ring_timeout_ms;
    ro.max_message_bytes = mo.max_message_bytes;
    ro.context = ctx;
    ro.curve_own = mo.curve_own;
    ro.public_keys = mo.public_keys;
    ro.rank_names = mo.rank_names;
    ro.stop = stop;
    ro.link = link;
    LOFT_ASSIGN_OR_RETURN(member.external, ExternalRing::Create(spec, ro));
  } else {
    LOFT_ASSIGN_OR_RETURN(member.model, ModelTrainer::Create(spec, mo));
  }
  return member;
}

}  // namespace loft::agent
