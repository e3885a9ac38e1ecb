#include "models/ring_allreduce.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string>

#include "core/le_bytes.h"
#include "models/replica_vote.h"

namespace loft::models {

Status AllReduceOptions::Validate() const {
  if (timeout_ms <= 0) return InvalidArgument("all-reduce timeout_ms must be > 0");
  if (tolerance < 0 || tolerance > 31)
    return InvalidArgument("all-reduce tolerance " + std::to_string(tolerance) + " is not in [0, 31]");
  return reducer.Validate();
}

std::pair<size_t, size_t> RingAllReduce::ChunkRange(size_t d, int n, int c) {
  const size_t base = d / static_cast<size_t>(n), extra = d % static_cast<size_t>(n);
  const size_t cc = static_cast<size_t>(c);
  const size_t begin = cc * base + std::min(cc, extra);
  return {begin, begin + base + (cc < extra ? 1 : 0)};
}

namespace {
std::span<const std::byte> AsBytes(std::span<const float> v) {
  return std::as_bytes(v);
}
}  // namespace

Status RingAllReduce::Run(const RingView& view, uint32_t round, std::span<float> data,
                          std::span<const double> weights, AllReduceReport* report) {
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

  const uint64_t scatter_tag = MakeTag(view.view, round, 1);
  const uint64_t gather_tag = MakeTag(view.view, round, 2);
  transport_->SetTagFloor(MakeTag(view.view, round, 0));
  const int64_t deadline_us = clock_->NowMicros() + options_.timeout_ms * 1000;
  auto remaining_ms = [&] { return std::max<int64_t>(0, (deadline_us - clock_->NowMicros() + 999) / 1000); };
  const size_t d = data.size();
  if (options_.tolerance > 0) return RunVerified(view, pos, round, data, weights, deadline_us, ctx, report);

  // 1. Reduce-scatter: send chunk c to its owner, nearest ring neighbour first.
  for (int s = 1; s < n; ++s) {
    const int c = (pos + s) % n;
    const auto [b, e] = ChunkRange(d, n, c);
    LOFT_RETURN_IF_ERROR(
        transport_->Send(view.members[c], scatter_tag, AsBytes(data.subspan(b, e - b))).WithContext(ctx));
  }
  const auto [mb, me_end] = ChunkRange(d, n, pos);
  const size_t len = me_end - mb;
  std::vector<std::vector<float>> copies(n);
  copies[pos].assign(data.begin() + static_cast<std::ptrdiff_t>(mb),
                     data.begin() + static_cast<std::ptrdiff_t>(me_end));
  for (int s = 1; s < n; ++s) {
    const int src = (pos - s + n) % n;
    copies[src].resize(len);
    LOFT_ASSIGN_OR_RETURN(const size_t got,
                          transport_->RecvInto(view.members[src], scatter_tag, remaining_ms(),
                                               std::as_writable_bytes(std::span(copies[src]))));
    if (got != len * sizeof(float)) {
      copies[src].assign(len, std::numeric_limits<float>::quiet_NaN());
      if (report) report->malformed_from.push_back(view.members[src]);
    }
  }
  std::vector<std::span<const float>> inputs(copies.begin(), copies.end());
  std::vector<float> result(d);
  std::span<float> mine(result.data() + mb, len);
  LOFT_RETURN_IF_ERROR(
      Reduce(options_.reducer, inputs, weights, mine).WithContext(ctx + " chunk " + std::to_string(pos)));
  if (options_.corrupt_owned_chunk) options_.corrupt_owned_chunk(mine);

  // 2. All-gather: the owner sends its reduced chunk to every member.
  for (int s = 1; s < n; ++s) {
    LOFT_RETURN_IF_ERROR(
        transport_->Send(view.members[(pos + s) % n], gather_tag, AsBytes(mine)).WithContext(ctx));
  }
  for (int s = 1; s < n; ++s) {
    const int src = (pos - s + n) % n;
    const auto [b, e] = ChunkRange(d, n, src);
    LOFT_ASSIGN_OR_RETURN(const size_t got,
                          transport_->RecvInto(view.members[src], gather_tag, remaining_ms(),
                                               std::as_writable_bytes(std::span(result).subspan(b, e - b))));
    if (got != (e - b) * sizeof(float)) {
      return DataLoss(ctx + ": rank " + std::to_string(view.members[src]) + " sent " + std::to_string(got) +
                      " bytes for reduced chunk " + std::to_string(src) + ", expected " +
                      std::to_string((e - b) * sizeof(float)));
    }
  }
  std::copy(result.begin(), result.end(), data.begin());
  return OkStatus();
}

Status RingAllReduce::RunVerified(const RingView& view, int pos, uint32_t round, std::span<float> data,
                                  std::span<const double> weights, int64_t deadline_us,
                                  const std::string& ctx, AllReduceReport* report) {
  const int n = static_cast<int>(view.members.size());
  const int f = options_.tolerance;
  const int r1 = std::min(f + 1, n);      // primary replicas: reduce every round
  const int r2 = std::min(2 * f + 1, n);  // with the backups: reduce a disputed chunk
  const size_t d = data.size();
  auto remaining_ms = [&] { return std::max<int64_t>(0, (deadline_us - clock_->NowMicros() + 999) / 1000); };
  auto scatter_tag = [&](int j) { return MakeTag(view.view, round, static_cast<uint8_t>(16 + j)); };
  auto copy_tag = [&](int j) { return MakeTag(view.view, round, static_cast<uint8_t>(80 + j)); };
  auto digest_tag = [&](int j) { return MakeTag(view.view, round, static_cast<uint8_t>(144 + j)); };
  const uint64_t dispute_tag = MakeTag(view.view, round, 208);
  auto chunk_of = [&](int c) {
    const auto [b, e] = ChunkRange(d, n, c);
    return data.subspan(b, e - b);
  };
  auto replica_index = [&](int c) { return (pos - c + n) % n; };  // this member is replica j of chunk c
  std::vector<float> result(d);                                   // staged: `data` is written only on success
  auto result_of = [&](int c) {
    const auto [b, e] = ChunkRange(d, n, c);
    return std::span(result).subspan(b, e - b);
  };
  // Primary `full` of every chunk sends the full result this round (rotating
  // with the round, so each member sends N-1 full chunks); the other
  // primaries send its digest.
  const int full = static_cast<int>(round % static_cast<uint32_t>(r1));
  auto send = [&](GatherPayload kind, int to_pos, uint64_t tag, std::span<const std::byte> bytes) -> Status {
    const int to = view.members[to_pos];
    if (!options_.tamper_gather) return transport_->Send(to, tag, bytes).WithContext(ctx);
    std::vector<std::byte> b(bytes.begin(), bytes.end());
    if (!options_.tamper_gather(kind, to, b)) return OkStatus();
    return transport_->Send(to, tag, b).WithContext(ctx);
  };
  // Reduces chunk c as its replica j from every member's copy (scatter phase
  // 16+j). The n input buffers are reused for every chunk.
  std::vector<std::vector<float>> copies(n);
  std::vector<std::span<const float>> inputs(n);
  auto reduce_chunk = [&](int j, int c, std::vector<float>* out) -> Status {
    const std::span<float> own = chunk_of(c);
    for (int s = 0; s < n; ++s) {
      if (s == pos) {
        inputs[s] = own;  // read only; `data` is not written before the end
        continue;
      }
      copies[s].resize(own.size());
      LOFT_ASSIGN_OR_RETURN(const size_t got,
                            transport_->RecvInto(view.members[s], scatter_tag(j), remaining_ms(),
                                                 std::as_writable_bytes(std::span(copies[s]))));
      if (got != own.size_bytes()) {
        copies[s].assign(own.size(), std::numeric_limits<float>::quiet_NaN());
        if (report) report->malformed_from.push_back(view.members[s]);
      }
      inputs[s] = copies[s];
    }
    out->resize(own.size());
    LOFT_RETURN_IF_ERROR(
        Reduce(options_.reducer, inputs, weights, *out).WithContext(ctx + " chunk " + std::to_string(c)));
    if (options_.corrupt_owned_chunk) options_.corrupt_owned_chunk(*out);
    return OkStatus();
  };

  // 1. Scatter: chunk c to each of its r1 primaries (positions c .. c+r1-1).
  for (int j = 0; j < r1; ++j) {
    for (int c = 0; c < n; ++c) {
      const int owner = (c + j) % n;
      if (owner == pos) continue;
      LOFT_RETURN_IF_ERROR(
          transport_->Send(view.members[owner], scatter_tag(j), std::as_bytes(chunk_of(c))).WithContext(ctx));
    }
  }
  // 2. Reduce the r1 chunks this member is a primary of (as replica j, chunk
  // pos - j); send the full result or its digest to every member.
  std::vector<std::vector<float>> owned(r2);  // [r1, r2): backup results, only for disputed chunks
  std::vector<ChunkDigest> owned_digest(r1);
  for (int j = 0; j < r1; ++j) {
    LOFT_RETURN_IF_ERROR(reduce_chunk(j, (pos - j + n) % n, &owned[j]));
    const auto bytes = std::as_bytes(std::span<const float>(owned[j]));
    if (j == full) {
      for (int s = 1; s < n; ++s)
        LOFT_RETURN_IF_ERROR(send(GatherPayload::kFullCopy, (pos + s) % n, copy_tag(j), bytes));
      owned_digest[j] = DigestOf(owned[j]);
    } else {
      owned_digest[j] = DigestOf(owned[j]);
      for (int s = 1; s < n; ++s) {
        LOFT_RETURN_IF_ERROR(send(GatherPayload::kDigest, (pos + s) % n, digest_tag(j),
                                  std::as_bytes(std::span(owned_digest[j]))));
      }
    }
  }
  // 3. Gather: per chunk the full copy of primary `full` (straight into the
  // result) and the other primaries' digests. All r1 agreeing: take it.
  struct Disputed {
    int c = 0;
    std::vector<ReplicaClaim> claims;      // r2: primaries, then backups
    std::vector<std::vector<float>> bufs;  // copies this member did not reduce itself
  };
  std::vector<Disputed> disputed;
  std::vector<ReplicaClaim> claims(r1);
  for (int c = 0; c < n; ++c) {
    const std::span<float> out = result_of(c);
    const int mine = replica_index(c);
    for (int j = 0; j < r1; ++j) {
      const int owner = (c + j) % n;
      claims[j] = ReplicaClaim{};
      if (owner == pos) {
        claims[j] = {owned_digest[j], true, owned[j]};
      } else if (j == full) {
        LOFT_ASSIGN_OR_RETURN(const size_t got,
                              transport_->RecvInto(view.members[owner], copy_tag(j), remaining_ms(),
                                                   std::as_writable_bytes(out)));
        claims[j].held = true;
        claims[j].copy = out;
        if (got != out.size_bytes()) {
          std::fill(out.begin(), out.end(), std::numeric_limits<float>::quiet_NaN());
        } else if (mine < r1 && SameBits(out, owned[mine])) {
          claims[j].digest = owned_digest[mine];  // the same bits as this member's own result
        } else {
          claims[j].digest = DigestOf(out);
        }
      } else {
        ChunkDigest dg;
        LOFT_ASSIGN_OR_RETURN(const size_t got,
                              transport_->RecvInto(view.members[owner], digest_tag(j), remaining_ms(),
                                                   std::as_writable_bytes(std::span(dg))));
        if (got == dg.size()) claims[j].digest = dg;
      }
    }
    // min(f+1, r1) = r1: a digest carries only when every primary claims it.
    const ChunkPlan plan = PlanChunk(claims, f);
    if (plan.take >= 0) {
      const std::span<const float> taken = claims[plan.take].copy;
      if (taken.data() != out.data() && !out.empty()) std::memcpy(out.data(), taken.data(), out.size_bytes());
      continue;
    }
    // Disputed: keep the claims (a received full copy moves out of the
    // result); the backups' results and the primaries' full copies follow.
    Disputed x;
    x.c = c;
    x.claims = claims;
    x.claims.resize(r2);
    x.bufs.resize(r2);
    for (int j = 0; j < r1; ++j) {
      if (!x.claims[j].held || (c + j) % n == pos) continue;
      x.bufs[j].assign(out.begin(), out.end());
      x.claims[j].copy = x.bufs[j];
    }
    disputed.push_back(std::move(x));
  }
  // 4. Disputes: every member tells every other which chunks it disputes (a
  // bitmap of n bits; empty when all agreed). A chunk anyone disputes is
  // escalated: every member sends its copy to the chunk's backups.
  const size_t map_bytes = (static_cast<size_t>(n) + 7) / 8;
  std::vector<unsigned char> bitmap(map_bytes, 0);
  for (const Disputed& x : disputed)
    bitmap[static_cast<size_t>(x.c) / 8] |= static_cast<unsigned char>(1u << (x.c % 8));
  for (int s = 1; s < n; ++s) {
    LOFT_RETURN_IF_ERROR(
        transport_->Send(view.members[(pos + s) % n], dispute_tag, std::as_bytes(std::span(bitmap)))
            .WithContext(ctx));
  }
  std::vector<std::vector<int>> disputers(n);  // positions, per chunk
  for (const Disputed& x : disputed) disputers[x.c].push_back(pos);
  std::vector<unsigned char> theirs(map_bytes);
  for (int s = 1; s < n; ++s) {
    const int from = (pos - s + n) % n;
    LOFT_ASSIGN_OR_RETURN(const size_t got,
                          transport_->RecvInto(view.members[from], dispute_tag, remaining_ms(),
                                               std::as_writable_bytes(std::span(theirs))));
    if (got != map_bytes) {
      if (report) report->malformed_from.push_back(view.members[from]);
      continue;  // its disputes are not served
    }
    for (int c = 0; c < n; ++c) {
      if ((theirs[static_cast<size_t>(c) / 8] >> (c % 8)) & 1) disputers[c].push_back(from);
    }
  }
  // 5. Escalation: this member's copy of each disputed chunk to its backups
  // (positions c+r1 .. c+r2-1); as a primary that sent a digest, its full
  // result to each member that disputes the chunk.
  for (int c = 0; c < n; ++c) {
    if (disputers[c].empty()) continue;
    for (int j = r1; j < r2; ++j) {
      const int backup = (c + j) % n;
      if (backup == pos) continue;
      LOFT_RETURN_IF_ERROR(transport_->Send(view.members[backup], scatter_tag(j), std::as_bytes(chunk_of(c)))
                               .WithContext(ctx));
    }
    const int j = replica_index(c);
    if (j >= r1 || j == full) continue;  // not a primary, or its full copy went to everyone
    for (int to : disputers[c]) {
      if (to == pos) continue;
      LOFT_RETURN_IF_ERROR(
          send(GatherPayload::kFetched, to, copy_tag(j), std::as_bytes(std::span<const float>(owned[j]))));
    }
  }
  // 6. As a backup of a disputed chunk: reduce it and send the result to the
  // members that dispute it.
  for (int j = r1; j < r2; ++j) {
    const int c = (pos - j + n) % n;
    if (disputers[c].empty()) continue;
    LOFT_RETURN_IF_ERROR(reduce_chunk(j, c, &owned[j]));
    for (int to : disputers[c]) {
      if (to == pos) continue;
      LOFT_RETURN_IF_ERROR(
          send(GatherPayload::kFetched, to, copy_tag(j), std::as_bytes(std::span<const float>(owned[j]))));
    }
  }
  // 7. Settle each disputed chunk over the r2 replicas: a copy whose digest
  // at least f+1 claim, or the coordinate-wise median.
  std::set<int> mismatched;
  for (Disputed& x : disputed) {
    const std::span<float> out = result_of(x.c);
    for (int j = 0; j < r2; ++j) {
      ReplicaClaim& claim = x.claims[j];
      if (claim.held) continue;
      const int owner = (x.c + j) % n;
      if (owner == pos) {  // this member is a backup of x.c
        claim = {DigestOf(owned[j]), true, owned[j]};
        continue;
      }
      std::vector<float>& buf = x.bufs[j];
      buf.resize(out.size());
      LOFT_ASSIGN_OR_RETURN(const size_t got,
                            transport_->RecvInto(view.members[owner], copy_tag(j), remaining_ms(),
                                                 std::as_writable_bytes(std::span(buf))));
      if (report) ++report->fetched_copies;
      claim.held = true;
      claim.copy = buf;
      if (got != out.size_bytes()) {
        buf.assign(out.size(), std::numeric_limits<float>::quiet_NaN());
        if (j >= r1) claim.digest.reset();
      } else if (j >= r1) {
        claim.digest = DigestOf(buf);  // a backup's claim is its copy
      }
    }
    SettleChunk(x.claims, f, out);
    for (int j : Dissenters(x.claims, DigestOf(out), out, f)) mismatched.insert(view.members[(x.c + j) % n]);
  }
  if (report) report->chunk_mismatch_from.assign(mismatched.begin(), mismatched.end());
  std::copy(result.begin(), result.end(), data.begin());
  return OkStatus();
}

}  // namespace loft::models
