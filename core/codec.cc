#include "core/codec.h"

#include <fmt/format.h>

namespace loft {

Status EncodeTo(const v1::Envelope& env, std::string* out) {
  if (env.protocol_version() == 0) {
    v1::Envelope copy = env;
    copy.set_protocol_version(kProtocolVersion);
    if (!copy.SerializeToString(out)) return Internal("protobuf failed to serialise an Envelope");
    return OkStatus();
  }
  if (!env.SerializeToString(out)) return Internal("protobuf failed to serialise an Envelope");
  return OkStatus();
}

StatusOr<std::string> Encode(const v1::Envelope& env) {
  std::string out;
  LOFT_RETURN_IF_ERROR(EncodeTo(env, &out));
  return out;
}

StatusOr<v1::Envelope> Decode(std::string_view bytes, size_t max_bytes) {
  if (bytes.size() > max_bytes) {
    return ResourceExhausted(
        fmt::format("frame of {} bytes exceeds the limit of {} bytes", bytes.size(), max_bytes));
  }
  v1::Envelope env;
  if (bytes.size() > static_cast<size_t>(INT32_MAX) ||
      !env.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return InvalidArgument(fmt::format("frame of {} bytes is not a valid Envelope", bytes.size()));
  }
  if (env.protocol_version() != kProtocolVersion) {
    return FailedPrecondition(
        fmt::format("protocol version {} is not supported (this build speaks version {})",
                    env.protocol_version(), kProtocolVersion));
  }
  if (env.body_case() == v1::Envelope::BODY_NOT_SET) {
    return InvalidArgument("Envelope has no body (unknown or missing message type)");
  }
  return env;
}

std::string_view BodyName(const v1::Envelope& env) {
  using E = v1::Envelope;
  switch (env.body_case()) {
    case E::kRegisterRequest: return "register_request";
    case E::kRegisterReply: return "register_reply";
    case E::kHeartbeat: return "heartbeat";
    case E::kView: return "view";
    case E::kAssignment: return "assignment";
    case E::kPartitionDone: return "partition_done";
    case E::kPartitionFailed: return "partition_failed";
    case E::kFetchRequest: return "fetch_request";
    case E::kFetchReply: return "fetch_reply";
    case E::kStatusRequest: return "status_request";
    case E::kStatusReply: return "status_reply";
    case E::kError: return "error";
    case E::kServeGrant: return "serve_grant";
    case E::kCreditGrant: return "credit_grant";
    case E::kShutdown: return "shutdown";
    case E::kConsumerHello: return "consumer_hello";
    case E::kConsumerBatch: return "consumer_batch";
    case E::kConsumerReport: return "consumer_report";
    case E::kPeerReport: return "peer_report";
    case E::kConsumerAllreduce: return "consumer_allreduce";
    case E::kConsumerAggregate: return "consumer_aggregate";
    case E::kConsumerState: return "consumer_state";
    case E::kConsumerSyncRequest: return "consumer_sync_request";
    case E::kConsumerSyncReply: return "consumer_sync_reply";
    case E::kConsumerRefused: return "consumer_refused";
    case E::BODY_NOT_SET: return "none";
  }
  return "unknown";
}

v1::Envelope MakeError(const Status& status, uint64_t request_id) {
  v1::Envelope env;
  env.set_protocol_version(kProtocolVersion);
  auto* e = env.mutable_error();
  e->set_code(static_cast<int32_t>(status.code()));
  e->set_message(status.message());
  e->set_request_id(request_id);
  return env;
}

Status StatusFromError(const v1::Error& error) {
  int code = error.code();
  if (code <= 0 || code > static_cast<int>(StatusCode::kIOError)) {
    return InvalidArgument(fmt::format("peer error with unknown code {}: {}", code, error.message()));
  }
  return Status(static_cast<StatusCode>(code), error.message());
}

}  // namespace loft
