#include "scheduler/poison_reports.h"

#include <fmt/format.h>

#include <algorithm>

namespace loft::sched {

StatusOr<PoisonReports> PoisonReports::Create(metrics::Registry* registry) {
  PoisonReports r;
  if (registry != nullptr) {
    LOFT_ASSIGN_OR_RETURN(r.counter_, registry->AddCounter("loft_scheduler_poisoned_samples_total",
                                                           "Peer-served samples that agents refused because "
                                                           "they do not match the dataset manifest, by the "
                                                           "accused serving peer node.",
                                                           {"peer"}));
    LOFT_ASSIGN_OR_RETURN(r.distrusted_counter_,
                          registry->AddCounter("loft_scheduler_distrusted_sources_total",
                                               "Peers the planner stopped reading from for other workers: "
                                               "reported for forged samples by f+1 distinct nodes.",
                                               {"peer"}));
  }
  return r;
}

int32_t PoisonReports::reporters(int32_t peer) const {
  int32_t n = 0;
  for (const auto& [pair, samples] : by_pair_) n += pair.second == peer ? 1 : 0;
  return n;
}

void PoisonReports::CountDistrusted(int32_t peer) {
  if (distrusted_counter_ != nullptr) distrusted_counter_->WithLabels({std::to_string(peer)}).Increment();
}

std::vector<std::string> PoisonReports::Record(int32_t reporter, const v1::PartitionFailed& f,
                                               int32_t num_nodes, const PartitionRecord* partition,
                                               std::vector<std::string>* rejected) {
  std::vector<std::string> lines;
  if (f.poisoned_by_size() == 0) return lines;
  const bool counts_ok = f.poisoned_samples_size() == f.poisoned_by_size();
  auto reject = [&](std::string why) {
    if (rejected != nullptr) rejected->push_back(std::move(why));
  };
  if (partition == nullptr || partition->partition.worker() != reporter) {
    ++ignored_;
    // Anyone can send these: named at the 1st, 2nd, 4th, 8th ... only.
    if ((ignored_ & (ignored_ - 1)) == 0) {
      reject(
          fmt::format("node {}: poisoning report of partition {}, {}; ignored ({} such reports so far, "
                      "logged at #1, 2, 4, 8 ...)",
                      reporter, f.partition_id(),
                      partition == nullptr ? "which the scheduler does not know" : "not its own", ignored_));
    }
    return lines;
  }
  const auto& sources = partition->partition.sources();
  if (!counts_ok) {
    reject(fmt::format(
        "node {}: poisoning report of partition {} lists {} peers but {} counts; counted as 1 each", reporter,
        f.partition_id(), f.poisoned_by_size(), f.poisoned_samples_size()));
  }
  bool any = false;
  for (int i = 0; i < f.poisoned_by_size(); ++i) {
    const int32_t peer = f.poisoned_by(i);
    const int64_t n = counts_ok ? f.poisoned_samples(i) : 1;
    if (peer < 0 || peer >= num_nodes || peer == reporter || n < 1) {
      reject(fmt::format("node {}: poisoning report of partition {} names peer {} with {} samples; ignored",
                         reporter, f.partition_id(), peer, n));
      continue;
    }
    if (std::find(sources.begin(), sources.end(), peer) == sources.end()) {
      reject(
          fmt::format("node {}: poisoning report of partition {} names peer {}, which served none of its "
                      "samples; ignored",
                      reporter, f.partition_id(), peer));
      continue;
    }
    any = true;
    total_ += n;
    by_peer_[peer] += n;
    by_pair_[{reporter, peer}] += n;
    if (counter_ != nullptr) counter_->WithLabels({std::to_string(peer)}).Increment(static_cast<double>(n));
    lines.push_back(fmt::format(
        "POISONING: node {} refused {} samples served by node {} (digest mismatch with the dataset manifest, "
        "partition {}); node {} accused {} samples so far",
        reporter, n, peer, f.partition_id(), peer, by_peer_[peer]));
  }
  if (any) ++reports_;
  return lines;
}

Status DistrustReported(JobDriver& driver, PoisonReports& reports, const v1::PartitionFailed& failed,
                        int tolerance, double now_ms,
                        const std::function<Status(int32_t, int32_t, Updates&&)>& distrusted) {
  const int32_t num_nodes = driver.state().spec().num_nodes();
  for (int32_t peer : failed.poisoned_by()) {
    if (peer < 0 || peer >= num_nodes || driver.state().distrusted(peer) ||
        !reports.ShouldDistrust(peer, tolerance)) {
      continue;
    }
    const int32_t reporters = reports.reporters(peer);
    LOFT_ASSIGN_OR_RETURN(auto u, driver.DistrustSource(peer, reporters, now_ms));
    if (u.empty()) continue;
    LOFT_RETURN_IF_ERROR(distrusted(peer, reporters, std::move(u)));
    reports.CountDistrusted(peer);
  }
  return OkStatus();
}

}  // namespace loft::sched
