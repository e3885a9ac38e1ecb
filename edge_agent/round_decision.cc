#include "edge_agent/round_decision.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>

namespace loft::agent {

std::pair<int64_t, uint64_t> AgreedState(std::span<const int64_t> last_round,
                                         std::span<const uint64_t> hash) {
  // A member with no progress (a restarted agent: round -1; a malformed
  // exchange: below that) votes only when nobody has progress: a majority
  // of restarted agents must not roll a survivor back to the initial state.
  const size_t n = std::min(last_round.size(), hash.size());
  const bool progress =
      std::any_of(last_round.begin(), last_round.begin() + static_cast<ptrdiff_t>(n),
                  [](int64_t r) { return r >= 0 && r <= int64_t{std::numeric_limits<uint32_t>::max()}; });
  std::map<std::pair<int64_t, uint64_t>, int> votes;
  for (size_t i = 0; i < n; ++i) {
    // Rounds are 32-bit (ring tags): a later "round" is a lie that would
    // make this agent treat every later partition as already done.
    if (last_round[i] > int64_t{std::numeric_limits<uint32_t>::max()}) continue;
    if (!progress || last_round[i] >= 0) ++votes[{last_round[i], hash[i]}];
  }
  std::pair<int64_t, uint64_t> target{-1, 0};
  int best = 0;
  for (const auto& [k, c] : votes) {
    if (c > best || (c == best && k.first > target.first)) {
      best = c;
      target = k;
    }
  }
  return target;
}

SyncDecision DecideSync(int self, const RoundHellos& x, std::pair<int64_t, uint64_t> mine) {
  std::vector<int64_t> rounds;
  std::vector<uint64_t> hashes;
  for (const MemberHello& h : x.hellos) {
    rounds.push_back(h.last_round);
    hashes.push_back(h.hash);
  }
  SyncDecision d;
  d.target = AgreedState(rounds, hashes);
  for (size_t i = 0; i < x.hellos.size() && i < x.members.size(); ++i) {
    if (std::pair{rounds[i], hashes[i]} != d.target) continue;
    ++d.agreeing;
    if (x.members[i] != self) d.holders.push_back(x.members[i]);
  }
  d.needed = mine != d.target;
  return d;
}

RoundHellos Participants(const RoundHellos& x) {
  RoundHellos out;
  for (size_t i = 0; i < x.members.size() && i < x.hellos.size(); ++i) {
    if (std::find(x.past.begin(), x.past.end(), x.members[i]) != x.past.end()) continue;
    out.members.push_back(x.members[i]);
    out.hellos.push_back(x.hellos[i]);
  }
  return out;
}

std::optional<FinishedElsewhere> FindFinishedElsewhere(const RoundHellos& x, uint32_t round, int vouch) {
  std::map<uint64_t, std::vector<int>> by_hash;
  for (size_t i = 0; i < x.members.size() && i < x.hellos.size(); ++i) {
    if (std::find(x.past.begin(), x.past.end(), x.members[i]) == x.past.end()) continue;
    if (x.hellos[i].last_round != static_cast<int64_t>(round)) continue;
    by_hash[x.hellos[i].hash].push_back(x.members[i]);
  }
  std::optional<FinishedElsewhere> best;
  for (auto& [hash, holders] : by_hash) {
    if (static_cast<int>(holders.size()) < std::max(1, vouch)) continue;
    if (!best || holders.size() > best->holders.size()) best = FinishedElsewhere{hash, holders};
  }
  return best;
}

StatusOr<RoundPlan> PlanRound(int self, uint32_t round, const RoundHellos& x,
                              const models::ReducerOptions& base, double global_batch) {
  RoundPlan p;
  std::vector<double> b;
  for (const MemberHello& h : x.hellos) b.push_back(std::isfinite(h.b) && h.b > 0 ? h.b : 0.0);
  p.weights = models::AggregationWeights(base.kind, b, global_batch);
  p.present =
      static_cast<int>(std::count_if(p.weights.begin(), p.weights.end(), [](double w) { return w > 0; }));
  if (p.present == 0) return DataLoss("round " + std::to_string(round) + ": no member has samples");
  p.reducer = base;
  if (p.reducer.kind == models::ReducerKind::kTrimmedMean) {
    // Trim at least one per side when there are enough members with samples.
    int k = std::max(1, static_cast<int>(std::floor(0.2 * p.present)));
    while (k > 0 && p.present <= 2 * k) --k;
    p.reducer.trim_count = k;
  }
  if (p.reducer.kind == models::ReducerKind::kMultiKrum && p.present < p.reducer.krum_f + 3)
    p.reducer.krum_f = 0;
  // Carried samples belong to partitions already reported: only a
  // partition of this round with weight counts as applied.
  for (size_t i = 0; i < x.hellos.size() && i < x.members.size(); ++i) {
    if (p.weights[i] > 0 && x.hellos[i].partition != 0)
      p.applied.emplace_back(x.hellos[i].partition, x.members[i]);
  }
  std::sort(p.applied.begin(), p.applied.end());
  for (size_t i = 0; i < x.hellos.size() && i < x.members.size(); ++i) {
    if (x.hellos[i].reports) {
      p.evaluator = x.members[i] == self;
      break;
    }
  }
  return p;
}

double LocalStepScale(size_t samples, double global_batch, int members) {
  if (!(global_batch > 0) || members <= 0) return 1.0;
  return static_cast<double>(samples) * static_cast<double>(members) / global_batch;
}

}  // namespace loft::agent
