#include "scheduler/ledger.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

namespace loft::sched {

std::string_view PartitionStateName(PartitionState s) {
  switch (s) {
    case PartitionState::kPlanned: return "planned";
    case PartitionState::kSent: return "sent";
    case PartitionState::kDone: return "done";
    case PartitionState::kFailed: return "failed";
    case PartitionState::kTimedOut: return "timed_out";
  }
  return "?";
}

std::string_view AckOutcomeName(AckOutcome o) {
  switch (o) {
    case AckOutcome::kAccepted: return "accepted";
    case AckOutcome::kDuplicate: return "duplicate";
    case AckOutcome::kUnknown: return "unknown";
    case AckOutcome::kTerminal: return "terminal";
    case AckOutcome::kWrongAttempt: return "wrong_attempt";
    case AckOutcome::kWrongNode: return "wrong_node";
  }
  return "?";
}

Status Ledger::AddPlanned(const loft::v1::Partition& p, double now_ms, double deadline_ms) {
  if (p.id() == 0) return InvalidArgument("ledger: partition id 0 is reserved");
  if (p.id() <= last_id_) {
    return InvalidArgument("ledger: partition id " + std::to_string(p.id()) + " is not greater than " +
                           std::to_string(last_id_));
  }
  if (p.sources_size() != p.sample_ids_size()) {
    return InvalidArgument("ledger: partition " + std::to_string(p.id()) + " has " +
                           std::to_string(p.sample_ids_size()) + " sample ids but " +
                           std::to_string(p.sources_size()) + " sources");
  }
  // Built in place: the partition (with its sample ids) is copied once.
  PartitionRecord& rec = records_.emplace_back();
  rec.partition = p;
  rec.planned_ms = now_ms;
  rec.deadline_ms = deadline_ms;
  open_.emplace(p.id(), p.iteration());
  ++open_by_iteration_[p.iteration()];
  last_id_ = p.id();
  ++counters_.partitions;
  if (p.attempt() > 0) ++counters_.retries;
  return OkStatus();
}

AckOutcome Ledger::Check(uint64_t id, int32_t attempt, int32_t node, PartitionRecord** rec) {
  PartitionRecord* r = FindMutable(id);
  if (r == nullptr) return AckOutcome::kUnknown;
  *rec = r;
  if (r->partition.attempt() != attempt) return AckOutcome::kWrongAttempt;
  if (node >= 0 && r->partition.worker() != node) return AckOutcome::kWrongNode;
  if (IsTerminal(r->state)) {
    return r->state == PartitionState::kDone ? AckOutcome::kDuplicate : AckOutcome::kTerminal;
  }
  return AckOutcome::kAccepted;
}

void Ledger::Finish(PartitionRecord& rec, PartitionState s, double now_ms) {
  rec.state = s;
  rec.finished_ms = now_ms;
  const uint64_t id = rec.partition.id();
  auto it = open_.find(id);
  if (it != open_.end()) {
    auto bit = open_by_iteration_.find(it->second);
    if (--bit->second == 0) open_by_iteration_.erase(bit);
    open_.erase(it);
  }
}

AckOutcome Ledger::MarkSent(uint64_t id, int32_t attempt, double now_ms) {
  PartitionRecord* rec = nullptr;
  AckOutcome o = Check(id, attempt, -1, &rec);
  if (o == AckOutcome::kAccepted && rec->state != PartitionState::kPlanned) o = AckOutcome::kDuplicate;
  if (o != AckOutcome::kAccepted) {
    ++counters_.acks_ignored;
    return o;
  }
  rec->state = PartitionState::kSent;
  rec->sent_ms = now_ms;
  return o;
}

AckOutcome Ledger::MarkDone(uint64_t id, int32_t attempt, int32_t node, double now_ms) {
  PartitionRecord* rec = nullptr;
  const AckOutcome o = Check(id, attempt, node, &rec);
  if (o != AckOutcome::kAccepted) {
    ++counters_.acks_ignored;
    return o;
  }
  Finish(*rec, PartitionState::kDone, now_ms);
  return o;
}

AckOutcome Ledger::MarkFailed(uint64_t id, int32_t attempt, int32_t node, double now_ms) {
  PartitionRecord* rec = nullptr;
  AckOutcome o = Check(id, attempt, node, &rec);
  if (o == AckOutcome::kDuplicate) o = AckOutcome::kTerminal;
  if (o != AckOutcome::kAccepted) {
    ++counters_.acks_ignored;
    return o;
  }
  Finish(*rec, PartitionState::kFailed, now_ms);
  ++counters_.failed;
  return o;
}

AckOutcome Ledger::MarkTimedOut(uint64_t id, int32_t attempt, double now_ms) {
  PartitionRecord* rec = nullptr;
  AckOutcome o = Check(id, attempt, -1, &rec);
  if (o == AckOutcome::kDuplicate) o = AckOutcome::kTerminal;
  if (o != AckOutcome::kAccepted) {
    ++counters_.acks_ignored;
    return o;
  }
  Finish(*rec, PartitionState::kTimedOut, now_ms);
  ++counters_.timed_out;
  return o;
}

bool Ledger::MarkRoundLost(uint64_t id, double now_ms) {
  PartitionRecord* rec = FindMutable(id);
  if (rec == nullptr || rec->state != PartitionState::kDone) return false;
  rec->state = PartitionState::kFailed;
  if (now_ms >= 0) rec->finished_ms = now_ms;
  ++counters_.failed;
  return true;
}

PartitionRecord* Ledger::FindMutable(uint64_t id) {
  if (id == 0 || records_.empty()) return nullptr;
  // Ids are usually consecutive: try the direct offset first.
  const uint64_t first = records_.front().partition.id();
  if (id >= first && id - first < records_.size()) {
    PartitionRecord& r = records_[id - first];
    if (r.partition.id() == id) return &r;
  }
  // Gaps (ids skipped) or tombstones: binary search over the live ids.
  size_t lo = 0, hi = records_.size();
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    // A tombstone's id is 0; look right of it for the nearest live id.
    size_t m = mid;
    while (m < hi && records_[m].partition.id() == 0) ++m;
    if (m == hi) {
      hi = mid;
      continue;
    }
    const uint64_t mid_id = records_[m].partition.id();
    if (mid_id == id) return &records_[m];
    if (mid_id < id) {
      lo = m + 1;
    } else {
      hi = mid;
    }
  }
  return nullptr;
}

const PartitionRecord* Ledger::Find(uint64_t id) const {
  return const_cast<Ledger*>(this)->FindMutable(id);
}

std::vector<uint64_t> Ledger::InFlight() const {
  std::vector<uint64_t> out;
  out.reserve(open_.size());
  for (const auto& [id, iteration] : open_) out.push_back(id);
  return out;
}

std::vector<uint64_t> Ledger::InFlightOf(int32_t worker) const {
  std::vector<uint64_t> out;
  for (const auto& [id, iteration] : open_) {
    if (Find(id)->partition.worker() == worker) out.push_back(id);
  }
  return out;
}

std::vector<uint64_t> Ledger::Expired(double now_ms) const {
  std::vector<uint64_t> out;
  for (const auto& [id, iteration] : open_) {
    const double d = Find(id)->deadline_ms;
    if (d > 0 && d <= now_ms) out.push_back(id);
  }
  return out;
}

int64_t Ledger::OpenInIteration(int64_t iteration) const {
  auto it = open_by_iteration_.find(iteration);
  return it == open_by_iteration_.end() ? 0 : it->second;
}

void Ledger::PruneBefore(int64_t epoch) {
  for (PartitionRecord& r : records_) {
    if (r.partition.id() != 0 && r.partition.epoch() < epoch && IsTerminal(r.state)) {
      r = PartitionRecord{};  // tombstone: id 0
      ++pruned_in_place_;
    }
  }
  while (!records_.empty() && records_.front().partition.id() == 0) {
    records_.pop_front();
    --pruned_in_place_;
  }
}

void Ledger::ForEachRecord(const std::function<void(const PartitionRecord&)>& fn) const {
  for (const PartitionRecord& r : records_) {
    if (r.partition.id() != 0) fn(r);
  }
}

Status Ledger::Restore(std::vector<PartitionRecord> records, const LedgerCounters& counters,
                       uint64_t last_id) {
  if (!records_.empty() || last_id_ != 0)
    return FailedPrecondition("ledger: restore into a non-empty ledger");
  uint64_t prev = 0;
  for (const PartitionRecord& r : records) {
    const auto& p = r.partition;
    const std::string where = "ledger record " + std::to_string(p.id());
    if (p.id() == 0 || p.id() <= prev || p.id() > last_id) {
      return InvalidArgument(where + ": id is 0, not ascending or above last id " + std::to_string(last_id));
    }
    if (p.sources_size() != p.sample_ids_size()) {
      return InvalidArgument(where + ": sources are not parallel to sample ids");
    }
    if (static_cast<uint8_t>(r.state) > static_cast<uint8_t>(PartitionState::kTimedOut)) {
      return InvalidArgument(where + ": state " + std::to_string(static_cast<int>(r.state)) +
                             " out of range");
    }
    // A NaN deadline never expires: the partition would stay in flight for good.
    for (const auto& [name, ms] : {std::pair<const char*, double>{"planned_ms", r.planned_ms},
                                   {"sent_ms", r.sent_ms},
                                   {"finished_ms", r.finished_ms},
                                   {"deadline_ms", r.deadline_ms}}) {
      if (!std::isfinite(ms))
        return InvalidArgument(where + ": " + name + " " + std::to_string(ms) + " is not finite");
    }
    prev = p.id();
  }
  for (PartitionRecord& r : records) {
    if (!IsTerminal(r.state)) {
      open_.emplace(r.partition.id(), r.partition.iteration());
      ++open_by_iteration_[r.partition.iteration()];
    }
    records_.push_back(std::move(r));
  }
  pruned_in_place_ = 0;
  counters_ = counters;
  last_id_ = last_id;
  return OkStatus();
}

std::string Ledger::ToJson() const {
  nlohmann::json j;
  nlohmann::json parts = nlohmann::json::array();
  for (const PartitionRecord& r : records_) {
    const uint64_t id = r.partition.id();
    if (id == 0) continue;  // pruned
    const auto& p = r.partition;
    parts.push_back({{"id", id},
                     {"job", p.job()},
                     {"epoch", p.epoch()},
                     {"iteration", p.iteration()},
                     {"worker", p.worker()},
                     {"attempt", p.attempt()},
                     {"parent", p.parent()},
                     {"plan_id", p.plan_id()},
                     {"view", p.view()},
                     {"predicted_ms", p.predicted_ms()},
                     {"samples", std::vector<uint64_t>(p.sample_ids().begin(), p.sample_ids().end())},
                     {"sources", std::vector<int32_t>(p.sources().begin(), p.sources().end())},
                     {"state", PartitionStateName(r.state)},
                     {"planned_ms", r.planned_ms},
                     {"sent_ms", r.sent_ms},
                     {"finished_ms", r.finished_ms},
                     {"deadline_ms", r.deadline_ms}});
  }
  j["partitions"] = std::move(parts);
  j["counters"] = {{"partitions", counters_.partitions},
                   {"retries", counters_.retries},
                   {"samples_committed", counters_.samples_committed},
                   {"duplicates", counters_.duplicates},
                   {"lost", counters_.lost},
                   {"failed", counters_.failed},
                   {"timed_out", counters_.timed_out},
                   {"acks_ignored", counters_.acks_ignored},
                   {"epochs_completed", counters_.epochs_completed}};
  j["last_id"] = last_id_;
  return j.dump();
}

bool WouldApply(const Ledger& ledger, uint64_t partition_id, int32_t attempt, int32_t node) {
  return WouldApply(ledger.Find(partition_id), attempt, node);
}

bool WouldApply(const PartitionRecord* r, int32_t attempt, int32_t node) {
  return r != nullptr && r->partition.attempt() == attempt && r->partition.worker() == node &&
         !IsTerminal(r->state);
}

}  // namespace loft::sched
