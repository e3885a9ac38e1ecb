// CheckAdvertisedEndpoint: what a RegisterRequest may advertise as its
// peer_endpoint or ring_endpoint. Every other agent connects to these
// (they travel in each MembershipView), so one bad value must be refused
// at registration, not found by every ring round: at most
// kMaxEndpointBytes, and tcp://HOST:PORT (HOST a name, an IPv4 address or
// a bracketed IPv6 address, not a wildcard; PORT 1..65535) or ipc://PATH
// (printable, no spaces).
//
// Not responsible for: whether anything listens there (a member that never
// answers is reported by its ring and evicted, scheduler/accusations.h).
// Thread-safety: a pure function.
#pragma once

#include <cstddef>
#include <string_view>

#include "core/status.h"

namespace loft::server {

inline constexpr size_t kMaxEndpointBytes = 256;

// OK for a well-formed endpoint, and for an empty one unless `required`.
// Otherwise InvalidArgument naming `field` and quoting (the start of) the value.
Status CheckAdvertisedEndpoint(std::string_view field, std::string_view endpoint, bool required);

}  // namespace loft::server
