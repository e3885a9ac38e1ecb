// Helpers shared by the agent's two ring members (ModelTrainer for its own
// model, ExternalRing for a consumer's) and the state transfer: little-endian
// packing of the fixed exchange fields (AppendLe / LoadLe from
// core/le_bytes.h) and the reducer a spec's training.aggregation names.
// Not responsible for: framing or checking lengths (callers check `at`).
#pragma once

#include <string>

#include "core/le_bytes.h"
#include "core/status.h"
#include "models/reducers.h"

namespace loft::agent {

// training.aggregation → reducer ("krum" and "centered_clip" are aliases).
inline StatusOr<models::ReducerOptions> ReducerFor(const std::string& aggregation) {
  std::string name = aggregation;
  if (name == "krum") name = "multi_krum";
  if (name == "centered_clip") name = "centered_clipping";
  models::ReducerOptions r;
  LOFT_ASSIGN_OR_RETURN(r.kind, models::ParseReducerKind(name));
  return r;
}

}  // namespace loft::agent
