// Calibration (`loftctl calibrate RUN_DIR --out SPEC.yaml`): a cluster spec
// whose per-node compute, disk and link constants are the scheduler's
// fitted cost models from a real run (status.json "workers[].profile"),
// inverted through the spec-prior formulas of scheduler/plan.h:
//   compute.fixed_ms      = c0               compute.per_sample_ms = c1
//   disk.read_mbps        = s·8 / (l1·1000)  (l1 = local_per_sample_ms)
//   link.latency_ms       = a                link.down_mbps = s·8 / (r1·1000)
//   link.up_mbps          = s·8 / (u·1000)   (u = uplink_per_sample_ms)
// so that PriorFromSpec(calibrated spec) = the fitted profile. A constant
// the run did not observe (the profile still equals the spec's prior) keeps
// the spec's value. The fitted local read intercept l0 has no spec field:
// it is reported, not written. Everything else (dataset, placement,
// training, failures, slowdowns, …) is copied; `count` groups are written
// expanded, one entry per node, in the same order (placement unchanged).
//
// Not responsible for: the per-iteration constants the model lacks
// (all-reduce, scheduler overhead; issue 15 item 3, second half).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/cluster_spec.h"
#include "core/status.h"

namespace loft::ctl {

struct Calibration {
  std::string yaml;                // the calibrated spec
  std::vector<std::string> notes;  // per node: what was kept from the spec or dropped, and why
};

// `status`: the scheduler's status JSON of the run (status.json).
StatusOr<Calibration> CalibrateSpec(const ClusterSpec& spec, const nlohmann::json& status,
                                    const std::string& source);

// The spec as YAML that ParseClusterSpec reads back to the same values
// (nodes expanded).
std::string ClusterSpecToYaml(const ClusterSpec& spec);

}  // namespace loft::ctl
