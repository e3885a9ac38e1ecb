// Transport: point-to-point, tagged, message-oriented byte delivery between
// the ranks of a job, as seen by ONE rank. RingAllReduce talks only to this
// interface; the in-memory implementation (models/in_memory_transport.h) is
// for tests, the ZeroMQ one lives in edge_agent/.
//
// Contract for implementations:
//  - Send never waits for the receiver to call Recv (messages are buffered,
//    as a ZeroMQ DEALER/ROUTER pair does); it may fail with Unavailable
//    when the peer is known to be gone or the send queue is full.
//  - Recv(from, tag) returns the payload of a message sent by `from` with
//    exactly `tag`; messages with other tags stay buffered for later Recv
//    calls. It waits at most timeout_ms and then returns DeadlineExceeded.
//  - SetTagFloor(t): messages with tag < t are dropped, both those already
//    buffered and those arriving later (stale views / rounds). Floors only
//    rise.
//  - Message boundaries and per-(sender, tag) FIFO order are preserved.
//  - RecvInto is Recv that copies the payload into the caller's buffer
//    (the ring's chunk buffers) instead of returning a new vector; the
//    default goes through Recv, an implementation may skip that copy.
//
// Tags used by RingAllReduce (MakeTag): bits 63..40 membership view (low 24
// bits), 39..8 round (the caller's 32-bit iteration counter), 7..0 phase.
// Because the view is in the high bits, raising the floor to the first tag
// of a new view drops everything from older views.
//
// Not responsible for: membership, authentication, serialisation of the
// payload (callers pass bytes).
// Thread-safety: one Transport object per rank, used by one thread at a
// time; different ranks' objects may be used concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "core/status.h"

namespace loft::models {

class Transport {
 public:
  virtual ~Transport() = default;
  // This endpoint's rank in [0, world_size()).
  virtual int rank() const = 0;
  // Number of addressable ranks (a membership view may use a subset).
  virtual int world_size() const = 0;
  virtual Status Send(int to_rank, uint64_t tag, std::span<const std::byte> payload) = 0;
  virtual StatusOr<std::vector<std::byte>> Recv(int from_rank, uint64_t tag, int64_t timeout_ms) = 0;
  // As Recv; returns the payload's size and copies the payload into `out`
  // only when that size is out.size() (otherwise `out` is untouched; the
  // message is consumed either way).
  virtual StatusOr<size_t> RecvInto(int from_rank, uint64_t tag, int64_t timeout_ms,
                                    std::span<std::byte> out) {
    LOFT_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, Recv(from_rank, tag, timeout_ms));
    if (bytes.size() == out.size() && !bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
    return bytes.size();
  }
  virtual void SetTagFloor(uint64_t floor) = 0;
};

inline constexpr uint64_t MakeTag(uint32_t view, uint32_t round, uint8_t phase) {
  return (static_cast<uint64_t>(view & 0xFFFFFFu) << 40) | (static_cast<uint64_t>(round) << 8) | phase;
}
inline constexpr uint32_t TagView(uint64_t tag) {
  return static_cast<uint32_t>(tag >> 40);
}
inline constexpr uint32_t TagRound(uint64_t tag) {
  return static_cast<uint32_t>(tag >> 8);
}

}  // namespace loft::models
