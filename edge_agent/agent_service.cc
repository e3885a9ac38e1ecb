#include "edge_agent/agent_service.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cmath>
#include <future>
#include <random>
#include <unordered_map>

#include "core/codec.h"
#include "core/membership.h"
#include "core/placement.h"
#include "preprocess/preprocess_pool.h"

namespace loft::agent {

StatusOr<AgentMetrics> AgentMetrics::Create(metrics::Registry* r) {
  AgentMetrics m;
  LOFT_ASSIGN_OR_RETURN(
      m.rejected_frames,
      r->AddCounter("loft_agent_rejected_frames_total",
                    "Frames dropped or answered with an Error, by socket and reason.", {"socket", "reason"}));
  LOFT_ASSIGN_OR_RETURN(m.ring_offences, r->AddCounter("loft_agent_ring_offences_total",
                                                       "Ring messages dropped (malformed, out of window) and "
                                                       "chunks detected, by sending node and reason.",
                                                       {"node", "reason"}));
  LOFT_ASSIGN_OR_RETURN(
      m.fetch_requests,
      r->AddCounter("loft_agent_fetch_requests_total", "Peer fetch requests served, by result.", {"result"}));
  LOFT_ASSIGN_OR_RETURN(auto* s,
                        r->AddCounter("loft_agent_served_samples_total", "Samples served to peers."));
  m.served_samples = &s->Get();
  LOFT_ASSIGN_OR_RETURN(auto* b,
                        r->AddCounter("loft_agent_served_bytes_total", "Record bytes served to peers."));
  m.served_bytes = &b->Get();
  LOFT_ASSIGN_OR_RETURN(m.partitions,
                        r->AddCounter("loft_agent_partitions_total",
                                      "Partitions finished, by result (done, failed, refused).", {"result"}));
  LOFT_ASSIGN_OR_RETURN(m.fetched_bytes,
                        r->AddCounter("loft_agent_fetched_bytes_total",
                                      "Record bytes fetched from peers, by peer node.", {"peer"}));
  LOFT_ASSIGN_OR_RETURN(
      m.partition_ms, r->AddHistogram("loft_agent_partition_ms",
                                      "Per-partition time in ms by phase (local_read, remote_read, compute).",
                                      metrics::DefaultMillisBuckets(), {"phase"}));
  LOFT_ASSIGN_OR_RETURN(auto* f,
                        r->AddGauge("loft_agent_in_flight_partitions", "Partitions queued or running."));
  m.in_flight = &f->Get();
  LOFT_ASSIGN_OR_RETURN(auto* g, r->AddGauge("loft_agent_serve_grants", "Live ServeGrant entries."));
  m.grants = &g->Get();
  LOFT_ASSIGN_OR_RETURN(auto* e, r->AddCounter("loft_agent_scheduler_errors_total",
                                               "Error messages received from the scheduler."));
  m.scheduler_errors = &e->Get();
  LOFT_ASSIGN_OR_RETURN(m.log_suppressed, AddLogSuppressedCounter(r, "loft_agent"));
  LOFT_ASSIGN_OR_RETURN(m.poisoned_samples,
                        r->AddCounter("loft_agent_poisoned_samples_total",
                                      "Peer-fetched samples refused because their digest does not match the "
                                      "dataset manifest, by serving peer node.",
                                      {"peer"}));
  return m;
}

std::string RejectReason(const Status& st) {
  switch (st.code()) {
    case StatusCode::kResourceExhausted: return "oversized";
    case StatusCode::kFailedPrecondition: return "version";
    case StatusCode::kInvalidArgument:
      return st.message().find("no body") != std::string::npos ? "no_body" : "undecodable";
    default: return "other";
  }
}

AgentService::AgentService(AgentServiceOptions options, cache::SampleCache* cache, AgentMetrics* metrics)
    : options_(std::move(options)),
      cache_(cache),
      metrics_(metrics),
      grants_(options_.max_grants),
      peer_log_(metrics->log_suppressed),
      decoded_log_(metrics->log_suppressed) {
  std::random_device rd;
  while (incarnation_ == 0) incarnation_ = (uint64_t{rd()} << 32) ^ rd();
  if (options_.local_manifest != nullptr) local_root_ = options_.local_manifest->Root();
}

PeerReply AgentService::HandlePeer(std::string_view frame, size_t extra_frames, const std::string& user_id) {
  PeerReply out;
  auto reject = [&](const std::string& reason, const Status& st, uint64_t request_id) {
    metrics_->rejected_frames->WithLabels({"peer", reason}).Increment();
    out.header = MakeError(st, request_id);
    return out;
  };
  auto env = Decode(frame, options_.max_message_bytes);
  if (!env.ok()) return reject(RejectReason(env.status()), env.status(), 0);
  if (!env->has_fetch_request()) {
    return reject(
        "unexpected_type",
        InvalidArgument(fmt::format("the peer socket accepts only fetch_request, got {}", BodyName(*env))),
        0);
  }
  const v1::FetchRequest& req = env->fetch_request();
  if (extra_frames > 0) {
    return reject("unexpected_frames",
                  InvalidArgument(fmt::format("fetch_request must be one frame, got {} extra", extra_frames)),
                  req.request_id());
  }
  auto deny = [&](const std::string& result, const Status& st) {
    metrics_->fetch_requests->WithLabels({result}).Increment();
    out.header = MakeError(st, req.request_id());
    return out;
  };
  if (req.sample_ids_size() == 0)
    return deny("invalid", InvalidArgument("fetch_request lists no sample ids"));
  if (req.sample_ids_size() > 4096) {
    return deny("invalid", ResourceExhausted(fmt::format("fetch_request of {} ids exceeds the limit of 4096",
                                                         req.sample_ids_size())));
  }
  if (options_.authenticated) {
    auto peer = PeerFor(req.requester());
    if (!peer || peer->name != user_id) {
      return deny("denied", PermissionDenied(
                                fmt::format("key '{}' may not fetch as node {}", user_id, req.requester())));
    }
  }
  std::span<const uint64_t> ids(req.sample_ids().data(), static_cast<size_t>(req.sample_ids_size()));
  if (req.decoded() && decode_pool_ == nullptr) {
    return deny("denied", FailedPrecondition(fmt::format(
                              "node {} asked for decoded samples but this agent does not decode for peers "
                              "(no preprocessing stage: dataset.encoding raw without augment)",
                              req.requester())));
  }
  Status auth = grants_.Authorize(req.partition_id(), req.requester(), ids, req.decoded());
  if (!auth.ok()) {
    return deny(auth.code() == StatusCode::kUnavailable ? "no_grant" : "denied", auth);
  }
  if (req.decoded()) {
    // Granted: preprocessing is the caller's to schedule (ServeDecoded).
    out.decoded = req;
    return out;
  }
  if (Status st = cache_->MultiGetRecordsInto(ids, &out.records); !st.ok()) {
    if (st.code() != StatusCode::kDataLoss)
      return deny(st.code() == StatusCode::kNotFound ? "not_found" : "data_loss", st);
    // A stored record failed its check: name every such id of the request
    // (decoded once more, only on this rare path) so the requester can
    // report them and the scheduler quarantine them.
    std::vector<uint64_t> bad;
    const auto recs = cache_->MultiGet(ids);
    for (size_t i = 0; i < recs.size(); ++i)
      if (!recs[i].ok() && recs[i].status().code() == StatusCode::kDataLoss) bad.push_back(ids[i]);
    (void)deny("data_loss", st);
    for (uint64_t id : bad) out.header.mutable_error()->add_bad_samples(id);
    if (!bad.empty())
      peer_log_.Log(
          spdlog::level::err, "corrupt_fetch", std::to_string(req.requester()),
          "fetch by node {} (partition {}): {} stored records failed their check (first: sample {})",
          req.requester(), req.partition_id(), bad.size(), bad.front());
    return out;
  }
  if (options_.poison_serve) {
    if (Status st = PoisonRecords(ids, &out.records); !st.ok()) return deny("data_loss", st);
    poison_served_ += static_cast<int64_t>(ids.size());
    spdlog::info("poison_serve: served {} label-flipped records to node {} (partition {}); {} in total",
                 ids.size(), req.requester(), req.partition_id(), poison_served_);
  }
  auto* fr = out.header.mutable_fetch_reply();
  out.header.set_protocol_version(kProtocolVersion);
  fr->set_request_id(req.request_id());
  fr->set_count(static_cast<int32_t>(out.records.size()));
  metrics_->fetch_requests->WithLabels({"ok"}).Increment();
  metrics_->served_samples->Increment(static_cast<double>(out.records.size()));
  metrics_->served_bytes->Increment(static_cast<double>(out.records.bytes()));
  return out;
}

Status AgentService::Accept(const v1::Partition& p) {
  int32_t me = node();
  if (me < 0) return FailedPrecondition("assignment before registration finished");
  if (p.worker() != me)
    return InvalidArgument(
        fmt::format("partition {} is for worker {}, this node is {}", p.id(), p.worker(), me));
  if (p.sample_ids_size() == 0) return InvalidArgument(fmt::format("partition {} has no samples", p.id()));
  if (p.sources_size() != p.sample_ids_size()) {
    return InvalidArgument(fmt::format("partition {}: {} sources for {} sample ids", p.id(), p.sources_size(),
                                       p.sample_ids_size()));
  }
  for (int32_t src : p.sources()) {
    if (src != me && !PeerFor(src)) {
      return InvalidArgument(
          fmt::format("partition {}: source node {} is not in view {}", p.id(), src, view()));
    }
  }
  if (in_flight_ >= options_.credits) {
    return ResourceExhausted(
        fmt::format("partition {} exceeds the granted window of {} partitions", p.id(), options_.credits));
  }
  return OkStatus();
}

SchedulerEffects AgentService::HandleScheduler(std::string_view frame, size_t extra_frames) {
  SchedulerEffects fx;
  auto env = Decode(frame, options_.max_message_bytes);
  if (!env.ok()) {
    metrics_->rejected_frames->WithLabels({"scheduler", RejectReason(env.status())}).Increment();
    fx.to_scheduler.push_back(MakeError(env.status()));
    return fx;
  }
  using E = v1::Envelope;
  switch (env->body_case()) {
    case E::kRegisterReply: {
      std::lock_guard lock(mu_);
      const uint64_t job = env->register_reply().job();
      if (job_ != 0 && job != 0 && job != job_) {
        fx.new_job = fmt::format(
            "the scheduler runs a new job ({:016x}; this agent registered for job {:016x}): exiting so that "
            "the agent is restarted and starts the new job from fresh parameters",
            job, job_);
        break;
      }
      if (job != 0) job_ = job;
      node_ = env->register_reply().node();
      view_.set_view(env->register_reply().view());
      scheduler_heartbeat_ms_ = std::max(0, env->register_reply().heartbeat_interval_ms());
      if (options_.guard != nullptr) {
        const v1::RegisterReply& rr = env->register_reply();
        const std::string& d = rr.sample_digests();
        auto m = cache::Manifest::FromDigests(d);
        if (m.ok() && m->empty() && !rr.manifest_root().empty()) {
          // Digests left out: the scheduler's root was ours when we asked.
          if (options_.local_manifest != nullptr && rr.manifest_root() == local_root_) {
            m = *options_.local_manifest;
          } else {
            m = DataLoss(fmt::format(
                "the scheduler sent only its manifest root {} and this agent holds no manifest with it "
                "(local: {})",
                cache::Hex(rr.manifest_root()),
                options_.local_manifest != nullptr ? options_.local_manifest->RootHex() : "none"));
          }
        } else if (m.ok() && !m->empty() && options_.local_manifest != nullptr && m->Root() != local_root_) {
          spdlog::warn(
              "this agent's manifest file (root {}) is not the scheduler's (root {}): using the scheduler's",
              options_.local_manifest->RootHex(), m->RootHex());
        }
        if (!m.ok()) {
          spdlog::error("registration reply: {}; peer samples are checked by CRC only",
                        m.status().ToString());
        } else if (m->empty()) {
          spdlog::warn(
              "the scheduler sent no dataset manifest (no `manifest:` in its config): peer-fetched samples "
              "are "
              "checked by CRC only, which a lying peer can recompute");
        } else {
          spdlog::info("dataset manifest: {} samples, root {}", m->size(), m->RootHex());
          options_.guard->SetManifest(std::move(*m));
        }
      }
      fx.registered = true;
      spdlog::info("registered as node {} (view {}, heartbeat every {} ms as the scheduler asks)", node_,
                   view_.view(), scheduler_heartbeat_ms_.load());
      break;
    }
    case E::kView: {
      std::vector<int32_t> gone;
      {
        std::lock_guard lock(mu_);
        for (const v1::Member& m : view_.members()) {
          if (!IsMember(env->view(), m.node())) gone.push_back(m.node());
        }
        view_ = env->view();
      }
      if (options_.on_view) options_.on_view(env->view());
      for (int32_t n : gone) grants_.DropRequester(n);
      metrics_->grants->Set(static_cast<double>(grants_.size()));
      break;
    }
    case E::kServeGrant:
      grants_.Add(env->serve_grant());
      metrics_->grants->Set(static_cast<double>(grants_.size()));
      break;
    case E::kAssignment: {
      const v1::Partition& p = env->assignment().partition();
      if (seen_.Contains(p.id(), p.attempt())) {
        // Already accepted (running or reported): training it again would
        // count its samples twice. No reply: its one report is, or was, sent.
        spdlog::info("partition {} attempt {} was already accepted: duplicate assignment dropped", p.id(),
                     p.attempt());
        metrics_->partitions->WithLabels({"duplicate"}).Increment();
        break;
      }
      Status st = Accept(p);
      if (st.ok()) {
        seen_.Add(p.id(), p.attempt());
        ++in_flight_;
        metrics_->in_flight->Set(in_flight_);
        fx.run.push_back(p);
      } else {
        spdlog::warn("refused partition {}: {}", p.id(), st.ToString());
        metrics_->partitions->WithLabels({"refused"}).Increment();
        E failed;
        failed.set_protocol_version(kProtocolVersion);
        auto* f = failed.mutable_partition_failed();
        f->set_partition_id(p.id());
        f->set_attempt(p.attempt());
        f->set_node(node());
        f->set_reason(st.ToString());
        fx.to_scheduler.push_back(std::move(failed));
        // Over-window assignments were never covered by a credit; others were.
        if (st.code() != StatusCode::kResourceExhausted) ++fx.credits_to_return;
      }
      break;
    }
    case E::kHeartbeat: break;
    case E::kShutdown:
      spdlog::info("shutdown requested: {}", env->shutdown().reason());
      fx.shutdown = true;
      break;
    case E::kError:
      metrics_->scheduler_errors->Increment();
      peer_log_.Log(spdlog::level::warn, "scheduler_error", "scheduler", "scheduler error: {}: {}",
                    StatusCodeName(StatusFromError(env->error()).code()), PeerText(env->error().message()));
      break;
    default:
      metrics_->rejected_frames->WithLabels({"scheduler", "unexpected_type"}).Increment();
      fx.to_scheduler.push_back(MakeError(
          InvalidArgument(fmt::format("an agent does not accept {} from the scheduler", BodyName(*env)))));
      break;
  }
  if (extra_frames > 0) metrics_->rejected_frames->WithLabels({"scheduler", "unexpected_frames"}).Increment();
  return fx;
}

v1::Envelope AgentService::MakeRegister(const v1::CacheSummary& summary) const {
  v1::Envelope env;
  env.set_protocol_version(kProtocolVersion);
  auto* r = env.mutable_register_request();
  r->set_node_name(options_.node_name);
  r->set_peer_endpoint(options_.peer_endpoint);
  *r->mutable_cache() = summary;
  r->set_credits(options_.credits);
  r->set_ring_endpoint(options_.ring_endpoint);
  r->set_incarnation(incarnation_);
  if (options_.local_manifest != nullptr) r->set_manifest_root(local_root_);
  r->set_serves_decoded(decode_pool_ != nullptr);
  return env;
}

v1::Envelope AgentService::MakeHeartbeat() const {
  v1::Envelope env;
  env.set_protocol_version(kProtocolVersion);
  auto* h = env.mutable_heartbeat();
  h->set_node(node());
  h->set_view(view());
  if (options_.peers_ready) h->set_peers_ready(options_.peers_ready(ViewPeers()));
  return env;
}

std::vector<int32_t> AgentService::ViewPeers() const {
  std::lock_guard lock(mu_);
  std::vector<int32_t> out;
  for (const v1::Member& m : view_.members())
    if (m.node() != node_) out.push_back(m.node());
  return out;
}

v1::Envelope AgentService::MakeCreditGrant(int credits) const {
  v1::Envelope env;
  env.set_protocol_version(kProtocolVersion);
  env.mutable_credit_grant()->set_node(node());
  env.mutable_credit_grant()->set_credits(credits);
  return env;
}

void AgentService::PartitionFinished() {
  if (in_flight_ > 0) --in_flight_;
  metrics_->in_flight->Set(in_flight_);
}

std::optional<v1::Envelope> AgentService::ReportSent(const v1::Envelope& report) {
  // Only a partition's own report ends it; a PeerReport (ring offences)
  // shares the outbox but holds no slot of the window.
  if (!report.has_partition_done() && !report.has_partition_failed()) return std::nullopt;
  PartitionFinished();
  return MakeCreditGrant(1);
}

int32_t AgentService::node() const {
  std::lock_guard lock(mu_);
  return node_;
}

int64_t AgentService::view() const {
  std::lock_guard lock(mu_);
  return view_.view();
}

std::optional<PeerInfo> AgentService::PeerFor(int32_t node) const {
  std::lock_guard lock(mu_);
  const v1::Member* m = FindMember(view_, node);
  if (m == nullptr) return std::nullopt;
  return PeerInfo{node, m->name(), m->peer_endpoint()};
}

// ---------------------------------------------------------------- runner

PeerReply AgentService::ServeDecoded(const v1::FetchRequest& req) {
  PeerReply reply;
  PeerReply* out = &reply;
  const std::span<const uint64_t> ids(req.sample_ids().data(), static_cast<size_t>(req.sample_ids_size()));
  auto fail = [&](const Status& st, const std::vector<uint64_t>& bad) {
    metrics_->fetch_requests->WithLabels({"data_loss"}).Increment();
    out->records = cache::RecordBatch{};
    out->header = MakeError(st, req.request_id());
    for (uint64_t id : bad) out->header.mutable_error()->add_bad_samples(id);
    if (!bad.empty()) {
      std::lock_guard lock(decoded_log_mu_);
      decoded_log_.Log(spdlog::level::err, "corrupt_fetch", std::to_string(req.requester()),
                       "decoded fetch by node {} (partition {}): {} samples failed their check or did not "
                       "decode (first: sample {})",
                       req.requester(), req.partition_id(), bad.size(), bad.front());
    }
    return std::move(reply);
  };
  preprocess::PreprocessPool* pool = decode_pool_;
  if (pool == nullptr) {
    metrics_->fetch_requests->WithLabels({"denied"}).Increment();
    out->header = MakeError(FailedPrecondition("this agent does not decode for peers"), req.request_id());
    return reply;
  }
  std::vector<StatusOr<cache::Sample>> recs = cache_->MultiGet(ids);
  std::vector<uint64_t> bad;
  Status first;
  for (size_t i = 0; i < recs.size(); ++i) {
    if (recs[i].ok()) continue;
    if (recs[i].status().code() != StatusCode::kDataLoss) return fail(recs[i].status(), {});
    bad.push_back(ids[i]);
    if (first.ok()) first = recs[i].status();
  }
  if (!bad.empty()) return fail(first, bad);
  // The whole preprocessing stage, seeded by the requester's epoch, on this
  // agent's pool (its threads, its CPU quota).
  const auto dim = static_cast<size_t>(pool->options().input_size());
  std::vector<uint8_t> levels(ids.size() * dim);
  std::vector<Status> statuses(ids.size());
  std::vector<preprocess::PreprocessItem> items(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    items[i].id = ids[i];
    items[i].epoch = req.epoch();
    items[i].payload = recs[i]->payload;
    items[i].status = &statuses[i];
    items[i].bytes = std::span<uint8_t>(levels).subspan(i * dim, dim);
  }
  if (Status st = pool->Run(items); !st.ok()) {
    for (size_t i = 0; i < ids.size(); ++i)
      if (statuses[i].code() == StatusCode::kDataLoss) bad.push_back(ids[i]);
    return fail(st.WithContext(fmt::format("decoding for node {}", req.requester())), bad);
  }
  if (options_.poison_decoded) {
    for (uint8_t& q : levels) q = static_cast<uint8_t>(255 - q);
    const int64_t total = poison_decoded_served_ += static_cast<int64_t>(ids.size());
    spdlog::info("poison_decoded: served {} forged decoded samples to node {} (partition {}); {} in total",
                 ids.size(), req.requester(), req.partition_id(), total);
  }
  if (decoded_served_.fetch_add(static_cast<int64_t>(ids.size())) == 0)
    spdlog::info(
        "decoded serving: preprocessed {} samples for node {} (partition {}), its first decoded request",
        ids.size(), req.requester(), req.partition_id());
  cache::RecordBatch& rb = out->records;
  rb.data.reserve(ids.size() * (dim + cache::kRecordHeaderBytes + cache::kRecordTrailerBytes));
  std::string rec;
  for (size_t i = 0; i < ids.size(); ++i) {
    cache::EncodeRecordTo(ids[i], recs[i]->label, std::span<const uint8_t>(levels).subspan(i * dim, dim),
                          &rec);
    rb.data += rec;
    rb.ends.push_back(rb.data.size());
  }
  auto* fr = out->header.mutable_fetch_reply();
  out->header.set_protocol_version(kProtocolVersion);
  fr->set_request_id(req.request_id());
  fr->set_count(static_cast<int32_t>(rb.size()));
  metrics_->fetch_requests->WithLabels({"ok_decoded"}).Increment();
  metrics_->served_samples->Increment(static_cast<double>(rb.size()));
  metrics_->served_bytes->Increment(static_cast<double>(rb.bytes()));
  return reply;
}

PartitionRunner::PartitionRunner(Clock* clock, cache::SampleCache* cache, PeerClient* peers,
                                 AgentMetrics* metrics, const SampleGuard* guard)
    : clock_(clock),
      cache_(cache),
      peers_(peers),
      metrics_(metrics),
      guard_(guard),
      fetch_thread_(peers != nullptr ? std::make_unique<boost::asio::thread_pool>(1) : nullptr) {}

PartitionRunner::~PartitionRunner() = default;  // the pool joins its thread

ReadPartition PartitionRunner::Read(const v1::Partition& p, int32_t me) {
  ReadPartition out;
  out.partition = p;
  out.batch.partition_id = p.id();
  out.batch.iteration = p.iteration();
  out.batch.view = p.view();
  out.batch.local_step = p.local_step();
  out.batch.delta_exchange = p.delta_exchange();
  std::vector<uint64_t> local;
  std::map<int32_t, std::vector<uint64_t>> remote;
  for (int i = 0; i < p.sample_ids_size(); ++i) {
    if (p.sources(i) == me)
      local.push_back(p.sample_ids(i));
    else
      remote[p.sources(i)].push_back(p.sample_ids(i));
  }
  std::future<Fetched> fut;
  const uint64_t edges_at_start = exchange_edges_.load();
  int64_t t0 = clock_->NowMicros();
  if (!remote.empty()) {
    if (!peers_) {
      out.status = FailedPrecondition("partition needs peer reads but no peer client is configured");
      return out;
    }
    if (p.decoded_from_size() > 0 && preprocess_ == nullptr) {
      out.status = FailedPrecondition(
          fmt::format("partition {} has samples served decoded but this agent has no preprocessing stage to "
                      "spot-check them",
                      p.id()));
      return out;
    }
    std::vector<int32_t> decoded;
    std::map<int32_t, int64_t> served_before;  // SpotCheck probation
    {
      std::lock_guard lock(decoded_mu_);
      for (int32_t h : p.decoded_from()) {
        if (remote.count(h) == 0) continue;
        decoded.push_back(h);
        served_before[h] = decoded_served_by_[h];
      }
    }
    // The task owns what it reads: unlike std::async's, a packaged_task's
    // future does not wait for it if Read leaves early. The spot check's
    // records are asked for only once the decoded replies are in.
    std::packaged_task<Fetched()> fetch([peers = peers_, id = p.id(), me, remote, decoded, served_before,
                                         epoch = p.epoch(), check = spot_check_] {
      Fetched f;
      f.results = decoded.empty() ? peers->FetchAll(id, me, remote)
                                  : peers->FetchAllDecoded(id, me, remote, decoded, epoch);
      for (int32_t h : decoded) {
        auto r = f.results.find(h);
        if (r == f.results.end() || !r->second.status.ok()) continue;
        int64_t n = served_before.at(h);
        for (uint64_t s : remote.at(h))
          if (check.Checks(epoch, s, n++)) f.spot_ids[h].push_back(s);
        f.decoded_received[h] = static_cast<int64_t>(remote.at(h).size());
      }
      if (!f.spot_ids.empty()) f.spot = peers->FetchAll(id, me, f.spot_ids);
      return f;
    });
    fut = fetch.get_future();
    boost::asio::post(*fetch_thread_, std::move(fetch));
  }
  std::unordered_map<uint64_t, cache::Sample> got;
  std::shared_ptr<const cache::Manifest> manifest = guard_ != nullptr ? guard_->manifest() : nullptr;
  Status first_error;
  // Decoded (header, CRC, id checked) straight from RocksDB's pinned
  // values: no intermediate copy of each record.
  std::vector<StatusOr<cache::Sample>> recs = cache_->MultiGet(local);
  int64_t local_bytes = 0;
  got.reserve(static_cast<size_t>(p.sample_ids_size()));
  for (size_t i = 0; i < recs.size(); ++i) {
    if (!recs[i].ok()) {
      if (recs[i].status().code() == StatusCode::kDataLoss) out.bad_samples.push_back(local[i]);
      if (first_error.ok())
        first_error = recs[i].status().WithContext(fmt::format("local sample {}", local[i]));
      continue;
    }
    local_bytes += static_cast<int64_t>(recs[i]->payload.size() + cache::kRecordHeaderBytes +
                                        cache::kRecordTrailerBytes);
    got[local[i]] = std::move(recs[i]).value();
  }
  if (disk_ms_per_sample_ > 0 && !local.empty()) {
    const int64_t until = t0 + std::llround(static_cast<double>(local.size()) * disk_ms_per_sample_ * 1000.0);
    if (const int64_t now = clock_->NowMicros(); until > now) disk_sleep_.Sleep(until - now);
  } else if (disk_ms_per_byte_ > 0 && !local.empty()) {
    int64_t payload_bytes = 0;
    for (const auto& [id, s] : got) payload_bytes += static_cast<int64_t>(s.payload.size());
    const int64_t until = t0 + std::llround(static_cast<double>(payload_bytes) * disk_ms_per_byte_ * 1000.0);
    if (const int64_t now = clock_->NowMicros(); until > now) disk_sleep_.Sleep(until - now);
  }
  double local_ms = static_cast<double>(clock_->NowMicros() - t0) / 1000.0;
  auto* t = &out.timings;
  t->set_local_read_ms(local_ms);
  t->set_local_samples(static_cast<int64_t>(local.size()));
  t->set_local_bytes(local_bytes);
  if (fut.valid()) {
    Fetched fetched = fut.get();
    {
      std::lock_guard lock(decoded_mu_);
      for (const auto& [h, n] : fetched.decoded_received) decoded_served_by_[h] += n;
    }
    double remote_ms = static_cast<double>(clock_->NowMicros() - t0) / 1000.0;
    TakeRemote(remote, fetched, manifest.get(), got, out, first_error);
    t->set_remote_read_ms(remote_ms);
    metrics_->partition_ms->WithLabels({"remote_read"}).Observe(remote_ms);
  }
  metrics_->partition_ms->WithLabels({"local_read"}).Observe(local_ms);
  t->set_read_during_exchange((edges_at_start & 1) != 0 || exchange_edges_.load() != edges_at_start);
  if (!first_error.ok()) {
    out.status = first_error;
    return out;
  }
  out.batch.samples.reserve(static_cast<size_t>(p.sample_ids_size()));
  // Distinct ids (the usual case): each sample is moved, not copied.
  const bool distinct = got.size() == static_cast<size_t>(p.sample_ids_size());
  for (uint64_t id : p.sample_ids()) out.batch.samples.push_back(distinct ? std::move(got[id]) : got[id]);
  if (preprocess_ != nullptr) Preprocess(out);
  return out;
}

std::map<int32_t, PeerFetchResult> PeerClient::FetchAllDecoded(
    uint64_t partition_id, int32_t requester, const std::map<int32_t, std::vector<uint64_t>>& ids_by_peer,
    const std::vector<int32_t>& decoded_peers, int64_t epoch) {
  (void)epoch;
  std::map<int32_t, std::vector<uint64_t>> records;
  for (const auto& [peer, ids] : ids_by_peer)
    if (std::find(decoded_peers.begin(), decoded_peers.end(), peer) == decoded_peers.end())
      records[peer] = ids;
  auto out =
      records.empty() ? std::map<int32_t, PeerFetchResult>{} : FetchAll(partition_id, requester, records);
  for (int32_t peer : decoded_peers) {
    if (ids_by_peer.count(peer) == 0) continue;
    out[peer].status =
        Unimplemented(fmt::format("this peer client cannot fetch decoded samples (peer {})", peer));
  }
  return out;
}

bool SpotCheck::Checks(int64_t epoch, uint64_t id) const {
  if (every <= 1) return true;
  const uint64_t h = Mix64(Mix64(Mix64(Mix64(salt) ^ seed) ^ static_cast<uint64_t>(epoch)) ^ id);
  return h % static_cast<uint64_t>(every) == 0;
}

namespace {

// One record from a peer checked for its CRC and sample id: the sample, or
// nullopt with the error kept in `first_error` (and a corrupt record's id
// in bad_samples, reported like a local corrupt record).
std::optional<cache::Sample> CheckedRecord(uint64_t id, const auto& record, int32_t peer, ReadPartition& out,
                                           Status& first_error) {
  auto s = cache::DecodeRecord(id, record);
  if (s.ok()) return std::move(s).value();
  if (s.status().code() == StatusCode::kDataLoss) out.bad_samples.push_back(id);
  if (first_error.ok()) first_error = s.status().WithContext(fmt::format("record from peer {}", peer));
  return std::nullopt;
}

}  // namespace

void PartitionRunner::CountPoisoned(ReadPartition& out, int32_t peer) {
  ++out.poisoned[peer];
  metrics_->poisoned_samples->WithLabels({std::to_string(peer)}).Increment();
}

void PartitionRunner::TakeRemote(const std::map<int32_t, std::vector<uint64_t>>& remote, Fetched& f,
                                 const cache::Manifest* manifest,
                                 std::unordered_map<uint64_t, cache::Sample>& got, ReadPartition& out,
                                 Status& first_error) {
  auto* t = &out.timings;
  const v1::Partition& p = out.partition;
  const size_t dim = preprocess_ != nullptr ? static_cast<size_t>(preprocess_->options().input_size()) : 0;
  int64_t remote_bytes = 0, remote_samples = 0, decoded_bytes = 0, decoded_samples = 0;
  for (const auto& [peer, ids] : remote) {
    auto it = f.results.find(peer);
    if (it == f.results.end()) {
      if (first_error.ok()) first_error = Internal(fmt::format("no fetch result for peer {}", peer));
      continue;
    }
    PeerFetchResult& r = it->second;
    const bool decoded =
        std::find(p.decoded_from().begin(), p.decoded_from().end(), peer) != p.decoded_from().end();
    (*t->mutable_remote_read_ms_by_peer())[peer] = r.ms;
    if (!r.status.ok()) {
      // Records the peer found corrupt in its own cache, or (decoded) that
      // did not decode there (ids of this group only): reported like a
      // local corrupt record or decode failure.
      for (uint64_t id : r.bad_samples)
        if (std::find(ids.begin(), ids.end(), id) != ids.end()) out.bad_samples.push_back(id);
      if (first_error.ok()) first_error = r.status.WithContext(fmt::format("fetch from peer {}", peer));
      continue;
    }
    if (r.records.size() != ids.size()) {
      if (first_error.ok()) {
        first_error = DataLoss(
            fmt::format("peer {} returned {} records for {} ids", peer, r.records.size(), ids.size()));
      }
      continue;
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      // CRC + sample id: a corrupt or misplaced record fails the partition.
      std::optional<cache::Sample> s = CheckedRecord(ids[i], r.records[i], peer, out, first_error);
      if (!s) break;
      if (decoded) {
        // The model input: no manifest digest covers it (the spot check
        // below does); a wrong size is a forgery.
        if (s->payload.size() != dim) {
          CountPoisoned(out, peer);
          if (first_error.ok())
            first_error = DataLoss(fmt::format("peer {} served sample {} decoded as {} bytes, expected {}",
                                               peer, ids[i], s->payload.size(), dim));
          continue;
        }
        out.decoded.insert(ids[i]);
        decoded_bytes += static_cast<int64_t>(r.records[i].size());
        ++decoded_samples;
      } else if (manifest != nullptr) {
        // Manifest: a forged label or payload (valid CRC) is refused and the
        // peer reported; every forged sample of the group is counted.
        if (Status ms = CheckAgainstManifest(*manifest, *s, peer); !ms.ok()) {
          CountPoisoned(out, peer);
          if (first_error.ok()) first_error = ms;
          continue;
        }
      }
      got[ids[i]] = std::move(*s);
      remote_bytes += static_cast<int64_t>(r.records[i].size());
      ++remote_samples;
    }
    metrics_->fetched_bytes->WithLabels({std::to_string(peer)}).Increment(static_cast<double>(r.bytes));
  }
  if (!f.spot_ids.empty()) VerifySpotChecks(f, manifest, got, out, first_error);
  t->set_remote_samples(remote_samples);
  t->set_remote_bytes(remote_bytes);
  t->set_remote_decoded_samples(decoded_samples);
  t->set_remote_decoded_bytes(decoded_bytes);
}

void PartitionRunner::VerifySpotChecks(Fetched& f, const cache::Manifest* manifest,
                                       std::unordered_map<uint64_t, cache::Sample>& got, ReadPartition& out,
                                       Status& first_error) {
  const int64_t t0 = clock_->NowMicros();
  const auto dim = static_cast<size_t>(preprocess_->options().input_size());
  auto poisoned = [&](int32_t peer, uint64_t id, const std::string& what) {
    CountPoisoned(out, peer);
    got.erase(id);  // not used
    out.decoded.erase(id);
    if (first_error.ok())
      first_error = DataLoss(fmt::format("spot check: peer {} served sample {} decoded {}", peer, id, what));
  };
  // The records, checked like any peer record; then preprocessed here.
  std::vector<std::pair<int32_t, uint64_t>> checked;
  std::vector<cache::Sample> records;
  for (const auto& [peer, ids] : f.spot_ids) {
    PeerFetchResult& r = f.spot[peer];
    if (!r.status.ok() || r.records.size() != ids.size()) {
      if (first_error.ok())
        first_error = (r.status.ok() ? DataLoss("wrong record count") : r.status)
                          .WithContext(fmt::format("spot-check records from peer {}", peer));
      continue;
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      std::optional<cache::Sample> s = CheckedRecord(ids[i], r.records[i], peer, out, first_error);
      if (!s) continue;
      if (manifest != nullptr) {
        if (Status ms = CheckAgainstManifest(*manifest, *s, peer); !ms.ok()) {
          poisoned(peer, ids[i], "and its record does not match the dataset manifest");
          continue;
        }
      }
      checked.emplace_back(peer, ids[i]);
      records.push_back(std::move(*s));
    }
  }
  std::vector<uint8_t> levels(records.size() * dim);
  std::vector<Status> statuses(records.size());
  std::vector<preprocess::PreprocessItem> items(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    items[i].id = records[i].id;
    items[i].epoch = out.partition.epoch();
    items[i].payload = records[i].payload;
    items[i].status = &statuses[i];
    items[i].bytes = std::span<uint8_t>(levels).subspan(i * dim, dim);
  }
  (void)preprocess_->Run(items);  // each item's own status below
  for (size_t i = 0; i < records.size(); ++i) {
    const auto [peer, id] = checked[i];
    auto g = got.find(id);
    if (g == got.end()) continue;  // refused above already
    if (!statuses[i].ok()) {
      // The genuine record (manifest) does not decode: the holder sent a
      // decoded sample it cannot have made.
      poisoned(peer, id, "but its record does not decode (" + statuses[i].ToString() + ")");
      continue;
    }
    const std::span<const uint8_t> mine = std::span<const uint8_t>(levels).subspan(i * dim, dim);
    int64_t differ = 0;
    for (size_t k = 0; k < dim; ++k) differ += mine[k] != g->second.payload[k];
    if (differ > 0 || g->second.label != records[i].label) {
      poisoned(peer, id,
               fmt::format("with {} of {} levels (label {}, record's {}) differing from its record "
                           "preprocessed here",
                           differ, dim, g->second.label, records[i].label));
    }
  }
  out.timings.set_spot_checked_samples(static_cast<int64_t>(records.size()));
  out.timings.set_preprocess_ms(static_cast<double>(clock_->NowMicros() - t0) / 1000.0);
}

void PartitionRunner::Preprocess(ReadPartition& out) {
  const int64_t t0 = clock_->NowMicros();
  std::vector<cache::Sample>& samples = out.batch.samples;
  const auto dim = static_cast<size_t>(preprocess_->options().input_size());
  out.batch.inputs.resize(samples.size() * dim);
  std::vector<Status> statuses(samples.size());
  std::vector<preprocess::PreprocessItem> items;
  items.reserve(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    const std::span<float> input = std::span<float>(out.batch.inputs).subspan(i * dim, dim);
    if (out.decoded.count(samples[i].id) != 0) {
      // Served decoded: the holder's levels are the input (same floats as
      // preprocessing here, preprocess/preprocessor.h "quantise").
      statuses[i] = preprocess::DequantiseInputs(samples[i].payload, input);
      continue;
    }
    items.push_back(preprocess::PreprocessItem{samples[i].id, out.partition.epoch(), samples[i].payload,
                                               input, &statuses[i]});
  }
  Status st = items.empty() ? OkStatus() : preprocess_->Run(items);
  for (size_t i = 0; i < samples.size() && st.ok(); ++i)
    if (!statuses[i].ok()) st = statuses[i];
  const double ms = static_cast<double>(clock_->NowMicros() - t0) / 1000.0;
  metrics_->partition_ms->WithLabels({"preprocess"}).Observe(ms);
  // The spot check's preprocessing (VerifySpotChecks) counts too.
  out.timings.set_preprocess_ms(out.timings.preprocess_ms() + ms);
  if (st.ok()) return;
  // A record that passed its CRC but does not decode: the sample is bad,
  // as a corrupt record is (PartitionFailed.bad_samples), and the
  // partition fails; the scheduler re-plans its other samples.
  for (size_t i = 0; i < samples.size(); ++i) {
    if (statuses[i].code() == StatusCode::kDataLoss &&
        std::find(out.bad_samples.begin(), out.bad_samples.end(), samples[i].id) == out.bad_samples.end())
      out.bad_samples.push_back(samples[i].id);
  }
  out.status = st.WithContext("preprocess");
  out.batch.inputs.clear();
}

v1::Envelope PartitionRunner::Finish(ReadPartition read, Trainer* trainer, int32_t me) {
  v1::Envelope env;
  env.set_protocol_version(kProtocolVersion);
  const v1::Partition& p = read.partition;
  Status st = read.status;
  // A round-ending step (its compute, then the exchange): an exchange
  // window for the reads running meanwhile (read_during_exchange).
  struct ExchangeWindow {
    std::atomic<uint64_t>* edges;
    explicit ExchangeWindow(std::atomic<uint64_t>* e) : edges(e) {
      if (edges != nullptr) edges->fetch_add(1);
    }
    ~ExchangeWindow() {
      if (edges != nullptr) edges->fetch_add(1);
    }
    ExchangeWindow(const ExchangeWindow&) = delete;
    ExchangeWindow& operator=(const ExchangeWindow&) = delete;
  } window(p.local_step() ? nullptr : &exchange_edges_);
  if (st.ok()) {
    int64_t t0 = clock_->NowMicros();
    auto loss = trainer->Compute(read.batch);
    double ms = static_cast<double>(clock_->NowMicros() - t0) / 1000.0;
    if (auto reported = trainer->ReportedComputeMs()) ms = *reported;
    read.timings.set_compute_ms(ms);
    metrics_->partition_ms->WithLabels({"compute"}).Observe(ms);
    if (!loss.ok()) st = loss.status().WithContext("compute");
    if (auto rep = trainer->TakeReport()) {
      // compute_ms is the worker's own work: the all-reduce (which also
      // holds the wait for the ring's slowest member) is reported apart,
      // so the scheduler's compute cost model does not fit the ring's wait.
      read.timings.set_compute_ms(std::max(0.0, ms - rep->allreduce_ms()));
      *read.timings.mutable_training() = std::move(*rep);
    }
  } else {
    trainer->Skip(p.view(), p.iteration(), p.local_step());
  }
  if (!st.ok()) {
    auto* f = env.mutable_partition_failed();
    f->set_partition_id(p.id());
    f->set_attempt(p.attempt());
    f->set_node(me);
    f->set_reason(st.ToString());
    for (uint64_t id : read.bad_samples) f->add_bad_samples(id);
    if (!read.bad_samples.empty())
      spdlog::error("partition {}: {} stored records failed their check (first: sample {}); reported", p.id(),
                    read.bad_samples.size(), read.bad_samples.front());
    for (const auto& [peer, n] : read.poisoned) {
      f->add_poisoned_by(peer);
      f->add_poisoned_samples(n);
      spdlog::warn(
          "partition {}: peer {} served {} samples that do not match the dataset manifest (or, "
          "decoded, failed the spot check); reported",
          p.id(), peer, n);
    }
    metrics_->partitions->WithLabels({"failed"}).Increment();
    spdlog::warn("partition {} failed: {}", p.id(), st.ToString());
    return env;
  }
  auto* d = env.mutable_partition_done();
  d->set_partition_id(p.id());
  d->set_attempt(p.attempt());
  d->set_node(me);
  *d->mutable_timings() = std::move(read.timings);
  metrics_->partitions->WithLabels({"done"}).Increment();
  return env;
}

}  // namespace loft::agent
