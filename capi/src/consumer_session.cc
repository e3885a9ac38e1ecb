#include "capi/src/consumer_session.h"

#include <chrono>
#include <cmath>
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
  LOFT_RETURN_IF_ERROR(SendEnvelope(s->sock_, hello));
  return s;
}

ConsumerSession::~ConsumerSession() = default;

StatusOr<std::unique_ptr<ConsumerBatchData>> ConsumerSession::Next(int timeout_ms) {
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  while (true) {
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
      return ZmqError(e, "consumer poll");
    }
    if (n == 0) {
      return DeadlineExceeded("timeout after " + std::to_string(timeout_ms) + " ms waiting for a batch on " +
                              endpoint_);
    }
    std::vector<zmq::message_t> extra;
    auto env = RecvEnvelope(sock_, kDefaultMaxMessageBytes, &extra);
    if (!env.ok()) return env.status().WithContext("consumer receive");
    if (!env->has_consumer_batch()) continue;  // nothing else is meant for consumers
    const auto& b = env->consumer_batch();
    if (b.labels_size() != b.sample_ids_size() || extra.size() != static_cast<size_t>(b.sample_ids_size())) {
      return DataLoss("consumer batch " + std::to_string(b.partition_id()) + ": " +
                      std::to_string(b.sample_ids_size()) + " ids, " + std::to_string(b.labels_size()) +
                      " labels, " + std::to_string(extra.size()) + " payload frames");
    }
    auto out = std::make_unique<ConsumerBatchData>();
    out->partition_id = b.partition_id();
    out->sample_ids.assign(b.sample_ids().begin(), b.sample_ids().end());
    out->labels.assign(b.labels().begin(), b.labels().end());
    out->payloads = std::move(extra);
    return out;
  }
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
  LOFT_RETURN_IF_ERROR(SendEnvelope(sock_, env).WithContext("consumer report"));
  batch->reported = true;
  return Status::Ok();
}

}  // namespace loft::capi
