// RingDetection: the scheduler's counters of Byzantine behaviour in the
// ring, for the status JSON ("ring_detection"),
// `loftctl cluster run`'s summary.json and metrics:
//  - offences by kind: each agent sends, with its training reports, the
//    ring offences it has seen so far per (offender, reason)
//    (TrainingReport.ring_offences, cumulative); the latest count of each
//    (reporter, offender, reason) is kept and summed.
//    loft_scheduler_ring_offences_total{reason} grows by the increases.
//  - reports: PeerReports accepted (loft_scheduler_peer_reports_total{reason});
//  - evictions: nodes evicted by f+1 reporters (loft_scheduler_evictions_total).
// Reasons are the closed set kReasons; entries with another reason, an
// offender out of range or a negative count are ignored (counted in
// ignored()). Counts are the reporters' word (a Byzantine reporter can
// inflate them), like PoisonReports.
//
// Not responsible for: the eviction rule (accusations.h), detecting
// offences (edge_agent/ring_guard.h).
// Thread-safety: not thread-safe; the scheduler's poll thread owns it.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <tuple>

#include "core/metrics.h"
#include "core/proto/loft.pb.h"
#include "core/status.h"

namespace loft::sched {

class RingDetection {
 public:
  static constexpr std::array<std::string_view, 4> kReasons = {"malformed_hello", "out_of_window",
                                                               "malformed_chunk", "chunk_mismatch"};

  // registry may be null (no metrics).
  static StatusOr<RingDetection> Create(metrics::Registry* registry);

  // `reporter`'s cumulative offence counts from a training report.
  void RecordOffences(int32_t reporter, const v1::TrainingReport& report, int32_t num_nodes);
  void RecordReport(const std::string& reason);
  void RecordEviction(int32_t node);

  int64_t offences() const;
  int64_t offences(std::string_view reason) const;
  int64_t reports() const { return reports_; }
  int64_t evictions() const { return static_cast<int64_t>(evicted_.size()); }
  int64_t ignored() const { return ignored_; }
  // {"offences", "offences_by_reason", "offences_by_node", "reports",
  //  "reports_by_reason", "evictions", "evicted", "ignored_entries"}
  nlohmann::json ToJson() const;

 private:
  metrics::CounterFamily* offences_counter_ = nullptr;
  metrics::CounterFamily* reports_counter_ = nullptr;
  metrics::CounterFamily* evictions_counter_ = nullptr;
  std::map<std::tuple<int32_t, int32_t, std::string>, int64_t> latest_;  // (reporter, node, reason)
  std::map<std::string, int64_t> reports_by_reason_;
  int64_t reports_ = 0;
  std::map<int32_t, bool> evicted_;
  int64_t ignored_ = 0;
};

}  // namespace loft::sched
