// SchedulerService, the reporting and persistence side: sessions.json,
// the status document and the run's figures (StatusReply.run).
// service.h describes the class.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cache/manifest.h"
#include "scheduler/cost_profile.h"
#include "server/service.h"

namespace loft::server {
namespace fs = std::filesystem;
using nlohmann::json;

Status SchedulerService::SaveSessions() const {
  json j = json::array();
  for (int32_t node = 0; node < spec_.num_nodes(); ++node) {
    const NodeSession& n = nodes_[node];
    if (!n.connected) continue;
    j.push_back({{"node", node},
                 {"peer_endpoint", n.peer_endpoint},
                 {"ring_endpoint", n.ring_endpoint},
                 {"credits", n.flow.window},
                 {"cache_samples", n.cache.samples()}});
  }
  fs::path tmp = fs::path(opts_.journal_dir) / "sessions.json.tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(1);
    if (!out) return IOError("cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, fs::path(opts_.journal_dir) / "sessions.json", ec);
  if (ec) return IOError("cannot rename " + tmp.string() + ": " + ec.message());
  return OkStatus();
}

void SchedulerService::LoadSessions(double now_ms) {
  std::ifstream in(fs::path(opts_.journal_dir) / "sessions.json");
  if (!in) return;
  json j = json::parse(in, nullptr, false);
  if (!j.is_array()) {
    spdlog::warn("ignoring malformed sessions.json in {}", opts_.journal_dir);
    return;
  }
  for (const auto& e : j) {
    int node = e.value("node", -1);
    if (node < 0 || node >= spec_.num_nodes() || !driver_->state().alive(node)) continue;
    NodeSession& n = nodes_[node];
    n.connected = true;
    n.peer_endpoint = e.value("peer_endpoint", "");
    n.ring_endpoint = e.value("ring_endpoint", "");
    n.flow.Open(std::clamp<int64_t>(e.value("credits", int64_t{1}), 1, sched::kMaxCredits));
    n.cache.set_samples(e.value("cache_samples", int64_t{0}));
    n.last_seen_ms = now_ms;
  }
}

std::string SchedulerService::StatusJson(double now_ms) const {
  const auto& st = driver_->state();
  const auto& c = st.ledger().counters();
  json j;
  j["policy"] = opts_.policy;
  j["view"] = st.view();
  j["epoch"] = st.epoch();
  j["iteration"] = st.last_iteration();
  j["iterations_target"] = target_iterations();
  j["plan_ahead"] = gate_->plan_ahead();
  j["planned_ahead"] = planned_ahead_;          // iterations planned while the previous one ran
  j["committed_by_ring"] = committed_by_ring_;  // partitions committed from the ring's reports
  j["finished"] = finished_;
  j["recovered"] = recovered_;
  j["live_nodes"] = st.LiveNodes();
  {
    json by_peer = json::object();
    for (const auto& [peer, n] : poison_reports_.samples_by_peer()) by_peer[std::to_string(peer)] = n;
    j["poisoning"] = {{"manifest_samples", sample_digests_.size() / cache::kSampleDigestBytes},
                      {"reports", poison_reports_.reports()},
                      {"samples", poison_reports_.total_samples()},
                      {"samples_by_peer", by_peer}};
  }
  json workers = json::array();
  for (int32_t node = 0; node < spec_.num_nodes(); ++node) {
    const NodeSession& n = nodes_[node];
    workers.push_back({{"node", node},
                       {"name", spec_.nodes[node].name},
                       {"registered", st.registered(node)},
                       {"live", st.alive(node)},
                       {"connected", n.connected},
                       {"credits", n.flow.credits},
                       {"in_flight", n.flow.in_flight},
                       {"max_in_flight", n.flow.max_in_flight},
                       {"queued", n.queue.size()},
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
                 {"in_flight", st.ledger().in_flight()}};
  const double start = first_plan_ms_ >= 0 ? first_plan_ms_ : started_ms_;
  if (!training_.empty()) {
    // Per iteration: mean worker loss, test accuracy when evaluated, and
    // whether every worker reported the same parameter hash.
    json iters = json::array();
    double final_accuracy = -1;
    int64_t mismatches = 0;
    for (const auto& [it, ts] : training_) {
      bool same =
          std::all_of(ts.hashes.begin(), ts.hashes.end(), [&](uint64_t h) { return h == ts.hashes[0]; });
      mismatches += same ? 0 : 1;
      json e = {{"iteration", it},
                {"wall_s", std::max(0.0, ts.done_ms - start) / 1000.0},
                {"loss", ts.reports > 0 ? ts.loss_sum / ts.reports : 0.0},
                {"workers", ts.reports},
                {"hashes_equal", same},
                {"param_hash", fmt::format("{:016x}", ts.hashes.empty() ? 0 : ts.hashes[0])}};
      // Partitions most of the iteration's workers reported applied (once closed).
      if (ts.applied >= 0) e["applied"] = ts.applied;
      if (ts.test_accuracy >= 0) {
        e["test_accuracy"] = ts.test_accuracy;
        final_accuracy = ts.test_accuracy;
      }
      iters.push_back(std::move(e));
    }
    j["training"] = {{"model", spec_.training.model},
                     {"aggregation", spec_.training.aggregation},
                     {"final_accuracy", final_accuracy},
                     {"hash_mismatches", mismatches},
                     {"iterations", std::move(iters)}};
  }
  return j.dump();
}

v1::RunSummary SchedulerService::RunSummary(bool include_rows) const {
  v1::RunSummary out;
  sched::ToProto(recorder_.Figures(driver_->state().ledger().counters().epochs_completed), &out);
  int64_t kept = 0;
  for (const sched::IterationRecord& it : recorder_.iterations())
    kept += static_cast<int64_t>(it.workers.size());
  out.set_rows_dropped(recorder_.rows_added() - kept);
  if (include_rows) {
    for (const sched::IterationRecord& it : recorder_.iterations()) sched::ToProto(it, &out);
  }
  return out;
}

}  // namespace loft::server
