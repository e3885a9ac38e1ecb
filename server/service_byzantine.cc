// SchedulerService's handling of Byzantine evidence: poisoning
// reports (scheduler/poison_reports.h: PoisonReports records them,
// DistrustReported decides which peers stop being sources); here they are
// logged and the SourceDistrusted updates journaled. Kept apart from
// service.cc so that the protocol layer only calls OnPoisonReport.
#include <spdlog/spdlog.h>

#include "server/service.h"

namespace loft::server {

Status SchedulerService::OnPoisonReport(int32_t node, const v1::PartitionFailed& f, double now_ms) {
  if (f.poisoned_by_size() == 0) return OkStatus();
  std::vector<std::string> rejected;
  const sched::PartitionRecord* partition = driver_->state().ledger().Find(f.partition_id());
  // Anyone may send these (made-up partitions too): rate-limited per node.
  const std::string& name = spec_.nodes[node].name;
  for (const auto& line : poison_reports_.Record(node, f, spec_.num_nodes(), partition, &rejected))
    peer_log_.Log(spdlog::level::warn, "poison_report", name, LogTime(now_ms), "{}", line);
  for (const auto& line : rejected)
    peer_log_.Log(spdlog::level::warn, "poison_report_ignored", name, LogTime(now_ms), "{}", line);
  // Who stops being a source: scheduler/poison_reports.h (DistrustReported).
  const int tolerance = spec_.training.byzantine_tolerance;
  return sched::DistrustReported(
      *driver_, poison_reports_, f, tolerance, now_ms,
      [&](int32_t peer, int32_t reporters, sched::Updates&& u) {
        Record(std::move(u));
        spdlog::warn(
            "DISTRUSTED: node {} ({}) is no longer a source for other workers: {} distinct nodes refused "
            "samples it served (f = {}); partitions after {} (iteration {} on) read its samples from other "
            "holders or leave them to it",
            peer, spec_.nodes[peer].name, reporters, tolerance, driver_->state().ledger().last_id(),
            driver_->state().next_iteration());
        return OkStatus();
      });
}

}  // namespace loft::server
