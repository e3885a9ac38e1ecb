#include "models/ring_allreduce.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string>

#include "models/replica_vote.h"

namespace loft::models {

Status AllReduceOptions::Validate() const {
  if (timeout_ms <= 0) return InvalidArgument("all-reduce timeout_ms must be > 0");
  if (tolerance < 0 || tolerance > 31)
    return InvalidArgument("all-reduce tolerance " + std::to_string(tolerance) + " is not in [0, 31]");
  if (compression != Compression::kNone && compression != Compression::kInt8) {
    return InvalidArgument("all-reduce compression " + std::to_string(static_cast<int>(compression)) +
                           " is not none (0) or int8 (1)");
  }
  return reducer.Validate();
}

std::pair<size_t, size_t> RingAllReduce::ChunkRange(size_t d, int n, int c) {
  const size_t base = d / static_cast<size_t>(n), extra = d % static_cast<size_t>(n);
  const size_t cc = static_cast<size_t>(c);
  const size_t begin = cc * base + std::min(cc, extra);
  return {begin, begin + base + (cc < extra ? 1 : 0)};
}

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// This member's input as the ring sends it: per chunk, the payload and the
// values its replicas reduce (the decoded payload). Without compression
// both are the caller's floats (no copy); with int8 every chunk is encoded
// (and decoded) once, the chunk this member reduces itself included.
class SentInput {
 public:
  SentInput(Compression compression, std::span<const float> data, int n)
      : compression_(compression), data_(data), n_(n) {
    if (compression_ == Compression::kNone) return;
    decoded_.resize(data.size());
    wire_.resize(data.size() + sizeof(float) * static_cast<size_t>(n));
    for (int c = 0; c < n; ++c) {
      const auto [b, e] = RingAllReduce::ChunkRange(data.size(), n, c);
      const std::span<std::byte> w =
          std::span(wire_).subspan(WireBegin(c), ChunkWireBytes(compression_, e - b));
      EncodeInt8(data.subspan(b, e - b), w);
      DecodeInt8(w, std::span(decoded_).subspan(b, e - b));
    }
  }
  size_t size() const { return data_.size(); }
  // The values the replicas of chunk c reduce as this member's copy.
  std::span<const float> values(int c) const {
    const auto [b, e] = RingAllReduce::ChunkRange(data_.size(), n_, c);
    const std::span<const float> all = compression_ == Compression::kNone ? data_ : std::span(decoded_);
    return all.subspan(b, e - b);
  }
  // The chunk message this member sends for chunk c.
  std::span<const std::byte> payload(int c) const {
    if (compression_ == Compression::kNone) return std::as_bytes(values(c));
    const auto [b, e] = RingAllReduce::ChunkRange(data_.size(), n_, c);
    return std::span(wire_).subspan(WireBegin(c), ChunkWireBytes(compression_, e - b));
  }
  // Error feedback: input - decoded per element; 0 where the decoded value
  // is not finite (a chunk that held NaN/Inf: a NaN residual would poison
  // every later round) and everywhere without compression.
  void Residual(std::vector<float>* out) const {
    out->assign(data_.size(), 0.0f);
    if (compression_ == Compression::kNone) return;
    for (size_t i = 0; i < data_.size(); ++i) {
      if (std::isfinite(decoded_[i])) (*out)[i] = data_[i] - decoded_[i];
    }
  }

 private:
  // Chunk c's message in wire_: the messages of chunks 0..c-1 (4 + len each) before it.
  size_t WireBegin(int c) const {
    return RingAllReduce::ChunkRange(data_.size(), n_, c).first + sizeof(float) * static_cast<size_t>(c);
  }
  Compression compression_;
  std::span<const float> data_;
  int n_;
  std::vector<float> decoded_;   // int8: the decoded input
  std::vector<std::byte> wire_;  // int8: the n chunk messages, in chunk order
};

// A reduced chunk as it is sent: without compression its own bytes; with
// int8 its encoding, in *wire, and `chunk` becomes the decoded values (what
// every member takes, this one included).
std::span<const std::byte> EncodeResult(Compression compression, std::span<float> chunk,
                                        std::vector<std::byte>* wire) {
  if (compression == Compression::kNone) return std::as_bytes(std::span<const float>(chunk));
  wire->resize(ChunkWireBytes(compression, chunk.size()));
  EncodeInt8(chunk, *wire);
  DecodeInt8(*wire, chunk);
  return *wire;
}

// What one member's attempt at one round works with.
struct Attempt {
  Transport* transport;
  const AllReduceOptions& options;
  Clock* clock;
  const RingView& view;
  int pos;  // this member's ring position
  uint32_t round;
  std::span<const double> weights;
  int64_t deadline_us;  // clock micros
  const std::string& ctx;
  AllReduceReport* report;  // may be null
  const SentInput& sent;

  int n() const { return static_cast<int>(view.members.size()); }
  size_t d() const { return sent.size(); }
  Compression compression() const { return options.compression; }
  uint64_t Tag(int phase) const { return MakeTag(view.view, round, static_cast<uint8_t>(phase)); }
  int64_t RemainingMs() const {
    return std::max<int64_t>(0, (deadline_us - clock->NowMicros() + 999) / 1000);
  }
  // Receives one chunk message of out.size() floats from ring position
  // `from` and returns its size; when that is ChunkWireBytes (compression,
  // out.size()), `out` holds the decoded values (int8: *wire the payload).
  StatusOr<size_t> RecvChunk(int from, uint64_t tag, std::span<float> out,
                             std::vector<std::byte>* wire) const {
    if (compression() == Compression::kNone)
      return transport->RecvInto(view.members[from], tag, RemainingMs(), std::as_writable_bytes(out));
    wire->resize(ChunkWireBytes(compression(), out.size()));
    LOFT_ASSIGN_OR_RETURN(const size_t got,
                          transport->RecvInto(view.members[from], tag, RemainingMs(), *wire));
    if (got == wire->size()) DecodeInt8(*wire, out);
    return got;
  }
  // A chunk payload's bytes as ReplicaClaim::payload (empty = the copy's own bytes).
  std::span<const std::byte> ClaimPayload(std::span<const std::byte> wire) const {
    return compression() == Compression::kNone ? std::span<const std::byte>() : wire;
  }
  void Malformed(int from) const {
    if (report) report->malformed_from.push_back(view.members[from]);
  }
};

// The plain ring (tolerance 0): every member sends chunk c to its owner,
// the owner reduces and sends the result to every member.
Status RunPlain(const Attempt& a, std::vector<float>* result) {
  const int n = a.n(), pos = a.pos;
  const uint64_t scatter_tag = a.Tag(1), gather_tag = a.Tag(2);
  // 1. Reduce-scatter: send chunk c to its owner, nearest ring neighbour first.
  for (int s = 1; s < n; ++s) {
    const int c = (pos + s) % n;
    LOFT_RETURN_IF_ERROR(
        a.transport->Send(a.view.members[c], scatter_tag, a.sent.payload(c)).WithContext(a.ctx));
  }
  const std::span<const float> own = a.sent.values(pos);
  const size_t len = own.size();
  std::vector<std::vector<float>> copies(n);
  copies[pos].assign(own.begin(), own.end());
  std::vector<std::byte> wire;
  for (int s = 1; s < n; ++s) {
    const int src = (pos - s + n) % n;
    copies[src].resize(len);
    LOFT_ASSIGN_OR_RETURN(const size_t got, a.RecvChunk(src, scatter_tag, copies[src], &wire));
    if (got != ChunkWireBytes(a.compression(), len)) {
      copies[src].assign(len, kNaN);
      a.Malformed(src);
    }
  }
  std::vector<std::span<const float>> inputs(copies.begin(), copies.end());
  result->assign(a.d(), 0.0f);
  const size_t mb = RingAllReduce::ChunkRange(a.d(), n, pos).first;
  std::span<float> mine(result->data() + mb, len);
  LOFT_RETURN_IF_ERROR(Reduce(a.options.reducer, inputs, a.weights, mine)
                           .WithContext(a.ctx + " chunk " + std::to_string(pos)));
  if (a.options.corrupt_owned_chunk) a.options.corrupt_owned_chunk(mine);
  const std::span<const std::byte> bytes = EncodeResult(a.compression(), mine, &wire);

  // 2. All-gather: the owner sends its reduced chunk to every member.
  for (int s = 1; s < n; ++s) {
    LOFT_RETURN_IF_ERROR(
        a.transport->Send(a.view.members[(pos + s) % n], gather_tag, bytes).WithContext(a.ctx));
  }
  for (int s = 1; s < n; ++s) {
    const int src = (pos - s + n) % n;
    const auto [b, e] = RingAllReduce::ChunkRange(a.d(), n, src);
    LOFT_ASSIGN_OR_RETURN(const size_t got,
                          a.RecvChunk(src, gather_tag, std::span(*result).subspan(b, e - b), &wire));
    const size_t want = ChunkWireBytes(a.compression(), e - b);
    if (got != want) {
      return DataLoss(a.ctx + ": rank " + std::to_string(a.view.members[src]) + " sent " +
                      std::to_string(got) + " bytes for reduced chunk " + std::to_string(src) +
                      ", expected " + std::to_string(want));
    }
  }
  return OkStatus();
}

// One member's attempt with verified chunks (tolerance f > 0): the steps of
// "Verified chunks" in ring_allreduce.h, one method each.
class VerifiedAttempt {
 public:
  explicit VerifiedAttempt(const Attempt& a)
      : a_(a),
        n_(a.n()),
        f_(a.options.tolerance),
        r1_(std::min(f_ + 1, n_)),
        r2_(std::min(2 * f_ + 1, n_)),
        // Primary `full` of every chunk sends the full result this round
        // (rotating with the round, so each member sends N-1 full chunks);
        // the other primaries send its digest.
        full_(static_cast<int>(a.round % static_cast<uint32_t>(r1_))),
        result_(a.d()),
        copies_(n_),
        inputs_(n_),
        owned_(r2_),
        owned_wire_(r2_),
        owned_digest_(r1_),
        gather_wire_(n_),
        disputers_(n_) {}

  Status Run() {
    LOFT_RETURN_IF_ERROR(Scatter());
    LOFT_RETURN_IF_ERROR(ReducePrimaries());
    LOFT_RETURN_IF_ERROR(Gather());
    LOFT_RETURN_IF_ERROR(ExchangeDisputes());
    LOFT_RETURN_IF_ERROR(Escalate());
    return Settle();
  }
  std::vector<float> TakeResult() { return std::move(result_); }

 private:
  struct Disputed {
    int c = 0;
    std::vector<ReplicaClaim> claims;           // r2: primaries, then backups
    std::vector<std::vector<float>> bufs;       // copies this member did not reduce itself
    std::vector<std::vector<std::byte>> wires;  // int8: the payloads of fetched copies
  };
  uint64_t ScatterTag(int j) const { return a_.Tag(16 + j); }
  uint64_t CopyTag(int j) const { return a_.Tag(80 + j); }
  uint64_t DigestTag(int j) const { return a_.Tag(144 + j); }
  uint64_t DisputeTag() const { return a_.Tag(208); }
  std::span<float> ResultOf(int c) {
    const auto [b, e] = RingAllReduce::ChunkRange(result_.size(), n_, c);
    return std::span(result_).subspan(b, e - b);
  }
  int ReplicaIndex(int c) const { return (a_.pos - c + n_) % n_; }  // this member is replica j of chunk c
  // What this member sends as replica j (after ReduceChunk(j, ...)).
  std::span<const std::byte> OwnedBytes(int j) const {
    if (a_.compression() == Compression::kNone) return std::as_bytes(std::span<const float>(owned_[j]));
    return owned_wire_[j];
  }
  ReplicaClaim OwnClaim(int j, const ChunkDigest& digest) const {
    return {digest, true, owned_[j], a_.ClaimPayload(owned_wire_[j])};
  }
  Status Send(GatherPayload kind, int to_pos, uint64_t tag, std::span<const std::byte> bytes) {
    const int to = a_.view.members[to_pos];
    if (!a_.options.tamper_gather) return a_.transport->Send(to, tag, bytes).WithContext(a_.ctx);
    std::vector<std::byte> b(bytes.begin(), bytes.end());
    if (!a_.options.tamper_gather(kind, to, b)) return OkStatus();
    return a_.transport->Send(to, tag, b).WithContext(a_.ctx);
  }
  Status ReduceChunk(int j, int c);
  Status Scatter();
  Status ReducePrimaries();
  Status Gather();
  Status ExchangeDisputes();
  Status Escalate();
  Status Settle();

  const Attempt& a_;
  const int n_, f_;
  const int r1_;  // primary replicas: reduce every round
  const int r2_;  // with the backups: reduce a disputed chunk
  const int full_;
  std::vector<float> result_;
  std::vector<std::vector<float>> copies_;  // the n input buffers, reused for every chunk
  std::vector<std::span<const float>> inputs_;
  std::vector<std::byte> wire_;                      // int8: a received scatter payload
  std::vector<std::vector<float>> owned_;            // [r1, r2): backup results, only for disputed chunks
  std::vector<std::vector<std::byte>> owned_wire_;   // int8: their encodings
  std::vector<ChunkDigest> owned_digest_;            // of the r1 primary results
  std::vector<std::vector<std::byte>> gather_wire_;  // int8: per chunk, the full copy received
  std::vector<Disputed> disputed_;
  std::vector<std::vector<int>> disputers_;  // positions, per chunk
};

// Reduces chunk c as its replica j from every member's copy (scatter phase
// 16+j) into owned_[j] (int8: and its encoding).
Status VerifiedAttempt::ReduceChunk(int j, int c) {
  const std::span<const float> own = a_.sent.values(c);
  const size_t want = ChunkWireBytes(a_.compression(), own.size());
  for (int s = 0; s < n_; ++s) {
    if (s == a_.pos) {
      inputs_[s] = own;  // read only; `data` is not written before the end
      continue;
    }
    copies_[s].resize(own.size());
    LOFT_ASSIGN_OR_RETURN(const size_t got, a_.RecvChunk(s, ScatterTag(j), copies_[s], &wire_));
    if (got != want) {
      copies_[s].assign(own.size(), kNaN);
      a_.Malformed(s);
    }
    inputs_[s] = copies_[s];
  }
  std::vector<float>& out = owned_[j];
  out.resize(own.size());
  LOFT_RETURN_IF_ERROR(Reduce(a_.options.reducer, inputs_, a_.weights, out)
                           .WithContext(a_.ctx + " chunk " + std::to_string(c)));
  if (a_.options.corrupt_owned_chunk) a_.options.corrupt_owned_chunk(out);
  EncodeResult(a_.compression(), out, &owned_wire_[j]);
  return OkStatus();
}

// 1. Scatter: chunk c to each of its r1 primaries (positions c .. c+r1-1).
Status VerifiedAttempt::Scatter() {
  for (int j = 0; j < r1_; ++j) {
    for (int c = 0; c < n_; ++c) {
      const int owner = (c + j) % n_;
      if (owner == a_.pos) continue;
      LOFT_RETURN_IF_ERROR(
          a_.transport->Send(a_.view.members[owner], ScatterTag(j), a_.sent.payload(c)).WithContext(a_.ctx));
    }
  }
  return OkStatus();
}

// 2. Reduce the r1 chunks this member is a primary of (as replica j, chunk
// pos - j); send the full result or its digest to every member.
Status VerifiedAttempt::ReducePrimaries() {
  for (int j = 0; j < r1_; ++j) {
    LOFT_RETURN_IF_ERROR(ReduceChunk(j, (a_.pos - j + n_) % n_));
    const std::span<const std::byte> bytes = OwnedBytes(j);
    if (j == full_) {
      for (int s = 1; s < n_; ++s)
        LOFT_RETURN_IF_ERROR(Send(GatherPayload::kFullCopy, (a_.pos + s) % n_, CopyTag(j), bytes));
      owned_digest_[j] = DigestOf(bytes);
    } else {
      owned_digest_[j] = DigestOf(bytes);
      for (int s = 1; s < n_; ++s) {
        LOFT_RETURN_IF_ERROR(Send(GatherPayload::kDigest, (a_.pos + s) % n_, DigestTag(j),
                                  std::as_bytes(std::span(owned_digest_[j]))));
      }
    }
  }
  return OkStatus();
}

// 3. Gather: per chunk the full copy of primary `full` (straight into the
// result) and the other primaries' digests. All r1 agreeing: take it.
Status VerifiedAttempt::Gather() {
  std::vector<ReplicaClaim> claims(r1_);
  for (int c = 0; c < n_; ++c) {
    const std::span<float> out = ResultOf(c);
    const int mine = ReplicaIndex(c);
    for (int j = 0; j < r1_; ++j) {
      const int owner = (c + j) % n_;
      claims[j] = ReplicaClaim{};
      if (owner == a_.pos) {
        claims[j] = OwnClaim(j, owned_digest_[j]);
      } else if (j == full_) {
        LOFT_ASSIGN_OR_RETURN(const size_t got, a_.RecvChunk(owner, CopyTag(j), out, &gather_wire_[c]));
        claims[j].held = true;
        claims[j].copy = out;
        if (got != ChunkWireBytes(a_.compression(), out.size())) {
          std::fill(out.begin(), out.end(), kNaN);
        } else {
          claims[j].payload = a_.ClaimPayload(gather_wire_[c]);
          if (mine < r1_ && SameBytes(HashedBytes(claims[j]), OwnedBytes(mine))) {
            claims[j].digest = owned_digest_[mine];  // the same bytes as this member's own result
          } else {
            claims[j].digest = DigestOf(HashedBytes(claims[j]));
          }
        }
      } else {
        ChunkDigest dg;
        LOFT_ASSIGN_OR_RETURN(const size_t got,
                              a_.transport->RecvInto(a_.view.members[owner], DigestTag(j), a_.RemainingMs(),
                                                     std::as_writable_bytes(std::span(dg))));
        if (got == dg.size()) claims[j].digest = dg;
      }
    }
    // min(f+1, r1) = r1: a digest carries only when every primary claims it.
    const ChunkPlan plan = PlanChunk(claims, f_);
    if (plan.take >= 0) {
      const std::span<const float> taken = claims[plan.take].copy;
      if (taken.data() != out.data() && !out.empty()) std::memcpy(out.data(), taken.data(), out.size_bytes());
      continue;
    }
    // Disputed: keep the claims (a received full copy moves out of the
    // result; its int8 payload stays in gather_wire_); the backups' results
    // and the primaries' full copies follow.
    Disputed x;
    x.c = c;
    x.claims = claims;
    x.claims.resize(r2_);
    x.bufs.resize(r2_);
    x.wires.resize(r2_);
    for (int j = 0; j < r1_; ++j) {
      if (!x.claims[j].held || (c + j) % n_ == a_.pos) continue;
      x.bufs[j].assign(out.begin(), out.end());
      x.claims[j].copy = x.bufs[j];
    }
    disputed_.push_back(std::move(x));
  }
  return OkStatus();
}

// 4. Disputes: every member tells every other which chunks it disputes (a
// bitmap of n bits; empty when all agreed).
Status VerifiedAttempt::ExchangeDisputes() {
  const size_t map_bytes = (static_cast<size_t>(n_) + 7) / 8;
  std::vector<unsigned char> bitmap(map_bytes, 0);
  for (const Disputed& x : disputed_)
    bitmap[static_cast<size_t>(x.c) / 8] |= static_cast<unsigned char>(1u << (x.c % 8));
  for (int s = 1; s < n_; ++s) {
    LOFT_RETURN_IF_ERROR(
        a_.transport->Send(a_.view.members[(a_.pos + s) % n_], DisputeTag(), std::as_bytes(std::span(bitmap)))
            .WithContext(a_.ctx));
  }
  for (const Disputed& x : disputed_) disputers_[x.c].push_back(a_.pos);
  std::vector<unsigned char> theirs(map_bytes);
  for (int s = 1; s < n_; ++s) {
    const int from = (a_.pos - s + n_) % n_;
    LOFT_ASSIGN_OR_RETURN(const size_t got,
                          a_.transport->RecvInto(a_.view.members[from], DisputeTag(), a_.RemainingMs(),
                                                 std::as_writable_bytes(std::span(theirs))));
    if (got != map_bytes) {
      a_.Malformed(from);
      continue;  // its disputes are not served
    }
    for (int c = 0; c < n_; ++c) {
      if ((theirs[static_cast<size_t>(c) / 8] >> (c % 8)) & 1) disputers_[c].push_back(from);
    }
  }
  return OkStatus();
}

// 5. Escalation: a chunk anyone disputes goes to its backups (positions
// c+r1 .. c+r2-1): this member's copy of it to each backup and, as a primary
// that sent a digest, its full result to each member that disputes it.
// 6. As a backup of a disputed chunk: reduce it and send the result to the
// members that dispute it.
Status VerifiedAttempt::Escalate() {
  for (int c = 0; c < n_; ++c) {
    if (disputers_[c].empty()) continue;
    for (int j = r1_; j < r2_; ++j) {
      const int backup = (c + j) % n_;
      if (backup == a_.pos) continue;
      LOFT_RETURN_IF_ERROR(
          a_.transport->Send(a_.view.members[backup], ScatterTag(j), a_.sent.payload(c)).WithContext(a_.ctx));
    }
    const int j = ReplicaIndex(c);
    if (j >= r1_ || j == full_) continue;  // not a primary, or its full copy went to everyone
    for (int to : disputers_[c]) {
      if (to == a_.pos) continue;
      LOFT_RETURN_IF_ERROR(Send(GatherPayload::kFetched, to, CopyTag(j), OwnedBytes(j)));
    }
  }
  for (int j = r1_; j < r2_; ++j) {
    const int c = (a_.pos - j + n_) % n_;
    if (disputers_[c].empty()) continue;
    LOFT_RETURN_IF_ERROR(ReduceChunk(j, c));
    for (int to : disputers_[c]) {
      if (to == a_.pos) continue;
      LOFT_RETURN_IF_ERROR(Send(GatherPayload::kFetched, to, CopyTag(j), OwnedBytes(j)));
    }
  }
  return OkStatus();
}

// 7. Settle each disputed chunk over the r2 replicas: a copy whose digest
// at least f+1 claim, or the coordinate-wise median.
Status VerifiedAttempt::Settle() {
  std::set<int> mismatched;
  for (Disputed& x : disputed_) {
    const std::span<float> out = ResultOf(x.c);
    for (int j = 0; j < r2_; ++j) {
      ReplicaClaim& claim = x.claims[j];
      if (claim.held) continue;
      const int owner = (x.c + j) % n_;
      if (owner == a_.pos) {  // this member is a backup of x.c
        claim = OwnClaim(j, DigestOf(OwnedBytes(j)));
        continue;
      }
      std::vector<float>& buf = x.bufs[j];
      buf.resize(out.size());
      LOFT_ASSIGN_OR_RETURN(const size_t got, a_.RecvChunk(owner, CopyTag(j), buf, &x.wires[j]));
      if (a_.report) ++a_.report->fetched_copies;
      claim.held = true;
      claim.copy = buf;
      if (got != ChunkWireBytes(a_.compression(), out.size())) {
        buf.assign(out.size(), kNaN);
        if (j >= r1_) claim.digest.reset();
      } else {
        claim.payload = a_.ClaimPayload(x.wires[j]);
        if (j >= r1_) claim.digest = DigestOf(HashedBytes(claim));  // a backup's claim is its copy
      }
    }
    // A replica is named only when f+1 match the taken copy, so only when
    // a digest carried and its copy was taken (never after a median).
    const int taken = SettleChunk(x.claims, f_, out);
    if (taken < 0) continue;
    const ReplicaClaim& t = x.claims[taken];
    for (int j : Dissenters(x.claims, *t.digest, HashedBytes(t), f_))
      mismatched.insert(a_.view.members[(x.c + j) % n_]);
  }
  if (a_.report) a_.report->chunk_mismatch_from.assign(mismatched.begin(), mismatched.end());
  return OkStatus();
}

}  // namespace

Status RingAllReduce::Run(const RingView& view, uint32_t round, std::span<float> data,
                          std::span<const double> weights, AllReduceReport* report,
                          std::vector<float>* residual) {
  LOFT_RETURN_IF_ERROR(options_.Validate());
  const int n = static_cast<int>(view.members.size());
  const int me = transport_->rank();
  const std::string ctx = "all-reduce (rank " + std::to_string(me) + ", view " + std::to_string(view.view) +
                          ", round " + std::to_string(round) + ")";
  if (n == 0) return InvalidArgument(ctx + ": empty membership");
  std::set<int> seen;
  int pos = -1;
  for (int i = 0; i < n; ++i) {
    const int r = view.members[i];
    if (r < 0 || r >= transport_->world_size())
      return InvalidArgument(ctx + ": member rank " + std::to_string(r) + " out of range");
    if (!seen.insert(r).second)
      return InvalidArgument(ctx + ": member rank " + std::to_string(r) + " listed twice");
    if (r == me) pos = i;
  }
  if (pos < 0) return InvalidArgument(ctx + ": this rank is not a member of the view");
  if (!weights.empty() && static_cast<int>(weights.size()) != n) {
    return InvalidArgument(ctx + ": " + std::to_string(weights.size()) + " weights for " + std::to_string(n) +
                           " members");
  }
  if (report) *report = AllReduceReport{};

  transport_->SetTagFloor(MakeTag(view.view, round, 0));
  const int64_t deadline_us = clock_->NowMicros() + options_.timeout_ms * 1000;
  const SentInput sent(options_.compression, data, n);
  const Attempt attempt{transport_, options_,    clock_, view,   pos, round,
                        weights,    deadline_us, ctx,    report, sent};
  std::vector<float> result;  // staged: `data` is written only on success
  if (options_.tolerance > 0) {
    VerifiedAttempt verified(attempt);
    LOFT_RETURN_IF_ERROR(verified.Run());
    result = verified.TakeResult();
  } else {
    LOFT_RETURN_IF_ERROR(RunPlain(attempt, &result));
  }
  if (residual) sent.Residual(residual);
  std::copy(result.begin(), result.end(), data.begin());
  return OkStatus();
}

}  // namespace loft::models
