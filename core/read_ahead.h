// How far an agent reads ahead of its compute stage: one rule for the
// agent (edge_agent/partition_pipeline.h) and loft-sim's agent model
// (sim/simulator.h).
//
// An agent holds at most ReadyDepth(training) partitions read and waiting
// for its compute stage: 1, or kExchangeReadAhead with
// training.exchange.overlap, so that while its compute stage runs an
// exchange (seconds on slow uplinks) the reader can read the next round's
// first partitions, as many as the scheduler planned ahead
// (sched::IterationGate: with exchange overlap it plans up to
// kExchangeReadAhead steps past a round's end while its exchange runs).
// Reads overlap compute only with training.overlap (the spec refuses
// exchange.overlap without it).
#pragma once

#include "core/cluster_spec.h"

namespace loft {

inline constexpr int kExchangeReadAhead = 3;

// An agent's partition window by default (the agent config's `credits`,
// RegisterRequest.credits; loft-sim's --credits): partitions queued and
// running at once. The scheduler's deepest plan-ahead (sched::kMaxPlanAhead,
// which static_asserts this) + 1: at depth k up to k + 1 partitions are on
// their way to, or held by, one agent.
inline constexpr int kDefaultCredits = 4;

inline int ReadyDepth(const TrainingSpec& training) {
  return training.exchange.overlap ? kExchangeReadAhead : 1;
}

}  // namespace loft
