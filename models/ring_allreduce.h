// RingAllReduce: Byzantine-robust all-reduce of one float vector per rank
// (BTARD-style, Gorbunov et al. 2022) over an abstract Transport.
//
// The vector (length d) is cut into N chunks, sizes differing by at most one
// (the first d mod N chunks are one longer); member at ring position c owns
// chunk c.
//  1. reduce-scatter: every member sends chunk c to its owner, in ring order
//     (position p sends to p+1, p+2, ...); the owner receives all N copies
//     and applies the configured robust reducer with the weights (b_i);
//  2. all-gather: every owner sends its reduced chunk to every member.
// Every member ends with the same vector. For coordinate-wise reducers
// (mean, weighted_mean, median, trimmed_mean) the result equals the reducer
// applied to the full vectors; multi_krum and centered_clipping are applied
// per chunk (as in BTARD), so they select/clip per chunk.
//
// Membership and failure: every message carries the view number and round
// in its tag, and Run raises the transport's tag floor, so messages of older
// views/rounds are dropped. One attempt has one deadline (timeout_ms from
// its start); a member that does not deliver ends the attempt with
// DeadlineExceeded (or Unavailable from the transport). `data` is left
// untouched on any error, so the caller can restart the same round with a
// new view among the survivors. A retry must use a higher view number
// (views < 2^24) and rounds must not decrease within a view: the tag floor
// drops everything below (view, round). A scatter payload of the wrong size counts
// as a Byzantine input: it becomes a NaN vector (robust reducers discard it)
// and the sender is listed in the report; a malformed all-gather payload
// fails the attempt with DataLoss.
//
// Not responsible for: deciding membership (the scheduler issues views),
// validating that all members pass the same weights, retrying.
// Thread-safety: one instance per rank, used by one thread.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "models/reducers.h"
#include "models/transport.h"

namespace loft::models {

struct RingView {
  uint32_t view = 0;
  std::vector<int> members;  // transport ranks in ring order; must include this rank
};

struct AllReduceOptions {
  ReducerOptions reducer;
  int64_t timeout_ms = 10000;  // per attempt, > 0
  Status Validate() const;
};

struct AllReduceReport {
  std::vector<int> malformed_from;  // transport ranks whose scatter payload had the wrong size
};

class RingAllReduce {
 public:
  RingAllReduce(Transport* transport, AllReduceOptions options, Clock* clock = SystemClock::Default())
      : transport_(transport), options_(std::move(options)), clock_(clock) {}

  // data: in: this rank's vector; out (on OK): the reduced vector.
  // weights: empty (equal) or one per member, in `view.members` order.
  // Every member must call Run with the same view, round, length, weights.
  Status Run(const RingView& view, uint32_t round, std::span<float> data, std::span<const double> weights,
             AllReduceReport* report = nullptr);

  // [begin, end) of chunk c when d values are split into n chunks.
  static std::pair<size_t, size_t> ChunkRange(size_t d, int n, int c);

 private:
  Transport* transport_;
  AllReduceOptions options_;
  Clock* clock_;
};

}  // namespace loft::models
