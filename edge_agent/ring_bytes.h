// Helpers shared by the agent's two ring members (ModelTrainer for its own
// model, ExternalRing for a consumer's) and the state transfer: little-endian
// packing of the fixed exchange fields, and the reducer a spec's
// training.aggregation names.
// Not responsible for: framing or checking lengths (callers check `at`).
#pragma once

#include <cstddef>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "models/reducers.h"

namespace loft::agent {

template <typename T>
void PutLe(std::vector<std::byte>* out, T v) {
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  out->insert(out->end(), p, p + sizeof v);
}

template <typename T>
T GetLe(std::span<const std::byte> in, size_t at) {
  T v{};
  std::memcpy(&v, in.data() + at, sizeof v);
  return v;
}

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
