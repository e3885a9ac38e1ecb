#include "edge_agent/trainer.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace loft::agent {

StatusOr<double> SyntheticTrainer::Compute(const Batch& batch) {
  double ms = NominalMs(batch.samples.size());
  if (spec_.jitter > 0) ms *= JitterFactor(spec_.jitter, spec_.jitter_kind, normal_(rng_));
  const int64_t us = std::llround(ms * 1000.0);
  last_ms_ = static_cast<double>(us) / 1000.0;
  sleep_.Sleep(us);
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace loft::agent
