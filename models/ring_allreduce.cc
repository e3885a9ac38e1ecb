#include "models/ring_allreduce.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string>

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
  if (report) {
    report->malformed_from.clear();
    report->chunk_mismatch_from.clear();
  }

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

namespace {

// Orders floats with every non-finite value last (NaN has no order).
bool RankLess(float a, float b) {
  const bool fa = std::isfinite(a), fb = std::isfinite(b);
  if (fa != fb) return fa;
  return fa ? a < b : false;
}

bool SameBits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

}  // namespace

bool RingAllReduce::MedianOfReplicas(std::span<const std::span<const float>> results, std::span<float> out) {
  const size_t r = results.size();
  // Fast path (the honest case): every replica sent the same bits, so every
  // coordinate's r values are identical and their median is that value.
  // One differing bit anywhere, or a malformed (all-NaN) result, takes the
  // coordinate-wise path below.
  bool identical = true;
  for (size_t j = 0; j < r && identical; ++j) identical = results[j].size() == out.size();
  for (size_t j = 1; j < r && identical; ++j) identical = SameBits(results[j], results[0]);
  if (identical) {
    if (!out.empty()) std::memcpy(out.data(), results[0].data(), out.size_bytes());
    return true;
  }
  std::vector<float> column(r);
  for (size_t k = 0; k < out.size(); ++k) {
    for (size_t j = 0; j < r; ++j) column[j] = results[j][k];
    std::nth_element(column.begin(), column.begin() + static_cast<std::ptrdiff_t>(r / 2), column.end(),
                     RankLess);
    out[k] = column[r / 2];
  }
  return false;
}

Status RingAllReduce::RunVerified(const RingView& view, int pos, uint32_t round, std::span<float> data,
                                  std::span<const double> weights, int64_t deadline_us,
                                  const std::string& ctx, AllReduceReport* report) {
  const int n = static_cast<int>(view.members.size());
  const int r = std::min(2 * options_.tolerance + 1, n);
  const size_t d = data.size();
  auto remaining_ms = [&] { return std::max<int64_t>(0, (deadline_us - clock_->NowMicros() + 999) / 1000); };
  auto scatter_tag = [&](int j) { return MakeTag(view.view, round, static_cast<uint8_t>(16 + j)); };
  auto gather_tag = [&](int j) { return MakeTag(view.view, round, static_cast<uint8_t>(80 + j)); };
  auto chunk_of = [&](int c) {
    const auto [b, e] = ChunkRange(d, n, c);
    return data.subspan(b, e - b);
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
  // 2. Reduce the r chunks this member replicates: as replica j, chunk pos - j.
  // The n input buffers are reused for every chunk (no allocation per chunk).
  std::vector<std::vector<float>> owned(r);
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
    for (int s = 1; s < n; ++s) {
      LOFT_RETURN_IF_ERROR(transport_
                               ->Send(view.members[(pos + s) % n], gather_tag(j),
                                      std::as_bytes(std::span<const float>(owned[j])))
                               .WithContext(ctx));
    }
  }
  // 3. Gather: r results per chunk; take the coordinate-wise median.
  std::vector<float> result(d);
  std::set<int> mismatched;
  std::vector<std::vector<float>> received(r);
  std::vector<std::span<const float>> results(r);
  for (int c = 0; c < n; ++c) {
    const auto [b, e] = ChunkRange(d, n, c);
    const size_t len = e - b;
    for (int j = 0; j < r; ++j) {
      const int owner = (c + j) % n;
      if (owner == pos) {
        results[j] = owned[j];
        continue;
      }
      received[j].resize(len);
      LOFT_ASSIGN_OR_RETURN(const size_t got,
                            transport_->RecvInto(view.members[owner], gather_tag(j), remaining_ms(),
                                                 std::as_writable_bytes(std::span(received[j]))));
      if (got != len * sizeof(float)) received[j].assign(len, std::numeric_limits<float>::quiet_NaN());
      results[j] = received[j];
    }
    std::span<float> out(result.data() + b, len);
    MedianOfReplicas(results, out);
    int agree = 0;
    std::vector<int> differ;
    for (int j = 0; j < r; ++j) {
      if (SameBits(results[j], out))
        ++agree;
      else
        differ.push_back(view.members[(c + j) % n]);
    }
    if (agree >= options_.tolerance + 1) mismatched.insert(differ.begin(), differ.end());
  }
  if (report) report->chunk_mismatch_from.assign(mismatched.begin(), mismatched.end());
  std::copy(result.begin(), result.end(), data.begin());
  return OkStatus();
}

}  // namespace loft::models
