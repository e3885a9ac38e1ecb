#include "scheduler/ring_detection.h"

#include <algorithm>

namespace loft::sched {

StatusOr<RingDetection> RingDetection::Create(metrics::Registry* registry) {
  RingDetection d;
  if (registry != nullptr) {
    LOFT_ASSIGN_OR_RETURN(d.offences_counter_,
                          registry->AddCounter("loft_scheduler_ring_offences_total",
                                               "Ring offences (malformed or out-of-window messages, chunks "
                                               "that do not match) seen by the agents, by kind.",
                                               {"reason"}));
    LOFT_ASSIGN_OR_RETURN(
        d.reports_counter_,
        registry->AddCounter("loft_scheduler_peer_reports_total",
                             "Ring members reported to the scheduler by agents, by reason.", {"reason"}));
    LOFT_ASSIGN_OR_RETURN(
        d.evictions_counter_,
        registry->AddCounter("loft_scheduler_evictions_total",
                             "Nodes evicted because f+1 distinct nodes reported them.", {}));
  }
  return d;
}

namespace {
bool KnownReason(std::string_view reason) {
  return std::find(RingDetection::kReasons.begin(), RingDetection::kReasons.end(), reason) !=
         RingDetection::kReasons.end();
}
}  // namespace

void RingDetection::RecordOffences(int32_t reporter, const v1::TrainingReport& report, int32_t num_nodes) {
  for (const auto& o : report.ring_offences()) {
    if (o.node() < 0 || o.node() >= num_nodes || o.node() == reporter || o.count() < 0 ||
        !KnownReason(o.reason())) {
      ++ignored_;
      continue;
    }
    int64_t& latest = latest_[{reporter, o.node(), o.reason()}];
    if (o.count() <= latest) continue;  // cumulative: an older or repeated report
    if (offences_counter_ != nullptr)
      offences_counter_->WithLabels({o.reason()}).Increment(static_cast<double>(o.count() - latest));
    latest = o.count();
  }
}

void RingDetection::RecordReport(const std::string& reason) {
  const std::string r = KnownReason(reason) ? reason : "other";
  ++reports_;
  ++reports_by_reason_[r];
  if (reports_counter_ != nullptr) reports_counter_->WithLabels({r}).Increment();
}

void RingDetection::RecordEviction(int32_t node) {
  if (evicted_.emplace(node, true).second && evictions_counter_ != nullptr)
    evictions_counter_->WithLabels({}).Increment();
}

int64_t RingDetection::offences() const {
  int64_t n = 0;
  for (const auto& [key, count] : latest_) n += count;
  return n;
}

int64_t RingDetection::offences(std::string_view reason) const {
  int64_t n = 0;
  for (const auto& [key, count] : latest_) n += std::get<2>(key) == reason ? count : 0;
  return n;
}

nlohmann::json RingDetection::ToJson() const {
  nlohmann::json by_reason = nlohmann::json::object();
  for (std::string_view r : kReasons) by_reason[std::string(r)] = offences(r);
  nlohmann::json by_node = nlohmann::json::object();
  for (const auto& [key, count] : latest_) {
    const std::string node = std::to_string(std::get<1>(key));
    by_node[node] = by_node.value(node, int64_t{0}) + count;
  }
  std::vector<int32_t> evicted;
  for (const auto& [node, yes] : evicted_) evicted.push_back(node);
  return {{"offences", offences()},
          {"offences_by_reason", by_reason},
          {"offences_by_node", by_node},
          {"reports", reports_},
          {"reports_by_reason", reports_by_reason_},
          {"evictions", evictions()},
          {"evicted", evicted},
          {"ignored_entries", ignored_}};
}

}  // namespace loft::sched
