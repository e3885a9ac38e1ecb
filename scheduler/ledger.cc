#include "scheduler/ledger.h"

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
  PartitionRecord rec;
  rec.partition = p;
  rec.planned_ms = now_ms;
  rec.deadline_ms = deadline_ms;
  partitions_.emplace(p.id(), std::move(rec));
  open_.emplace(p.id(), p.iteration());
  ++open_by_iteration_[p.iteration()];
  last_id_ = p.id();
  ++counters_.partitions;
  if (p.attempt() > 0) ++counters_.retries;
  return OkStatus();
}

AckOutcome Ledger::Check(uint64_t id, int32_t attempt, int32_t node, PartitionRecord** rec) {
  auto it = partitions_.find(id);
  if (it == partitions_.end()) return AckOutcome::kUnknown;
  *rec = &it->second;
  if (it->second.partition.attempt() != attempt) return AckOutcome::kWrongAttempt;
  if (node >= 0 && it->second.partition.worker() != node) return AckOutcome::kWrongNode;
  if (IsTerminal(it->second.state)) {
    return it->second.state == PartitionState::kDone ? AckOutcome::kDuplicate : AckOutcome::kTerminal;
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

const PartitionRecord* Ledger::Find(uint64_t id) const {
  auto it = partitions_.find(id);
  return it == partitions_.end() ? nullptr : &it->second;
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
    if (partitions_.at(id).partition.worker() == worker) out.push_back(id);
  }
  return out;
}

std::vector<uint64_t> Ledger::Expired(double now_ms) const {
  std::vector<uint64_t> out;
  for (const auto& [id, iteration] : open_) {
    const double d = partitions_.at(id).deadline_ms;
    if (d > 0 && d <= now_ms) out.push_back(id);
  }
  return out;
}

int64_t Ledger::OpenInIteration(int64_t iteration) const {
  auto it = open_by_iteration_.find(iteration);
  return it == open_by_iteration_.end() ? 0 : it->second;
}

void Ledger::PruneBefore(int64_t epoch) {
  for (auto it = partitions_.begin(); it != partitions_.end();) {
    if (it->second.partition.epoch() < epoch && IsTerminal(it->second.state)) {
      it = partitions_.erase(it);
    } else {
      ++it;
    }
  }
}

std::string Ledger::ToJson() const {
  nlohmann::json j;
  nlohmann::json parts = nlohmann::json::array();
  for (const auto& [id, r] : partitions_) {
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

}  // namespace loft::sched
