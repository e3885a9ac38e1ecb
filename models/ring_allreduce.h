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
// still agree). With f > 0 chunk c has r2 = min(2f+1, N) replicas, the
// members at ring positions c, c+1, ..., c+r2-1 (replica j at c+j): the
// first r1 = min(f+1, N) are its primaries, the others its backups.
//  1. Scatter: every member sends chunk c to its r1 primaries (phase 16+j).
//  2. Each primary reduces; in round t primary k = t mod r1 of every chunk
//     sends its full result to every member (phase 80+k; each member is
//     primary k of exactly one chunk, so it sends N-1 full chunks, as in the
//     plain ring) and the other primaries send only its BLAKE2b-256 digest
//     (phase 144+j, 32 bytes).
//  3. A member takes the full copy when every primary claims its digest
//     (for a copy it reduced itself or received, the digest it computed):
//     at least one of the f+1 primaries is honest, honest replicas reduce
//     the same inputs to the same bits, and BLAKE2b's collision resistance
//     keeps a Byzantine full sender from matching the honest digest with
//     other bits. Otherwise it disputes the chunk.
//  4. Every member sends every other one a bitmap of the chunks it disputes
//     (phase 208, ceil(N/8) bytes; all zero in the honest case).
//  5. A chunk anyone disputes is escalated: every member sends its copy of
//     the chunk to the backups (phase 16+j), the backups reduce it and, with
//     the primaries that sent digests, send their full results to each
//     member that disputes it (phase 80+j). That member now has r2 claims
//     and takes, as models/replica_vote.h decides, a copy whose digest at
//     least f+1 replicas claim (with at most f Byzantine replicas, bitwise
//     the honest result), or if none does, the coordinate-wise median of the
//     r2 copies (non-finite values rank last).
// A replica whose digest or copy differs from the taken result while at
// least f+1 replicas match it is listed in chunk_mismatch_from (a malformed
// digest or copy matches nothing). A backup waits for every member's copy of
// the escalated chunk: a member that withholds it (or a Byzantine member
// that disputes a chunk towards some members only) ends the attempt with
// DeadlineExceeded for those waiting, as a silent member does. Cost versus
// the plain ring when all primaries agree: r1 times the scatter traffic, the
// same full chunks in the all-gather plus (r1-1)(N-1) digests and N-1
// bitmaps per member ((r1+1)/2 times the plain traffic: 1.5x for f = 1), r1
// times the reduce work, BLAKE2b over about d floats per member, and one
// exchange of bitmaps before a member may return; an escalated chunk costs
// its scatter to the backups and up to r2-1 full copies per disputing
// member (bench/ring_verify_bench.cc). Not protected: a Byzantine *sender*
// that gives different inputs to different replicas makes honest replicas
// disagree; the median then lies between honest results, and nobody is
// listed unless f+1 replicas still agree.
//
// Compression (AllReduceOptions::compression, models/chunk_codec.h): with
// int8 every chunk message (scatter copies, full results, fetched copies)
// is [float32 scale][int8 x len], about 1/4 of the float bytes; digests and
// bitmaps are unchanged. Every member quantizes EVERY chunk of its input
// once, the chunks it reduces itself included, and a reducer sees the
// decoded chunks (with the same weights as without compression), so all
// replicas of a chunk reduce the same decoded inputs and honest replicas
// still agree bit for bit. A chunk holding a NaN or Inf decodes to all-NaN,
// which the robust reducers discard. A reduced chunk is quantized the same
// way (after corrupt_owned_chunk; tamper_gather sees the encoded bytes) and
// every member, the owner and the replicas included, takes the decoded
// values: all members end with the same bits. Verified chunks: digests
// cover the encoded payload as sent; escalation sends encoded copies to the
// backups and fetched results are encoded; the median is over the decoded
// copies. Error feedback: Run's `residual` returns input - decoded(what this
// member sent) per element (0 in a chunk that held a non-finite value, and
// all 0 without compression); the caller owns it and adds it to its next
// round's input, each member its own. The all-gather's quantization error
// is not fed back: nobody but the chunk's replicas sees the unquantized
// result, and a residual kept by them would have to stay identical across
// replicas, views and disputes.
//
// Membership and failure: every message carries the view number and round
// in its tag, and Run raises the transport's tag floor, so messages of older
// views/rounds are dropped. One attempt has one deadline (timeout_ms from
// its start); a member that does not deliver ends the attempt with
// DeadlineExceeded (or Unavailable from the transport). `data` is left
// untouched on any error, so the caller can restart the same round with a
// new view among the survivors. A retry must use a higher view number
// (views < 2^24) and rounds must not decrease within a view: the tag floor
// drops everything below (view, round). A scatter payload of the wrong size
// (ChunkWireBytes of the chunk for the ring's compression) counts as a
// Byzantine input: it becomes a NaN vector (robust reducers discard it)
// and the sender is listed in the report, as is the sender of a dispute
// bitmap of the wrong size (its disputes are not served); a malformed
// all-gather payload fails the plain attempt with DataLoss (verified: see
// above).
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
#include "models/chunk_codec.h"
#include "models/reducers.h"
#include "models/transport.h"

namespace loft::models {

struct RingView {
  uint32_t view = 0;
  std::vector<int> members;  // transport ranks in ring order; must include this rank
};

// What a verified all-gather message carries (AllReduceOptions::tamper_gather).
enum class GatherPayload {
  kFullCopy,  // the round's full result of a chunk, sent to every member
  kDigest,    // BLAKE2b-256 of a result, sent instead of the full copy
  kFetched,   // a full result (primary or backup) sent to a member that disputes the chunk
};

struct AllReduceOptions {
  ReducerOptions reducer;
  int64_t timeout_ms = 10000;  // per attempt, > 0
  // f: Byzantine members tolerated (training.byzantine_tolerance). 0 = the
  // plain ring (one owner per chunk, trusted). f > 0: each chunk is reduced
  // by min(f+1, N) primaries, and by min(2f+1, N) replicas when they
  // disagree (see "Verified chunks" above). In [0, 31].
  int tolerance = 0;
  // Wire format of every chunk message (see "Compression" above). Every
  // member of a ring must use the same.
  Compression compression = Compression::kNone;
  // Attack hook (byzantine: chunk_garbage / chunk_scale, and tests): called
  // on each chunk this member reduced, before it is sent. Empty = honest.
  std::function<void(std::span<float> reduced_chunk)> corrupt_owned_chunk;
  // Test hook (verified chunks): called on each all-gather payload this
  // member is about to send to `to_rank`, after corrupt_owned_chunk; it may
  // change the bytes (not the size) and returns false to withhold the
  // message. Empty = honest.
  std::function<bool(GatherPayload kind, int to_rank, std::span<std::byte> payload)> tamper_gather;
  Status Validate() const;
};

struct AllReduceReport {
  // Transport ranks whose scatter payload (or verified fetch request) had the wrong size.
  std::vector<int> malformed_from;
  // Verified chunks (tolerance > 0): replicas whose digest or full copy (or
  // its size) differed from the result at least f+1 replicas of a disputed
  // chunk agreed on.
  std::vector<int> chunk_mismatch_from;
  // Verified chunks: full copies this member received for chunks it
  // disputed (0 when every primary agreed).
  int64_t fetched_copies = 0;
};

class RingAllReduce {
 public:
  RingAllReduce(Transport* transport, AllReduceOptions options, Clock* clock = SystemClock::Default())
      : transport_(transport), options_(std::move(options)), clock_(clock) {}

  // data: in: this rank's vector; out (on OK): the reduced vector.
  // weights: empty (equal) or one per member, in `view.members` order.
  // Every member must call Run with the same view, round, length, weights.
  // residual (optional, error feedback): on OK, data.size() values: the
  // input minus the decoded values this member sent (see "Compression"
  // above); untouched on error. The caller keeps it for its next round.
  Status Run(const RingView& view, uint32_t round, std::span<float> data, std::span<const double> weights,
             AllReduceReport* report = nullptr, std::vector<float>* residual = nullptr);

  // [begin, end) of chunk c when d values are split into n chunks.
  static std::pair<size_t, size_t> ChunkRange(size_t d, int n, int c);

 private:
  Transport* transport_;
  AllReduceOptions options_;
  Clock* clock_;
};

}  // namespace loft::models
