#include "capi/src/consumer_session.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "core/codec.h"
#include "core/zmq_util.h"

namespace loft::capi {

StatusOr<std::unique_ptr<ConsumerSession>> ConsumerSession::Open(const std::string& endpoint,
                                                                 const std::string& client) {
  if (endpoint.rfind("ipc://", 0) != 0 && endpoint.rfind("tcp://", 0) != 0) {
    return InvalidArgument("consumer endpoint must start with ipc:// or tcp:// (got '" + endpoint + "')");
  }
  std::unique_ptr<ConsumerSession> s(new ConsumerSession());
  s->endpoint_ = endpoint;
  SocketOptions so;  // ZMQ_MAXMSGSIZE = kDefaultMaxMessageBytes per frame
  LOFT_ASSIGN_OR_RETURN(s->sock_, MakeSocket(s->ctx_, zmq::socket_type::dealer, so));
  LOFT_RETURN_IF_ERROR(Connect(s->sock_, endpoint).WithContext("consumer endpoint '" + endpoint + "'"));
  v1::Envelope hello;
  hello.mutable_consumer_hello()->set_client(client);
  hello.mutable_consumer_hello()->set_consumer_protocol(kConsumerProtocol);
  if (const char* token = std::getenv("LOFT_CONSUMER_TOKEN"); token != nullptr)
    hello.mutable_consumer_hello()->set_token(token);
  LOFT_RETURN_IF_ERROR(SendEnvelope(s->sock_, hello));
  return s;
}

ConsumerSession::~ConsumerSession() = default;

template <typename Want>
StatusOr<std::vector<zmq::message_t>> ConsumerSession::Await(int timeout_ms, const std::string& what,
                                                             Want want, v1::Envelope* out) {
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  while (true) {
    if (!refused_.empty()) return FailedPrecondition("the agent refused this consumer: " + refused_);
    zmq::pollitem_t item{sock_.handle(), 0, ZMQ_POLLIN, 0};
    std::chrono::milliseconds wait(-1);
    if (timeout_ms >= 0) {
      wait =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (wait.count() < 0) wait = std::chrono::milliseconds(0);
    }
    int n = 0;
    try {
      n = zmq::poll(&item, 1, wait);
    } catch (const zmq::error_t& e) {
      // A signal (the training program's timers, SIGCHLD of its data
      // loader workers) interrupted the wait: wait again for what is left.
      if (e.num() == EINTR) continue;
      return ZmqError(e, "consumer poll");
    }
    if (n == 0) {
      return DeadlineExceeded("timeout after " + std::to_string(timeout_ms) + " ms waiting for " + what +
                              " on " + endpoint_);
    }
    std::vector<zmq::message_t> extra;
    auto env = RecvEnvelope(sock_, kDefaultMaxMessageBytes, &extra);
    if (!env.ok()) return env.status().WithContext("consumer receive");
    if (env->has_consumer_refused()) {
      refused_ = env->consumer_refused().reason();
      continue;
    }
    if (want(*env)) {
      *out = std::move(*env);
      return extra;
    }
    if (env->has_consumer_batch()) queued_.emplace_back(std::move(*env), std::move(extra));
    // anything else is not meant for this call: dropped
  }
}

StatusOr<std::unique_ptr<ConsumerBatchData>> ConsumerSession::ToBatch(const v1::Envelope& env,
                                                                      std::vector<zmq::message_t> extra) {
  const auto& b = env.consumer_batch();
  const size_t n = static_cast<size_t>(b.sample_ids_size());
  auto out = std::make_unique<ConsumerBatchData>();
  out->partition_id = b.partition_id();
  out->round = b.round();
  out->ring = b.ring();
  out->local_step = b.local_step();
  out->delta_exchange = b.delta_exchange();
  out->local_scale = b.local_scale() > 0 && std::isfinite(b.local_scale()) ? b.local_scale() : 1.0;
  if (b.labels_size() != b.sample_ids_size() || b.payload_sizes_size() != b.sample_ids_size() ||
      extra.size() != 1) {
    return DataLoss("consumer batch " + std::to_string(b.partition_id()) + ": " + std::to_string(n) +
                    " ids, " + std::to_string(b.labels_size()) + " labels, " +
                    std::to_string(b.payload_sizes_size()) + " payload sizes, " +
                    std::to_string(extra.size()) + " payload frames (want 1)");
  }
  out->offsets.reserve(n + 1);
  size_t at = 0;
  out->offsets.push_back(0);
  for (uint32_t sz : b.payload_sizes()) {
    at += sz;
    out->offsets.push_back(at);
  }
  if (at != extra[0].size()) {
    return DataLoss("consumer batch " + std::to_string(b.partition_id()) + ": payload sizes sum to " +
                    std::to_string(at) + " bytes, the frame has " + std::to_string(extra[0].size()));
  }
  out->sample_ids.assign(b.sample_ids().begin(), b.sample_ids().end());
  out->labels.assign(b.labels().begin(), b.labels().end());
  out->payload = std::move(extra[0]);
  return out;
}

StatusOr<std::unique_ptr<ConsumerBatchData>> ConsumerSession::Next(int timeout_ms) {
  if (!refused_.empty()) return FailedPrecondition("the agent refused this consumer: " + refused_);
  if (!queued_.empty()) {
    auto [env, extra] = std::move(queued_.front());
    queued_.pop_front();
    return ToBatch(env, std::move(extra));
  }
  v1::Envelope env;
  LOFT_ASSIGN_OR_RETURN(auto extra, Await(
                                        timeout_ms, "a batch",
                                        [](const v1::Envelope& e) { return e.has_consumer_batch(); }, &env));
  return ToBatch(env, std::move(extra));
}

Status ConsumerSession::Report(ConsumerBatchData* batch, double compute_ms) {
  if (batch->reported) {
    return FailedPrecondition("batch " + std::to_string(batch->partition_id) + " was already reported");
  }
  if (!std::isfinite(compute_ms) || compute_ms < 0) {
    return InvalidArgument("compute_ms must be finite and >= 0 (got " + std::to_string(compute_ms) + ")");
  }
  v1::Envelope env;
  auto* r = env.mutable_consumer_report();
  r->set_partition_id(batch->partition_id);
  r->set_compute_ms(compute_ms);
  if (batch->loss) r->set_loss(*batch->loss);
  if (batch->test_accuracy) r->set_test_accuracy(*batch->test_accuracy);
  if (batch->param_hash) r->set_param_hash(*batch->param_hash);
  LOFT_RETURN_IF_ERROR(SendEnvelope(sock_, env).WithContext("consumer report"));
  batch->reported = true;
  return Status::Ok();
}

StatusOr<int> ConsumerSession::AllReduce(ConsumerBatchData* batch, float* data, size_t n, int timeout_ms) {
  const std::string which =
      "batch " + std::to_string(batch->partition_id) + " (round " + std::to_string(batch->round) + ")";
  if (!batch->ring)
    return FailedPrecondition(which +
                              ": the agent runs no all-reduce ring (its spec's training.model is not "
                              "external)");
  if (batch->reported) return FailedPrecondition(which + " was already reported");
  if (batch->local_step)
    return FailedPrecondition(which +
                              " is a local step (the spec's training.exchange.period is not 1): apply its "
                              "gradient, times loft_batch_local_scale, with the optimizer; no all-reduce");
  if (batch->allreduced) return FailedPrecondition(which + " was already all-reduced");
  if (n == 0 && !batch->sample_ids.empty()) return InvalidArgument(which + ": an empty gradient (n = 0)");
  if (data == nullptr && n > 0) return InvalidArgument(which + ": data is NULL");
  v1::Envelope env;
  env.mutable_consumer_allreduce()->set_partition_id(batch->partition_id);
  env.mutable_consumer_allreduce()->set_round(batch->round);
  std::vector<zmq::message_t> frames;
  LOFT_ASSIGN_OR_RETURN(zmq::message_t head, EnvelopeFrame(env));
  frames.push_back(std::move(head));
  frames.emplace_back(data, n * sizeof(float));
  LOFT_RETURN_IF_ERROR(SendMultipart(sock_, frames).WithContext("consumer all-reduce"));
  batch->allreduced = true;
  v1::Envelope ans;
  const uint64_t pid = batch->partition_id;
  const int64_t round = batch->round;
  LOFT_ASSIGN_OR_RETURN(auto extra, Await(
                                        timeout_ms, "the aggregate of " + which,
                                        [&](const v1::Envelope& e) {
                                          return e.has_consumer_aggregate() &&
                                                 e.consumer_aggregate().partition_id() == pid &&
                                                 e.consumer_aggregate().round() == round;
                                        },
                                        &ans));
  const auto& a = ans.consumer_aggregate();
  batch->round_steps = a.round_steps() > 0 ? a.round_steps() : 1;
  auto take = [&](const char* p, size_t bytes) -> Status {
    if (bytes != n * sizeof(float)) {
      return DataLoss(which + ": the aggregate has " + std::to_string(bytes / sizeof(float)) +
                      " floats, the "
                      "gradient " +
                      std::to_string(n) + (n == 0 ? " (an empty batch: pass the model's length)" : ""));
    }
    if (bytes > 0) std::memcpy(data, p, bytes);
    return Status::Ok();
  };
  switch (a.outcome()) {
    case v1::ConsumerAggregate::APPLIED: {
      if (extra.size() != 1) return DataLoss(which + ": aggregate without its data frame");
      LOFT_RETURN_IF_ERROR(take(static_cast<const char*>(extra[0].data()), extra[0].size()));
      return kAggregateApplied;
    }
    case v1::ConsumerAggregate::CARRIED: return kAggregateCarried;
    case v1::ConsumerAggregate::STALE: {
      uint64_t len = 0;
      if (extra.size() != 1 || extra[0].size() < sizeof len)
        return DataLoss(which + ": stale answer without state");
      const char* p = static_cast<const char*>(extra[0].data());
      std::memcpy(&len, p, sizeof len);
      if (len > extra[0].size() - sizeof len)
        return DataLoss(which + ": stale answer with a truncated state");
      LOFT_RETURN_IF_ERROR(take(p + sizeof len + len, extra[0].size() - sizeof len - len));
      batch->state.assign(p + sizeof len, len);
      return kAggregateStale;
    }
    default: return Aborted(which + ": " + a.message());
  }
}

Status ConsumerSession::PutState(const void* blob, size_t len) {
  if (!refused_.empty()) return FailedPrecondition("the agent refused this consumer: " + refused_);
  v1::Envelope env;
  env.mutable_consumer_state();
  std::vector<zmq::message_t> frames;
  LOFT_ASSIGN_OR_RETURN(zmq::message_t head, EnvelopeFrame(env));
  frames.push_back(std::move(head));
  frames.emplace_back(blob, len);
  return SendMultipart(sock_, frames).WithContext("consumer state");
}

StatusOr<std::pair<int64_t, std::string>> ConsumerSession::SyncState(int timeout_ms) {
  v1::Envelope env;
  env.mutable_consumer_sync_request();
  LOFT_RETURN_IF_ERROR(SendEnvelope(sock_, env).WithContext("consumer sync request"));
  v1::Envelope ans;
  LOFT_ASSIGN_OR_RETURN(auto extra,
                        Await(
                            timeout_ms, "the ring's state",
                            [](const v1::Envelope& e) { return e.has_consumer_sync_reply(); }, &ans));
  const auto& r = ans.consumer_sync_reply();
  if (!r.error().empty()) return Unavailable("state sync: " + r.error());
  std::string blob;
  if (!extra.empty()) blob = extra[0].to_string();
  return std::pair<int64_t, std::string>{r.round(), std::move(blob)};
}

}  // namespace loft::capi
