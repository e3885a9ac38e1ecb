// RingHello codec: the first message every member of a ring round sends
// the others (phase 0xFE of the round's tag), as a v1::RingHello proto.
//
// Decoding is strict: bytes that do not parse, a protocol_version other
// than kProtocolVersion, a non-finite or negative sample count, a
// partition with no samples and a last_round below -1 or beyond the
// 32-bit ring round all give InvalidArgument naming what was wrong. A
// member whose hello is refused has no weight in the round.
//
// Not responsible for: sending, or deciding what a hello means for the
// round (edge_agent/round_decision.h).
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"

namespace loft::agent {

// The tag phase of a round's hellos (models::MakeTag).
inline constexpr uint8_t kHelloPhase = 0xFE;

// One member's hello, as the round decision uses it.
struct MemberHello {
  double b = 0;             // samples in its contribution; 0 = weight-0 join
  int64_t last_round = -1;  // last round it applied; -1 = none
  uint64_t hash = 0;        // models::TrainingStateHash of the state it holds
  bool reports = false;     // it reports the round to the scheduler
  uint64_t partition = 0;   // its partition of the round; 0 = none
  uint64_t length = 0;      // floats it all-reduces; 0 = not said (the built-in trainer)
};

std::vector<std::byte> EncodeHello(const MemberHello& h);
StatusOr<MemberHello> DecodeHello(std::span<const std::byte> bytes);

}  // namespace loft::agent
