#include "core/zmq_util.h"

#include <fmt/format.h>

#include <random>

namespace loft {

Status ZmqError(const zmq::error_t& e, const std::string& what) {
  int n = e.num();
  std::string msg = fmt::format("{}: {}", what, e.what());
  if (n == EAGAIN) return ResourceExhausted(msg + " (backpressure)");
  if (n == EHOSTUNREACH) return Unavailable(msg);
  if (n == ETERM) return Aborted(msg);
  if (n == EINVAL || n == EPROTONOSUPPORT || n == ENOCOMPATPROTO) return InvalidArgument(msg);
  return Unavailable(msg);
}

std::string UniqueRoutingId(const std::string& prefix) {
  std::random_device rd;
  std::string out = prefix + "/";
  for (int i = 0; i < 4; ++i) out += fmt::format("{:08x}", static_cast<uint32_t>(rd()));
  return out;
}

std::string TosProblem(int tos) {
  if (tos >= 0 && tos <= 255) return "";
  return fmt::format("must be an IP type-of-service byte 0..255 (got {}; {} = low delay, 0 = unmarked)", tos,
                     kLowDelayTos);
}

StatusOr<zmq::socket_t> MakeSocket(zmq::context_t& ctx, zmq::socket_type type, const SocketOptions& o) {
  if (o.max_message_bytes == 0) return InvalidArgument("max_message_bytes must be > 0");
  std::string step = "create socket";
  try {
    zmq::socket_t s(ctx, type);
    step = "ZMQ_MAXMSGSIZE";
    s.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(o.max_message_bytes));
    step = "ZMQ_LINGER";
    s.set(zmq::sockopt::linger, o.linger_ms);
    step = "ZMQ_SNDHWM";
    s.set(zmq::sockopt::sndhwm, o.send_hwm);
    step = "ZMQ_RCVHWM";
    s.set(zmq::sockopt::rcvhwm, o.recv_hwm);
    step = "ZMQ_SNDTIMEO";
    s.set(zmq::sockopt::sndtimeo, o.send_timeout_ms);
    step = "ZMQ_RCVTIMEO";
    s.set(zmq::sockopt::rcvtimeo, o.recv_timeout_ms);
    if (type == zmq::socket_type::router) {
      step = "ZMQ_ROUTER_MANDATORY";
      s.set(zmq::sockopt::router_mandatory, 1);
    }
    if (o.tos != 0) {
      step = "ZMQ_TOS";
      s.set(zmq::sockopt::tos, o.tos);
    }
    if (!o.routing_id.empty()) {
      step = "ZMQ_ROUTING_ID";
      s.set(zmq::sockopt::routing_id, o.routing_id);
    }
    if (o.curve_own) {
      if (!IsValidZ85Key(o.curve_own->public_key) || !IsValidZ85Key(o.curve_own->secret_key)) {
        return InvalidArgument("CURVE key pair is not two 40-character Z85 keys");
      }
      if (o.curve_server) {
        step = "ZMQ_CURVE_SERVER";
        s.set(zmq::sockopt::zap_domain, "loft");
        s.set(zmq::sockopt::curve_server, 1);
        s.set(zmq::sockopt::curve_secretkey, o.curve_own->secret_key);
      } else {
        if (!IsValidZ85Key(o.curve_server_public)) {
          return InvalidArgument("CURVE client needs the server's 40-character Z85 public key");
        }
        step = "CURVE client keys";
        s.set(zmq::sockopt::curve_serverkey, o.curve_server_public);
        s.set(zmq::sockopt::curve_publickey, o.curve_own->public_key);
        s.set(zmq::sockopt::curve_secretkey, o.curve_own->secret_key);
      }
    } else if (o.curve_server) {
      return InvalidArgument("curve_server set without a key pair");
    }
    return s;
  } catch (const zmq::error_t& e) {
    return ZmqError(e, "socket setup (" + step + ")");
  }
}

Status Bind(zmq::socket_ref s, const std::string& endpoint) {
  try {
    s.bind(endpoint);
    return OkStatus();
  } catch (const zmq::error_t& e) {
    return ZmqError(e, "bind " + endpoint);
  }
}

Status Connect(zmq::socket_ref s, const std::string& endpoint) {
  try {
    s.connect(endpoint);
    return OkStatus();
  } catch (const zmq::error_t& e) {
    return ZmqError(e, "connect " + endpoint);
  }
}

StatusOr<std::string> LastEndpoint(zmq::socket_ref s) {
  try {
    return s.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return ZmqError(e, "ZMQ_LAST_ENDPOINT");
  }
}

StatusOr<zmq::message_t> EnvelopeFrame(const v1::Envelope& env) {
  std::string bytes;
  LOFT_RETURN_IF_ERROR(EncodeTo(env, &bytes));
  return zmq::message_t(bytes.data(), bytes.size());
}

Status SendMultipart(zmq::socket_ref s, std::vector<zmq::message_t>& frames, bool dontwait) {
  if (frames.empty()) return InvalidArgument("cannot send a message with no frames");
  try {
    for (size_t i = 0; i < frames.size(); ++i) {
      auto flags = i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
      if (dontwait) flags = flags | zmq::send_flags::dontwait;
      auto sent = s.send(frames[i], flags);
      if (!sent) {
        // Only the first frame can block: libzmq queues multipart messages atomically.
        return ResourceExhausted(
            fmt::format("send would block at frame {} of {} (backpressure)", i + 1, frames.size()));
      }
    }
    return OkStatus();
  } catch (const zmq::error_t& e) {
    return ZmqError(e, "send");
  }
}

Status SendEnvelope(zmq::socket_ref s, const v1::Envelope& env, bool dontwait) {
  std::vector<zmq::message_t> frames;
  LOFT_ASSIGN_OR_RETURN(zmq::message_t f, EnvelopeFrame(env));
  frames.push_back(std::move(f));
  return SendMultipart(s, frames, dontwait);
}

Status SendEnvelopeTo(zmq::socket_ref router, const zmq::message_t& routing_id, const v1::Envelope& env,
                      bool dontwait) {
  std::vector<zmq::message_t> frames;
  frames.emplace_back(routing_id.data(), routing_id.size());
  LOFT_ASSIGN_OR_RETURN(zmq::message_t f, EnvelopeFrame(env));
  frames.push_back(std::move(f));
  return SendMultipart(router, frames, dontwait);
}

StatusOr<std::vector<zmq::message_t>> RecvMultipart(zmq::socket_ref s, bool dontwait, size_t max_frames) {
  std::vector<zmq::message_t> frames;
  size_t total = 0;
  try {
    while (true) {
      zmq::message_t m;
      auto flags =
          (dontwait && frames.empty() && total == 0) ? zmq::recv_flags::dontwait : zmq::recv_flags::none;
      auto got = s.recv(m, flags);
      if (!got) {
        if (total == 0) {
          if (dontwait) return frames;  // nothing queued
          return DeadlineExceeded("receive timed out");
        }
        return Internal("multipart message ended early");
      }
      ++total;
      bool more = m.more();
      if (frames.size() < max_frames) frames.push_back(std::move(m));
      if (!more) break;
    }
  } catch (const zmq::error_t& e) {
    return ZmqError(e, "recv");
  }
  if (total > max_frames) {
    return ResourceExhausted(fmt::format("message of {} frames exceeds the limit of {}", total, max_frames));
  }
  return frames;
}

StatusOr<v1::Envelope> RecvEnvelope(zmq::socket_ref s, size_t max_bytes, std::vector<zmq::message_t>* extra) {
  LOFT_ASSIGN_OR_RETURN(std::vector<zmq::message_t> frames, RecvMultipart(s));
  if (frames.empty()) return Internal("empty message");
  auto env =
      Decode(std::string_view(static_cast<const char*>(frames[0].data()), frames[0].size()), max_bytes);
  if (extra) {
    extra->clear();
    for (size_t i = 1; i < frames.size(); ++i) extra->push_back(std::move(frames[i]));
  }
  return env;
}

std::string FrameProperty(const zmq::message_t& frame, const char* property) {
  const char* v = zmq_msg_gets(frame.handle(), property);
  return v ? std::string(v) : std::string();
}

}  // namespace loft
