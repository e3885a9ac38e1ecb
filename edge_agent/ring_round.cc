#include "edge_agent/ring_round.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <limits>
#include <string>

#include "models/transport.h"

namespace loft::agent {

void RingOffenceLog::Offend(int from, const char* reason) {
  RingOffence o;
  o.node = from;
  o.reason = reason;
  o.report = guard_.Offence(from);
  o.count = guard_.offences(from);
  offences_.push_back(std::move(o));
}

void RingOffenceLog::Silent(int from, uint32_t round, int64_t timeout_ms) {
  RingOffence o;
  o.node = from;
  o.reason = "silent";
  o.report = guard_.Silent(from);
  o.count = guard_.silent_rounds(from);
  spdlog::warn("round {}: no hello from node {} within {} ms{}", round, from, timeout_ms,
               o.report ? " again: reporting it" : "");
  offences_.push_back(std::move(o));
}

std::vector<RingOffence> RingOffenceLog::Take() {
  std::vector<RingOffence> out;
  out.swap(offences_);
  return out;
}

StatusOr<RoundHellos> ExchangeHellos(ZmqTransport* transport, RingOffenceLog* log,
                                     const HelloExchangeOptions& o, const RingMembers& m, uint32_t round,
                                     const MemberHello& mine) {
  const uint64_t tag = models::MakeTag(m.view, round, kHelloPhase);
  const std::vector<std::byte> buf = EncodeHello(mine);
  for (int n : m.nodes) {
    if (n != o.self) LOFT_RETURN_IF_ERROR(transport->Send(n, tag, buf));
  }
  RingGuard& guard = log->guard();
  RoundHellos x;
  x.members = m.nodes;
  // A member whose hello does not come within the ring timeout fails the
  // attempt; the others are still looked at (without waiting again) so
  // that every silent member is known (ring_guard.h, silence).
  Status silent;
  for (int n : m.nodes) {
    if (n == o.self) {
      x.hellos.push_back(mine);
      continue;
    }
    // A member that sent a later round's hello of this view instead is past
    // this round (e.g. it finished it while this member's attempt failed,
    // and this member restarts it among the survivors): waiting for it
    // would deadlock, each waiting for the other's round.
    auto usable = [&](uint64_t later, std::span<const std::byte> body) {
      if (guard.OutOfWindow(o.last_round, models::TagRound(later))) return false;
      auto h = DecodeHello(body);
      if (!h.ok() || guard.OutOfWindow(o.last_round, h->last_round)) return false;
      return !o.past_only_behind || h->last_round < static_cast<int64_t>(round);
    };
    auto got = transport->RecvOrLater(n, tag, silent.ok() ? o.ring_timeout_ms : 0, o.past_grace_ms, usable);
    if (!got.ok()) {
      if (got.status().code() != StatusCode::kDeadlineExceeded) return got.status();
      log->Silent(n, round, o.ring_timeout_ms);
      if (silent.ok()) silent = got.status();
      continue;
    }
    guard.Heard(n);
    if (!silent.ok()) continue;  // the attempt failed already
    auto h = DecodeHello(got->body);
    if (h.ok() && got->tag != tag) {
      spdlog::info(
          "round {}: node {} is past it (its hello of round {} came instead; it holds round {}): it takes "
          "no part in this round's all-reduce",
          round, n, models::TagRound(got->tag), h->last_round);
      MemberHello past;  // its state votes; no weight
      past.last_round = h->last_round;
      past.hash = h->hash;
      x.hellos.push_back(past);
      x.past.push_back(n);
      continue;
    }
    if (h.ok()) {
      if (guard.OutOfWindow(o.last_round, h->last_round))
        log->Offend(n, "out_of_window");  // a minority: never agreed
      x.hellos.push_back(*h);
      continue;
    }
    // Malformed: no weight, and a state nobody else holds.
    spdlog::warn("round {}: node {}: {}", round, n, h.status().ToString());
    log->Offend(n, "malformed_hello");
    MemberHello bad;
    bad.last_round = std::numeric_limits<int64_t>::min();
    x.hellos.push_back(bad);
  }
  if (!silent.ok()) return silent;
  return x;
}

void IdleJoinState::Refuse(uint64_t key) {
  refused.insert(key);
  if (refused.size() > 256) refused.erase(refused.begin());
}

std::optional<IdleJoin> ScanIdleJoin(ZmqTransport* transport, ViewBook* views, RingOffenceLog* log,
                                     int64_t last_round, int64_t grace_ms, IdleJoinState* state) {
  Status st = transport->Poll(0);  // serves state requests too
  if (!st.ok()) {
    spdlog::warn("ring poll: {}", st.ToString());
    return std::nullopt;
  }
  const int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  // Per (view, round): the live members announcing it with a partition,
  // and whether one of its hellos has waited the grace period.
  std::map<uint64_t, std::set<int>> announcers;
  std::set<uint64_t> ripe;
  std::set<std::pair<int, uint64_t>> present;
  for (const auto& [from, tag] : transport->Buffered()) {
    if ((tag & 0xFF) != kHelloPhase) continue;
    const int64_t round = models::TagRound(tag);
    if (round <= last_round) {
      transport->Discard(from, tag);  // a round this node has done
      continue;
    }
    if (log->guard().OutOfWindow(last_round, round)) {
      transport->Discard(from, tag);
      log->Offend(from, "out_of_window");
      continue;
    }
    const std::optional<std::span<const std::byte>> bytes = transport->Peek(from, tag);
    auto hello = bytes ? DecodeHello(*bytes) : StatusOr<MemberHello>(DataLoss("no payload"));
    if (!hello.ok()) {
      transport->Discard(from, tag);
      log->Offend(from, "malformed_hello");
      continue;
    }
    const uint64_t key = tag & ~uint64_t{0xFF};
    // Only live members of a view that has arrived (a view this agent has
    // not seen yet is judged once it arrives).
    if (state->refused.count(key) || !views->IsLive(models::TagView(tag), from)) continue;
    present.insert({from, tag});
    if (hello->partition != 0) announcers[key].insert(from);
    auto [it, fresh] = state->seen_us.emplace(std::pair{from, tag}, now);
    if (!fresh && now - it->second >= grace_ms * 1000) ripe.insert(key);
  }
  for (auto it = state->seen_us.begin(); it != state->seen_us.end();) {
    it = present.count(it->first) ? std::next(it) : state->seen_us.erase(it);
  }
  for (uint64_t key : ripe) {  // the lowest ripe round with a quorum of announcers
    const int count = static_cast<int>(announcers[key].size());
    if (count >= log->guard().JoinQuorum()) {
      state->seen_us.clear();
      return IdleJoin{models::TagView(key), models::TagRound(key), key, count};
    }
  }
  return std::nullopt;
}

Status VerifiedAllReduce(ZmqTransport* transport, const models::AllReduceOptions& ao,
                         const models::RingView& view, uint32_t round, std::vector<float>& data,
                         const std::vector<double>& weights, RingOffenceLog* log,
                         std::vector<float>* residual) {
  models::RingAllReduce ring(transport, ao);
  models::AllReduceReport report;
  LOFT_RETURN_IF_ERROR(ring.Run(view, round, data, weights, &report, residual));
  for (int from : report.malformed_from) log->Offend(from, "malformed_chunk");
  for (int from : report.chunk_mismatch_from) {
    spdlog::warn("round {}: node {} sent a reduced chunk its replicas do not agree with: not taken", round,
                 from);
    log->Offend(from, "chunk_mismatch");
  }
  return OkStatus();
}

Status CompressedAllReduce(ZmqTransport* transport, const models::AllReduceOptions& ao,
                           const models::RingView& view, uint32_t round, std::vector<float>& data,
                           const std::vector<double>& weights, RingOffenceLog* log,
                           std::vector<float>* residual) {
  if (ao.compression == models::Compression::kNone)
    return VerifiedAllReduce(transport, ao, view, round, data, weights, log);
  if (residual->size() != data.size()) residual->assign(data.size(), 0.0f);
  for (size_t i = 0; i < data.size(); ++i) data[i] += (*residual)[i];
  std::vector<float> rounding;
  LOFT_RETURN_IF_ERROR(VerifiedAllReduce(transport, ao, view, round, data, weights, log, &rounding));
  *residual = std::move(rounding);
  return OkStatus();
}

}  // namespace loft::agent
