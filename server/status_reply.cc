#include "server/status_reply.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace loft::server {

Status CheckStatusRequest(const v1::StatusRequest& req, std::string_view key, bool operator_key) {
  if (req.rows_from() < 0 || req.max_rows() < 0) {
    return InvalidArgument(fmt::format("StatusRequest rows_from {} and max_rows {} must not be negative",
                                       req.rows_from(), req.max_rows()));
  }
  if (req.include_rows() && !operator_key) {
    return PermissionDenied(fmt::format(
        "key '{}' may not read the run's rows (StatusRequest.include_rows): only the operator's key '{}' may",
        key, kOperatorKey));
  }
  return OkStatus();
}

void FillStatusRows(const sched::RunRecorder& recorder, const v1::StatusRequest& req, v1::RunSummary* out) {
  out->set_rows_kept(recorder.rows_kept());
  if (!req.include_rows()) return;
  out->set_rows_from(req.rows_from());
  const int32_t page = req.max_rows() > 0 ? std::min(req.max_rows(), kMaxStatusRows) : kMaxStatusRows;
  recorder.RowsToProto(req.rows_from(), page, out);
}

Status StatusBudget::Admit(const std::string& key, bool operator_key, double now_ms) {
  const double burst = static_cast<double>(operator_key ? kOperatorStatusBurstBytes : kStatusBurstBytes);
  const double per_ms =
      static_cast<double>(operator_key ? kOperatorStatusBytesPerS : kStatusBytesPerS) / 1000;
  auto [it, fresh] = buckets_.try_emplace(key, Bucket{burst, now_ms});
  Bucket& b = it->second;
  if (!fresh) {
    b.bytes = std::min(burst, b.bytes + std::max(0.0, now_ms - b.at_ms) * per_ms);
    b.at_ms = std::max(b.at_ms, now_ms);
  }
  if (b.bytes > 0) return OkStatus();
  return ResourceExhausted(
      fmt::format("status replies to key '{}' spent their budget ({} MiB, then {} MiB/s): retry in {:.0f} ms",
                  key, static_cast<int64_t>(burst) >> 20, static_cast<int64_t>(per_ms * 1000) >> 20,
                  std::ceil(-b.bytes / per_ms)));
}

void StatusBudget::Charge(const std::string& key, int64_t bytes) {
  auto it = buckets_.find(key);
  if (it != buckets_.end()) it->second.bytes -= static_cast<double>(bytes);
}

}  // namespace loft::server
