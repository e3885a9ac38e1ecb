#include "scheduler/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

namespace loft::sched {

Status CostModelOptions::Validate() const {
  if (!(forgetting > 0 && forgetting <= 1)) return InvalidArgument("forgetting must be in (0, 1]");
  if (!(prior_scale > 0)) return InvalidArgument("prior_scale must be > 0");
  if (!(outlier_k > 0)) return InvalidArgument("outlier_k must be > 0");
  if (residual_window < 1 || min_residuals < 1)
    return InvalidArgument("residual_window and min_residuals must be >= 1");
  if (accept_after < 1) return InvalidArgument("accept_after must be >= 1");
  if (warmup < 0) return InvalidArgument("warmup must be >= 0");
  if (!(cold_k > 0)) return InvalidArgument("cold_k must be > 0");
  if (!(uplink_alpha > 0 && uplink_alpha <= 1)) return InvalidArgument("uplink_alpha must be in (0, 1]");
  return OkStatus();
}

RobustLinearRls::RobustLinearRls(double theta0, double theta1, const CostModelOptions& opts)
    : opts_(opts), theta_{theta0, theta1} {
  const double s0 = opts.prior_scale * std::max(std::abs(theta0), 1.0);
  const double s1 = opts.prior_scale * std::max(std::abs(theta1), 1e-3);
  p_[0][0] = s0 * s0;
  p_[1][1] = s1 * s1;
  p_[0][1] = p_[1][0] = 0;
  trace_cap_ = p_[0][0] + p_[1][1];
}

bool RobustLinearRls::Update(double x, double y) {
  if (!std::isfinite(x) || !std::isfinite(y)) return false;
  if (accepted_ + rejected_ < opts_.warmup) {
    ++rejected_;
    return false;
  }
  const double pred = Predict(x);
  const double err = y - pred;
  // The rejection limit: outlier_k robust std-devs (a MAD of the recent
  // accepted residuals) once there are min_residuals of them; before that
  // (cold start) cold_k × the prediction (at least 1 ms), so that an early
  // observation far off the prior (a cold cache block, a connection being
  // set up, a throttled agent) is not taken as the law: at the prior's
  // small covariance in the other direction, one such point sets the
  // intercept or the slope for good.
  double limit = opts_.cold_k * std::max(std::abs(pred), 1.0);
  if (static_cast<int>(residuals_.size()) >= opts_.min_residuals) {
    std::vector<double> r(residuals_.begin(), residuals_.end());
    std::nth_element(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(r.size() / 2), r.end());
    limit = opts_.outlier_k * std::max(1.4826 * r[r.size() / 2], 0.01 * std::abs(pred));
  }
  if (std::abs(err) > limit && ++consecutive_rejections_ < opts_.accept_after) {
    ++rejected_;
    return false;
  }
  consecutive_rejections_ = 0;
  // RLS with forgetting: k = P·φ / (λ + φᵀPφ); θ += k·e; P = (P − k·φᵀP)/λ.
  const double phi[2] = {1.0, x};
  const double pphi[2] = {p_[0][0] * phi[0] + p_[0][1] * phi[1], p_[1][0] * phi[0] + p_[1][1] * phi[1]};
  const double denom = opts_.forgetting + phi[0] * pphi[0] + phi[1] * pphi[1];
  const double k[2] = {pphi[0] / denom, pphi[1] / denom};
  theta_[0] += k[0] * err;
  theta_[1] += k[1] * err;
  for (int a = 0; a < 2; ++a) {
    for (int b = 0; b < 2; ++b) p_[a][b] = (p_[a][b] - k[a] * pphi[b]) / opts_.forgetting;
  }
  const double trace = p_[0][0] + p_[1][1];
  if (trace > trace_cap_) {
    const double f = trace_cap_ / trace;
    for (auto& row : p_) {
      for (double& v : row) v *= f;
    }
  }
  residuals_.push_back(std::abs(err));
  while (static_cast<int>(residuals_.size()) > opts_.residual_window) residuals_.pop_front();
  ++accepted_;
  return true;
}

std::pair<double, double> RobustLinearRls::NonNegative() const {
  const double a = theta_[0], b = theta_[1];
  if (a >= 0 && b >= 0) return {a, b};
  if (a < 0 && b < 0) return {0, 0};
  const double x = p_[1][1] > 0 ? std::max(0.0, -p_[0][1] / p_[1][1]) : 0.0;
  const double at_x = std::max(0.0, Predict(x));
  if (b < 0) return {at_x, 0};
  return {0, x > 0 ? at_x / x : b};
}

RlsState RobustLinearRls::state() const {
  RlsState s;
  s.theta[0] = theta_[0];
  s.theta[1] = theta_[1];
  for (int a = 0; a < 2; ++a) {
    for (int b = 0; b < 2; ++b) s.p[a][b] = p_[a][b];
  }
  s.residuals.assign(residuals_.begin(), residuals_.end());
  s.consecutive_rejections = consecutive_rejections_;
  s.accepted = accepted_;
  s.rejected = rejected_;
  return s;
}

namespace {
Status CheckRls(const RlsState& s, const CostModelOptions& opts) {
  bool finite = std::isfinite(s.theta[0]) && std::isfinite(s.theta[1]);
  for (const auto& row : s.p) {
    for (double v : row) finite = finite && std::isfinite(v);
  }
  for (double r : s.residuals) finite = finite && std::isfinite(r) && r >= 0;
  if (!finite) return InvalidArgument("cost model state: a parameter, covariance or residual is not finite");
  if (static_cast<int>(s.residuals.size()) > opts.residual_window) {
    return InvalidArgument(fmt::format("cost model state: {} residuals, the window holds {}",
                                       s.residuals.size(), opts.residual_window));
  }
  if (s.consecutive_rejections < 0 || s.accepted < 0 || s.rejected < 0) {
    return InvalidArgument("cost model state: negative count");
  }
  return OkStatus();
}
}  // namespace

Status RobustLinearRls::Restore(const RlsState& s) {
  LOFT_RETURN_IF_ERROR(CheckRls(s, opts_));
  theta_[0] = s.theta[0];
  theta_[1] = s.theta[1];
  for (int a = 0; a < 2; ++a) {
    for (int b = 0; b < 2; ++b) p_[a][b] = s.p[a][b];
  }
  residuals_.assign(s.residuals.begin(), s.residuals.end());
  consecutive_rejections_ = s.consecutive_rejections;
  accepted_ = s.accepted;
  rejected_ = s.rejected;
  return OkStatus();
}

CostModel::CostModel(const CostParams& prior, const CostModelOptions& opts) : CostModel(prior, {}, opts) {}

CostModel::CostModel(const CostParams& prior, const DecodeCost& decode_prior, const CostModelOptions& opts)
    : opts_(opts),
      compute_(prior.compute_fixed_ms, prior.compute_per_sample_ms, opts),
      local_(prior.local_fixed_ms, prior.local_per_sample_ms, opts),
      remote_(prior.remote_fixed_ms, prior.remote_per_sample_ms, opts),
      decode_(decode_prior.per_sample_ms, decode_prior.per_kb_ms, opts),
      uplink_per_sample_ms_(prior.uplink_per_sample_ms) {}

void CostModel::Observe(const Observation& o) {
  ++observations_;
  if (o.batch > 0 && o.compute_ms > 0) compute_.Update(static_cast<double>(o.batch), o.compute_ms);
  if (o.local > 0 && o.local_read_ms > 0) local_.Update(static_cast<double>(o.local), o.local_read_ms);
  if (o.remote > 0 && o.remote_read_ms > 0) remote_.Update(static_cast<double>(o.remote), o.remote_read_ms);
  if (o.decode_samples > 0 && o.decode_ms > 0 && o.decode_bytes >= 0) {
    const double n = static_cast<double>(o.decode_samples);
    decode_.Update(static_cast<double>(o.decode_bytes) / 1024.0 / n, o.decode_ms / n);
  }
}

DecodeCost CostModel::decode_params() const {
  DecodeCost d;
  std::tie(d.per_sample_ms, d.per_kb_ms) = decode_.NonNegative();
  return d;
}

void CostModel::ObserveUplink(int64_t samples, double ms) {
  if (samples <= 0 || !(ms > 0) || !std::isfinite(ms)) return;
  const double v = ms / static_cast<double>(samples);
  const double cur = uplink_per_sample_ms_;
  if (cur > 0 && (v > opts_.outlier_k * cur || v * opts_.outlier_k < cur) &&
      ++uplink_rejections_ < opts_.accept_after) {
    return;
  }
  uplink_rejections_ = 0;
  uplink_per_sample_ms_ = cur > 0 ? opts_.uplink_alpha * v + (1 - opts_.uplink_alpha) * cur : v;
}

CostModelState CostModel::state() const {
  CostModelState s;
  s.compute = compute_.state();
  s.local = local_.state();
  s.remote = remote_.state();
  s.decode = decode_.state();
  s.uplink_per_sample_ms = uplink_per_sample_ms_;
  s.uplink_rejections = uplink_rejections_;
  s.observations = observations_;
  return s;
}

Status CostModel::Restore(const CostModelState& s) {
  LOFT_RETURN_IF_ERROR(CheckRls(s.compute, opts_).WithContext("compute"));
  LOFT_RETURN_IF_ERROR(CheckRls(s.local, opts_).WithContext("local read"));
  LOFT_RETURN_IF_ERROR(CheckRls(s.remote, opts_).WithContext("remote read"));
  LOFT_RETURN_IF_ERROR(CheckRls(s.decode, opts_).WithContext("decode"));
  if (!std::isfinite(s.uplink_per_sample_ms) || s.uplink_rejections < 0 || s.observations < 0) {
    return InvalidArgument("cost model state: uplink or observation count out of range");
  }
  LOFT_RETURN_IF_ERROR(compute_.Restore(s.compute));
  LOFT_RETURN_IF_ERROR(local_.Restore(s.local));
  LOFT_RETURN_IF_ERROR(remote_.Restore(s.remote));
  LOFT_RETURN_IF_ERROR(decode_.Restore(s.decode));
  uplink_per_sample_ms_ = s.uplink_per_sample_ms;
  uplink_rejections_ = s.uplink_rejections;
  observations_ = s.observations;
  return OkStatus();
}

CostParams CostModel::params() const {
  CostParams c;
  std::tie(c.compute_fixed_ms, c.compute_per_sample_ms) = compute_.NonNegative();
  std::tie(c.local_fixed_ms, c.local_per_sample_ms) = local_.NonNegative();
  std::tie(c.remote_fixed_ms, c.remote_per_sample_ms) = remote_.NonNegative();
  c.uplink_per_sample_ms = std::max(0.0, uplink_per_sample_ms_);
  return c;
}

void CostModelSet::SetPrior(int32_t node, const CostParams& prior, const DecodeCost& decode_prior) {
  models_.insert_or_assign(node, CostModel(prior, decode_prior, opts_));
}

void CostModelSet::Observe(std::span<const Observation> observations) {
  for (const Observation& o : observations) {
    auto it = models_.find(o.node);
    if (it == models_.end()) {
      ++ignored_;
      continue;
    }
    it->second.Observe(o);
  }
}

StatusOr<CostParams> CostModelSet::params(int32_t node) const {
  auto it = models_.find(node);
  if (it == models_.end()) return NotFound(fmt::format("no cost model for node {}", node));
  return it->second.params();
}

StatusOr<DecodeCost> CostModelSet::decode_params(int32_t node) const {
  auto it = models_.find(node);
  if (it == models_.end()) return NotFound(fmt::format("no cost model for node {}", node));
  return it->second.decode_params();
}

}  // namespace loft::sched
