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
  const int r = std::min(2 * f + 1, n);
  const size_t d = data.size();
  auto remaining_ms = [&] { return std::max<int64_t>(0, (deadline_us - clock_->NowMicros() + 999) / 1000); };
  auto scatter_tag = [&](int j) { return MakeTag(view.view, round, static_cast<uint8_t>(16 + j)); };
  auto copy_tag = [&](int j) { return MakeTag(view.view, round, static_cast<uint8_t>(80 + j)); };
  auto digest_tag = [&](int j) { return MakeTag(view.view, round, static_cast<uint8_t>(144 + j)); };
  const uint64_t fetch_tag = MakeTag(view.view, round, 208);
  auto chunk_of = [&](int c) {
    const auto [b, e] = ChunkRange(d, n, c);
    return data.subspan(b, e - b);
  };
  // Replica `full` of every chunk sends the full result this round (rotating
  // with the round, so each member sends N-1 full chunks); the others send
  // its digest.
  const int full = static_cast<int>(round % static_cast<uint32_t>(r));
  auto send = [&](GatherPayload kind, int to_pos, uint64_t tag, std::span<const std::byte> bytes) -> Status {
    const int to = view.members[to_pos];
    if (!options_.tamper_gather) return transport_->Send(to, tag, bytes).WithContext(ctx);
    std::vector<std::byte> b(bytes.begin(), bytes.end());
    if (!options_.tamper_gather(kind, to, b)) return OkStatus();
    return transport_->Send(to, tag, b).WithContext(ctx);
  };

  // 1. Scatter: chunk c to each of its r replicas (positions c .. c+r-1).
  for (int j = 0; j < r; ++j) {
    for (int c = 0; c < n; ++c) {
      const int owner = (c + j) % n;
      if (owner == pos) continue;
      LOFT_RETURN_IF_ERROR(
          transport_->Send(view.members[owner], scatter_tag(j), std::as_bytes(chunk_of(c))).WithContext(ctx));
    }
  }
  // 2. Reduce the r chunks this member replicates (as replica j, chunk
  // pos - j); send the full result or its digest. The n input buffers are
  // reused for every chunk (no allocation per chunk).
  std::vector<std::vector<float>> owned(r);
  std::vector<ChunkDigest> owned_digest(r);
  std::vector<std::vector<float>> copies(n);
  std::vector<std::span<const float>> inputs(n);
  for (int j = 0; j < r; ++j) {
    const int c = (pos - j + n) % n;
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
    owned[j].resize(own.size());
    LOFT_RETURN_IF_ERROR(
        Reduce(options_.reducer, inputs, weights, owned[j]).WithContext(ctx + " chunk " + std::to_string(c)));
    if (options_.corrupt_owned_chunk) options_.corrupt_owned_chunk(owned[j]);
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
  // 3. Gather: per chunk the full copy of replica `full` (straight into the
  // result) and the others' digests; take a held copy whose digest carries.
  std::vector<float> result(d);
  std::set<int> mismatched;
  auto note_dissent = [&](int c, const std::vector<int>& js) {
    for (int j : js) mismatched.insert(view.members[(c + j) % n]);
  };
  struct Pending {
    int c = 0;
    std::vector<ReplicaClaim> claims;
    std::vector<std::vector<float>> bufs;  // the copies this member did not reduce itself
  };
  std::vector<Pending> pending;
  std::vector<uint64_t> want(n, 0);  // per ring position: replica indices whose copy to fetch from it
  std::vector<ReplicaClaim> claims(r);
  for (int c = 0; c < n; ++c) {
    const auto [b, e] = ChunkRange(d, n, c);
    const size_t len = e - b;
    const std::span<float> out(result.data() + b, len);
    const int mine = (pos - c + n) % n;  // this member is replica `mine` of chunk c if mine < r
    for (int j = 0; j < r; ++j) {
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
        } else if (mine < r && SameBits(out, owned[mine])) {
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
    const ChunkPlan plan = PlanChunk(claims, f);
    if (plan.take >= 0) {
      const std::span<const float> taken = claims[plan.take].copy;
      note_dissent(c, Dissenters(claims, *claims[plan.take].digest, taken, f));
      if (taken.data() != out.data() && !out.empty()) std::memcpy(out.data(), taken.data(), out.size_bytes());
      continue;
    }
    // Disagreement: keep the claims (the received full copy moves out of the
    // result) and ask for the copies this member lacks.
    Pending p;
    p.c = c;
    p.claims = claims;
    p.bufs.resize(r);
    for (int j = 0; j < r; ++j) {
      if (!p.claims[j].held || (c + j) % n == pos) continue;
      p.bufs[j].assign(out.begin(), out.end());
      p.claims[j].copy = p.bufs[j];
    }
    for (int j : plan.fetch) want[(c + j) % n] |= uint64_t{1} << j;
    pending.push_back(std::move(p));
  }
  // 4. Fetch requests: one to every member (0 = nothing), then answer the
  // requests of every member, then read the copies asked for.
  for (int s = 1; s < n; ++s) {
    const int to = (pos + s) % n;
    unsigned char mask[8];
    StoreLe<uint64_t>(mask, want[to]);
    LOFT_RETURN_IF_ERROR(
        transport_->Send(view.members[to], fetch_tag, std::as_bytes(std::span(mask))).WithContext(ctx));
  }
  for (int s = 1; s < n; ++s) {
    const int from = (pos - s + n) % n;
    unsigned char mask[8];
    LOFT_ASSIGN_OR_RETURN(const size_t got,
                          transport_->RecvInto(view.members[from], fetch_tag, remaining_ms(),
                                               std::as_writable_bytes(std::span(mask))));
    if (got != sizeof mask) {
      if (report) report->malformed_from.push_back(view.members[from]);
      continue;
    }
    const uint64_t asked = LoadLe<uint64_t>(mask);
    for (int j = 0; j < r; ++j) {
      if (j == full || ((asked >> j) & 1) == 0) continue;  // replica `full` sent its copy already
      LOFT_RETURN_IF_ERROR(
          send(GatherPayload::kFetched, from, copy_tag(j), std::as_bytes(std::span<const float>(owned[j]))));
    }
  }
  for (Pending& p : pending) {
    const auto [b, e] = ChunkRange(d, n, p.c);
    const std::span<float> out(result.data() + b, e - b);
    for (int j = 0; j < r; ++j) {
      if (p.claims[j].held) continue;
      std::vector<float>& buf = p.bufs[j];
      buf.resize(out.size());
      LOFT_ASSIGN_OR_RETURN(const size_t got,
                            transport_->RecvInto(view.members[(p.c + j) % n], copy_tag(j), remaining_ms(),
                                                 std::as_writable_bytes(std::span(buf))));
      if (got != out.size_bytes()) buf.assign(out.size(), std::numeric_limits<float>::quiet_NaN());
      p.claims[j].held = true;
      p.claims[j].copy = buf;
      if (report) ++report->fetched_copies;
    }
    SettleChunk(p.claims, f, out);
    note_dissent(p.c, Dissenters(p.claims, DigestOf(out), out, f));
  }
  if (report) report->chunk_mismatch_from.assign(mismatched.begin(), mismatched.end());
  std::copy(result.begin(), result.end(), data.begin());
  return OkStatus();
}

}  // namespace loft::models
