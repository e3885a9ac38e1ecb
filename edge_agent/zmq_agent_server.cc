#include "edge_agent/zmq_agent_server.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <optional>
#include <random>
#include <zmq.hpp>

#include "cache/sample_cache.h"
#include "core/cluster_spec.h"
#include "core/curve.h"
#include "core/metrics_http.h"
#include "core/read_ahead.h"
#include "core/zmq_util.h"
#include "edge_agent/agent_service.h"
#include "edge_agent/cache_check.h"
#include "edge_agent/decoded_server.h"
#include "edge_agent/external_trainer.h"
#include "edge_agent/link_emulator.h"
#include "edge_agent/model_trainer.h"
#include "edge_agent/partition_pipeline.h"
#include "edge_agent/peer_fetcher.h"
#include "edge_agent/ring_member.h"
#include "edge_agent/trainer.h"
#include "preprocess/jpeg_codec.h"
#include "preprocess/preprocess_pool.h"

namespace loft::agent {
namespace fs = std::filesystem;

struct ZmqAgentServer::Impl {
  AgentConfig cfg;
  Clock* clock = nullptr;
  AgentMetrics metrics;
  std::unique_ptr<cache::SampleCache> cache;
  ComputeSpec compute;
  LinkSpec link;
  v1::CacheSummary summary;

  // Declaration order = reverse destruction order: sockets close before
  // the ZAP handler stops, and both before the context terminates.
  zmq::context_t ctx{1};
  std::unique_ptr<ZapAuthenticator> zap;
  std::optional<CurveKeyPair> own;
  zmq::socket_t peer_sock;
  zmq::socket_t sched_sock;
  bool has_scheduler = false;
  std::string advertised;

  std::unique_ptr<AgentService> service;
  std::unique_ptr<TokenBucket> up, down;
  std::unique_ptr<PeerFetcher> fetcher;
  // The preprocessing stage (dataset.encoding jpeg, or an augment); the
  // runner borrows it, so it is declared (and outlives it) before.
  std::unique_ptr<preprocess::PreprocessPool> preprocess;
  // Serves decoded fetches on its threads (with `service` and the pool
  // above, which it borrows and so outlive it); the poll loop sends its
  // replies.
  std::unique_ptr<DecodedServer> decoded;
  std::unique_ptr<PartitionRunner> runner;
  SampleGuard guard;  // the dataset manifest from the scheduler
  std::unique_ptr<Trainer> trainer;
  std::unique_ptr<MetricsHttpServer> http;

  std::atomic<bool> stop{false};
  Status fatal;                           // set by ServeScheduler when the agent must stop (a new job)
  std::atomic<bool> trainer_stop{false};  // ends a trainer's ring waits early at shutdown
  // Declared last: its threads use the members above and stop first.
  std::unique_ptr<PartitionPipeline> pipeline;

  ~Impl() { StopThreads(); }

  void StopThreads() {
    trainer_stop = true;
    if (decoded) decoded->Stop();
    if (pipeline) pipeline->Stop();
  }

  void SendToScheduler(const v1::Envelope& env) {
    if (!has_scheduler) return;
    Status st = SendEnvelope(sched_sock, env, /*dontwait=*/true);
    if (!st.ok()) {
      metrics.rejected_frames->WithLabels({"scheduler", "send_failed"}).Increment();
      spdlog::warn("cannot send {} to the scheduler: {}", BodyName(env), st.ToString());
    }
  }

  struct SharedRecords {
    cache::RecordBatch batch;
    std::atomic<int64_t> refs;
    static void Release(void* /*data*/, void* hint) {
      auto* self = static_cast<SharedRecords*>(hint);
      if (self->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete self;
    }
  };

  void ServePeer() {
    for (int n = 0; n < 256; ++n) {
      auto frames = RecvMultipart(peer_sock, /*dontwait=*/true, /*max_frames=*/8);
      if (!frames.ok()) {
        metrics.rejected_frames->WithLabels({"peer", "too_many_frames"}).Increment();
        continue;
      }
      if (frames->empty()) return;
      if (frames->size() < 2) {
        metrics.rejected_frames->WithLabels({"peer", "empty"}).Increment();
        continue;  // only a routing id: nothing to answer
      }
      auto& f = (*frames)[1];
      std::string user = FrameProperty(f, "User-Id");
      PeerReply reply = service->HandlePeer(std::string_view(static_cast<const char*>(f.data()), f.size()),
                                            frames->size() - 2, user);
      if (reply.decoded) {
        // Preprocessing waits for the pool: it runs on the decoded server's
        // threads, and its reply comes back through SendDecodedReplies.
        if (decoded) {
          decoded->Submit((*frames)[0].to_string(), std::move(*reply.decoded));
          continue;
        }
        reply = service->ServeDecoded(*reply.decoded);
      }
      SendPeerReply(std::move((*frames)[0]), std::move(reply));
    }
  }

  // The replies the decoded server has finished, to their requesters.
  void SendDecodedReplies() {
    if (!decoded) return;
    for (DecodedServer::Finished& d : decoded->TakeFinished()) {
      SendPeerReply(zmq::message_t(d.route.data(), d.route.size()), std::move(d.reply));
    }
  }

  // Sends `reply` on the peer ROUTER to `route` (poll thread only). A
  // requester that has gone: the send fails (ROUTER_MANDATORY) and is counted.
  void SendPeerReply(zmq::message_t route, PeerReply reply) {
    std::vector<zmq::message_t> out;
    out.reserve(reply.records.size() + 2);
    out.push_back(std::move(route));
    auto header = EnvelopeFrame(reply.header);
    if (!header.ok()) {
      spdlog::error("cannot encode a peer reply: {}", header.status().ToString());
      return;
    }
    out.push_back(std::move(*header));
    const int64_t bytes = reply.records.bytes();
    if (!reply.records.empty()) {
      // The record frames point into the batch's one buffer (no copy per
      // record); the last frame ZeroMQ releases frees it.
      auto* shared = new SharedRecords{std::move(reply.records), {}};
      shared->refs.store(static_cast<int64_t>(shared->batch.size()));
      for (size_t k = 0; k < shared->batch.size(); ++k) {
        const std::string_view r = shared->batch[k];
        out.emplace_back(const_cast<char*>(r.data()), r.size(), &SharedRecords::Release, shared);
      }
    }
    if (up && bytes > 0) up->Acquire(bytes);  // emulated uplink
    Status st = SendMultipart(peer_sock, out, /*dontwait=*/true);
    if (!st.ok()) metrics.rejected_frames->WithLabels({"peer", "send_failed"}).Increment();
  }

  // Returns true when a Shutdown arrived.
  bool ServeScheduler(int64_t* last_heard_us) {
    bool shutdown = false;
    for (int n = 0; n < 256; ++n) {
      auto frames = RecvMultipart(sched_sock, /*dontwait=*/true, 8);
      if (!frames.ok()) {
        metrics.rejected_frames->WithLabels({"scheduler", "too_many_frames"}).Increment();
        continue;
      }
      if (frames->empty()) break;
      *last_heard_us = clock->NowMicros();
      auto& f = (*frames)[0];
      SchedulerEffects fx = service->HandleScheduler(
          std::string_view(static_cast<const char*>(f.data()), f.size()), frames->size() - 1);
      for (const auto& e : fx.to_scheduler) SendToScheduler(e);
      if (fx.credits_to_return > 0) SendToScheduler(service->MakeCreditGrant(fx.credits_to_return));
      // Tell the scheduler at once that the registration (its view, the
      // dataset manifest) arrived: it starts the job only then, so that no
      // peer fetches from this node before it knows the view.
      if (fx.registered && fx.new_job.empty() && service->node() >= 0)
        SendToScheduler(service->MakeHeartbeat());
      pipeline->Enqueue(std::move(fx.run));
      shutdown = shutdown || fx.shutdown;
      if (!fx.new_job.empty()) {
        fatal = FailedPrecondition(fx.new_job);
        break;
      }
    }
    return shutdown;
  }

  // Create's phases, in the order it runs them:
  // Opens the cache and fills `summary` from its scan (which also warms the block cache).
  StatusOr<cache::CacheStats> OpenCache();
  // The insecure-endpoint check, or the CURVE keys and the ZAP handler; the scheduler's public key.
  StatusOr<std::string> SetUpSecurity();
  // Binds the peer ROUTER (sets `advertised`) and connects the scheduler DEALER.
  Status OpenSockets(const std::string& scheduler_public);
  // The node's up and down link buckets and the ring's link emulation.
  RingLinkEmulation SetUpLinkEmulation(const ClusterSpec& spec, int idx);
  // The agent service's options: its limits, the manifest, Byzantine serving, the view callbacks.
  StatusOr<AgentServiceOptions> ServiceOptions(const ClusterSpec& spec, int idx, ModelTrainer* model_trainer,
                                               ExternalRing* external_ring);
  // The peer fetcher and the partition runner, with their link and disk
  // emulation and the preprocessing stage; `largest_record`: the largest
  // record this node's cache holds.
  Status MakeFetcherAndRunner(const ClusterSpec& spec, int idx, int64_t largest_record);
  // The trainer of compute_mode external (the consumer's ROUTER), if the config asks for it.
  Status MakeExternalTrainer(std::unique_ptr<ExternalRing> external_ring);

  void FlushReports() {
    for (const auto& r : pipeline->TakeReports()) {
      SendToScheduler(r);
      if (std::optional<v1::Envelope> grant = service->ReportSent(r)) SendToScheduler(*grant);
    }
  }
};

ZmqAgentServer::ZmqAgentServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ZmqAgentServer::~ZmqAgentServer() = default;

StatusOr<cache::CacheStats> ZmqAgentServer::Impl::OpenCache() {
  cache::CacheOptions copts;
  copts.create_if_missing = false;
  LOFT_ASSIGN_OR_RETURN(copts.block_cache_kind, cache::ParseBlockCacheKind(cfg.block_cache));
  LOFT_ASSIGN_OR_RETURN(cache, cache::SampleCache::Open(cfg.cache_dir, copts));
  // The scan also warms the block cache: no first-epoch read pays a block's
  // load and decompression (under a testbed CPU quota, several ms).
  LOFT_ASSIGN_OR_RETURN(cache::CacheStats stats, cache->Stats(/*warm=*/true));
  summary.set_samples(stats.samples);
  summary.set_bytes(stats.bytes);
  if (!stats.label_counts.empty()) {
    for (int l = 0; l <= stats.label_counts.rbegin()->first; ++l) {
      auto it = stats.label_counts.find(l);
      summary.add_label_counts(it == stats.label_counts.end() ? 0 : it->second);
    }
  }
  if (stats.corrupt > 0)
    spdlog::warn("cache {} holds {} corrupt records; they will never be served", cfg.cache_dir,
                 stats.corrupt);
  return stats;
}

StatusOr<std::string> ZmqAgentServer::Impl::SetUpSecurity() {
  std::string scheduler_public;
  if (cfg.insecure) {
    std::vector<std::string> eps{cfg.peer_bind};
    if (!cfg.scheduler_endpoint.empty()) eps.push_back(cfg.scheduler_endpoint);
    if (!cfg.peer_advertise.empty()) eps.push_back(cfg.peer_advertise);
    LOFT_RETURN_IF_ERROR(CheckInsecureAllowed(eps));
  } else {
    LOFT_ASSIGN_OR_RETURN(auto allowed, ReadCurveAllowList(cfg.keys_dir));
    LOFT_ASSIGN_OR_RETURN(CurveKeyPair own_pair,
                          ReadCurveKeyPair((fs::path(cfg.keys_dir) / (cfg.node_name + ".key")).string()));
    own = own_pair;
    if (!cfg.scheduler_endpoint.empty()) {
      LOFT_ASSIGN_OR_RETURN(scheduler_public,
                            ReadCurvePublicKey((fs::path(cfg.keys_dir) / "scheduler.pub").string()));
    }
    LOFT_ASSIGN_OR_RETURN(zap, ZapAuthenticator::Start(ctx, std::move(allowed)));
  }
  return scheduler_public;
}

Status ZmqAgentServer::Impl::OpenSockets(const std::string& scheduler_public) {
  // Peer ROUTER.
  SocketOptions po;
  // It accepts only FetchRequests of at most 4,096 ids (~40 KB encoded):
  // a peer may send at most 128 KiB per message and queue 256 of them.
  po.max_message_bytes = std::min<size_t>(static_cast<size_t>(cfg.max_message_bytes), 128u << 10);
  po.recv_hwm = 256;
  if (own) {
    po.curve_own = own;
    po.curve_server = true;
  }
  LOFT_ASSIGN_OR_RETURN(peer_sock, MakeSocket(ctx, zmq::socket_type::router, po));
  LOFT_RETURN_IF_ERROR(Bind(peer_sock, cfg.peer_bind));
  LOFT_ASSIGN_OR_RETURN(std::string bound, LastEndpoint(peer_sock));
  advertised = cfg.peer_advertise.empty() ? bound : cfg.peer_advertise;
  if (advertised.find("0.0.0.0") != std::string::npos || advertised.find("*") != std::string::npos) {
    return InvalidArgument("peer_bind " + cfg.peer_bind +
                           " is a wildcard; set peer_advertise to an address peers can reach");
  }

  // Scheduler DEALER.
  if (!cfg.scheduler_endpoint.empty()) {
    SocketOptions so;
    so.max_message_bytes = static_cast<size_t>(cfg.max_message_bytes);
    // Unique and secret per connection (core/zmq_util.h): with the bare
    // node name as routing id, any listed key claiming it took this
    // agent's connection (and its assignments) at the scheduler.
    so.routing_id = UniqueRoutingId(cfg.node_name);
    so.tos = cfg.request_tos;  // control traffic: ahead of bulk records where queues honour it
    if (own) {
      so.curve_own = own;
      so.curve_server_public = scheduler_public;
    }
    LOFT_ASSIGN_OR_RETURN(sched_sock, MakeSocket(ctx, zmq::socket_type::dealer, so));
    LOFT_RETURN_IF_ERROR(Connect(sched_sock, cfg.scheduler_endpoint));
    has_scheduler = true;
  }
  return OkStatus();
}

RingLinkEmulation ZmqAgentServer::Impl::SetUpLinkEmulation(const ClusterSpec& spec, int idx) {
  // The node's link emulation: one up and one down bucket for everything
  // the node sends and receives (peer records, ring messages).
  RingLinkEmulation ring_link;
  if (cfg.link_emulation) {
    if (cfg.link_rate_emulation) {
      down = MakeLinkBucket(clock, spec.network, link.down_mbps);
      up = MakeLinkBucket(clock, spec.network, link.up_mbps);
    }
    ring_link.clock = clock;
    ring_link.up = up.get();
    ring_link.down = down.get();
    ring_link.self = idx;
    for (const NodeSpec& n : spec.nodes) {
      ring_link.up_mbps.push_back(n.link.up_mbps);
      ring_link.latency_ms.push_back(n.link.latency_ms);
    }
  }
  return ring_link;
}

StatusOr<AgentServiceOptions> ZmqAgentServer::Impl::ServiceOptions(const ClusterSpec& spec, int idx,
                                                                   ModelTrainer* model_trainer,
                                                                   ExternalRing* external_ring) {
  AgentServiceOptions so;
  so.node_name = cfg.node_name;
  so.peer_endpoint = advertised;
  so.credits = cfg.credits;
  so.max_message_bytes = static_cast<size_t>(cfg.max_message_bytes);
  so.max_grants = static_cast<size_t>(cfg.max_grants);
  so.authenticated = own.has_value();
  so.guard = &guard;
  if (!cfg.manifest.empty()) {
    LOFT_ASSIGN_OR_RETURN(cache::Manifest local, cache::ReadManifestFile(cfg.manifest));
    if (local.size() != spec.dataset.samples) {
      return InvalidArgument(fmt::format("manifest {} covers {} samples, the spec's dataset has {}",
                                         cfg.manifest, local.size(), spec.dataset.samples));
    }
    spdlog::info("dataset manifest file {}: {} samples, root {}", cfg.manifest, local.size(),
                 local.RootHex());
    so.local_manifest = std::make_shared<const cache::Manifest>(std::move(local));
  }
  so.poison_serve = spec.nodes[idx].byzantine == ByzantineKind::kPoisonServe;
  so.poison_decoded = spec.nodes[idx].byzantine == ByzantineKind::kPoisonDecoded;
  if (so.poison_serve)
    spdlog::warn(
        "BYZANTINE poison_serve: this node serves label-flipped records with valid CRCs to its peers");
  if (model_trainer != nullptr) {
    so.ring_endpoint = cfg.ring_advertise.empty() ? model_trainer->ring_endpoint() : cfg.ring_advertise;
    so.on_view = [model_trainer](const v1::MembershipView& v) { model_trainer->OnView(v); };
  }
  if (external_ring != nullptr) {
    ExternalRing* ring = external_ring;
    so.ring_endpoint = cfg.ring_advertise.empty() ? ring->ring_endpoint() : cfg.ring_advertise;
    so.on_view = [ring](const v1::MembershipView& v) { ring->OnView(v); };
  }
  // Every view also connects the peer fetcher to the members it has no
  // connection to yet (PeerFetcher::Warm: the handshakes run before the
  // first fetch needs them).
  {
    auto trainer_on_view = std::move(so.on_view);
    Impl* mp = this;
    const auto self = static_cast<int32_t>(idx);
    so.on_view = [trainer_on_view = std::move(trainer_on_view), mp, self](const v1::MembershipView& v) {
      if (trainer_on_view) trainer_on_view(v);
      if (mp->fetcher) mp->fetcher->Warm(v, self);
    };
  }
  {
    Impl* mp = this;
    so.peers_ready = [mp](const std::vector<int32_t>& nodes) {
      return mp->fetcher ? mp->fetcher->HandshakenAmong(nodes) : 0;
    };
  }
  return so;
}

Status ZmqAgentServer::Impl::MakeFetcherAndRunner(const ClusterSpec& spec, int idx, int64_t largest_record) {
  PeerFetcherOptions fo;
  fo.max_message_bytes = static_cast<size_t>(cfg.max_message_bytes);
  fo.fetch_batch = cfg.fetch_batch;
  fo.request_tos = cfg.request_tos;
  fo.max_frame_bytes =
      std::max<size_t>(fo.max_frame_bytes, static_cast<size_t>(spec.dataset.sample_bytes) +
                                               cache::kRecordHeaderBytes + cache::kRecordTrailerBytes);
  if (spec.dataset.encoding == DatasetEncoding::kJpeg) {
    // JPEG records vary in size and sample_bytes is the decoded input's:
    // a frame may hold the largest JPEG of an image_size² image (any
    // quality), or the largest record this node stores, whichever is more.
    const size_t bound = std::max<size_t>(preprocess::MaxJpegBytes(spec.dataset.image_size) +
                                              cache::kRecordHeaderBytes + cache::kRecordTrailerBytes,
                                          static_cast<size_t>(std::max<int64_t>(0, largest_record)));
    fo.max_frame_bytes = std::max(fo.max_frame_bytes, bound);
  }
  fo.timeout_ms = cfg.fetch_timeout_ms;
  fo.own_keys = own;
  fo.keys_dir = cfg.keys_dir;
  if (cfg.link_emulation && cfg.link_rate_emulation) {
    fo.down = down.get();
    fo.latency_ms = link.latency_ms;
    spdlog::info(
        "link EMULATION on: down {} Mbit/s, up {} Mbit/s, latency {} ms (token buckets on peer fetches and "
        "the ring all-reduce)",
        link.down_mbps, link.up_mbps, link.latency_ms);
  } else if (cfg.link_emulation) {
    fo.latency_ms = link.latency_ms;
    spdlog::info(
        "link EMULATION of latency only: {} ms per remote phase and ring message (rates are not emulated "
        "here)",
        link.latency_ms);
  }
  AgentService* svc = service.get();
  fetcher = std::make_unique<PeerFetcher>(&ctx, clock, fo, [svc](int32_t n) { return svc->PeerFor(n); });
  runner = std::make_unique<PartitionRunner>(clock, cache.get(), fetcher.get(), &metrics, &guard);
  if (cfg.disk_emulation && spec.dataset.encoding == DatasetEncoding::kJpeg) {
    // Records of varying size: the read lasts what its real bytes take.
    const double read_mbps = spec.nodes[idx].disk.read_mbps;
    const double ms_per_byte = 8.0 / (read_mbps * 1000.0);
    runner->EmulateDiskPerByte(ms_per_byte);
    spdlog::info("disk EMULATION on: {} Mbit/s, by the JPEG records' real sizes", read_mbps);
  } else if (cfg.disk_emulation) {
    const double read_mbps = spec.nodes[idx].disk.read_mbps;
    const double ms_per_sample = static_cast<double>(spec.dataset.sample_bytes) * 8.0 / (read_mbps * 1000.0);
    runner->EmulateDisk(ms_per_sample);
    spdlog::info("disk EMULATION on: {} Mbit/s, {:.4f} ms per {}-byte sample read locally", read_mbps,
                 ms_per_sample, spec.dataset.sample_bytes);
  }
  // The preprocessing stage: JPEG records must be decoded; raw ones only
  // when they are augmented (raw + none keeps the models' own scaling). An
  // external consumer takes the payloads themselves (Create refuses jpeg).
  if ((spec.dataset.encoding != DatasetEncoding::kRaw || spec.dataset.augment != AugmentKind::kNone) &&
      cfg.compute_mode != "external") {
    LOFT_ASSIGN_OR_RETURN(preprocess::PreprocessOptions po, preprocess::PreprocessOptions::FromSpec(spec));
    preprocess::PoolOptions pool;
    pool.threads = cfg.preprocess_threads;
    LOFT_ASSIGN_OR_RETURN(preprocess, preprocess::PreprocessPool::Create(po, pool));
    runner->SetPreprocess(preprocess.get());
    // Decoded serving (dataset.decode_placement auto): this agent decodes
    // for peers on the same pool, and spot-checks what peers decode for it
    // with a salt of its own (edge_agent/README.md "Decoded serving").
    if (service) {
      service->SetDecodePool(preprocess.get());
      AgentService* svc = service.get();
      LOFT_ASSIGN_OR_RETURN(decoded, DecodedServer::Create(&ctx, [svc](const v1::FetchRequest& req) {
                              return svc->ServeDecoded(req);
                            }));
    }
    SpotCheck check;
    check.seed = spec.training.seed;
    std::random_device rd;
    while (check.salt == 0) check.salt = (uint64_t{rd()} << 32) ^ rd();
    runner->SetSpotCheck(check);
    spdlog::info("preprocessing: dataset.encoding {}, augment {}, {} threads, into {}x{} model inputs",
                 DatasetEncodingName(spec.dataset.encoding), AugmentKindName(spec.dataset.augment),
                 pool.threads, po.input_width, po.input_height);
  }
  return OkStatus();
}

Status ZmqAgentServer::Impl::MakeExternalTrainer(std::unique_ptr<ExternalRing> external_ring) {
  if (cfg.compute_mode == "external") {
    // The consumer ROUTER has no CURVE: ipc:// or loopback tcp:// only.
    if (cfg.consumer_endpoint.rfind("ipc://", 0) != 0) {
      LOFT_RETURN_IF_ERROR(CheckInsecureAllowed({cfg.consumer_endpoint}).WithContext("consumer_endpoint"));
    }
    ExternalTrainerOptions eo;
    eo.endpoint = cfg.consumer_endpoint;
    eo.timeout_ms = cfg.consumer_timeout_ms;
    eo.max_message_bytes = static_cast<size_t>(cfg.max_message_bytes);
    eo.stop = &stop;
    eo.token = cfg.consumer_token;
    eo.ring = std::move(external_ring);
    eo.log_suppressed = metrics.log_suppressed;
    LOFT_ASSIGN_OR_RETURN(trainer, ExternalTrainer::Create(clock, std::move(eo)));
  } else if (!cfg.consumer_endpoint.empty()) {
    spdlog::warn("consumer_endpoint {} is only served with compute_mode external", cfg.consumer_endpoint);
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<ZmqAgentServer>> ZmqAgentServer::Create(const AgentConfig& cfg, Clock* clock,
                                                                 metrics::Registry* registry) {
  LOFT_RETURN_IF_ERROR(cfg.Validate());
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  m.cfg = cfg;
  m.clock = clock;
  LOFT_ASSIGN_OR_RETURN(m.metrics, AgentMetrics::Create(registry));

  LOFT_ASSIGN_OR_RETURN(ClusterSpec spec, LoadClusterSpecFile(cfg.cluster_spec));
  int idx = spec.FindNode(cfg.node_name);
  if (idx < 0) return NotFound("node '" + cfg.node_name + "' is not in cluster spec " + cfg.cluster_spec);
  // The preprocessing stage feeds the built-in trainers (and the synthetic
  // one); an external consumer still receives raw payloads.
  if (spec.dataset.encoding != DatasetEncoding::kRaw &&
      (cfg.compute_mode == "external" || spec.training.model == "external"))
    return Unimplemented(
        cfg.cluster_spec + ": dataset.encoding " + std::string(DatasetEncodingName(spec.dataset.encoding)) +
        " with compute_mode external / training.model external: the consumer (e.g. loft.torch) receives "
        "the stored payloads and does not decode JPEG yet; use encoding raw, or a built-in model (mlp, "
        "softmax)");
  m.compute = spec.nodes[idx].compute;
  m.link = spec.nodes[idx].link;

  LOFT_ASSIGN_OR_RETURN(cache::CacheStats stats, m.OpenCache());

  // Security.
  LOFT_ASSIGN_OR_RETURN(std::string scheduler_public, m.SetUpSecurity());

  // The cache must hold what the placement gives this node (cache_check.h).
  if (cfg.check_cache) {
    LOFT_RETURN_IF_ERROR(CheckCacheMatchesPlacement(spec, idx, cfg.cluster_spec, cfg.cache_dir, *m.cache,
                                                    stats.samples + stats.corrupt));
  }

  LOFT_RETURN_IF_ERROR(m.OpenSockets(scheduler_public));

  RingLinkEmulation ring_link = m.SetUpLinkEmulation(spec, idx);
  // Real training when the spec names a model (README "Training").
  LOFT_ASSIGN_OR_RETURN(RingMember member,
                        MakeRingMember(spec, idx, cfg, &m.ctx, m.own, ring_link, &m.trainer_stop));
  ModelTrainer* model_trainer = member.model.get();
  std::unique_ptr<ExternalRing> external_ring = std::move(member.external);  // the consumer's model
  if (member.model) m.trainer = std::move(member.model);

  LOFT_ASSIGN_OR_RETURN(AgentServiceOptions so,
                        m.ServiceOptions(spec, idx, model_trainer, external_ring.get()));
  m.service = std::make_unique<AgentService>(so, m.cache.get(), &m.metrics);

  LOFT_RETURN_IF_ERROR(m.MakeFetcherAndRunner(spec, idx, stats.record_bytes.max));
  if (!m.trainer) m.trainer = std::make_unique<SyntheticTrainer>(clock, m.compute, cfg.seed);

  if (cfg.metrics_port > 0) {  // 0 (and legacy -1) = off, as for loft-scheduler
    LOFT_ASSIGN_OR_RETURN(m.http, MetricsHttpServer::Start(registry, cfg.metrics_address,
                                                           static_cast<uint16_t>(cfg.metrics_port)));
  }
  LOFT_RETURN_IF_ERROR(m.MakeExternalTrainer(std::move(external_ring)));
  LOFT_ASSIGN_OR_RETURN(
      m.pipeline, PartitionPipeline::Create(&m.ctx, m.runner.get(), m.trainer.get(), m.service.get(),
                                            &m.metrics, spec.training.overlap, ReadyDepth(spec.training)));
  spdlog::info("agent {} serving peers on {} ({} samples cached, {})", cfg.node_name, m.advertised,
               stats.samples, m.own ? "CURVE" : "INSECURE");
  return std::unique_ptr<ZmqAgentServer>(new ZmqAgentServer(std::move(impl)));
}

const std::string& ZmqAgentServer::peer_endpoint() const {
  return impl_->advertised;
}
int ZmqAgentServer::metrics_port() const {
  return impl_->http ? impl_->http->port() : 0;
}
void ZmqAgentServer::Stop() {
  impl_->stop = true;
}

Status ZmqAgentServer::Run(const std::atomic<bool>* interrupt) {
  Impl& m = *impl_;
  m.pipeline->Start();
  // The scheduler's period once it sent one (RegisterReply), capped so that
  // the agent still hears a reply before its own scheduler timeout.
  constexpr int kIdlePollMs = 50;
  auto heartbeat_us = [&m] {
    const int sched_ms = m.service->heartbeat_interval_ms();
    const int ms = sched_ms > 0 ? std::min(sched_ms, std::max(1, m.cfg.scheduler_timeout_ms / 2))
                                : m.cfg.heartbeat_interval_ms;
    return int64_t{ms} * 1000;
  };
  const int64_t timeout_us = int64_t{m.cfg.scheduler_timeout_ms} * 1000;
  int64_t last_heard = m.clock->NowMicros();
  int64_t last_hb = last_heard;
  bool draining = false;
  // After a view arrives, until every other member's peer connection is
  // handshaken (at most kPeersWatchUs), the loop wakes every
  // kPeersPollMs and beats as soon as the count changes: the scheduler
  // may be waiting for it to start the job (start_peers_wait_ms).
  constexpr int kPeersPollMs = 5;
  constexpr int64_t kPeersWatchUs = 3'000'000;
  int64_t watched_view = -1, view_at = 0;
  int reported_ready = -1;
  bool peers_watch = false;
  if (m.has_scheduler) m.SendToScheduler(m.service->MakeRegister(m.summary));
  Status result;
  while (!m.stop && !(interrupt && interrupt->load())) {
    std::vector<zmq::pollitem_t> items{{m.peer_sock.handle(), 0, ZMQ_POLLIN, 0},
                                       {m.pipeline->wake_socket().handle(), 0, ZMQ_POLLIN, 0}};
    if (m.has_scheduler) items.push_back({m.sched_sock.handle(), 0, ZMQ_POLLIN, 0});
    const size_t decoded_item = items.size();
    if (m.decoded) items.push_back({m.decoded->wake_socket().handle(), 0, ZMQ_POLLIN, 0});
    // Sleep until a socket is readable (peer requests, scheduler messages,
    // the pipeline's reports through the wake socket) or the next timer:
    // the heartbeat, the scheduler timeout, at most kIdlePollMs for a
    // Stop(). An idle agent used to wake every 2 ms: ~10% of a core
    // each, most of a 0.15-core edge node's quota (loftctl --testbed).
    int64_t wait_us = int64_t{(peers_watch ? kPeersPollMs : kIdlePollMs)} * 1000;
    if (m.has_scheduler) {
      const int64_t now = m.clock->NowMicros();
      if (m.service->node() >= 0) wait_us = std::min(wait_us, last_hb + heartbeat_us() - now);
      wait_us = std::min(wait_us, last_heard + timeout_us - now);
    }
    const auto wait = std::chrono::milliseconds(std::max<int64_t>(0, (wait_us + 999) / 1000));
    try {
      zmq::poll(items.data(), items.size(), wait);
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      result = ZmqError(e, "poll");
      break;
    }
    if (items[0].revents & ZMQ_POLLIN) m.ServePeer();
    if (items[1].revents & ZMQ_POLLIN) m.pipeline->DrainWakes();
    if (m.has_scheduler && (items[2].revents & ZMQ_POLLIN))
      draining = m.ServeScheduler(&last_heard) || draining;
    if (m.decoded && (items[decoded_item].revents & ZMQ_POLLIN)) m.decoded->DrainWakes();
    m.SendDecodedReplies();
    if (!m.fatal.ok()) {
      result = m.fatal;
      break;
    }
    m.FlushReports();
    int64_t now = m.clock->NowMicros();
    if (m.has_scheduler && m.service->node() >= 0 && m.fetcher) {
      if (const int64_t v = m.service->view(); v != watched_view) {
        watched_view = v;
        view_at = now;
        peers_watch = true;
      }
      if (peers_watch) {
        // The heartbeat counts the handshaken peers (AgentServiceOptions::peers_ready).
        v1::Envelope hb = m.service->MakeHeartbeat();
        const int ready = hb.heartbeat().peers_ready();
        if (ready != reported_ready) {
          reported_ready = ready;
          m.SendToScheduler(hb);
          last_hb = now;
        }
        if (ready == static_cast<int>(m.service->ViewPeers().size()) || now - view_at >= kPeersWatchUs)
          peers_watch = false;
      }
    }
    if (m.has_scheduler) {
      if (m.service->node() >= 0 && now - last_hb >= heartbeat_us()) {
        m.SendToScheduler(m.service->MakeHeartbeat());
        last_hb = now;
      }
      if (now - last_heard >= timeout_us) {
        spdlog::warn("no message from the scheduler for {} ms; registering again",
                     m.cfg.scheduler_timeout_ms);
        m.SendToScheduler(m.service->MakeRegister(m.summary));
        last_heard = now;
      }
    }
    if (draining && m.service->in_flight() == 0) {
      spdlog::info("shutdown: all partitions reported");
      break;
    }
  }
  m.StopThreads();
  m.FlushReports();
  m.SendDecodedReplies();  // those finished while stopping
  return result;
}

}  // namespace loft::agent
