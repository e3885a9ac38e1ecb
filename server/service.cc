#include "server/service.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <type_traits>

#include "cache/manifest.h"
#include "core/codec.h"

namespace loft::server {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr size_t kMaxIterationSamples = 100000;
constexpr int64_t kMaxCredits = 1024;

// The ledger's partition record as the wire message (the journal may keep
// a wire-identical mirror type).
template <typename P>
v1::Partition WireOf(const P& p) {
  if constexpr (std::is_same_v<P, v1::Partition>) {
    return p;
  } else {
    v1::Partition w;
    w.ParseFromString(p.SerializeAsString());
    return w;
  }
}

double PercentileOf(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}
}  // namespace

SchedulerService::SchedulerService(const SchedulerOptions& opts, ClusterSpec spec,
                                   SchedulerTransport* transport, metrics::Registry* registry)
    : opts_(opts), spec_(std::move(spec)), transport_(transport) {
  nodes_.resize(spec_.nodes.size());
  (void)registry;
}

StatusOr<std::unique_ptr<SchedulerService>> SchedulerService::Create(const SchedulerOptions& opts,
                                                                     ClusterSpec spec,
                                                                     SchedulerTransport* transport,
                                                                     metrics::Registry* registry,
                                                                     double now_ms) {
  std::unique_ptr<SchedulerService> s(new SchedulerService(opts, std::move(spec), transport, registry));
  LOFT_ASSIGN_OR_RETURN(s->g_view_, registry->AddGauge("loft_scheduler_view", "Membership view number."));
  LOFT_ASSIGN_OR_RETURN(
      s->g_iteration_, registry->AddGauge("loft_scheduler_iteration", "Last planned iteration (-1 = none)."));
  LOFT_ASSIGN_OR_RETURN(s->g_in_flight_,
                        registry->AddGauge("loft_scheduler_in_flight",
                                           "Partitions sent and not finished, per node.", {"node"}));
  LOFT_ASSIGN_OR_RETURN(s->g_max_in_flight_,
                        registry->AddGauge("loft_scheduler_max_in_flight",
                                           "Most partitions ever in flight to a node at once.", {"node"}));
  LOFT_ASSIGN_OR_RETURN(s->g_credits_,
                        registry->AddGauge("loft_scheduler_credits", "Unused credits per node.", {"node"}));
  LOFT_ASSIGN_OR_RETURN(s->g_ledger_,
                        registry->AddGauge("loft_scheduler_ledger", "Ledger counters.", {"counter"}));
  LOFT_ASSIGN_OR_RETURN(s->h_iteration_, registry->AddHistogram("loft_scheduler_iteration_ms",
                                                                "Iteration wall time, plan to last ack.",
                                                                metrics::DefaultMillisBuckets()));
  LOFT_ASSIGN_OR_RETURN(s->h_journal_, registry->AddHistogram("loft_scheduler_journal_append_ms",
                                                              "Time to persist one journal batch.",
                                                              metrics::DefaultMillisBuckets()));
  LOFT_ASSIGN_OR_RETURN(
      s->c_planned_ahead_,
      registry->AddCounter("loft_scheduler_planned_ahead_total",
                           "Iterations planned and streamed while the previous one was running."));
  LOFT_ASSIGN_OR_RETURN(s->c_committed_by_ring_,
                        registry->AddCounter("loft_scheduler_committed_by_ring_total",
                                             "Partitions committed on their worker's behalf because the "
                                             "ring applied their gradient (instead of a retry)."));
  LOFT_ASSIGN_OR_RETURN(s->poison_reports_, sched::PoisonReports::Create(registry));
  if (!opts.manifest.empty()) {
    LOFT_ASSIGN_OR_RETURN(cache::Manifest m, cache::ReadManifestFile(opts.manifest));
    if (m.size() < s->spec_.dataset.samples) {
      return InvalidArgument(fmt::format("dataset manifest {} covers {} samples, the spec's dataset has {}",
                                         opts.manifest, m.size(), s->spec_.dataset.samples));
    }
    // Sent whole in RegisterReply: 16 bytes per sample must fit one message
    // (16 MiB holds ~1M samples; larger datasets need chunked distribution).
    if (m.digests().size() + (64u << 10) > static_cast<size_t>(opts.max_message_bytes)) {
      return InvalidArgument(fmt::format(
          "dataset manifest {}: {} samples ({} digest bytes) do not fit one registration reply of "
          "max_message_bytes {}",
          opts.manifest, m.size(), m.digests().size(), opts.max_message_bytes));
    }
    spdlog::info("dataset manifest {}: {} samples, root {}", opts.manifest, m.size(), m.RootHex());
    s->sample_digests_ = m.digests();
  }
  LOFT_RETURN_IF_ERROR(s->Init(now_ms));
  return s;
}

Status SchedulerService::Init(double now_ms) {
  {
    std::ifstream in(opts_.cluster_spec);
    std::stringstream ss;
    ss << in.rdbuf();
    spec_text_ = ss.str();
  }
  sched::SchedulerOptions so;
  so.timeout_min_ms = static_cast<double>(opts_.partition_timeout_ms);
  sched::JournalOptions jo;
  jo.sync = opts_.journal_sync;
  LOFT_ASSIGN_OR_RETURN(journal_, sched::Journal::Open(opts_.journal_dir, jo));
  LOFT_ASSIGN_OR_RETURN(auto updates, journal_->ReadAll());
  LOFT_ASSIGN_OR_RETURN(job_id_, LoadOrCreateJobId(updates.empty()));
  so.job_id = job_id_;
  if (updates.empty()) {
    LOFT_ASSIGN_OR_RETURN(driver_, sched::JobDriver::Create(spec_, opts_.policy, so));
  } else {
    LOFT_ASSIGN_OR_RETURN(driver_, sched::JobDriver::Recover(spec_, opts_.policy, so, updates));
    recovered_ = true;
    started_ = driver_->state().next_iteration() > 0;
    const auto& c = driver_->state().ledger().counters();
    spdlog::warn(
        "recovered from journal {}: {} updates, view {}, epoch {}, next iteration {}, {} committed, "
        "{} partitions in flight",
        opts_.journal_dir, updates.size(), driver_->state().view(), driver_->state().epoch(),
        driver_->state().next_iteration(), c.samples_committed, driver_->state().ledger().in_flight());
    LoadSessions(now_ms);
  }
  plan_ahead_ = opts_.plan_ahead >= 0 ? opts_.plan_ahead : (spec_.training.overlap ? 1 : 0);
  started_ms_ = now_ms;
  for (auto& n : nodes_) n.last_seen_ms = now_ms;
  return OkStatus();
}

StatusOr<uint64_t> SchedulerService::LoadOrCreateJobId(bool fresh_journal) {
  const fs::path path = fs::path(opts_.journal_dir) / "job_id";
  if (!fresh_journal) {
    std::ifstream in(path);
    if (!in) {
      spdlog::warn("journal {} has no job_id file (written by an older scheduler); using job id 1",
                   opts_.journal_dir);
      return uint64_t{1};
    }
    std::string text;
    in >> text;
    uint64_t id = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id, 16);
    if (ec != std::errc() || end != text.data() + text.size() || id == 0) {
      return DataLoss(
          fmt::format("{}: job id '{}' is not a non-zero hexadecimal number", path.string(), text));
    }
    return id;
  }
  // A fresh job: a random id, so agents that trained an earlier job with
  // this journal directory notice the new one.
  std::random_device rd;
  uint64_t id = 0;
  while (id == 0) id = (uint64_t{rd()} << 32) ^ rd();
  const fs::path tmp = fs::path(opts_.journal_dir) / "job_id.tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << fmt::format("{:016x}\n", id);
    out.flush();
    if (!out) return IOError(fmt::format("cannot write {}", tmp.string()));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec)
    return IOError(fmt::format("cannot rename {} to {}: {}", tmp.string(), path.string(), ec.message()));
  spdlog::info("new job {:016x} (journal {})", id, opts_.journal_dir);
  return id;
}

int64_t SchedulerService::target_iterations() const {
  return opts_.iterations > 0 ? opts_.iterations : spec_.training.iterations;
}

void SchedulerService::Record(const sched::Updates& u) {
  unflushed_.insert(unflushed_.end(), u.begin(), u.end());
}

void SchedulerService::Record(sched::Updates&& u) {
  if (unflushed_.empty()) {
    unflushed_ = std::move(u);
  } else {
    unflushed_.insert(unflushed_.end(), std::make_move_iterator(u.begin()), std::make_move_iterator(u.end()));
  }
}

Status SchedulerService::Flush() {
  if (unflushed_.empty()) return OkStatus();
  auto t0 = std::chrono::steady_clock::now();
  Status st = journal_->AppendAll(unflushed_);
  h_journal_->Get().Observe(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  if (!st.ok()) return st.WithContext("journal append");
  unflushed_.clear();
  return OkStatus();
}

Status SchedulerService::FlushUnsynced() {
  if (unflushed_.empty()) return OkStatus();
  auto t0 = std::chrono::steady_clock::now();
  Status st = journal_->AppendAllUnsynced(unflushed_);
  h_journal_->Get().Observe(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  if (!st.ok()) return st.WithContext("journal append");
  unflushed_.clear();
  return OkStatus();
}

void SchedulerService::Observe(const sched::Updates& updates, double now_ms, const AckedPartition* acked,
                               bool by_ring) {
  const auto& ledger = driver_->state().ledger();
  for (const auto& u : updates) {
    uint64_t id = 0;
    if (u.has_partition_done())
      id = u.partition_done().done().partition_id();
    else if (u.has_partition_failed())
      id = u.partition_failed().failed().partition_id();
    else if (u.has_partition_timed_out())
      id = u.partition_timed_out().partition_id();
    else
      continue;
    // What the update did to the partition. The ack that commits an
    // epoch's last sample also advances the epoch, which prunes the
    // epoch's finished records: that one is known from `acked`.
    sched::PartitionRecord pruned;
    const auto* rec = ledger.Find(id);
    if (rec == nullptr && acked != nullptr && acked->id == id && u.has_partition_done()) {
      pruned.partition.set_id(id);
      pruned.partition.set_iteration(acked->iteration);
      pruned.partition.set_worker(acked->worker);
      pruned.state = sched::PartitionState::kDone;
      pruned.sent_ms = acked->sent_ms;
      pruned.finished_ms = now_ms;
      rec = &pruned;
    }
    if (rec == nullptr || !sched::IsTerminal(rec->state) || rec->finished_ms != now_ms) continue;
    auto it = sent_.find(id);
    if (it == sent_.end()) continue;  // a replayed or never-sent partition
    NodeSession& n = nodes_[it->second];
    n.in_flight = std::max<int64_t>(0, n.in_flight - 1);
    sent_.erase(it);
    unconfirmed_.erase(id);
    if (rec->state == sched::PartitionState::kTimedOut) {
      // The assignment (or its ack) was probably lost, e.g. with a crashed
      // scheduler's send queue; its credit would never come back. Restore
      // it: if the agent still holds the partition it refuses the extra
      // one as over-window and reports it failed, so its window holds.
      n.credits = std::min(n.window, n.credits + 1);
    }
    if (rec->state == sched::PartitionState::kDone) {
      ++n.partitions_done;
      auto& it_stats = open_iterations_[rec->partition.iteration()];
      if (!by_ring) {
        it_stats.worker_sent_done[rec->partition.worker()] = {rec->sent_ms, rec->finished_ms};
        it_stats.last_done_ms = std::max(it_stats.last_done_ms, now_ms);
      }
      if (u.has_partition_done()) {
        local_bytes_ += u.partition_done().done().timings().local_bytes();
        remote_bytes_ += u.partition_done().done().timings().remote_bytes();
        // The journal keeps no training report: take it from the ack.
        auto tr = pending_training_.find(id);
        if (tr != pending_training_.end()) {
          const v1::TrainingReport& t = tr->second;
          if (training_.size() < kMaxIterationSamples) {
            TrainingStats& ts = training_[rec->partition.iteration()];
            ts.loss_sum += t.loss();
            ++ts.reports;
            ts.done_ms = std::max(ts.done_ms, now_ms);
            if (t.evaluated()) ts.test_accuracy = t.test_accuracy();
            ts.hashes.push_back(t.param_hash());
          }
        }
      }
    }
  }
  // Close finished iterations (every partition of it is terminal), in
  // order: with planning ahead iteration t+1 runs after t on every worker,
  // so its time counts from t's last ack (or from its plan, if later).
  for (auto it = open_iterations_.begin(); it != open_iterations_.end();) {
    if (ledger.OpenInIteration(it->first) > 0) break;
    const IterationStats& s = it->second;
    if (!s.worker_sent_done.empty()) {
      const double start = std::max(s.planned_ms, prev_done_ms_);
      double wall = s.last_done_ms - start;
      double slowest = 0;
      std::vector<double> worker_ms;
      for (const auto& [node, sd] : s.worker_sent_done) {
        // >= 0: without a ring barrier a worker can ack t+1 before t's last ack.
        worker_ms.push_back(std::max(0.0, sd.second - std::max(sd.first, start)));
        slowest = std::max(slowest, worker_ms.back());
      }
      double wait = 0;
      for (double ms : worker_ms) wait += slowest - ms;
      straggler_wait_sum_ms_ += wait;
      if (iteration_ms_.size() < kMaxIterationSamples) iteration_ms_.push_back(wall);
      h_iteration_->Get().Observe(wall);
      finished_ms_ = s.last_done_ms;
      prev_done_ms_ = s.last_done_ms;
    }
    // The ring's votes are only needed while the iteration is open.
    auto votes = ring_votes_.find(it->first);
    auto workers = iteration_workers_.find(it->first);
    auto ts = training_.find(it->first);
    if (ts != training_.end() && workers != iteration_workers_.end()) {
      ts->second.applied = 0;
      if (votes != ring_votes_.end()) {
        // As CommitIfApplied counts: not the naming member's own report.
        for (const auto& [key, reporters] : votes->second) {
          const int others = static_cast<int>(reporters.size()) - (reporters.count(key.second) ? 1 : 0);
          ts->second.applied += 2 * others > workers->second ? 1 : 0;
        }
      }
    }
    if (votes != ring_votes_.end()) ring_votes_.erase(votes);
    if (workers != iteration_workers_.end()) iteration_workers_.erase(workers);
    it = open_iterations_.erase(it);
  }
}

StatusOr<int32_t> SchedulerService::Authenticate(const PeerInfo& peer, int32_t node) const {
  if (node < 0 || node >= spec_.num_nodes()) {
    return InvalidArgument("node " + std::to_string(node) + " is not in the cluster spec (0.." +
                           std::to_string(spec_.num_nodes() - 1) + ")");
  }
  if (peer.authenticated && peer.name != spec_.nodes[node].name) {
    return PermissionDenied("key '" + peer.name + "' may not speak for node '" + spec_.nodes[node].name +
                            "'");
  }
  return node;
}

Status SchedulerService::Handle(const v1::Envelope& in, const PeerInfo& peer, double now_ms,
                                v1::Envelope* reply, int32_t* sender_node) {
  *sender_node = -1;
  switch (in.body_case()) {
    case v1::Envelope::kRegisterRequest:
      return OnRegister(in.register_request(), peer, now_ms, reply, sender_node);
    case v1::Envelope::kHeartbeat: {
      const auto& hb = in.heartbeat();
      LOFT_ASSIGN_OR_RETURN(int32_t node, Authenticate(peer, hb.node()));
      NodeSession& n = nodes_[node];
      if (!n.connected)
        return FailedPrecondition("node " + spec_.nodes[node].name + " is not registered; register");
      if (hb.credits() < 0 || hb.credits() > kMaxCredits)
        return InvalidArgument("heartbeat credits out of range");
      *sender_node = node;
      n.last_seen_ms = now_ms;
      n.credits = std::min<int64_t>(n.window, n.credits + hb.credits());
      if (!driver_->state().alive(node)) {
        LOFT_ASSIGN_OR_RETURN(auto u, driver_->OnWorkerAlive(node, now_ms));
        Record(u);
        view_dirty_ = true;
        spdlog::info("node {} is alive again (view {})", spec_.nodes[node].name, driver_->state().view());
      }
      auto* r = reply->mutable_heartbeat();
      r->set_node(node);
      r->set_view(driver_->state().view());
      return OkStatus();
    }
    case v1::Envelope::kCreditGrant: {
      const auto& cg = in.credit_grant();
      LOFT_ASSIGN_OR_RETURN(int32_t node, Authenticate(peer, cg.node()));
      NodeSession& n = nodes_[node];
      if (!n.connected)
        return FailedPrecondition("node " + spec_.nodes[node].name + " is not registered; register");
      if (cg.credits() <= 0 || cg.credits() > kMaxCredits)
        return InvalidArgument("credit grant out of range");
      *sender_node = node;
      n.last_seen_ms = now_ms;
      n.credits = std::min<int64_t>(n.window, n.credits + cg.credits());
      return OkStatus();
    }
    case v1::Envelope::kPartitionDone: {
      const auto& d = in.partition_done();
      LOFT_ASSIGN_OR_RETURN(int32_t node, Authenticate(peer, d.node()));
      *sender_node = node;
      nodes_[node].last_seen_ms = now_ms;
      if (d.timings().has_training()) pending_training_[d.partition_id()] = d.timings().training();
      AckedPartition acked;
      if (const auto* r = driver_->state().ledger().Find(d.partition_id()); r != nullptr) {
        acked = {r->partition.id(), r->partition.iteration(), r->partition.worker(), r->sent_ms};
        // The worker's word on what the ring applied, recorded before the
        // ack is applied (an epoch's last ack prunes the records the
        // votes are checked against) and also when the ledger ignores the
        // ack (its partition was already committed, e.g. by the ring).
        if (r->partition.worker() == node && d.timings().has_training()) {
          RecordVotes(r->partition.iteration(), node, d.timings().training());
        }
      }
      auto u = driver_->OnPartitionDone(d, now_ms);
      if (!u.ok()) {
        pending_training_.erase(d.partition_id());
        return u.status();
      }
      Observe(*u, now_ms, &acked);
      Record(std::move(*u));
      pending_training_.erase(d.partition_id());
      return OkStatus();
    }
    case v1::Envelope::kPartitionFailed: {
      const auto& f = in.partition_failed();
      LOFT_ASSIGN_OR_RETURN(int32_t node, Authenticate(peer, f.node()));
      *sender_node = node;
      nodes_[node].last_seen_ms = now_ms;
      spdlog::info("partition {} attempt {} failed on {}: {}", f.partition_id(), f.attempt(),
                   spec_.nodes[node].name, f.reason());
      std::vector<std::string> rejected;
      for (const auto& line : poison_reports_.Record(node, f, spec_.num_nodes(), &rejected))
        spdlog::warn(line);
      for (const auto& line : rejected) spdlog::warn(line);
      if (const auto* r = driver_->state().ledger().Find(f.partition_id());
          r != nullptr && r->partition.worker() == node && r->partition.attempt() == f.attempt()) {
        LOFT_ASSIGN_OR_RETURN(bool committed, CommitIfApplied(f.partition_id(), now_ms));
        if (committed) return OkStatus();
      }
      LOFT_ASSIGN_OR_RETURN(auto u, driver_->OnPartitionFailed(f, now_ms));
      Record(u);
      Observe(u, now_ms);
      return OkStatus();
    }
    case v1::Envelope::kError:
      // Never answer an Error with an Error (no ping-pong); just log it.
      spdlog::info("error from a peer: {}", StatusFromError(in.error()).ToString());
      return OkStatus();
    case v1::Envelope::kStatusRequest:
      reply->mutable_status_reply()->set_json(StatusJson(now_ms));
      return OkStatus();
    default:
      return Unimplemented("the scheduler does not accept '" + std::string(BodyName(in)) + "' messages");
  }
}

Status SchedulerService::OnRegister(const v1::RegisterRequest& req, const PeerInfo& peer, double now_ms,
                                    v1::Envelope* reply, int32_t* sender) {
  int node = spec_.FindNode(req.node_name());
  if (node < 0) return NotFound("node '" + req.node_name() + "' is not in the cluster spec");
  LOFT_RETURN_IF_ERROR(Authenticate(peer, node).status());
  if (req.credits() <= 0 || req.credits() > kMaxCredits) {
    return InvalidArgument("register credits must be in 1.." + std::to_string(kMaxCredits));
  }
  if (req.peer_endpoint().empty()) return InvalidArgument("register without a peer_endpoint");
  if (driver_->state().alive(node)) {
    // A restart fails the node's partitions; commit those the ring applied.
    for (uint64_t id : driver_->state().ledger().InFlightOf(node)) {
      LOFT_RETURN_IF_ERROR(CommitIfApplied(id, now_ms).status());
    }
  }
  LOFT_ASSIGN_OR_RETURN(auto u, driver_->RegisterWorker(node, now_ms));
  Record(u);
  Observe(u, now_ms);
  NodeSession& n = nodes_[node];
  // A re-registration failed every partition the node had; forget them.
  for (auto it = sent_.begin(); it != sent_.end();) {
    it = it->second == node ? sent_.erase(it) : std::next(it);
  }
  std::erase_if(unconfirmed_, [&](const auto& kv) { return kv.second.first == node; });
  n.connected = true;
  n.peer_endpoint = req.peer_endpoint();
  n.ring_endpoint = req.ring_endpoint();
  n.cache = req.cache();
  n.credits = req.credits();
  n.window = req.credits();
  n.in_flight = 0;
  n.queue.clear();
  n.last_seen_ms = now_ms;
  *sender = node;
  LOFT_RETURN_IF_ERROR(Flush());  // journal before the reply
  Status ss = SaveSessions();
  if (!ss.ok()) spdlog::warn("cannot save sessions: {}", ss.ToString());
  spdlog::info("registered {} (node {}, view {}, {} credits, cache {} samples, peer {})", req.node_name(),
               node, driver_->state().view(), req.credits(), req.cache().samples(), req.peer_endpoint());
  auto* r = reply->mutable_register_reply();
  r->set_node(node);
  r->set_view(driver_->state().view());
  r->set_job_config_yaml(spec_text_);
  r->set_job(job_id_);
  r->set_sample_digests(sample_digests_);
  view_dirty_ = true;
  return OkStatus();
}

Status SchedulerService::BroadcastView() {
  const auto& st = driver_->state();
  v1::Envelope env;
  auto* v = env.mutable_view();
  v->set_view(st.view());
  for (int32_t node : st.LiveNodes()) {
    v->add_live_nodes(node);
    v->add_peer_endpoints(nodes_[node].peer_endpoint);
    v->add_ring_endpoints(nodes_[node].ring_endpoint);
    v->add_node_names(spec_.nodes[node].name);
  }
  for (int32_t node : st.LiveNodes()) {
    if (!nodes_[node].connected) continue;
    Status s = transport_->Send(node, env);
    if (!s.ok()) spdlog::debug("view {} to {}: {}", st.view(), spec_.nodes[node].name, s.ToString());
  }
  return OkStatus();
}

Status SchedulerService::SendQueued(double now_ms) {
  const auto& ledger = driver_->state().ledger();
  for (int32_t node = 0; node < spec_.num_nodes(); ++node) {
    NodeSession& n = nodes_[node];
    while (!n.queue.empty() && n.credits > 0) {
      uint64_t id = n.queue.front();
      const auto* rec = ledger.Find(id);
      if (rec == nullptr || rec->state != sched::PartitionState::kPlanned) {
        n.queue.pop_front();
        continue;
      }
      if (std::any_of(unconfirmed_.begin(), unconfirmed_.end(), [&](const auto& kv) {
            return kv.second.first == node && kv.second.second < rec->partition.iteration();
          }))
        break;  // after a restart: wait for this node's earlier partition
      v1::Envelope env;
      *env.mutable_assignment()->mutable_partition() = WireOf(rec->partition);
      const v1::Partition& p = env.assignment().partition();
      // Serving peers learn what they may serve before the worker asks.
      std::map<int32_t, v1::Envelope> grants;
      for (int k = 0; k < p.sample_ids_size(); ++k) {
        int32_t src = p.sources(k);
        if (src == node) continue;
        auto& g = grants[src];
        auto* sg = g.mutable_serve_grant();
        sg->set_partition_id(p.id());
        sg->set_requester(node);
        sg->set_view(p.view());
        sg->add_sample_ids(p.sample_ids(k));
      }
      for (auto& [src, g] : grants) {
        Status s = transport_->Send(src, g);
        if (!s.ok()) spdlog::debug("grant for partition {} to node {}: {}", id, src, s.ToString());
      }
      Status s = transport_->Send(node, env);
      if (!s.ok()) break;  // no route or backpressure: retry next tick
      n.queue.pop_front();
      --n.credits;
      ++n.in_flight;
      n.max_in_flight = std::max(n.max_in_flight, n.in_flight);
      sent_[id] = node;
      LOFT_ASSIGN_OR_RETURN(auto u, driver_->OnPartitionSent(id, p.attempt(), now_ms));
      Record(std::move(u));
    }
  }
  return OkStatus();
}

void SchedulerService::RecordVotes(int64_t iteration, int32_t reporter, const v1::TrainingReport& t) {
  if (t.applied_partitions_size() == 0 || t.applied_nodes_size() != t.applied_partitions_size() ||
      open_iterations_.count(iteration) == 0)
    return;
  const auto& ledger = driver_->state().ledger();
  std::map<std::pair<uint64_t, int32_t>, std::set<int32_t>>* votes = nullptr;
  int dropped = 0;
  for (int k = 0; k < t.applied_partitions_size(); ++k) {
    const auto* r = ledger.Find(t.applied_partitions(k));
    if (r == nullptr || r->partition.iteration() != iteration ||
        r->partition.worker() != t.applied_nodes(k)) {
      ++dropped;
      continue;
    }
    if (votes == nullptr) votes = &ring_votes_[iteration];
    (*votes)[{t.applied_partitions(k), t.applied_nodes(k)}].insert(reporter);
  }
  if (dropped > 0) {
    spdlog::debug(
        "training report of {} for iteration {}: {} of {} applied partitions are not that "
        "iteration's as named by their worker; ignored",
        spec_.nodes[reporter].name, iteration, dropped, t.applied_partitions_size());
  }
}

StatusOr<bool> SchedulerService::CommitIfApplied(uint64_t partition_id, double now_ms, bool timed_out) {
  const auto* rec = driver_->state().ledger().Find(partition_id);
  if (rec == nullptr || sched::IsTerminal(rec->state)) return false;
  const int64_t iteration = rec->partition.iteration();
  auto votes = ring_votes_.find(iteration);
  auto workers = iteration_workers_.find(iteration);
  if (votes == ring_votes_.end() || workers == iteration_workers_.end()) return false;
  const int32_t worker = rec->partition.worker();
  // Only votes for the partition as named by its own worker count.
  auto reporters = votes->second.find({partition_id, worker});
  if (reporters == votes->second.end()) return false;
  // Its own worker's word does not count (it could drop its samples so).
  const int others = static_cast<int>(reporters->second.size()) - (reporters->second.count(worker) ? 1 : 0);
  if (2 * others <= workers->second) return false;
  v1::PartitionDone d;
  d.set_partition_id(partition_id);
  d.set_attempt(rec->partition.attempt());
  d.set_node(worker);
  AckedPartition acked{rec->partition.id(), iteration, worker, rec->sent_ms};
  spdlog::info(
      "partition {} of iteration {} on {}: {} of the iteration's {} workers report the ring applied it; "
      "committing it instead of retrying its samples",
      partition_id, iteration, spec_.nodes[worker].name, others, workers->second);
  LOFT_ASSIGN_OR_RETURN(auto u, driver_->OnPartitionDone(d, now_ms));
  Observe(u, now_ms, &acked, /*by_ring=*/true);
  Record(std::move(u));
  if (timed_out) {
    // As for a timeout: the assignment or its ack was probably lost.
    NodeSession& n = nodes_[worker];
    n.credits = std::min(n.window, n.credits + 1);
  }
  ++committed_by_ring_;
  c_committed_by_ring_->Get().Increment();
  return true;
}

bool SchedulerService::ReadyToPlan() const {
  const auto& st = driver_->state();
  if (st.ledger().in_flight() == 0) return true;  // every iteration complete (BSP)
  if (plan_ahead_ < 1) return false;
  const int64_t running = st.last_iteration();
  // (a) only `running` is open; (b) all of it sent; (c) same view; (d)
  // every live node has a partition of it. After a restart the last
  // plan's workers are unknown: wait (BSP) once.
  if (running != last_planned_iteration_ || st.view() != last_planned_view_) return false;
  if (st.ledger().in_flight() != st.ledger().OpenInIteration(running)) return false;
  for (const NodeSession& n : nodes_) {
    if (!n.queue.empty()) return false;
  }
  for (int32_t node : st.LiveNodes()) {
    if (!last_planned_workers_[static_cast<size_t>(node)]) return false;
  }
  return true;
}

StatusOr<bool> SchedulerService::PlanIfReady(double now_ms) {
  if (finished_) return false;
  const auto& st = driver_->state();
  const bool complete = st.ledger().in_flight() == 0;  // no iteration open
  if (st.next_iteration() >= target_iterations()) {
    if (!complete) return false;  // the last iterations are still running
    finished_ = true;
    const auto& c = st.ledger().counters();
    spdlog::info(
        "job finished: {} iterations, {} epochs completed, {} samples committed, duplicates {}, lost {}, "
        "retries {}, {} iterations planned ahead",
        st.next_iteration(), c.epochs_completed, c.samples_committed, c.duplicates, c.lost, c.retries,
        planned_ahead_);
    return false;
  }
  if (!ReadyToPlan()) return false;
  if (!started_) {
    int need = opts_.min_workers > 0 ? std::min(opts_.min_workers, spec_.num_nodes()) : spec_.num_nodes();
    int live = 0;
    for (int32_t node : st.LiveNodes()) live += nodes_[node].connected ? 1 : 0;
    if (live < need) return false;
    started_ = true;
    first_plan_ms_ = now_ms;
    spdlog::info("{} workers live; starting the job ({} iterations, policy {}, plan ahead {})", live,
                 target_iterations(), opts_.policy, plan_ahead_);
  }
  LOFT_ASSIGN_OR_RETURN(auto u, driver_->PlanNextIteration(now_ms));
  if (u.empty() ||
      !std::any_of(u.begin(), u.end(), [](const v1::StateUpdate& x) { return x.has_iteration_planned(); })) {
    // Blocked. Only worth a log line when BSP is blocked too (planning
    // ahead at an epoch's end waits for the running iteration's samples).
    if (complete && driver_->BlockedReason() != last_blocked_) {
      last_blocked_ = driver_->BlockedReason();
      spdlog::info("planning blocked: {}", last_blocked_);
    }
    Record(std::move(u));  // an EpochAdvanced may precede a blocked plan
    return false;
  }
  last_blocked_.clear();
  if (!complete) {
    ++planned_ahead_;
    c_planned_ahead_->Get().Increment();
  }
  // Queue the partitions (ids only; SendQueued reads them from the
  // ledger), then hand the updates to the journal without copying them.
  last_planned_workers_.assign(static_cast<size_t>(spec_.num_nodes()), 0);
  for (const auto& up : u) {
    if (!up.has_iteration_planned()) continue;
    last_planned_iteration_ = up.iteration_planned().iteration();
    for (const auto& pp : up.iteration_planned().partitions()) {
      const int32_t w = pp.partition().worker();
      nodes_[w].queue.push_back(pp.partition().id());
      if (pp.partition().sample_ids_size() > 0) last_planned_workers_[static_cast<size_t>(w)] = 1;
      open_iterations_[pp.partition().iteration()].planned_ms = now_ms;
    }
  }
  last_planned_view_ = st.view();
  iteration_workers_[last_planned_iteration_] = static_cast<int>(
      std::count(last_planned_workers_.begin(), last_planned_workers_.end(), static_cast<char>(1)));
  Record(std::move(u));
  LOFT_RETURN_IF_ERROR(Flush());  // journal before streaming
  return true;
}

Status SchedulerService::Tick(double now_ms) {
  const auto& st = driver_->state();
  // Heartbeat expiry.
  for (int32_t node = 0; node < spec_.num_nodes(); ++node) {
    NodeSession& n = nodes_[node];
    if (!st.alive(node) || now_ms - n.last_seen_ms <= static_cast<double>(opts_.heartbeat_timeout_ms))
      continue;
    spdlog::warn("node {} missed heartbeats for {:.0f} ms: dropping it", spec_.nodes[node].name,
                 now_ms - n.last_seen_ms);
    // Its partitions (and those reading from it) fail; commit those the ring applied.
    for (uint64_t id : st.ledger().InFlight()) {
      const auto* r = st.ledger().Find(id);
      bool affected = r->partition.worker() == node;
      for (int32_t src : r->partition.sources()) affected = affected || src == node;
      if (affected) LOFT_RETURN_IF_ERROR(CommitIfApplied(id, now_ms).status());
    }
    LOFT_ASSIGN_OR_RETURN(auto u, driver_->OnWorkerDead(node, "missed heartbeats", now_ms));
    Record(u);
    Observe(u, now_ms);
    for (auto it = sent_.begin(); it != sent_.end();) {
      it = it->second == node ? sent_.erase(it) : std::next(it);
    }
    std::erase_if(unconfirmed_, [&](const auto& kv) { return kv.second.first == node; });
    n.connected = false;
    n.queue.clear();
    n.in_flight = 0;
    n.credits = 0;
    view_dirty_ = true;
  }
  {
    for (uint64_t id : st.ledger().Expired(now_ms)) {
      LOFT_RETURN_IF_ERROR(CommitIfApplied(id, now_ms, /*timed_out=*/true).status());
    }
    LOFT_ASSIGN_OR_RETURN(auto u, driver_->CheckTimeouts(now_ms));
    if (!u.empty()) {
      spdlog::warn("{} partition(s) timed out", u.size());
      Record(u);
      Observe(u, now_ms);
    }
  }
  if (recovered_ && !resent_after_recovery_) {
    // Partitions planned before the crash but not known to be sent: send
    // them again (an agent ignores a duplicate; a stale ack is ignored).
    resent_after_recovery_ = true;
    for (uint64_t id : st.ledger().InFlight()) {
      const auto* rec = st.ledger().Find(id);
      if (rec->state == sched::PartitionState::kPlanned)
        nodes_[rec->partition.worker()].queue.push_back(id);
      else if (rec->state == sched::PartitionState::kSent) {
        sent_[id] = rec->partition.worker();
        ++nodes_[rec->partition.worker()].in_flight;
        // Its assignment may have died with the old process: until it is
        // acked, failed or timed out, the node gets no later iteration
        // (it would run round t+1 while the ring waits for it in round t).
        unconfirmed_[id] = {rec->partition.worker(), rec->partition.iteration()};
      }
      open_iterations_[rec->partition.iteration()].planned_ms = rec->planned_ms;
    }
    for (auto& n : nodes_) n.credits = std::max<int64_t>(0, n.credits - n.in_flight);
  }
  if (view_dirty_) {
    LOFT_RETURN_IF_ERROR(Flush());
    view_dirty_ = false;
    LOFT_RETURN_IF_ERROR(BroadcastView());
  }
  // Plan and stream; with planning ahead, once the plan just streamed
  // allows it, the next one too (so t+1 does not wait for the next tick).
  for (int round = 0; round <= plan_ahead_; ++round) {
    LOFT_ASSIGN_OR_RETURN(bool planned, PlanIfReady(now_ms));
    LOFT_RETURN_IF_ERROR(Flush());
    LOFT_RETURN_IF_ERROR(SendQueued(now_ms));
    if (!planned) break;
  }
  // What SendQueued recorded are PartitionSent updates: the sends already
  // happened, nothing external derives from the records, and if they are
  // lost (power failure before the next synced write) recovery re-sends
  // those partitions, which agents ignore as duplicates. So no fsync of
  // its own: one fsync per iteration (the plan's) instead of two. They
  // still reach the WAL now, so a killed process keeps them.
  LOFT_RETURN_IF_ERROR(FlushUnsynced());

  g_view_->Get().Set(static_cast<double>(st.view()));
  g_iteration_->Get().Set(static_cast<double>(st.last_iteration()));
  if (node_gauges_.empty()) {
    node_gauges_.resize(static_cast<size_t>(spec_.num_nodes()));
    for (int32_t node = 0; node < spec_.num_nodes(); ++node) {
      const std::string& name = spec_.nodes[node].name;
      node_gauges_[node] = {&g_in_flight_->WithLabels({name}), &g_max_in_flight_->WithLabels({name}),
                            &g_credits_->WithLabels({name})};
    }
  }
  for (int32_t node = 0; node < spec_.num_nodes(); ++node) {
    node_gauges_[node].in_flight->Set(static_cast<double>(nodes_[node].in_flight));
    node_gauges_[node].max_in_flight->Set(static_cast<double>(nodes_[node].max_in_flight));
    node_gauges_[node].credits->Set(static_cast<double>(nodes_[node].credits));
  }
  const auto& c = st.ledger().counters();
  g_ledger_->WithLabels({"samples_committed"}).Set(static_cast<double>(c.samples_committed));
  g_ledger_->WithLabels({"duplicates"}).Set(static_cast<double>(c.duplicates));
  g_ledger_->WithLabels({"lost"}).Set(static_cast<double>(c.lost));
  g_ledger_->WithLabels({"retries"}).Set(static_cast<double>(c.retries));
  g_ledger_->WithLabels({"epochs_completed"}).Set(static_cast<double>(c.epochs_completed));
  return OkStatus();
}

Status SchedulerService::SaveSessions() const {
  json j = json::array();
  for (int32_t node = 0; node < spec_.num_nodes(); ++node) {
    const NodeSession& n = nodes_[node];
    if (!n.connected) continue;
    j.push_back({{"node", node},
                 {"peer_endpoint", n.peer_endpoint},
                 {"ring_endpoint", n.ring_endpoint},
                 {"credits", n.window},
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
    n.window = std::clamp<int64_t>(e.value("credits", int64_t{1}), 1, kMaxCredits);
    n.credits = n.window;
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
  j["plan_ahead"] = plan_ahead_;
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
    sched::CostParams cp = st.cost(node);
    workers.push_back({{"node", node},
                       {"name", spec_.nodes[node].name},
                       {"registered", st.registered(node)},
                       {"live", st.alive(node)},
                       {"connected", n.connected},
                       {"credits", n.credits},
                       {"in_flight", n.in_flight},
                       {"max_in_flight", n.max_in_flight},
                       {"queued", n.queue.size()},
                       {"partitions_done", n.partitions_done},
                       {"cache_samples", n.cache.samples()},
                       {"last_seen_ms_ago", now_ms - n.last_seen_ms},
                       {"observations", st.observations(node)},
                       {"profile",
                        {{"compute_fixed_ms", cp.compute_fixed_ms},
                         {"compute_per_sample_ms", cp.compute_per_sample_ms},
                         {"local_fixed_ms", cp.local_fixed_ms},
                         {"local_per_sample_ms", cp.local_per_sample_ms},
                         {"remote_fixed_ms", cp.remote_fixed_ms},
                         {"remote_per_sample_ms", cp.remote_per_sample_ms},
                         {"uplink_per_sample_ms", cp.uplink_per_sample_ms}}}});
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
  double mean = 0;
  for (double v : iteration_ms_) mean += v;
  if (!iteration_ms_.empty()) mean /= static_cast<double>(iteration_ms_.size());
  double start = first_plan_ms_ >= 0 ? first_plan_ms_ : started_ms_;
  double end = finished_ ? finished_ms_ : now_ms;
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
  j["run"] = {
      {"iterations_completed", iteration_ms_.size()},
      {"mean_iteration_ms", mean},
      {"p95_iteration_ms", PercentileOf(iteration_ms_, 95)},
      {"straggler_wait_ms",
       iteration_ms_.empty() ? 0.0 : straggler_wait_sum_ms_ / static_cast<double>(iteration_ms_.size())},
      {"local_bytes", local_bytes_},
      {"remote_bytes", remote_bytes_},
      {"total_s", std::max(0.0, end - start) / 1000.0},
      {"iteration_ms", iteration_ms_}};
  return j.dump();
}

}  // namespace loft::server
