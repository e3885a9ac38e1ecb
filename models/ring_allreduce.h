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
// Verified chunks (tolerance f > 0): a plain owner can set 1/N of the model
// to anything (every member applies the same values, so parameter hashes
// still agree). With f > 0 chunk c is reduced by the r = min(2f+1, N)
// members at ring positions c, c+1, ..., c+r-1; every member sends chunk c
// to each of them (scatter phase 16+j to replica j) and each replica sends
// its result to every member (gather phase 80+j). A member takes the
// coordinate-wise median of the r results (non-finite values rank last):
// honest replicas reduce the same inputs deterministically, so with at most
// f Byzantine replicas f+1 identical honest values straddle the median and
// the taken value is exactly the honest one. A replica whose chunk differs
// from the median while at least f+1 replicas match it exactly is listed in
// chunk_mismatch_from (a malformed result counts as all-NaN and is listed
// too). Cost versus the plain ring: r times the traffic of both phases and
// r times the reduce work, plus a median of r values per coordinate
// (bench/ring_verify_bench.cc). Not protected: a Byzantine *sender* that
// gives different inputs to different replicas makes honest replicas
// disagree; the median then lies between honest results, and nobody is
// listed unless f+1 replicas still agree.
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
#include <functional>
#include <span>
#include <string>
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
  // f: Byzantine members tolerated (training.byzantine_tolerance). 0 = the
  // plain ring (one owner per chunk, trusted). f > 0: each chunk is reduced
  // by min(2f+1, N) owners and every member takes the coordinate-wise
  // median of their results (see "Verified chunks" above). In [0, 31].
  int tolerance = 0;
  // Attack hook (byzantine: chunk_garbage / chunk_scale, and tests): called
  // on each chunk this member reduced, before it is sent. Empty = honest.
  std::function<void(std::span<float> reduced_chunk)> corrupt_owned_chunk;
  Status Validate() const;
};

struct AllReduceReport {
  std::vector<int> malformed_from;  // transport ranks whose scatter payload had the wrong size
  // Verified chunks (tolerance > 0): owners whose reduced chunk (or its
  // size) differed from the one at least f+1 owners of that chunk agreed on.
  std::vector<int> chunk_mismatch_from;
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

  // Verified chunks: out[k] = the median of results[j][k] over the r
  // replicas (non-finite values rank last). Each result must have
  // out.size() values. Returns true when it took the fast path: all r
  // results bitwise identical, copied instead of a median per coordinate.
  static bool MedianOfReplicas(std::span<const std::span<const float>> results, std::span<float> out);

 private:
  // The f > 0 path: pos = this rank's ring position; deadline in clock micros.
  Status RunVerified(const RingView& view, int pos, uint32_t round, std::span<float> data,
                     std::span<const double> weights, int64_t deadline_us, const std::string& ctx,
                     AllReduceReport* report);

  Transport* transport_;
  AllReduceOptions options_;
  Clock* clock_;
};

}  // namespace loft::models
