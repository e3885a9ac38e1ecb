#include "edge_agent/external_trainer.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <zmq.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

#include "core/codec.h"
#include "core/zmq_util.h"

namespace loft::agent {

namespace {
std::atomic<uint64_t> g_monitor_seq{0};

// Equal strings, in a time that does not depend on where they differ.
bool SameToken(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// The training report of a ring round's outcome, with the loss, the test
// accuracy and the parameter hash of the consumer's report, if any.
v1::TrainingReport TrainingReportOf(const ExternalRing::Outcome& outcome,
                                    const std::optional<v1::ConsumerReport>& report) {
  v1::TrainingReport rep;
  rep.set_allreduce_ms(outcome.allreduce_ms);
  rep.set_ring_members(outcome.members);
  rep.set_ring_attempts(outcome.attempts);
  for (const auto& [id, node] : outcome.applied) {
    rep.add_applied_partitions(id);
    rep.add_applied_nodes(node);
  }
  rep.set_loss(std::numeric_limits<double>::quiet_NaN());
  if (report.has_value()) {
    if (report->has_loss()) rep.set_loss(report->loss());
    if (report->has_test_accuracy()) {
      rep.set_evaluated(true);
      rep.set_test_accuracy(report->test_accuracy());
    }
    if (report->has_param_hash()) rep.set_param_hash(report->param_hash());
  }
  return rep;
}
}  // namespace

Status CheckConsumerAccess(const std::string& endpoint, const std::string& token) {
  if (!token.empty()) return OkStatus();
  const bool ipc = endpoint.rfind("ipc://", 0) == 0;
  if (ipc && endpoint.size() > 6 && endpoint[6] != '@') return OkStatus();
  return InvalidArgument(
      "consumer_endpoint " + endpoint + " needs consumer_token: " +
      (ipc ? "an abstract ipc:// socket has no file permissions"
           : "any local user can connect to a tcp:// port") +
      " (set consumer_token in the agent config and LOFT_CONSUMER_TOKEN in the consumer, or "
      "use ipc:///path, an owner-only socket file)");
}

ExternalTrainer::ExternalTrainer(Clock* clock, ExternalTrainerOptions opts)
    : clock_(clock), opts_(std::move(opts)), ctx_(1) {}

ExternalTrainer::~ExternalTrainer() {
  if (router_) zmq_socket_monitor(router_.handle(), nullptr, 0);
}

StatusOr<std::unique_ptr<ExternalTrainer>> ExternalTrainer::Create(Clock* clock,
                                                                   ExternalTrainerOptions opts) {
  if (opts.endpoint.empty()) return InvalidArgument("compute_mode external needs consumer_endpoint");
  LOFT_RETURN_IF_ERROR(CheckConsumerAccess(opts.endpoint, opts.token));
  if (opts.timeout_ms <= 0) {
    return InvalidArgument("consumer timeout must be > 0 ms (got " + std::to_string(opts.timeout_ms) + ")");
  }
  std::unique_ptr<ExternalTrainer> t(new ExternalTrainer(clock, std::move(opts)));
  SocketOptions so;
  so.max_message_bytes = t->opts_.max_message_bytes;
  LOFT_ASSIGN_OR_RETURN(t->router_, MakeSocket(t->ctx_, zmq::socket_type::router, so));
  std::string mon = "inproc://loft-consumer-monitor-" + std::to_string(g_monitor_seq.fetch_add(1));
  if (zmq_socket_monitor(t->router_.handle(), mon.c_str(), ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED) !=
      0) {
    return Internal("consumer socket monitor: " + std::string(zmq_strerror(zmq_errno())));
  }
  try {
    t->monitor_ = zmq::socket_t(t->ctx_, zmq::socket_type::pair);
    t->monitor_.connect(mon);
  } catch (const zmq::error_t& e) {
    return ZmqError(e, "consumer socket monitor connect");
  }
  const bool ipc = t->opts_.endpoint.rfind("ipc://", 0) == 0;
  // The ipc socket file is created owner-only (umask around the bind: no
  // window in which another user could connect), and made so again.
  const mode_t old_mask = ipc ? ::umask(0077) : 0;
  Status bound = Bind(t->router_, t->opts_.endpoint).WithContext("consumer_endpoint");
  if (ipc) ::umask(old_mask);
  LOFT_RETURN_IF_ERROR(bound);
  LOFT_ASSIGN_OR_RETURN(t->endpoint_, LastEndpoint(t->router_));
  if (ipc) {
    const std::string path = t->endpoint_.substr(6);
    if (::chmod(path.c_str(), 0600) != 0)
      return Internal("consumer_endpoint " + t->endpoint_ + ": chmod 0600: " + std::strerror(errno));
  }
  spdlog::info("compute_mode external: waiting for a consumer on {}{}{}", t->endpoint_,
               t->opts_.token.empty() ? "" : " (token required)",
               t->opts_.ring ? " (training: all-reduce)" : "");
  return t;
}

void ExternalTrainer::PollFor(int ms) {
  zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0}, {monitor_.handle(), 0, ZMQ_POLLIN, 0}};
  // With a ring, wake often to serve its state requests.
  if (opts_.ring) ms = std::min(ms, 10);
  try {
    zmq::poll(items, 2, std::chrono::milliseconds(std::max(ms, 0)));
  } catch (const zmq::error_t& e) {
    spdlog::warn("consumer poll: {}", e.what());
  }
  if (opts_.ring) opts_.ring->Serve();
}

void ExternalTrainer::Reply(const std::string& id, const v1::Envelope& env, zmq::message_t* data) {
  std::vector<zmq::message_t> frames;
  frames.emplace_back(id.data(), id.size());
  auto head = EnvelopeFrame(env);
  if (!head.ok()) {
    spdlog::warn("consumer reply: {}", head.status().ToString());
    return;
  }
  frames.push_back(std::move(*head));
  if (data != nullptr) frames.push_back(std::move(*data));
  Status st = SendMultipart(router_, frames, /*dontwait=*/true);
  if (!st.ok())
    log_.Log(spdlog::level::warn, "consumer_send", "consumer", "cannot send {} to the consumer: {}",
             BodyName(env), st.ToString());
}

void ExternalTrainer::OnHello(const std::string& id, int fd, const v1::ConsumerHello& h, Wait* wait) {
  auto refuse = [&](const std::string& why) {
    log_.Log(spdlog::level::warn, "consumer_refused", "consumer", "refusing consumer '{}' on {}: {}",
             PeerText(h.client()), endpoint_, why);
    v1::Envelope env;
    env.mutable_consumer_refused()->set_reason(why);
    Reply(id, env);
  };
  const bool delta = opts_.ring && opts_.ring->delta();
  if (h.consumer_protocol() == kConsumerProtocolGradientOnly && delta) {
    refuse("consumer protocol " + std::to_string(h.consumer_protocol()) +
           " cannot take local steps, and this job's training.exchange.period is not 1 (model deltas are "
           "exchanged): use a libloft of protocol " +
           std::to_string(kConsumerProtocol) + " or set training.exchange.period: 1");
    return;
  }
  if (h.consumer_protocol() != kConsumerProtocol && h.consumer_protocol() != kConsumerProtocolGradientOnly) {
    refuse("consumer protocol " + std::to_string(h.consumer_protocol()) + ", this agent speaks " +
           std::to_string(kConsumerProtocol) + " (libloft and loft-agent of different versions)");
    return;
  }
  if (!opts_.token.empty() && !SameToken(h.token(), opts_.token)) {
    refuse("wrong consumer token (set LOFT_CONSUMER_TOKEN to the agent's consumer_token)");
    return;
  }
  if (consumer_.has_value() && *consumer_ != id) {
    // The current consumer is live while its connection is open (fd known),
    // or, fd unknown, while any connection is.
    const bool live = consumer_fd_ >= 0 ? live_fds_.count(consumer_fd_) > 0 : !live_fds_.empty();
    if (live) {
      refuse("another consumer is connected to this agent");
      return;
    }
    if (wait != nullptr) wait->lost = true;
  }
  consumer_ = id;
  consumer_fd_ = fd;
  if (opts_.ring) opts_.ring->ResetConsumer();
  log_.Log(spdlog::level::info, "consumer_connected", "consumer", "consumer '{}' connected on {}",
           PeerText(h.client()), endpoint_);
}

void ExternalTrainer::Drain(Wait* wait) {
  // Monitor events: [uint16 event][uint32 value = fd] then the endpoint frame.
  while (true) {
    auto frames = RecvMultipart(monitor_, /*dontwait=*/true, /*max_frames=*/4);
    if (!frames.ok() || frames->empty()) break;
    if ((*frames)[0].size() < sizeof(uint16_t) + sizeof(uint32_t)) continue;
    uint16_t event = 0;
    uint32_t value = 0;
    std::memcpy(&event, (*frames)[0].data(), sizeof(event));
    std::memcpy(&value, static_cast<const char*>((*frames)[0].data()) + sizeof(event), sizeof(value));
    const int fd = static_cast<int>(value);
    if (event == ZMQ_EVENT_ACCEPTED) {
      live_fds_.insert(fd);
    } else if (event == ZMQ_EVENT_DISCONNECTED) {
      live_fds_.erase(fd);
      const bool gone = consumer_fd_ >= 0 ? fd == consumer_fd_ : live_fds_.empty();
      if (gone && consumer_.has_value()) {
        log_.Log(spdlog::level::warn, "consumer_disconnected", "consumer", "consumer disconnected from {}",
                 endpoint_);
        consumer_.reset();
        consumer_fd_ = -1;
        if (wait != nullptr) wait->lost = true;
      }
    }
  }
  while (true) {
    auto frames = RecvMultipart(router_, /*dontwait=*/true, /*max_frames=*/8);
    if (!frames.ok()) {
      if (frames.status().code() == StatusCode::kResourceExhausted) continue;  // too many frames: dropped
      log_.Log(spdlog::level::warn, "consumer_receive", "consumer", "consumer receive: {}",
               frames.status().ToString());
      break;
    }
    if (frames->empty()) break;
    if (frames->size() < 2) continue;
    std::string id((*frames)[0].to_string());
    auto env = Decode((*frames)[1].to_string_view(), opts_.max_message_bytes);
    if (!env.ok()) {
      log_.Log(spdlog::level::warn, "consumer_undecodable", "consumer",
               "consumer sent an undecodable frame: {}", env.status().ToString());
      continue;
    }
    if (env->has_consumer_hello()) {
      OnHello(id, (*frames)[1].get(ZMQ_SRCFD), env->consumer_hello(), wait);
      continue;
    }
    if (consumer_ != id) {
      log_.Log(spdlog::level::warn, "consumer_not_current", "consumer",
               "ignoring {} from a connection that is not the current consumer", BodyName(*env));
      continue;
    }
    if (env->has_consumer_report()) {
      const auto& r = env->consumer_report();
      if (wait != nullptr && r.partition_id() == wait->partition_id) {
        wait->report = r;
      } else {
        log_.Log(spdlog::level::warn, "consumer_report_ignored", "consumer",
                 "ignoring consumer report for partition {} (not awaited)", r.partition_id());
      }
    } else if (env->has_consumer_allreduce()) {
      const auto& a = env->consumer_allreduce();
      if (wait != nullptr && opts_.ring && a.partition_id() == wait->partition_id &&
          a.round() == wait->round && frames->size() == 3) {
        wait->allreduce = a;
        wait->gradient = std::move((*frames)[2]);
      } else {
        v1::Envelope e;
        auto* ag = e.mutable_consumer_aggregate();
        ag->set_partition_id(a.partition_id());
        ag->set_round(a.round());
        ag->set_outcome(v1::ConsumerAggregate::ERROR);
        ag->set_message(
            !opts_.ring           ? "this agent runs no all-reduce ring (spec training.model is not external)"
            : frames->size() != 3 ? "an all-reduce needs exactly one gradient frame"
                                  : "partition " + std::to_string(a.partition_id()) + " round " +
                                        std::to_string(a.round()) + " is not the batch being computed");
        Reply(id, e);
      }
    } else if (env->has_consumer_state()) {
      if (!opts_.ring || frames->size() != 3) {
        log_.Log(spdlog::level::warn, "consumer_state_ignored", "consumer", "ignoring consumer state ({})",
                 opts_.ring ? "no blob frame" : "no ring");
      } else {
        opts_.ring->PublishState((*frames)[2].to_string());
      }
    } else if (env->has_consumer_sync_request()) {
      v1::Envelope e;
      auto* r = e.mutable_consumer_sync_reply();
      zmq::message_t blob;
      if (!opts_.ring) {
        r->set_error("this agent runs no all-reduce ring (spec training.model is not external)");
      } else {
        auto st = opts_.ring->FetchState();
        if (st.ok()) {
          r->set_round(st->round);
          r->set_hash(st->hash);
          blob = zmq::message_t(st->blob.data(), st->blob.size());
        } else {
          r->set_error(st.status().ToString());
        }
      }
      Reply(id, e, &blob);
    } else {
      log_.Log(spdlog::level::warn, "consumer_unexpected", "consumer", "consumer sent unexpected {}",
               BodyName(*env));
    }
  }
}

void ExternalTrainer::JoinAlone(int64_t view, int64_t round) {
  if (!opts_.ring || round <= opts_.ring->round_done() || round > std::numeric_limits<uint32_t>::max() ||
      view < 0)
    return;
  auto r = opts_.ring->Round(view, static_cast<uint32_t>(round), 0, 0, {}, /*consumer=*/false);
  if (!r.ok()) {
    spdlog::warn("weight-0 join of round {} (view {}) failed: {}", round, view, r.status().ToString());
  }
}

StatusOr<std::vector<zmq::message_t>> ExternalTrainer::BatchFrames(const Batch* batch, int64_t round,
                                                                   uint64_t partition_id, bool ring) {
  v1::Envelope env;
  auto* cb = env.mutable_consumer_batch();
  cb->set_partition_id(partition_id);
  cb->set_ring(ring);
  cb->set_round(round);
  cb->set_local_scale(1.0);
  if (ring && opts_.ring->delta()) {
    cb->set_delta_exchange(true);
    if (batch != nullptr) {
      cb->set_local_step(batch->local_step);
      cb->set_local_scale(opts_.ring->LocalScale(batch->samples.size(), batch->view));
    }
  }
  size_t total = 0;
  if (batch != nullptr) {
    for (const auto& s : batch->samples) {
      cb->add_sample_ids(s.id);
      cb->add_labels(s.label);
      cb->add_payload_sizes(static_cast<uint32_t>(s.payload.size()));
      total += s.payload.size();
    }
  }
  std::vector<zmq::message_t> frames;
  frames.emplace_back(consumer_->data(), consumer_->size());
  LOFT_ASSIGN_OR_RETURN(zmq::message_t head, EnvelopeFrame(env));
  frames.push_back(std::move(head));
  zmq::message_t payloads(total);
  size_t at = 0;
  if (batch != nullptr) {
    for (const auto& s : batch->samples) {
      std::memcpy(static_cast<char*>(payloads.data()) + at, s.payload.data(), s.payload.size());
      at += s.payload.size();
    }
  }
  frames.push_back(std::move(payloads));
  return frames;
}

void ExternalTrainer::AnswerAllReduce(const Wait& w, int64_t view, int64_t round, uint64_t partition_id,
                                      size_t n, std::optional<ExternalRing::Outcome>* outcome,
                                      Status* ring_error) {
  v1::Envelope e;
  auto* ag = e.mutable_consumer_aggregate();
  ag->set_partition_id(partition_id);
  ag->set_round(round);
  zmq::message_t data;
  const size_t bytes = w.gradient.size();
  if (outcome->has_value() || !ring_error->ok()) {
    ag->set_outcome(v1::ConsumerAggregate::ERROR);
    ag->set_message("batch " + std::to_string(partition_id) + " was already all-reduced");
  } else if (bytes % sizeof(float) != 0 || (n > 0 && bytes == 0)) {
    ag->set_outcome(v1::ConsumerAggregate::ERROR);
    ag->set_message("gradient frame of " + std::to_string(bytes) + " bytes is not a float32 vector");
    *ring_error = InvalidArgument(ag->message());
    JoinAlone(view, round);
  } else if (round < 0 || round > std::numeric_limits<uint32_t>::max()) {
    ag->set_outcome(v1::ConsumerAggregate::ERROR);
    ag->set_message("round " + std::to_string(round) + " does not fit the ring's 32-bit rounds");
    *ring_error = OutOfRange(ag->message());
  } else {
    std::vector<float> grad(bytes / sizeof(float));
    if (bytes > 0) std::memcpy(grad.data(), w.gradient.data(), bytes);
    auto o = opts_.ring->Round(view, static_cast<uint32_t>(round), n, partition_id, grad, /*consumer=*/true);
    if (!o.ok()) {
      *ring_error = o.status();
      ag->set_outcome(v1::ConsumerAggregate::ERROR);
      ag->set_message(o.status().ToString());
    } else {
      *outcome = std::move(*o);
      const ExternalRing::Outcome& out = **outcome;
      spdlog::debug("round {}: all-reduce {:.1f} ms ({} members, partition {})", round, out.allreduce_ms,
                    out.members, partition_id);
      switch (out.kind) {
        case ExternalRing::Kind::kApplied: ag->set_outcome(v1::ConsumerAggregate::APPLIED); break;
        case ExternalRing::Kind::kCarried: ag->set_outcome(v1::ConsumerAggregate::CARRIED); break;
        case ExternalRing::Kind::kStale: ag->set_outcome(v1::ConsumerAggregate::STALE); break;
        case ExternalRing::Kind::kError: ag->set_outcome(v1::ConsumerAggregate::ERROR); break;
      }
      ag->set_message(out.message);
      ag->set_round_steps(out.round_steps);
      if (!out.aggregate.empty())
        data = zmq::message_t(out.aggregate.data(), out.aggregate.size() * sizeof(float));
      if (out.kind == ExternalRing::Kind::kStale) {
        // [u64 state length][state][aggregate] in one frame.
        const uint64_t len = out.state.size();
        zmq::message_t both(sizeof len + out.state.size() + data.size());
        auto* p = static_cast<char*>(both.data());
        std::memcpy(p, &len, sizeof len);
        std::memcpy(p + sizeof len, out.state.data(), out.state.size());
        if (data.size() > 0) std::memcpy(p + sizeof len + out.state.size(), data.data(), data.size());
        data = std::move(both);
      }
    }
  }
  Reply(*consumer_, e, &data);
}

StatusOr<double> ExternalTrainer::LocalStepReport(const Wait& w, size_t n) {
  opts_.ring->LocalStepTaken(n);
  v1::TrainingReport rep;
  rep.set_loss(w.report->has_loss() ? w.report->loss() : std::numeric_limits<double>::quiet_NaN());
  if (w.report->has_param_hash()) rep.set_param_hash(w.report->param_hash());
  if (w.report->has_test_accuracy()) {
    rep.set_evaluated(true);
    rep.set_test_accuracy(w.report->test_accuracy());
  }
  report_ = rep;
  return rep.loss();
}

StatusOr<double> ExternalTrainer::RunBatch(const Batch* batch, int64_t view, int64_t round,
                                           uint64_t partition_id) {
  last_ms_.reset();
  report_.reset();
  const int64_t deadline = clock_->NowMicros() + int64_t{opts_.timeout_ms} * 1000;
  auto remaining_ms = [&] { return static_cast<int>((deadline - clock_->NowMicros()) / 1000); };
  auto stopped = [&] { return opts_.stop != nullptr && opts_.stop->load(); };
  const bool ring = opts_.ring != nullptr;
  // A local step of a delta exchange: the consumer steps on its own, no
  // ring (and no round to join when it fails).
  const bool local = ring && batch != nullptr && batch->local_step && opts_.ring->delta();
  Wait w;
  w.partition_id = partition_id;
  w.round = round;
  Drain(&w);
  w.lost = false;
  if (batch == nullptr && !consumer_.has_value()) {  // a weight-0 round nobody consumes
    JoinAlone(view, round);
    return Unavailable("no consumer connected to " + endpoint_);
  }
  while (!consumer_.has_value()) {
    if (remaining_ms() <= 0 || stopped()) {
      if (!local) JoinAlone(view, round);
      return Unavailable("no consumer connected to " + endpoint_ + " within " +
                         std::to_string(opts_.timeout_ms) + " ms");
    }
    PollFor(std::min(remaining_ms(), 100));
    Drain(&w);
    w.lost = false;
  }

  const size_t n = batch != nullptr ? batch->samples.size() : 0;
  LOFT_ASSIGN_OR_RETURN(std::vector<zmq::message_t> frames, BatchFrames(batch, round, partition_id, ring));
  Status sent = SendMultipart(router_, frames, /*dontwait=*/true);
  if (!sent.ok()) {
    consumer_.reset();
    if (!local) JoinAlone(view, round);
    return Unavailable("sending partition " + std::to_string(partition_id) +
                       " to the consumer: " + sent.message());
  }

  std::optional<ExternalRing::Outcome> outcome;
  Status ring_error;
  auto in_update = [&] {
    return outcome.has_value() && (outcome->included || outcome->kind == ExternalRing::Kind::kCarried);
  };
  auto make_report = [&] {
    if (outcome.has_value()) report_ = TrainingReportOf(*outcome, w.report);
  };
  while (true) {
    Drain(&w);
    if (w.allreduce.has_value() && local) {
      v1::Envelope e;
      auto* ag = e.mutable_consumer_aggregate();
      ag->set_partition_id(partition_id);
      ag->set_round(round);
      ag->set_outcome(v1::ConsumerAggregate::ERROR);
      ag->set_message("batch " + std::to_string(partition_id) +
                      " is a local step (training.exchange.period is not 1): apply its gradient with the "
                      "optimizer, no all-reduce");
      Reply(*consumer_, e);
      w.allreduce.reset();
    } else if (w.allreduce.has_value()) {
      AnswerAllReduce(w, view, round, partition_id, n, &outcome, &ring_error);
      w.allreduce.reset();
    }
    if (w.report.has_value()) {
      const double ms = w.report->compute_ms();
      last_ms_ = (std::isfinite(ms) && ms >= 0) ? ms : 0.0;
      if (!ring) return std::numeric_limits<double>::quiet_NaN();
      if (local) return LocalStepReport(w, n);
      make_report();
      if (!outcome.has_value() && ring_error.ok()) {
        JoinAlone(view, round);
        return FailedPrecondition("the consumer reported partition " + std::to_string(partition_id) +
                                  " without all-reducing its gradient (training.model external)");
      }
      if (batch == nullptr || in_update()) {
        return w.report->has_loss() ? w.report->loss() : std::numeric_limits<double>::quiet_NaN();
      }
      return Unavailable("partition " + std::to_string(partition_id) + ": its gradient is not in round " +
                         std::to_string(round) +
                         "'s update: " + (ring_error.ok() ? outcome->message : ring_error.ToString()));
    }
    if (w.lost || remaining_ms() <= 0 || stopped()) {
      const std::string why =
          w.lost ? "consumer disconnected before reporting partition " + std::to_string(partition_id)
                 : "consumer did not report partition " + std::to_string(partition_id) + " within " +
                       std::to_string(opts_.timeout_ms) + " ms";
      if (w.lost) consumer_.reset();
      if (ring && !local && !outcome.has_value()) JoinAlone(view, round);
      if (ring && batch != nullptr && in_update()) {
        // Its samples are in the update already: done (the consumer is behind and will be brought in step).
        spdlog::warn("{}; its gradient is in round {}'s update", why, round);
        make_report();
        return std::numeric_limits<double>::quiet_NaN();
      }
      return Unavailable(why);
    }
    PollFor(std::min(remaining_ms(), 100));
  }
}

StatusOr<double> ExternalTrainer::Compute(const Batch& batch) {
  if (opts_.ring) opts_.ring->Planned(batch.iteration);
  return RunBatch(&batch, batch.view, batch.iteration, batch.partition_id);
}

void ExternalTrainer::Skip(int64_t view, int64_t iteration, bool local_step) {
  if (opts_.ring) opts_.ring->Planned(iteration);
  if (!opts_.ring || iteration <= opts_.ring->round_done()) return;
  if (local_step && opts_.ring->delta()) return;  // no exchange after a local step
  spdlog::info("partition of round {} failed before compute: joining the round with weight 0", iteration);
  auto r = RunBatch(nullptr, view, iteration, 0);
  if (!r.ok()) spdlog::warn("weight-0 join of round {}: {}", iteration, r.status().ToString());
  report_.reset();
}

void ExternalTrainer::Idle() {
  Drain(nullptr);
  if (!opts_.ring) return;
  auto join = opts_.ring->PendingJoin();
  if (!join) return;
  spdlog::info("round {} (view {}) started and this node has no partition: joining with weight 0",
               join->second, join->first);
  auto r = RunBatch(nullptr, join->first, join->second, 0);
  report_.reset();
  last_ms_.reset();
  if (!r.ok()) {
    spdlog::warn("weight-0 join of round {}: {}", join->second, r.status().ToString());
    if (opts_.ring->round_done() < static_cast<int64_t>(join->second))
      opts_.ring->RefuseIdle(join->first, join->second);
  }
}

std::vector<RingOffence> ExternalTrainer::TakeOffences() {
  if (!opts_.ring) return {};
  return opts_.ring->TakeOffences();
}

std::optional<double> ExternalTrainer::ReportedComputeMs() {
  return std::exchange(last_ms_, std::nullopt);
}

std::optional<v1::TrainingReport> ExternalTrainer::TakeReport() {
  return std::exchange(report_, std::nullopt);
}

}  // namespace loft::agent
