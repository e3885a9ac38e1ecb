// TokenBucket: EMULATION of a link's rate for local experiments (issue 5:
// "an agent can emulate its spec link rate with a token bucket on its
// fetch path"). It makes a caller wait, through the injected Clock, until
// `bytes` fit the configured rate. It shapes only loft's own fetch
// traffic; it is not a network emulator (use TBF qdiscs for that).
//
// Not responsible for: latency (the PeerFetcher adds the spec's
// latency_ms once per partition's remote phase).
// Thread-safety: thread-safe.
#pragma once

#include <cstdint>
#include <mutex>

#include "core/clock.h"

namespace loft::agent {

class TokenBucket {
 public:
  // rate_mbps > 0 (megabits/s); burst_bytes: bucket depth.
  TokenBucket(Clock* clock, double rate_mbps, int64_t burst_bytes = 64 * 1024);
  // Waits (clock->SleepForMicros) until `bytes` have been paid for;
  // returns the microseconds waited.
  int64_t Acquire(int64_t bytes);
  double rate_mbps() const { return rate_mbps_; }

 private:
  Clock* clock_;
  double rate_mbps_;
  double bytes_per_us_;
  double burst_;
  std::mutex mu_;
  double tokens_;
  int64_t last_us_;
};

}  // namespace loft::agent
