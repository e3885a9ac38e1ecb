#include "server/zmq_server.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/cluster_spec.h"
#include "core/codec.h"
#include "core/zmq_util.h"
#include "server/message_limits.h"

namespace loft::server {
namespace fs = std::filesystem;

StatusOr<std::unique_ptr<ZmqSchedulerServer>> ZmqSchedulerServer::Create(const SchedulerOptions& opts,
                                                                         Clock* clock) {
  LOFT_RETURN_IF_ERROR(opts.Validate());
  // The heartbeat figures left at 0 come from the spec (one default for
  // the daemon, loftctl and loft-sim); the stall threshold below needs them.
  SchedulerOptions resolved = opts;
  if (resolved.heartbeat_interval_ms == 0 || resolved.heartbeat_timeout_ms == 0) {
    LOFT_ASSIGN_OR_RETURN(ClusterSpec spec, LoadClusterSpecFile(resolved.cluster_spec));
    LOFT_RETURN_IF_ERROR(resolved.TakeSpecDefaults(spec.scheduler));
  }
  std::unique_ptr<ZmqSchedulerServer> s(new ZmqSchedulerServer(resolved, clock));
  LOFT_RETURN_IF_ERROR(s->Init());
  return s;
}

// A gap of more than half a heartbeat timeout (at most 1 s) between two
// readings is the scheduler's own stall, not the agents' silence.
ZmqSchedulerServer::ZmqSchedulerServer(const SchedulerOptions& opts, Clock* clock)
    : opts_(opts),
      clock_(clock),
      time_(clock, std::min(1000.0, static_cast<double>(opts.heartbeat_timeout_ms) / 2.0)) {}

ZmqSchedulerServer::~ZmqSchedulerServer() {
  if (http_) http_->Stop();
  router_.close();
  zap_.reset();
}

int ZmqSchedulerServer::metrics_port() const {
  return http_ ? http_->port() : 0;
}

Status ZmqSchedulerServer::Init() {
  LOFT_ASSIGN_OR_RETURN(received_, registry_.AddCounter("loft_scheduler_received_total",
                                                        "Envelopes received, by body.", {"body"}));
  LOFT_ASSIGN_OR_RETURN(dropped_, registry_.AddCounter("loft_scheduler_dropped_total",
                                                       "Messages dropped as malformed, oversized, "
                                                       "wrong-version or unknown, by reason.",
                                                       {"reason"}));
  LOFT_ASSIGN_OR_RETURN(
      sent_, registry_.AddCounter("loft_scheduler_sent_total", "Envelopes sent, by body.", {"body"}));
  LOFT_ASSIGN_OR_RETURN(send_failed_, registry_.AddCounter("loft_scheduler_send_failed_total",
                                                           "Sends that failed, by reason.", {"reason"}));
  LOFT_ASSIGN_OR_RETURN(metrics::CounterFamily * suppressed,
                        AddLogSuppressedCounter(&registry_, "loft_scheduler"));
  rejected_log_ = PeerLogLimits(suppressed);

  // The spec is read once, here: the service gets it parsed and as text
  // (RegisterReply.job_config_yaml) and never opens the file itself.
  std::string spec_yaml;
  {
    std::ifstream in(opts_.cluster_spec);
    if (!in) return NotFound("cannot open cluster spec '" + opts_.cluster_spec + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    spec_yaml = ss.str();
  }
  std::string base = opts_.cluster_spec;
  if (auto pos = base.find_last_of('/'); pos != std::string::npos) base = base.substr(pos + 1);
  LOFT_ASSIGN_OR_RETURN(ClusterSpec spec, ParseClusterSpec(spec_yaml, base));
  for (const std::string& w : SpecWarnings(spec)) spdlog::warn("{}", w);
  if (spec.training.byzantine_tolerance > 0 && !spec.training.byzantine_tolerance_set)
    spdlog::info("training.byzantine_tolerance {} (implied by aggregation {}): verified ring chunks",
                 spec.training.byzantine_tolerance, spec.training.aggregation);
  const size_t inbound_limit = InboundMessageLimit(spec, static_cast<size_t>(opts_.max_message_bytes));
  LOFT_ASSIGN_OR_RETURN(service_, SchedulerService::Create(opts_, std::move(spec), std::move(spec_yaml), this,
                                                           &registry_, time_.NowMillis()));
  time_.NotBefore(service_->resume_floor_ms());  // recovered: never before the journal

  SocketOptions so;
  // Bounded per-peer queues (server/message_limits.h): what a peer may
  // send is capped per message type, so inbound is at most
  // kRecvHwm x InboundMessageLimit per connection; outbound per peer is
  // kSendHwm messages (a peer that does not read loses the excess).
  so.max_message_bytes = inbound_limit;
  so.send_hwm = kSendHwm;
  so.recv_hwm = kRecvHwm;
  so.tos = opts_.control_tos;  // applies to every accepted agent connection
  if (opts_.insecure) {
    spdlog::warn("*** INSECURE MODE: CURVE authentication is OFF on {} (loopback development only) ***",
                 opts_.bind);
  } else {
    LOFT_ASSIGN_OR_RETURN(auto allowed, ReadCurveAllowList(opts_.keys_dir));
    LOFT_ASSIGN_OR_RETURN(CurveKeyPair own,
                          ReadCurveKeyPair((fs::path(opts_.keys_dir) / "scheduler.key").string()));
    allowed.erase(own.public_key);  // the scheduler never connects to itself
    spdlog::info("CURVE on: {} allowed client keys from {}", allowed.size(), opts_.keys_dir);
    LOFT_ASSIGN_OR_RETURN(zap_, ZapAuthenticator::Start(ctx_, std::move(allowed)));
    so.curve_own = own;
    so.curve_server = true;
  }
  LOFT_ASSIGN_OR_RETURN(router_, MakeSocket(ctx_, zmq::socket_type::router, so));
  // No ROUTER_HANDOVER: a connection's routing id is never taken over by
  // a later connection claiming the same id. Agents use a fresh secret id
  // per connection (core/zmq_util.h UniqueRoutingId), and a node's route
  // is only set from a message that authenticated as that node (CURVE
  // User-Id = node name, SchedulerService::Authenticate), so a restarted
  // agent gets a new route with its first message.
  LOFT_RETURN_IF_ERROR(Bind(router_, opts_.bind));
  LOFT_ASSIGN_OR_RETURN(endpoint_, LastEndpoint(router_));
  spdlog::info("scheduler listening on {}", endpoint_);

  if (opts_.metrics_port > 0) {
    LOFT_ASSIGN_OR_RETURN(http_, MetricsHttpServer::Start(&registry_, opts_.metrics_address,
                                                          static_cast<uint16_t>(opts_.metrics_port)));
    spdlog::info("metrics on http://{}:{}/metrics", opts_.metrics_address, http_->port());
  }
  return OkStatus();
}

void ZmqSchedulerServer::Drop(const std::string& reason) {
  dropped_->WithLabels({reason}).Increment();
}

void ZmqSchedulerServer::ReplyError(const zmq::message_t& routing_id, const Status& st) {
  auto s = SendEnvelopeTo(router_, routing_id, MakeError(st), /*dontwait=*/true);
  if (!s.ok()) send_failed_->WithLabels({"error_reply"}).Increment();
}

Status ZmqSchedulerServer::Send(int32_t node, const v1::Envelope& env) {
  auto it = routes_.find(node);
  if (it == routes_.end()) {
    send_failed_->WithLabels({"no_route"}).Increment();
    return Unavailable("no route to node " + std::to_string(node));
  }
  zmq::message_t rid(it->second.data(), it->second.size());
  Status st = SendEnvelopeTo(router_, rid, env, /*dontwait=*/true);
  if (!st.ok()) {
    send_failed_->WithLabels({st.code() == StatusCode::kResourceExhausted ? "backpressure" : "unavailable"})
        .Increment();
    return st;
  }
  sent_->WithLabels({std::string(BodyName(env))}).Increment();
  return OkStatus();
}

void ZmqSchedulerServer::HandleMessage(std::vector<zmq::message_t>& frames) {
  if (frames.size() < 2) {
    Drop("too_few_frames");
    if (!frames.empty()) ReplyError(frames[0], InvalidArgument("empty message"));
    return;
  }
  if (frames.size() > 2) {
    Drop("unexpected_frames");
    ReplyError(frames[0], InvalidArgument("the scheduler accepts exactly one envelope frame"));
    return;
  }
  auto env = Decode(frames[1].to_string_view(), static_cast<size_t>(opts_.max_message_bytes));
  if (!env.ok()) {
    const char* reason = "malformed";
    if (env.status().code() == StatusCode::kResourceExhausted) reason = "oversized";
    if (env.status().code() == StatusCode::kFailedPrecondition) reason = "wrong_version";
    Drop(reason);
    ReplyError(frames[0], env.status());
    return;
  }
  received_->WithLabels({std::string(BodyName(*env))}).Increment();
  Sender peer;
  peer.name = opts_.insecure ? std::string() : FrameProperty(frames[1], "User-Id");
  peer.authenticated = !opts_.insecure;
  v1::Envelope reply;
  int32_t sender_node = -1;
  Status st = service_->Handle(*env, peer, time_.NowMillis(), &reply, &sender_node);
  if (sender_node >= 0) routes_[sender_node] = frames[0].to_string();
  if (!st.ok()) {
    rejected_log_.Log(spdlog::level::debug, "rejected", peer.name, "rejected {} from '{}': {}",
                      BodyName(*env), PeerText(peer.name), PeerText(st.ToString(), 2 * kPeerTextLogBytes));
    if (st.code() == StatusCode::kFailedPrecondition) {
      // A heartbeat/credit from a node without a session (dropped as dead,
      // or unknown after a restart): stay silent so the agent's
      // scheduler_timeout_ms expires and it registers again.
      Drop("unregistered");
      return;
    }
    Drop(st.code() == StatusCode::kUnimplemented ? "unknown_type" : "rejected");
    ReplyError(frames[0], st);
    return;
  }
  if (reply.body_case() != v1::Envelope::BODY_NOT_SET) {
    auto s = SendEnvelopeTo(router_, frames[0], reply, /*dontwait=*/true);
    if (s.ok()) {
      sent_->WithLabels({std::string(BodyName(reply))}).Increment();
    } else {
      send_failed_->WithLabels({"reply"}).Increment();
    }
  }
}

Status ZmqSchedulerServer::Run(const std::function<bool()>& stop) {
  const long tick_ms = std::max<long>(5, std::min<long>(50, opts_.heartbeat_interval_ms / 4));
  while (!stop()) {
    zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 1, std::chrono::milliseconds(tick_ms));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      return ZmqError(e, "poll");
    }
    if (items[0].revents & ZMQ_POLLIN) {
      // Drain until the socket is empty or one tick's time is spent, then
      // tick, so timers, planning and sends run under a flood too. This
      // bounds the time between ticks, not the throughput: the next poll
      // returns at once while messages are queued.
      const double drain_end = clock_->NowMillis() + static_cast<double>(tick_ms);
      while (clock_->NowMillis() < drain_end) {
        auto frames = RecvMultipart(router_, /*dontwait=*/true);
        if (!frames.ok()) {
          Drop(frames.status().code() == StatusCode::kResourceExhausted ? "too_many_frames" : "recv_error");
          continue;
        }
        if (frames->empty()) break;
        HandleMessage(*frames);
      }
    }
    Status st = service_->Tick(time_.NowMillis());
    if (!st.ok()) return st.WithContext("scheduler tick");
  }
  return OkStatus();
}

}  // namespace loft::server
