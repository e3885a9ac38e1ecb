// Small helpers over cppzmq shared by loft-agent and loft-scheduler.
//
// - MakeSocket: every socket gets ZMQ_MAXMSGSIZE (a peer sending a larger
//   frame is disconnected by libzmq), linger, high-water marks and, for
//   ROUTER sockets, ZMQ_ROUTER_MANDATORY (an unknown or full peer is an
//   error, not a silent drop).
// - CURVE server/client setup from core/curve.h key pairs.
// - Send/receive of an Envelope frame through core/codec.h, and multipart
//   messages whose first frames are routing ids / envelopes and whose
//   remaining frames are raw payloads.
// Every cppzmq exception is caught here and returned as a Status. A send
// that would block (EAGAIN with dontwait, or a full ROUTER peer) returns
// ResourceExhausted: that is backpressure, the caller decides to retry
// or drop. A ROUTER send to a peer that is gone returns Unavailable.
//
// Message layout used by loft (DEALER <-> ROUTER, no empty delimiter):
//   DEALER sends   [envelope][raw frame]*
//   ROUTER reads   [routing id][envelope][raw frame]*
//
// Not responsible for: poll loops, retries, authentication policy
// (core/curve.h decides which keys may connect).
// Thread-safety: ZeroMQ sockets are not thread-safe; use each socket from
// one thread. The functions keep no state of their own.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "core/codec.h"
#include "core/curve.h"
#include "core/status.h"

namespace loft {

struct SocketOptions {
  size_t max_message_bytes = kDefaultMaxMessageBytes;  // ZMQ_MAXMSGSIZE, > 0
  int linger_ms = 0;                                   // ZMQ_LINGER on close
  int send_hwm = 1000;                                 // ZMQ_SNDHWM, messages
  int recv_hwm = 1000;                                 // ZMQ_RCVHWM, messages
  int send_timeout_ms = -1;                            // ZMQ_SNDTIMEO; -1 = block
  int recv_timeout_ms = -1;                            // ZMQ_RCVTIMEO; -1 = block
  std::string routing_id;                              // ZMQ_ROUTING_ID for DEALERs; empty = libzmq picks
  int tos = 0;                                         // ZMQ_TOS (IP type of service); 0 = unset
  // CURVE: a server socket needs `curve_own` and `curve_server = true`; a
  // client needs `curve_own` and `curve_server_public`. Unset = plain
  // (only allowed on loopback: see CheckInsecureAllowed in core/curve.h).
  std::optional<CurveKeyPair> curve_own;
  bool curve_server = false;
  std::string curve_server_public;  // Z85, client side
};

// IP type of service "low delay" (IPTOS_LOWDELAY): the agents' request_tos
// and the scheduler's control_tos by default, so that queues honouring it
// (pfifo_fast's band 0, the testbed's links, DSCP-aware routers) send
// requests and control messages ahead of bulk records.
inline constexpr int kLowDelayTos = 0x10;
// Empty when `tos` is a type-of-service byte (0..255, 0 = unset); else what
// is wrong with it, to follow the setting's name in an error.
std::string TosProblem(int tos);

// A fresh routing id for one connection: "<prefix>/<128 random bits in
// hex>". Unique per connection and, under CURVE, secret (sent encrypted in
// the handshake), so no other key holder can claim it at a ROUTER; the
// prefix only helps logs. Not a seedable simulation input.
std::string UniqueRoutingId(const std::string& prefix);

// Creates and configures a socket. Errors name the option that failed.
StatusOr<zmq::socket_t> MakeSocket(zmq::context_t& ctx, zmq::socket_type type, const SocketOptions& opts);

Status Bind(zmq::socket_ref s, const std::string& endpoint);
Status Connect(zmq::socket_ref s, const std::string& endpoint);
// The endpoint the socket bound last (resolves tcp://127.0.0.1:* ports).
StatusOr<std::string> LastEndpoint(zmq::socket_ref s);

// One frame holding `env` encoded by the codec.
StatusOr<zmq::message_t> EnvelopeFrame(const v1::Envelope& env);

// Sends the frames as one multipart message (all or none are queued).
// `frames` are consumed.
Status SendMultipart(zmq::socket_ref s, std::vector<zmq::message_t>& frames, bool dontwait = false);
// Sends one Envelope (optionally after a routing id, for ROUTER sockets).
Status SendEnvelope(zmq::socket_ref s, const v1::Envelope& env, bool dontwait = false);
Status SendEnvelopeTo(zmq::socket_ref router, const zmq::message_t& routing_id, const v1::Envelope& env,
                      bool dontwait = false);

// Receives every frame of one message. With dontwait and nothing queued
// returns an empty vector. A message with more than `max_frames` frames
// is read to its end and dropped (ResourceExhausted). A receive timeout
// (ZMQ_RCVTIMEO) returns DeadlineExceeded.
StatusOr<std::vector<zmq::message_t>> RecvMultipart(zmq::socket_ref s, bool dontwait = false,
                                                    size_t max_frames = 4096);

// Receives one message and decodes its first frame as an Envelope;
// `extra` (if given) gets the remaining raw frames.
StatusOr<v1::Envelope> RecvEnvelope(zmq::socket_ref s, size_t max_bytes = kDefaultMaxMessageBytes,
                                    std::vector<zmq::message_t>* extra = nullptr);

// Metadata property of a received frame ("User-Id", "Peer-Address"), or
// "" when the frame has none.
std::string FrameProperty(const zmq::message_t& frame, const char* property);

// Converts a cppzmq exception to a Status ("<what>: <zmq error>").
Status ZmqError(const zmq::error_t& e, const std::string& what);

}  // namespace loft
