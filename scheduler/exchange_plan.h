// ExchangePlan: which planned steps end a round (training.exchange).
//
// A round is `period` planned steps followed by one exchange: every member
// takes its steps on its own model (local SGD) and the members then
// all-reduce their model deltas (edge_agent/model_trainer.h). With period 1
// (the default) every step ends its round and the exchange is the step's
// gradient, as loft always did. The scheduler decides, once per planned
// iteration, and the decision travels on every partition of the iteration
// (Partition.local_step), so members, the daemon and loft-sim agree on it by
// construction; the decision and the period are journaled with the
// iteration (IterationPlanned.round_period, ends_round), so a replay
// rebuilds this object exactly.
//
// Rules:
//  - A round starts at the first iteration after the previous round's
//    last. Its period is fixed when its first iteration is planned.
//  - Iteration t ends its round when it is the round's period-th step or
//    the job's last iteration (so the job ends with every step exchanged).
//  - period: N: every round's period is N.
//  - period: auto: the period of round k is
//        tau_k = clamp(ceil(tau0_k * sqrt(F_k / F_0)), 1, max_period),
//        tau0_k = ceil(sqrt(X_k / (c * S_k)))
//    where X_k is the exchange's expected time (the mean reported
//    all-reduce time of the last exchanges, EWMA 0.3; before the first
//    one, `prior_exchange_ms`), S_k the step's (EWMA 0.3 of the planned
//    makespans), F_k the training loss (EWMA 0.3 of the mean loss the
//    members reported per step) and F_0 the first step's loss.
//    tau0: a step costs S + X/tau of wall time, and the members' local
//    steps drift apart as tau grows; taking the steps needed to reach a
//    given loss to grow as (1 + c*tau), the time to it, (S + X/tau) *
//    (1 + c*tau), is least at tau = sqrt(X / (c*S)). c is
//    training.exchange.drift (default 1/16: replaying the agents' delta
//    exchange offline, the MLP on Fashion-MNIST needed about as many steps
//    to 85 % at periods 2 to 16, c of about 0.01; on the testbed c = 1/16
//    reached 85 % sooner than c = 1/4 and than fixed periods 4, 8 and 16;
//    docs/exchange.md "How much a longer period costs per step"). (tau = X/S, an
//    exchange as long as the round's steps, was measured on the testbed:
//    it gave loft's fast steps period 16 throughout and the lowest
//    accuracy per step, docs/exchange.md.) The square root of the loss
//    ratio is AdaComm's schedule (Wang & Joshi, MLSys 2019): exchange
//    rarely while the loss is high and a step's noise is small against its
//    progress, more often as training converges. Before any loss is
//    reported the ratio is 1.
//
// Not responsible for: what a member does in a local step or an exchange
// (the trainer), measuring (the scheduler's reports feed Observe*).
// Thread-safety: not thread-safe; one caller.
#pragma once

#include <cstdint>
#include <string>

#include "core/cluster_spec.h"
#include "core/status.h"

namespace loft::v1 {
class ExchangeSnapshot;
}

namespace loft::sched {

struct ExchangeDecision {
  int64_t period = 1;      // the period of the round the iteration is in
  bool ends_round = true;  // the members exchange after this iteration
};

// The exchange's expected time from the spec alone (period: auto's prior
// until an exchange is measured): every member sends and receives
// 2(N-1)/N of the payload (the scatter f+1 times with verified chunks,
// training.byzantine_tolerance f), 4 bytes per parameter (1 with int8),
// over its own up- and downlink; the slowest member's time plus two link
// latencies. 0 without a built-in model or with one node.
double ExchangePriorMs(const ClusterSpec& spec);

class ExchangePlan {
 public:
  // `last_iteration`: the job's last planned step (-1 = none known: a
  // round ends only at its period). `prior_exchange_ms`: the exchange's
  // expected time before one was measured (auto only).
  ExchangePlan(const TrainingSpec::Exchange& exchange, int64_t last_iteration, double prior_exchange_ms);

  // The decision for `iteration`, the next to plan, whose plan is
  // predicted to take `step_ms` (its makespan).
  ExchangeDecision Decide(int64_t iteration, double step_ms) const;
  // A planned iteration (from the journaled update): its decision.
  // period 0 means 1 (an update written before exchange modes).
  void OnPlanned(int64_t iteration, int64_t period, bool ends_round, double makespan_ms);
  // A member's training report of step `iteration`: its loss (NaN: none)
  // and, when the step ended a round, its all-reduce time.
  void OnReport(int64_t iteration, double loss, bool exchanged, double allreduce_ms);

  bool delta_exchange() const { return delta_; }
  // training.exchange.overlap: how deep the scheduler may plan ahead now
  // so that the next round's first steps are read while the last round's
  // exchange runs: m = ⌈X / S⌉ in [1, cap] (X the exchange's time, S a
  // step's) while fewer than m steps were planned since the last round
  // ended, else 0 (no extra depth). 0 without overlap or before a round
  // ended. sched::IterationGate takes the larger of this and its own depth.
  int ReadAhead(int cap) const;
  // The period the next round would get now (auto: from the current
  // measurements, with `step_ms` as the next step's time).
  int64_t NextPeriod(double step_ms) const;
  int64_t rounds() const { return rounds_; }
  int64_t current_period() const { return period_; }
  double exchange_ms() const { return exchange_ms_; }
  double loss() const { return loss_; }
  double first_loss() const { return first_loss_; }
  std::string Describe() const;  // one line for logs and status

  // Snapshot (scheduler/state_snapshot.cc): everything OnPlanned and
  // OnReport changed. Restore refuses a period out of [1, 1024] or a
  // round position out of [0, period).
  void Save(loft::v1::ExchangeSnapshot* out) const;
  Status Restore(const loft::v1::ExchangeSnapshot& s);

 private:
  TrainingSpec::Exchange spec_;
  int64_t last_iteration_;
  bool delta_;
  // The open round: its period and how many of its steps are planned.
  int64_t period_ = 1;
  int64_t planned_in_round_ = 0;
  int64_t rounds_ = 0;  // rounds ended (planned)
  double exchange_ms_;  // EWMA of reported all-reduce times (prior until one)
  bool exchange_measured_ = false;
  double step_ms_ = -1;  // EWMA of planned makespans (-1 = none yet)
  double loss_ = -1, first_loss_ = -1;
  // Per-iteration mean of reported losses, fed to the EWMA once the next
  // iteration's first report arrives.
  int64_t loss_iteration_ = -1;
  double loss_sum_ = 0;
  int64_t loss_count_ = 0;
  void FoldLoss();
};

}  // namespace loft::sched
