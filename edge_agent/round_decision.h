// The pure decisions of one ring round of ModelTrainer (no sockets, no
// clock, no model): given every member's hello, which state the round
// starts from and where this member gets it (the sync source), whether the
// round is already done here (carried), the all-reduce weights and reducer
// settings, which partitions the update holds (the applied list) and who
// evaluates.
//
// Not responsible for: exchanging hellos, fetching state, all-reducing,
// carrying gradients (edge_agent/gradient_carry.h) or retrying
// (edge_agent/round_retry.h).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "core/status.h"
#include "edge_agent/ring_hello.h"
#include "models/reducers.h"

namespace loft::agent {

// The job's state in a round's exchange: the (last_round, hash) pair held by
// the most members; ties go to the later round. One member claiming a
// far-ahead round cannot win against two that agree. Members without
// progress (last_round < 0: restarted) vote only when no member has any, so
// restarted agents never roll the survivors back to the initial state; a
// last_round beyond 2^32 - 1 (rounds are 32-bit) never votes.
std::pair<int64_t, uint64_t> AgreedState(std::span<const int64_t> last_round, std::span<const uint64_t> hash);

// A round's hellos, one per member in ring order (members[i] sent hellos[i];
// this member's own hello is in its place too).
struct RoundHellos {
  std::vector<int> members;
  std::vector<MemberHello> hellos;
  // Members past the round: they sent a later round's hello instead of
  // this one's (their hello here is that one's state with no weight). Their
  // state votes, they may serve it, but they take no part in the all-reduce.
  std::vector<int> past;
};

// The hellos of the members that take part in the all-reduce (not past).
RoundHellos Participants(const RoundHellos& x);

// This round's result held by members past it. A member past the round
// holding last_round == round finished an attempt of it in which every
// member took part (a ring attempt ends only with every member's chunks):
// that result holds this member's contribution too, so this member takes
// it instead of all-reducing the round again (a redo would roll the
// finished members back and lose their partitions, which they have
// reported done). Taken when at least `vouch` past members (f + 1 with
// byzantine_tolerance f: one of them honest) hold the same hash; nullopt
// otherwise. `holders`: those members, ring order.
struct FinishedElsewhere {
  uint64_t hash = 0;
  std::vector<int> holders;
};
std::optional<FinishedElsewhere> FindFinishedElsewhere(const RoundHellos& x, uint32_t round, int vouch);

// Where this member's parameters must come from before the round.
struct SyncDecision {
  bool needed = false;                         // this member does not hold the agreed state
  std::pair<int64_t, uint64_t> target{-1, 0};  // the agreed (last_round, hash)
  int agreeing = 0;                            // members holding it
  std::vector<int> holders;                    // other members holding it, ring order: ask them in turn
};
SyncDecision DecideSync(int self, const RoundHellos& x, std::pair<int64_t, uint64_t> mine);

// True when this member (after any sync) has applied `round` already: its
// contribution is carried into the next round instead.
inline bool RoundCarried(int64_t last_round, uint32_t round) {
  return last_round >= static_cast<int64_t>(round);
}

// How the round is all-reduced and what it applies.
struct RoundPlan {
  std::vector<double> weights;     // per member, models::AggregationWeights of the hellos' b
  int present = 0;                 // members with weight
  models::ReducerOptions reducer;  // the spec's reducer with trim_count / krum_f fitted to `present`
  // (partition, member that named it) whose samples the update holds:
  // members with weight and a partition of this round; sorted.
  std::vector<std::pair<uint64_t, int32_t>> applied;
  bool evaluator = false;  // this member is the first (ring order) that reports the round
};
// DataLoss when no member has samples. global_batch: the spec's
// training.global_batch (the cap of trimmed_mean's weights, see
// models::AggregationWeights); 0 = each member with samples counts once.
StatusOr<RoundPlan> PlanRound(int self, uint32_t round, const RoundHellos& x,
                              const models::ReducerOptions& base, double global_batch = 0);

// Delta exchange: the factor on a local step's gradient for a member with
// `samples` in the step, global_batch B and `members` live members: its
// share of the global batch, samples / (B / members) (model_trainer.h).
// 1 when B or members is not positive.
double LocalStepScale(size_t samples, double global_batch, int members);

}  // namespace loft::agent
