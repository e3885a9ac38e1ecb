#include "server/service.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>

#include "cache/manifest.h"
#include "core/codec.h"
#include "core/durable_file.h"
#include "scheduler/failure_reports.h"
#include "scheduler/recovered_time.h"
#include "scheduler/worker_messages.h"
#include "server/endpoint_check.h"
#include "server/message_limits.h"

namespace loft::server {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
// Rows of iterations.csv kept for StatusReply.run (≈ 100 bytes each); later
// iterations still count in every figure.
constexpr int64_t kMaxRecordedRows = 1 << 20;
}  // namespace

SchedulerService::SchedulerService(const SchedulerOptions& opts, ClusterSpec spec, std::string spec_yaml,
                                   SchedulerTransport* transport, metrics::Registry* registry)
    : opts_(opts),
      spec_(std::move(spec)),
      spec_text_(std::move(spec_yaml)),
      transport_(transport),
      recorder_(sched::RunRecorderOptions{
          .max_records = std::max<int64_t>(1, kMaxRecordedRows / std::max(1, spec_.num_nodes())),
          .max_makespans = static_cast<int64_t>(kMaxIterationSamples)}) {
  nodes_.resize(spec_.nodes.size());
  sends_ = sched::SendQueues(spec_.num_nodes());
  (void)registry;
}

StatusOr<std::unique_ptr<SchedulerService>> SchedulerService::Create(const SchedulerOptions& opts,
                                                                     ClusterSpec spec, std::string spec_yaml,
                                                                     SchedulerTransport* transport,
                                                                     metrics::Registry* registry,
                                                                     double now_ms) {
  SchedulerOptions resolved = opts;
  LOFT_RETURN_IF_ERROR(resolved.TakeSpecDefaults(spec.scheduler));
  std::unique_ptr<SchedulerService> s(
      new SchedulerService(resolved, std::move(spec), std::move(spec_yaml), transport, registry));
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
  LOFT_ASSIGN_OR_RETURN(s->h_snapshot_,
                        registry->AddHistogram("loft_scheduler_journal_snapshot_ms",
                                               "Time to build and write one journal snapshot.",
                                               metrics::DefaultMillisBuckets()));
  LOFT_ASSIGN_OR_RETURN(
      s->g_journal_entries_,
      registry->AddGauge("loft_scheduler_journal_entries",
                         "Journal entries stored after its newest snapshot (what a restart replays)."));
  LOFT_ASSIGN_OR_RETURN(
      s->c_planned_ahead_,
      registry->AddCounter("loft_scheduler_planned_ahead_total",
                           "Iterations planned and streamed while the previous one was running."));
  LOFT_ASSIGN_OR_RETURN(s->c_journal_syncs_,
                        registry->AddCounter("loft_scheduler_journal_syncs_total",
                                             "Journal writes that were fsynced (journal_sync): about one per "
                                             "iteration (the plan's), not one per ack."));
  LOFT_ASSIGN_OR_RETURN(s->c_committed_by_ring_,
                        registry->AddCounter("loft_scheduler_committed_by_ring_total",
                                             "Partitions committed on their worker's behalf because the "
                                             "ring applied their gradient (instead of a retry)."));
  LOFT_ASSIGN_OR_RETURN(
      s->c_reports_ignored_,
      registry->AddCounter("loft_scheduler_reports_ignored_total",
                           "PartitionDone/PartitionFailed for an unknown, finished or superseded partition "
                           "attempt: counted and dropped, never journaled.",
                           {"type"}));
  LOFT_ASSIGN_OR_RETURN(s->poison_reports_, sched::PoisonReports::Create(registry));
  LOFT_ASSIGN_OR_RETURN(metrics::CounterFamily * suppressed,
                        AddLogSuppressedCounter(registry, "loft_scheduler"));
  s->peer_log_ = PeerLogLimits(suppressed);
  LOFT_ASSIGN_OR_RETURN(s->ring_detection_, sched::RingDetection::Create(registry));
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
    s->manifest_root_ = m.Root();
  }
  LOFT_RETURN_IF_ERROR(s->Init(now_ms));
  return s;
}

Status SchedulerService::Init(double now_ms) {
  sched::StateOptions so;
  so.timeout_min_ms = static_cast<double>(opts_.partition_timeout_ms);
  so.overlap_epochs = opts_.epoch_overlap;
  so.iterations = opts_.iterations;
  sched::JournalOptions jo;
  jo.sync = opts_.journal_sync;
  LOFT_ASSIGN_OR_RETURN(journal_, sched::Journal::Open(opts_.journal_dir, jo));
  const bool fresh = journal_->next_seq() == 0;
  LOFT_ASSIGN_OR_RETURN(job_id_, LoadOrCreateJobId(fresh));
  so.job_id = job_id_;
  LOFT_ASSIGN_OR_RETURN(driver_, sched::JobDriver::Create(spec_, opts_.policy, so));
  if (!fresh) {
    // The newest snapshot, then the entries after it, replayed in chunks:
    // the journal is never held whole in memory.
    {
      LOFT_ASSIGN_OR_RETURN(std::optional<v1::StateSnapshot> snapshot, journal_->ReadSnapshot());
      if (snapshot) {
        LOFT_RETURN_IF_ERROR(driver_->Restore(*snapshot).WithContext(
            fmt::format("journal {}: snapshot at entry {}", opts_.journal_dir, journal_->snapshot_seq())));
      }
    }
    LOFT_ASSIGN_OR_RETURN(const uint64_t replayed,
                          journal_->ReadInChunks(4096, [this](std::span<const v1::StateUpdate> c) {
                            return driver_->Replay(c);
                          }));
    recovered_ = true;
    restart_resend_.Recovered();
    // Never earlier than the journal (a wall clock stepped back between
    // runs): the server's clock follows (resume_floor_ms).
    resume_floor_ms_ = sched::LatestRecordedMs(driver_->state().ledger());
    now_ms = sched::ResumeAtMs(now_ms, resume_floor_ms_);
    started_ = driver_->state().next_iteration() > 0;
    const auto& c = driver_->state().ledger().counters();
    spdlog::warn(
        "recovered from journal {}: snapshot at entry {}, {} updates replayed, view {}, epoch {}, next "
        "iteration {}, {} committed, {} partitions in flight",
        opts_.journal_dir, journal_->snapshot_seq(), replayed, driver_->state().view(),
        driver_->state().epoch(), driver_->state().next_iteration(), c.samples_committed,
        driver_->state().ledger().in_flight());
    LoadSessions(now_ms);
  }
  sched::IterationGateOptions go;
  go.plan_ahead = opts_.plan_ahead;  // -1 = auto: deep enough for the spec's control path
  go.overlap = spec_.training.overlap;
  go.control_ms = spec_.scheduler.overhead_ms + spec_.scheduler.handoff_ms;
  go.target_iterations = opts_.iterations > 0 ? opts_.iterations : spec_.training.iterations;
  go.min_workers = opts_.min_workers;
  gate_ = std::make_unique<sched::IterationGate>(go, spec_.num_nodes());
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
  LOFT_RETURN_IF_ERROR(WriteFileDurably(path.string(), fmt::format("{:016x}\n", id)));
  spdlog::info("new job {:016x} (journal {})", id, opts_.journal_dir);
  return id;
}

void SchedulerService::CountIgnored(const char* type) {
  ++reports_ignored_;
  c_reports_ignored_->WithLabels({type}).Increment();
}

int64_t SchedulerService::target_iterations() const {
  return gate_->target_iterations();
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

void SchedulerService::CountSyncs(int64_t before) {
  c_journal_syncs_->Get().Increment(static_cast<double>(journal_->synced_writes() - before));
}

Status SchedulerService::Flush() {
  if (unflushed_.empty()) return OkStatus();
  auto t0 = std::chrono::steady_clock::now();
  const int64_t syncs = journal_->synced_writes();
  Status st = journal_->AppendAll(unflushed_);
  CountSyncs(syncs);
  h_journal_->Get().Observe(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  if (!st.ok()) return st.WithContext("journal append");
  unflushed_.clear();
  unsynced_since_ms_ = -1;  // the WAL is synced as a whole
  return OkStatus();
}

Status SchedulerService::FlushUnsynced(double now_ms) {
  if (unflushed_.empty()) return OkStatus();
  auto t0 = std::chrono::steady_clock::now();
  Status st = journal_->AppendAllUnsynced(unflushed_);
  h_journal_->Get().Observe(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  if (!st.ok()) return st.WithContext("journal append");
  unflushed_.clear();
  if (unsynced_since_ms_ < 0) unsynced_since_ms_ = now_ms;
  return OkStatus();
}

Status SchedulerService::SyncIfDue(double now_ms, bool force) {
  if (unsynced_since_ms_ < 0 || (!force && now_ms - unsynced_since_ms_ < kMaxUnsyncedMs)) return OkStatus();
  const int64_t syncs = journal_->synced_writes();
  LOFT_RETURN_IF_ERROR(journal_->Sync().WithContext("journal sync"));
  CountSyncs(syncs);
  unsynced_since_ms_ = -1;
  return OkStatus();
}

Status SchedulerService::FlushBeforeEffects(double now_ms) {
  const bool needs_sync = std::any_of(unflushed_.begin(), unflushed_.end(), [](const v1::StateUpdate& u) {
    return u.kind_case() != v1::StateUpdate::kPartitionSent &&
           u.kind_case() != v1::StateUpdate::kPartitionDone;
  });
  return needs_sync ? Flush() : FlushUnsynced(now_ms);
}

void SchedulerService::MaybeSnapshotJournal() {
  const auto every = static_cast<uint64_t>(opts_.journal_snapshot_every);
  if (every == 0 || !unflushed_.empty() || journal_->entries() < every ||
      journal_->next_seq() < snapshot_retry_seq_) {
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t covered = journal_->entries();
  const int64_t syncs = journal_->synced_writes();
  Status st = journal_->WriteSnapshot(driver_->state().ToSnapshot());
  CountSyncs(syncs);
  if (st.ok() && journal_->synced_writes() > syncs) unsynced_since_ms_ = -1;
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  h_snapshot_->Get().Observe(ms);
  if (!st.ok()) {
    snapshot_retry_seq_ = journal_->next_seq() + every;
    spdlog::warn("journal snapshot failed (the journal is unchanged; next try after entry {}): {}",
                 snapshot_retry_seq_, st.ToString());
    return;
  }
  spdlog::info("journal snapshot at entry {}: {} entries compacted in {:.1f} ms", journal_->snapshot_seq(),
               covered, ms);
}

StatusOr<int32_t> SchedulerService::Authenticate(const Sender& peer, int32_t node) const {
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

Status SchedulerService::Handle(const v1::Envelope& in, const Sender& peer, double now_ms,
                                v1::Envelope* reply, int32_t* sender_node) {
  *sender_node = -1;
  LOFT_RETURN_IF_ERROR(CheckFieldSizes(in, spec_));  // server/message_limits.h
  switch (in.body_case()) {
    case v1::Envelope::kRegisterRequest:
      return OnRegister(in.register_request(), peer, now_ms, reply, sender_node);
    case v1::Envelope::kHeartbeat: return OnHeartbeat(in.heartbeat(), peer, now_ms, reply, sender_node);
    case v1::Envelope::kPeerReport: return OnPeerReport(in.peer_report(), peer, now_ms, sender_node);
    case v1::Envelope::kCreditGrant: return OnCreditGrant(in.credit_grant(), peer, now_ms, sender_node);
    case v1::Envelope::kPartitionDone: return OnPartitionDone(in.partition_done(), peer, now_ms, sender_node);
    case v1::Envelope::kPartitionFailed:
      return OnPartitionFailed(in.partition_failed(), peer, now_ms, sender_node);
    case v1::Envelope::kError:
      // Never answer an Error with an Error (no ping-pong); just log it.
      peer_log_.Log(spdlog::level::info, "peer_error", peer.name, LogTime(now_ms),
                    "error from a peer (key '{}'): {}: {}", PeerText(peer.name),
                    StatusCodeName(StatusFromError(in.error()).code()), PeerText(in.error().message()));
      return OkStatus();
    case v1::Envelope::kStatusRequest: return OnStatusRequest(in.status_request(), peer, now_ms, reply);
    default:
      return Unimplemented("the scheduler does not accept '" + std::string(BodyName(in)) + "' messages");
  }
}

Status SchedulerService::OnHeartbeat(const v1::Heartbeat& hb, const Sender& peer, double now_ms,
                                     v1::Envelope* reply, int32_t* sender_node) {
  LOFT_ASSIGN_OR_RETURN(int32_t node, Authenticate(peer, hb.node()));
  NodeSession& n = nodes_[node];
  // Evicted, unregistered, credits out of range (scheduler/worker_messages.h).
  LOFT_RETURN_IF_ERROR(
      sched::AdmitHeartbeat(driver_->state(), accusations_, node, n.connected, hb.credits()));
  *sender_node = node;
  n.last_seen_ms = now_ms;
  n.confirmed = true;
  n.peers_ready = hb.peers_ready();
  sends_.window(node).Grant(hb.credits());
  LOFT_ASSIGN_OR_RETURN(auto u, sched::ComeBackIfDead(*driver_, node, now_ms));
  if (!u.empty()) {
    Record(u);
    LOFT_RETURN_IF_ERROR(Flush());  // journaled before the reply carries the new view
    view_dirty_ = true;
    spdlog::info("node {} is alive again (view {})", spec_.nodes[node].name, driver_->state().view());
  }
  auto* r = reply->mutable_heartbeat();
  r->set_node(node);
  r->set_view(driver_->state().view());
  return OkStatus();
}

Status SchedulerService::OnCreditGrant(const v1::CreditGrant& cg, const Sender& peer, double now_ms,
                                       int32_t* sender_node) {
  LOFT_ASSIGN_OR_RETURN(int32_t node, Authenticate(peer, cg.node()));
  NodeSession& n = nodes_[node];
  LOFT_RETURN_IF_ERROR(sched::AdmitCreditGrant(driver_->state(), node, n.connected, cg.credits()));
  *sender_node = node;
  n.last_seen_ms = now_ms;
  n.confirmed = true;
  sends_.window(node).Grant(cg.credits());
  return OkStatus();
}

Status SchedulerService::OnPartitionDone(const v1::PartitionDone& d, const Sender& peer, double now_ms,
                                         int32_t* sender_node) {
  LOFT_ASSIGN_OR_RETURN(int32_t node, Authenticate(peer, d.node()));
  *sender_node = node;
  nodes_[node].last_seen_ms = now_ms;
  if (d.timings().has_training()) {
    ring_detection_.RecordOffences(node, d.timings().training(), spec_.num_nodes());
  }
  // Whether it applies, and the ring's votes recorded before it is applied
  // (scheduler/worker_messages.h).
  const sched::AckVotes votes = sched::RecordAckVotes(ring_, driver_->state().ledger(), node, d);
  if (!votes.applies) {
    CountIgnored("partition_done");  // changes no state: counted, not journaled
    return OkStatus();
  }
  // WouldApply: the ledger holds this worker's open partition.
  const sched::PartitionRecord* r = driver_->state().ledger().Find(d.partition_id());
  if (votes.dropped > 0) {
    peer_log_.Log(spdlog::level::debug, "training_report", spec_.nodes[node].name, LogTime(now_ms),
                  "training report of {} for iteration {}: {} of {} applied partitions are not that "
                  "iteration's as named by their worker; ignored",
                  spec_.nodes[node].name, r->partition.iteration(), votes.dropped,
                  d.timings().training().applied_partitions_size());
  }
  if (d.timings().has_training()) pending_training_[d.partition_id()] = d.timings().training();
  const AckedPartition acked = {r->partition.id(), r->partition.iteration(), r->partition.worker(),
                                r->sent_ms};
  auto u = driver_->OnPartitionDone(d, now_ms);
  if (!u.ok()) {
    pending_training_.erase(d.partition_id());
    return u.status();
  }
  Observe(*u, now_ms, &acked);  // reads pending_training_
  Record(std::move(*u));
  pending_training_.erase(d.partition_id());
  return OkStatus();
}

Status SchedulerService::OnPartitionFailed(const v1::PartitionFailed& f, const Sender& peer, double now_ms,
                                           int32_t* sender_node) {
  LOFT_ASSIGN_OR_RETURN(int32_t node, Authenticate(peer, f.node()));
  *sender_node = node;
  nodes_[node].last_seen_ms = now_ms;
  LOFT_RETURN_IF_ERROR(OnPoisonReport(node, f, now_ms));
  // Ignored, committed for the ring, or failed (scheduler/failure_reports.h).
  const size_t quarantined = driver_->state().quarantine().samples().size();
  sched::Updates u;
  LOFT_ASSIGN_OR_RETURN(const sched::FailureOutcome outcome,
                        sched::OnFailureReport(
                            *driver_, ring_, node, f, now_ms,
                            [&](uint64_t id) {
                              LogPartitionFailed(node, f, now_ms);
                              return CommitIfApplied(id, now_ms).status();
                            },
                            &u));
  if (outcome == sched::FailureOutcome::kIgnored) {
    CountIgnored("partition_failed");  // changes no state: not journaled
    peer_log_.Log(spdlog::level::debug, "report_ignored", spec_.nodes[node].name, LogTime(now_ms),
                  "ignored failure report of partition {} attempt {} from {}", f.partition_id(), f.attempt(),
                  spec_.nodes[node].name);
    return OkStatus();
  }
  if (outcome == sched::FailureOutcome::kCommittedByRing) return OkStatus();
  LogPartitionFailed(node, f, now_ms);
  if (driver_->state().quarantine().samples().size() != quarantined)
    spdlog::error(
        "QUARANTINE: {} reported the stored records of samples [{}] of partition {} unreadable "
        "(failed their check); quarantined after {} reports, {} samples are now unavailable (never "
        "committed)",
        spec_.nodes[node].name, fmt::join(f.bad_samples().begin(), f.bad_samples().end(), ","),
        f.partition_id(), driver_->state().quarantine().after(),
        driver_->state().quarantine().samples().size());
  Record(u);
  Observe(u, now_ms);
  return OkStatus();
}

void SchedulerService::LogPartitionFailed(int32_t node, const v1::PartitionFailed& f, double now_ms) {
  peer_log_.Log(spdlog::level::info, "partition_failed", spec_.nodes[node].name, LogTime(now_ms),
                "partition {} attempt {} failed on {}: {}", f.partition_id(), f.attempt(),
                spec_.nodes[node].name, PeerText(f.reason()));
}

Status SchedulerService::OnPeerReport(const v1::PeerReport& pr, const Sender& peer, double now_ms,
                                      int32_t* sender_node) {
  // A ring member reported by agents; evicted by the next Tick. Which
  // reports count, and what they do: sched::TakePeerReport (accusations.h).
  LOFT_ASSIGN_OR_RETURN(int32_t node, Authenticate(peer, pr.node()));
  *sender_node = node;
  LOFT_ASSIGN_OR_RETURN(const int evicted, sched::TakePeerReport(accusations_, driver_->state(), node, pr,
                                                                 spec_.training.byzantine_tolerance));
  peer_log_.Log(spdlog::level::warn, "peer_report", spec_.nodes[node].name, LogTime(now_ms),
                "node {} reports node {}: {} ({} times)", spec_.nodes[node].name,
                spec_.nodes[pr.accused()].name, PeerText(pr.reason()), pr.count());
  ring_detection_.RecordReport(pr.reason());
  if (evicted >= 0) {
    ring_detection_.RecordEviction(evicted);
    spdlog::warn("evicting node {}: {}", spec_.nodes[evicted].name,
                 evicted == node ? "it reports every other ring member silent (it hears nobody)"
                                 : fmt::format("reported by {} nodes", accusations_.reporters(evicted)));
  }
  return OkStatus();
}

Status SchedulerService::OnRegister(const v1::RegisterRequest& req, const Sender& peer, double now_ms,
                                    v1::Envelope* reply, int32_t* sender) {
  int node = spec_.FindNode(req.node_name());
  if (node < 0) return NotFound("node '" + req.node_name() + "' is not in the cluster spec");
  LOFT_RETURN_IF_ERROR(Authenticate(peer, node).status());
  // Every member connects to these (endpoint_check.h); a training agent
  // needs a ring. Checked before the registration rule (which refuses
  // credits outside 1..kMaxCredits, then an evicted node).
  LOFT_RETURN_IF_ERROR(CheckAdvertisedEndpoint("peer_endpoint", req.peer_endpoint(), /*required=*/true));
  LOFT_RETURN_IF_ERROR(
      CheckAdvertisedEndpoint("ring_endpoint", req.ring_endpoint(), spec_.training.model != "none"));
  NodeSession& n = nodes_[node];
  // Refused, a reconnect (nothing changes) or a new session: the ring's
  // commits, then the driver fails the rest (scheduler/worker_messages.h).
  const sched::Session session{.connected = n.connected,
                               .incarnation = n.incarnation,
                               .peer_endpoint = n.peer_endpoint,
                               .ring_endpoint = n.ring_endpoint};
  LOFT_ASSIGN_OR_RETURN(
      sched::Registration reg,
      sched::TakeRegistration(*driver_, ring_, accusations_, register_backoff_, node, session, req, now_ms,
                              [&](uint64_t id) { return CommitIfApplied(id, now_ms).status(); }));
  if (reg.wait_ms > 0) {
    return ResourceExhausted(
        fmt::format("node {} registers again too soon (each registration changes the view for every member): "
                    "retry in {:.0f} ms",
                    req.node_name(), reg.wait_ms));
  }
  const bool reconnect = reg.reconnect;
  if (!reconnect) {
    Record(reg.updates);
    Observe(reg.updates, now_ms);
    // A re-registration failed every partition the node had; forget them.
    for (auto it = sent_.begin(); it != sent_.end();) {
      it = it->second == node ? sent_.erase(it) : std::next(it);
    }
    hold_.ReleaseNode(node);
    n.connected = true;
    n.confirmed = false;
    n.peer_endpoint = req.peer_endpoint();
    n.ring_endpoint = req.ring_endpoint();
    n.cache = req.cache();
    sends_.StartSession(node, req.credits());  // window opened, queue empty (send_queues.h)
    n.incarnation = req.incarnation();
  }
  driver_->SetServesDecoded(node, req.serves_decoded());
  n.last_seen_ms = now_ms;
  *sender = node;
  LOFT_RETURN_IF_ERROR(Flush());  // journal before the reply
  if (!reconnect) {               // a reconnect changes nothing sessions.json holds
    Status ss = SaveSessions();
    if (!ss.ok()) spdlog::warn("cannot save sessions: {}", ss.ToString());
  }
  // Reconnects are not limited by RegisterBackoff; their lines are, here.
  peer_log_.Log(spdlog::level::info, "register", req.node_name(), LogTime(now_ms),
                "{} {} (node {}, view {}, {} credits, cache {} samples, peer {})",
                reconnect ? "reconnected" : "registered", req.node_name(), node, driver_->state().view(),
                req.credits(), req.cache().samples(), req.peer_endpoint());
  auto* r = reply->mutable_register_reply();
  r->set_node(node);
  r->set_view(driver_->state().view());
  r->set_job_config_yaml(spec_text_);
  r->set_job(job_id_);
  // An agent holding the same manifest gets the root only (960 KB less
  // per registration at 60,000 samples: seconds on a slow edge link).
  if (!manifest_root_.empty()) r->set_manifest_root(manifest_root_);
  if (manifest_root_.empty() || req.manifest_root() != manifest_root_) r->set_sample_digests(sample_digests_);
  r->set_heartbeat_interval_ms(static_cast<int32_t>(opts_.heartbeat_interval_ms));
  view_dirty_ = true;
  return OkStatus();
}

Status SchedulerService::BroadcastView() {
  const auto& st = driver_->state();
  v1::Envelope env;
  auto* v = env.mutable_view();
  v->set_view(st.view());
  for (int32_t node : st.LiveNodes()) {
    v1::Member* m = v->add_members();
    m->set_node(node);
    m->set_peer_endpoint(nodes_[node].peer_endpoint);
    m->set_ring_endpoint(nodes_[node].ring_endpoint);
    m->set_name(spec_.nodes[node].name);
  }
  for (int32_t node : st.LiveNodes()) {
    if (!nodes_[node].connected) continue;
    Status s = transport_->Send(node, env);
    if (!s.ok()) spdlog::debug("view {} to {}: {}", st.view(), spec_.nodes[node].name, s.ToString());
  }
  return OkStatus();
}

}  // namespace loft::server
