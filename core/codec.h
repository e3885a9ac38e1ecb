// Codec: the one place that turns an Envelope into bytes and back.
//
// Decode checks, in order: the frame size against the receiver's limit
// (ResourceExhausted), that the bytes parse as an Envelope
// (InvalidArgument), the protocol version (FailedPrecondition naming both
// versions), and that a body is set (InvalidArgument). A message that
// fails any check is never returned.
//
// Not responsible for: sockets or framing of multipart messages
// (core/zmq_util.h), or checking the body's fields (each service does).
// Thread-safety: free functions without shared state; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/proto/loft.pb.h"
#include "core/status.h"

namespace loft {

// 2: the ring's weight exchange carries each member's partition id and
// TrainingReport lists the applied partitions; a build speaking 1 is
// refused with a clear error instead of mixing exchange formats.
// 3: the ring's exchange is a RingHello message (it was packed bytes).
// 4: MembershipView lists its live nodes as `repeated Member` (it had four
// parallel lists, which a version-3 reader would see as an empty view).
constexpr uint32_t kProtocolVersion = 4;
// Default per-frame limit of every socket and decode: 16 MiB.
constexpr size_t kDefaultMaxMessageBytes = size_t{16} << 20;

// Serialises `env`, stamping protocol_version = kProtocolVersion when the
// caller left it 0. Fails (Internal) only if protobuf cannot serialise.
StatusOr<std::string> Encode(const v1::Envelope& env);
// Same, into `out` (reused buffer). Returns the status.
Status EncodeTo(const v1::Envelope& env, std::string* out);

// Parses one frame. See the class comment for the checks.
StatusOr<v1::Envelope> Decode(std::string_view bytes, size_t max_bytes = kDefaultMaxMessageBytes);

// Name of the envelope's body case ("fetch_request", "none", ...), for
// logs and metric labels.
std::string_view BodyName(const v1::Envelope& env);

// Envelope carrying an Error built from a non-OK status.
v1::Envelope MakeError(const Status& status, uint64_t request_id = 0);
// The Status an Error message carries (InvalidArgument-coded if the code
// is out of range).
Status StatusFromError(const v1::Error& error);

}  // namespace loft
