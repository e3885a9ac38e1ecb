#include "scheduler/exchange_plan.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "scheduler/proto/state.pb.h"

namespace loft::sched {
namespace {

constexpr double kEwma = 0.3;  // weight of the newest measurement

double Fold(double old, double x) {
  return old < 0 ? x : (1 - kEwma) * old + kEwma * x;
}

}  // namespace

double ExchangePriorMs(const ClusterSpec& spec) {
  const auto& t = spec.training;
  const int n = spec.num_nodes();
  const int64_t params = t.allreduce.parameters > 0 ? t.allreduce.parameters
                                                    : ModelParameterCount(t.model, spec.dataset.sample_bytes);
  if (n <= 1 || params <= 0) return 0;
  const double bytes = static_cast<double>(params) * (t.exchange.compression == "int8" ? 1.0 : 4.0);
  const double share = bytes * static_cast<double>(n - 1) / static_cast<double>(n);
  const int r1 = std::min(t.byzantine_tolerance + 1, n);
  const double sent = share * (r1 + 1), received = share * (r1 + 1);
  double worst = 0, latency = 0;
  for (const NodeSpec& node : spec.nodes) {
    const double up = node.link.up_mbps > 0 ? sent * 8 / (node.link.up_mbps * 1000) : 0;
    const double down = node.link.down_mbps > 0 ? received * 8 / (node.link.down_mbps * 1000) : 0;
    worst = std::max({worst, up, down});
    latency = std::max(latency, node.link.latency_ms);
  }
  return worst + 2 * latency;
}

ExchangePlan::ExchangePlan(const TrainingSpec::Exchange& exchange, int64_t last_iteration,
                           double prior_exchange_ms)
    : spec_(exchange),
      last_iteration_(last_iteration),
      delta_(exchange.period_auto || exchange.period > 1),
      exchange_ms_(std::max(0.0, prior_exchange_ms)) {}

int64_t ExchangePlan::NextPeriod(double step_ms) const {
  if (!spec_.period_auto) return std::max<int64_t>(1, spec_.period);
  const double s = step_ms_ > 0 ? step_ms_ : step_ms;
  double tau0 = 1;
  if (s > 0 && exchange_ms_ > 0) tau0 = std::ceil(std::sqrt(exchange_ms_ / (spec_.drift * s)) - 1e-9);
  double ratio = 1;
  if (first_loss_ > 0 && loss_ >= 0 && std::isfinite(loss_))
    ratio = std::sqrt(std::min(1.0, loss_ / first_loss_));
  const double tau = std::ceil(tau0 * ratio - 1e-9);
  if (!std::isfinite(tau)) return 1;
  return std::clamp<int64_t>(static_cast<int64_t>(tau), 1, spec_.max_period);
}

ExchangeDecision ExchangePlan::Decide(int64_t iteration, double step_ms) const {
  ExchangeDecision d;
  d.period = planned_in_round_ == 0 ? NextPeriod(step_ms) : period_;
  d.ends_round = planned_in_round_ + 1 >= d.period || (last_iteration_ >= 0 && iteration >= last_iteration_);
  return d;
}

void ExchangePlan::OnPlanned(int64_t /*iteration*/, int64_t period, bool ends_round, double makespan_ms) {
  if (period <= 0) {  // an update from before exchange modes: period 1
    period = 1;
    ends_round = true;
  }
  period_ = period;
  if (std::isfinite(makespan_ms) && makespan_ms > 0) step_ms_ = Fold(step_ms_, makespan_ms);
  if (ends_round) {
    planned_in_round_ = 0;
    ++rounds_;
  } else {
    ++planned_in_round_;
  }
}

int ExchangePlan::ReadAhead(int cap) const {
  if (!spec_.overlap || rounds_ == 0 || cap < 1) return 0;
  int m = cap;
  if (step_ms_ > 0 && exchange_ms_ > 0)
    m = static_cast<int>(
        std::clamp(std::ceil(exchange_ms_ / step_ms_ - 1e-9), 1.0, static_cast<double>(cap)));
  return planned_in_round_ < m ? m : 0;
}

void ExchangePlan::FoldLoss() {
  if (loss_count_ == 0) return;
  const double mean = loss_sum_ / static_cast<double>(loss_count_);
  if (first_loss_ < 0) first_loss_ = mean;
  loss_ = Fold(loss_, mean);
  loss_sum_ = 0;
  loss_count_ = 0;
}

void ExchangePlan::OnReport(int64_t iteration, double loss, bool exchanged, double allreduce_ms) {
  if (exchanged && std::isfinite(allreduce_ms) && allreduce_ms > 0) {
    exchange_ms_ = exchange_measured_ ? Fold(exchange_ms_, allreduce_ms) : allreduce_ms;
    exchange_measured_ = true;
  }
  if (!std::isfinite(loss) || loss < 0) return;
  if (iteration != loss_iteration_) {
    FoldLoss();
    loss_iteration_ = iteration;
  }
  loss_sum_ += loss;
  ++loss_count_;
}

std::string ExchangePlan::Describe() const {
  std::ostringstream os;
  os << "exchange: period " << (spec_.period_auto ? "auto" : std::to_string(spec_.period)) << " (current "
     << period_ << ", " << rounds_ << " rounds), compression " << spec_.compression << ", overlap "
     << (spec_.overlap ? "true" : "false");
  if (spec_.period_auto) {
    os << ", exchange " << exchange_ms_ << " ms" << (exchange_measured_ ? "" : " (prior)") << ", step "
       << step_ms_ << " ms, loss " << loss_ << " of " << first_loss_;
  }
  return os.str();
}

void ExchangePlan::Save(loft::v1::ExchangeSnapshot* out) const {
  out->set_period(period_);
  out->set_planned_in_round(planned_in_round_);
  out->set_rounds(rounds_);
  out->set_exchange_ms(exchange_ms_);
  out->set_exchange_measured(exchange_measured_);
  out->set_step_ms(step_ms_);
  out->set_loss(loss_);
  out->set_first_loss(first_loss_);
  out->set_loss_iteration(loss_iteration_);
  out->set_loss_sum(loss_sum_);
  out->set_loss_count(loss_count_);
}

Status ExchangePlan::Restore(const loft::v1::ExchangeSnapshot& s) {
  if (s.period() < 1 || s.period() > 1024)
    return DataLoss("exchange snapshot: period " + std::to_string(s.period()) + " is not in [1, 1024]");
  if (s.planned_in_round() < 0 || s.planned_in_round() >= s.period())
    return DataLoss("exchange snapshot: " + std::to_string(s.planned_in_round()) +
                    " steps planned in a round of period " + std::to_string(s.period()));
  if (s.rounds() < 0 || s.loss_count() < 0) return DataLoss("exchange snapshot: negative counter");
  period_ = s.period();
  planned_in_round_ = s.planned_in_round();
  rounds_ = s.rounds();
  exchange_ms_ = s.exchange_ms();
  exchange_measured_ = s.exchange_measured();
  step_ms_ = s.step_ms();
  loss_ = s.loss();
  first_loss_ = s.first_loss();
  loss_iteration_ = s.loss_iteration();
  loss_sum_ = s.loss_sum();
  loss_count_ = s.loss_count();
  return OkStatus();
}

}  // namespace loft::sched
