// What a StatusRequest may cost the scheduler, whose one thread builds
// every reply. Three rules (server/README.md "Status and metrics"):
//  - rows (one per worker per iteration: a million for 1,000 workers at
//    iteration 1,000) go to the operator's key only (kOperatorKey; any
//    sender without CURVE), a page at a time: at most kMaxStatusRows from
//    the row the request names (CheckStatusRequest, FillStatusRows). A
//    page is found by a binary search over the recorded iterations, so its
//    cost does not grow with the run;
//  - another key's status document lists the last kStatusTrainingEntries
//    training iterations, not every one (the operator's lists all);
//  - every reply is charged to its key's byte budget (StatusBudget): a key
//    that spent it gets Error{ResourceExhausted} until it refills. The
//    budget is per key name, so opening more connections buys nothing.
//
// Not responsible for: the document's content (SchedulerService), the
// figures (sched::RunRecorder), limiting connections per key (the ROUTER
// cannot tell which key a disconnect belongs to; ZeroMQ's per-connection
// queues bound what each one holds: server/message_limits.h).
// Thread-safety: StatusBudget is not thread-safe (the poll thread owns it).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "core/proto/loft.pb.h"
#include "core/status.h"
#include "scheduler/run_recorder.h"

namespace loft::server {

// The operator's key name (keys_dir/loftctl.key from `loftctl keygen`).
inline constexpr std::string_view kOperatorKey = "loftctl";
// Most rows in one StatusReply (≈ 160 bytes each on the wire: ≈ 650 KB).
inline constexpr int32_t kMaxStatusRows = 4096;
// Training iterations listed in the status document of a key that is not
// the operator's (the last ones; training.iterations_omitted counts the rest).
inline constexpr size_t kStatusTrainingEntries = 64;
// Status reply bytes per key: a full bucket of *Burst, refilled at *PerS.
// Agents never ask; the operator's `loftctl cluster run` polls the document
// 5 times a second and reads every page of rows at the end.
inline constexpr int64_t kStatusBurstBytes = int64_t{4} << 20;
inline constexpr int64_t kStatusBytesPerS = int64_t{1} << 20;
inline constexpr int64_t kOperatorStatusBurstBytes = int64_t{64} << 20;
inline constexpr int64_t kOperatorStatusBytesPerS = int64_t{16} << 20;

// InvalidArgument for a negative rows_from / max_rows; PermissionDenied
// when a key other than the operator's (`operator_key` false) asks for rows.
Status CheckStatusRequest(const v1::StatusRequest& req, std::string_view key, bool operator_key);

// Sets out->rows_kept and, with req.include_rows, out->rows_from and one
// page of rows: rows_from .. rows_from + min(max_rows or kMaxStatusRows,
// kMaxStatusRows) - 1 of the recorder's kept rows (fewer at the end).
void FillStatusRows(const sched::RunRecorder& recorder, const v1::StatusRequest& req, v1::RunSummary* out);

class StatusBudget {
 public:
  // OK when `key` may be sent a reply at `now_ms` (its bucket is not
  // empty); ResourceExhausted naming the key and the wait otherwise.
  Status Admit(const std::string& key, bool operator_key, double now_ms);
  // Takes a reply of `bytes` sent to `key` from its bucket (which may go
  // below zero: the next replies wait until it refilled above it).
  void Charge(const std::string& key, int64_t bytes);

 private:
  struct Bucket {
    double bytes = 0;
    double at_ms = 0;
  };
  std::map<std::string, Bucket> buckets_;  // one per key name: bounded by the allow-list
};

}  // namespace loft::server
