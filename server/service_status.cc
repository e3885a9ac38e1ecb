// SchedulerService, the reporting and persistence side: sessions.json,
// the status document and the run's figures (StatusReply.run).
// service.h describes the class.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cache/manifest.h"
#include "core/durable_file.h"
#include "scheduler/cost_profile.h"
#include "scheduler/holder_wait.h"
#include "server/service.h"
#include "server/sessions_file.h"

namespace loft::server {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
// The first 1,000 quarantined sample ids (the count is "unavailable").
json QuarantinedIds(const sched::SampleQuarantine& q) {
  json ids = json::array();
  for (uint64_t id : q.samples()) {
    if (ids.size() >= 1000) break;
    ids.push_back(id);
  }
  return ids;
}
}  // namespace

Status SchedulerService::SaveSessions() const {
  std::vector<SessionEntry> entries;
  for (int32_t node = 0; node < spec_.num_nodes(); ++node) {
    const NodeSession& n = nodes_[node];
    if (!n.connected) continue;
    entries.push_back(
        {node, n.peer_endpoint, n.ring_endpoint, sends_.window(node).window, n.cache.samples()});
  }
  return WriteFileDurably((fs::path(opts_.journal_dir) / "sessions.json").string(), SessionsToJson(entries));
}

void SchedulerService::LoadSessions(double now_ms) {
  const std::string path = (fs::path(opts_.journal_dir) / "sessions.json").string();
  std::ifstream in(path);
  if (!in) return;
  std::stringstream text;
  text << in.rdbuf();
  auto entries = ParseSessions(text.str(), path);
  if (!entries.ok()) {
    spdlog::error("ignoring sessions file: {} (agents register again)", entries.status().message());
    return;
  }
  for (const SessionEntry& e : *entries) {
    if (e.node < 0 || e.node >= spec_.num_nodes() || !driver_->state().alive(e.node)) continue;
    NodeSession& n = nodes_[e.node];
    n.connected = true;
    n.peer_endpoint = e.peer_endpoint;
    n.ring_endpoint = e.ring_endpoint;
    sends_.window(e.node).Open(std::clamp<int64_t>(e.credits, 1, sched::kMaxCredits));
    n.cache.set_samples(e.cache_samples);
    n.last_seen_ms = now_ms;
  }
}

std::string SchedulerService::StatusJson(double now_ms, size_t training_entries) const {
  const auto& st = driver_->state();
  const auto& c = st.ledger().counters();
  json j;
  j["policy"] = opts_.policy;
  j["view"] = st.view();
  j["epoch"] = st.epoch();
  j["iteration"] = st.last_iteration();
  j["iterations_target"] = target_iterations();
  j["plan_ahead"] = gate_->depth();             // the depth in force (auto: from the last plan)
  j["planned_ahead"] = planned_ahead_;          // iterations planned while the previous one ran
  j["committed_by_ring"] = committed_by_ring_;  // partitions committed from the ring's reports
  j["reports_ignored"] = reports_ignored_;      // done/failed reports that changed nothing (not journaled)
  j["finished"] = finished_;
  j["recovered"] = recovered_;
  // Entries after the newest snapshot are what a restart replays
  // (journal_snapshot_every bounds them).
  j["journal"] = {{"next_seq", journal_->next_seq()},
                  {"snapshot_seq", journal_->snapshot_seq()},
                  {"entries", journal_->entries()},
                  {"snapshots_written", journal_->snapshots_written()}};
  j["live_nodes"] = st.LiveNodes();
  {
    json by_peer = json::object();
    for (const auto& [peer, n] : poison_reports_.samples_by_peer()) by_peer[std::to_string(peer)] = n;
    j["poisoning"] = {{"manifest_samples", sample_digests_.size() / cache::kSampleDigestBytes},
                      {"reports", poison_reports_.reports()},
                      {"samples", poison_reports_.total_samples()},
                      {"samples_by_peer", by_peer}};
    std::vector<int32_t> distrusted;  // sources the planner stopped using (SourceDistrusted)
    for (int32_t node = 0; node < spec_.num_nodes(); ++node)
      if (st.distrusted(node)) distrusted.push_back(node);
    j["poisoning"]["distrusted_sources"] = distrusted;
    j["poisoning"]["distrusted_reads_committed"] = st.distrusted_reads_committed();
    // Reports about unknown partitions or another worker's: counted, not acted on.
    j["poisoning"]["ignored_reports"] = poison_reports_.ignored_reports();
  }
  j["ring_detection"] = ring_detection_.ToJson();
  json workers = json::array();
  for (int32_t node = 0; node < spec_.num_nodes(); ++node) {
    const NodeSession& n = nodes_[node];
    workers.push_back({{"node", node},
                       {"name", spec_.nodes[node].name},
                       {"registered", st.registered(node)},
                       {"live", st.alive(node)},
                       {"connected", n.connected},
                       {"credits", sends_.window(node).credits},
                       {"in_flight", sends_.window(node).in_flight},
                       {"max_in_flight", sends_.window(node).max_in_flight},
                       {"queued", sends_.queued(node)},
                       {"partitions_done", n.partitions_done},
                       {"cache_samples", n.cache.samples()},
                       {"last_seen_ms_ago", now_ms - n.last_seen_ms},
                       {"observations", st.observations(node)},
                       {"profile", sched::CostToJson(st.cost(node))}});
  }
  j["workers"] = workers;
  j["ledger"] = {{"partitions", c.partitions},
                 {"retries", c.retries},
                 {"samples_committed", c.samples_committed},
                 {"duplicates", c.duplicates},
                 {"lost", c.lost},
                 {"failed", c.failed},
                 {"timed_out", c.timed_out},
                 {"acks_ignored", c.acks_ignored},
                 {"epochs_completed", c.epochs_completed},
                 {"in_flight", st.ledger().in_flight()},
                 // Sample-epochs left out, never committed: quarantined
                 // (scheduler/quarantine.h; their ids: unavailable_samples),
                 // lost to an eviction, held out after the wait for dead
                 // holders (scheduler/holder_wait.h).
                 {"unavailable", st.unavailable()},
                 {"unavailable_samples", QuarantinedIds(st.quarantine())},
                 {"quarantined", st.quarantine().unavailable()},
                 {"lost_to_eviction", st.lost_to_eviction()},
                 {"held_out", st.held_out()}};
  {
    std::vector<int32_t> evicted;
    for (int32_t node = 0; node < spec_.num_nodes(); ++node)
      if (st.evicted(node)) evicted.push_back(node);
    j["evicted_nodes"] = evicted;
    // Planning blocked on crashed holders: how long it has waited of
    // scheduler.holder_wait_s (absent when not waiting).
    const sched::HolderWait w = sched::CheckHolderWait(st, now_ms);
    if (w.waiting) {
      json names = json::array();
      for (int32_t node : w.dead_holders) names.push_back(spec_.nodes[node].name);
      j["holder_wait"] = {{"samples", w.samples},
                          {"dead_holders", names},
                          {"waited_s", w.waited_ms / 1000.0},
                          {"limit_s", w.limit_ms / 1000.0}};
    }
  }
  const double start = first_plan_ms_ >= 0 ? first_plan_ms_ : started_ms_;
  if (!training_.empty()) {
    // Per iteration: mean worker loss, test accuracy when evaluated, and
    // whether every worker reported the same parameter hash.
    // Listed: the last `training_entries` (a key other than the
    // operator's: server/status_reply.h); the counts cover every one.
    json iters = json::array();
    double final_accuracy = -1;
    int64_t mismatches = 0;
    const size_t omitted = training_.size() > training_entries ? training_.size() - training_entries : 0;
    size_t k = 0;
    for (const auto& [it, ts] : training_) {
      mismatches += ts.hashes_equal ? 0 : 1;
      if (ts.test_accuracy >= 0) final_accuracy = ts.test_accuracy;
      if (k++ < omitted) continue;
      json e = {{"iteration", it},
                {"wall_s", std::max(0.0, ts.done_ms - start) / 1000.0},
                {"loss", ts.reports > 0 ? ts.loss_sum / ts.reports : 0.0},
                {"workers", ts.reports},
                {"hashes_equal", ts.hashes_equal},
                {"param_hash", fmt::format("{:016x}", ts.first_hash)}};
      // Partitions most of the iteration's workers reported applied (once closed).
      if (ts.applied >= 0) e["applied"] = ts.applied;
      if (ts.test_accuracy >= 0) e["test_accuracy"] = ts.test_accuracy;
      iters.push_back(std::move(e));
    }
    j["training"] = {{"model", spec_.training.model},    {"aggregation", spec_.training.aggregation},
                     {"final_accuracy", final_accuracy}, {"hash_mismatches", mismatches},
                     {"iterations", std::move(iters)},   {"iterations_omitted", omitted}};
  }
  return j.dump();
}

void SchedulerService::WorkerProfiles(google::protobuf::RepeatedPtrField<v1::WorkerCostProfile>* out) const {
  const auto& st = driver_->state();
  for (int32_t node = 0; node < spec_.num_nodes(); ++node) {
    v1::WorkerCostProfile* w = out->Add();
    w->set_node(node);
    w->set_name(spec_.nodes[node].name);
    w->set_observations(st.observations(node));
    sched::CostToProto(st.cost(node), w->mutable_profile());
  }
}

const v1::RunSummary& SchedulerService::Figures() const {
  const int64_t epochs = driver_->state().ledger().counters().epochs_completed;
  if (figures_iterations_ != recorder_.iterations_added() || figures_epochs_ != epochs) {
    figures_.Clear();
    sched::ToProto(recorder_.Figures(epochs), &figures_);
    figures_.set_rows_dropped(recorder_.rows_added() - recorder_.rows_kept());
    figures_.set_rows_kept(recorder_.rows_kept());
    figures_iterations_ = recorder_.iterations_added();
    figures_epochs_ = epochs;
  }
  return figures_;
}

v1::RunSummary SchedulerService::RunSummary(bool include_rows) const {
  v1::RunSummary out = Figures();
  if (include_rows) {
    for (const sched::IterationRecord& it : recorder_.iterations()) sched::ToProto(it, &out);
  }
  return out;
}

Status SchedulerService::OnStatusRequest(const v1::StatusRequest& req, const Sender& peer, double now_ms,
                                         v1::Envelope* reply) {
  // Without CURVE (a loopback development setup) nobody is authenticated:
  // every sender is the operator.
  const bool operator_key = !peer.authenticated || peer.name == kOperatorKey;
  LOFT_RETURN_IF_ERROR(CheckStatusRequest(req, peer.name, operator_key));
  LOFT_RETURN_IF_ERROR(status_budget_.Admit(peer.name, operator_key, now_ms));
  v1::StatusReply* r = reply->mutable_status_reply();
  r->set_json(StatusJson(now_ms, operator_key ? SIZE_MAX : kStatusTrainingEntries));
  *r->mutable_run() = Figures();
  FillStatusRows(recorder_, req, r->mutable_run());
  WorkerProfiles(r->mutable_workers());
  status_budget_.Charge(peer.name, static_cast<int64_t>(reply->ByteSizeLong()));
  return OkStatus();
}

}  // namespace loft::server
