#include "sim/flow_network.h"

#include <algorithm>
#include <limits>
#include <queue>
#include <utility>

namespace loft::sim {

namespace {
// A flow with at most this many bytes left counts as finished (absorbs
// floating-point residue of rate × time).
constexpr double kDoneBytes = 1e-6;
}  // namespace

FlowNetwork::FlowNetwork(EventQueue* queue, std::vector<double> up_bytes_per_ms,
                         std::vector<double> down_bytes_per_ms, double recompute_interval_ms)
    : queue_(queue),
      up_(std::move(up_bytes_per_ms)),
      down_(std::move(down_bytes_per_ms)),
      interval_ms_(std::max(0.0, recompute_interval_ms)) {
  const size_t r = up_.size() * 2;
  cap_.assign(r, 0);
  unfrozen_.assign(r, 0);
  by_resource_.assign(r, {});
  last_ms_ = queue_->now_ms();
}

uint32_t FlowNetwork::Alloc() {
  if (!free_.empty()) {
    const uint32_t s = free_.back();
    free_.pop_back();
    return s;
  }
  slots_.emplace_back();
  return static_cast<uint32_t>(slots_.size() - 1);
}

void FlowNetwork::SetBursts(std::vector<double> up_burst_bytes, std::vector<double> down_burst_bytes) {
  const size_t n = up_.size();
  burst_.assign(2 * n, 0);
  for (size_t i = 0; i < n && i < up_burst_bytes.size(); ++i)
    burst_[2 * i] = std::max(0.0, up_burst_bytes[i]);
  for (size_t i = 0; i < n && i < down_burst_bytes.size(); ++i)
    burst_[2 * i + 1] = std::max(0.0, down_burst_bytes[i]);
  tokens_ = burst_;
  idle_since_.assign(2 * n, queue_->now_ms());
  crossing_.assign(2 * n, 0);
}

double& FlowNetwork::Tokens(int32_t r) {
  const double now = queue_->now_ms();
  if (crossing_[r] == 0) {
    const double rate = (r % 2 == 0) ? up_[r / 2] : down_[r / 2];
    tokens_[r] = std::min(burst_[r], tokens_[r] + rate * (now - idle_since_[r]));
    idle_since_[r] = now;
  }
  return tokens_[r];
}

void FlowNetwork::Free(uint32_t slot) {
  if (!burst_.empty() && slots_[slot].id != 0) {
    const double now = queue_->now_ms();
    for (int32_t r : {2 * slots_[slot].server, 2 * slots_[slot].reader + 1}) {
      if (--crossing_[r] == 0) idle_since_[r] = now;
    }
  }
  index_.erase(slots_[slot].id);
  slots_[slot] = Flow{};
  free_.push_back(slot);
}

uint64_t FlowNetwork::Start(int server, int reader, double bytes, Done done, bool burst) {
  Advance();
  const uint64_t id = next_id_++;
  const uint32_t slot = Alloc();
  if (!burst_.empty()) {
    // The first bytes go at once while both buckets hold tokens; a flow
    // left with nothing finishes at this instant (kDoneBytes).
    double& up_tokens = Tokens(2 * server);
    double& down_tokens = Tokens(2 * reader + 1);
    const double now_bytes = burst ? std::min({bytes, up_tokens, down_tokens}) : 0.0;
    up_tokens -= now_bytes;
    down_tokens -= now_bytes;
    bytes -= now_bytes;
    ++crossing_[2 * server];
    ++crossing_[2 * reader + 1];
  }
  slots_[slot] = Flow{id, server, reader, bytes, 0, std::move(done)};
  index_.emplace(id, slot);
  dirty_ = true;
  if (!settle_pending_) {
    settle_pending_ = true;
    queue_->At(queue_->now_ms(), [this] { Settle(); });
  }
  return id;
}

void FlowNetwork::Settle() {
  settle_pending_ = false;
  if (!dirty_) return;  // a finish or cancel at this instant already recomputed
  Advance();
  Recompute();
}

void FlowNetwork::CancelNode(int node) {
  Advance();
  std::vector<Done> cancelled;
  for (uint32_t s = 0; s < slots_.size(); ++s) {
    Flow& f = slots_[s];
    if (f.id != 0 && (f.server == node || f.reader == node)) {
      cancelled.push_back(std::move(f.done));
      Free(s);
    }
  }
  if (cancelled.empty()) return;
  Recompute();
  for (auto& d : cancelled) d(false);
}

void FlowNetwork::Cancel(uint64_t flow) {
  auto it = index_.find(flow);
  if (it == index_.end()) return;
  Advance();
  Free(it->second);
  Recompute();
}

double FlowNetwork::RateOf(uint64_t flow) {
  if (dirty_) {
    Advance();
    Recompute();
  }
  auto it = index_.find(flow);
  return it == index_.end() ? 0.0 : slots_[it->second].rate;
}

void FlowNetwork::Advance() {
  const double now = queue_->now_ms();
  const double dt = now - last_ms_;
  if (dt > 0) {
    for (Flow& f : slots_) {
      if (f.id != 0) f.remaining -= f.rate * dt;
    }
  }
  last_ms_ = now;
}

void FlowNetwork::Recompute() {
  ++recomputes_;
  dirty_ = false;
  last_recompute_ms_ = last_ms_;
  // Resources: 2·node = uplink of node, 2·node + 1 = downlink of node.
  touched_.clear();
  for (uint32_t s = 0; s < slots_.size(); ++s) {
    Flow& f = slots_[s];
    if (f.id == 0) continue;
    const int32_t rs[2] = {2 * f.server, 2 * f.reader + 1};
    for (int32_t r : rs) {
      if (by_resource_[r].empty()) {
        touched_.push_back(r);
        cap_[r] = (r % 2 == 0) ? up_[r / 2] : down_[r / 2];
        unfrozen_[r] = 0;
      }
      by_resource_[r].push_back(s);
      ++unfrozen_[r];
    }
    f.rate = -1;  // unfrozen
  }
  // Progressive filling: repeatedly saturate the resource with the
  // smallest fair share; its unfrozen flows get that share. Ties break on
  // the resource index, so the result is deterministic.
  using Entry = std::pair<double, int32_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  for (int32_t r : touched_) heap.emplace(cap_[r] / unfrozen_[r], r);
  while (!heap.empty()) {
    auto [share, r] = heap.top();
    heap.pop();
    if (unfrozen_[r] == 0) continue;
    if (cap_[r] / unfrozen_[r] != share) continue;  // stale entry; a fresher one exists
    for (uint32_t s : by_resource_[r]) {
      Flow& f = slots_[s];
      if (f.rate >= 0) continue;
      f.rate = share;
      const int32_t other = (r == 2 * f.server) ? 2 * f.reader + 1 : 2 * f.server;
      cap_[r] -= share;
      --unfrozen_[r];
      cap_[other] = std::max(0.0, cap_[other] - share);
      --unfrozen_[other];
      if (unfrozen_[other] > 0) heap.emplace(cap_[other] / unfrozen_[other], other);
    }
  }
  for (int32_t r : touched_) by_resource_[r].clear();
  ScheduleNext();
}

void FlowNetwork::ScheduleNext() {
  ++generation_;
  double soonest = std::numeric_limits<double>::infinity();
  for (const Flow& f : slots_) {
    if (f.id == 0 || f.rate <= 0) continue;
    soonest = std::min(soonest, f.remaining <= kDoneBytes ? 0.0 : f.remaining / f.rate);
  }
  if (soonest == std::numeric_limits<double>::infinity()) return;
  const uint64_t gen = generation_;
  queue_->At(last_ms_ + soonest, [this, gen] { OnTimer(gen); });
}

void FlowNetwork::OnTimer(uint64_t generation) {
  if (generation != generation_) return;  // superseded by a later recompute
  Advance();
  std::vector<Done> finished;
  for (uint32_t s = 0; s < slots_.size(); ++s) {
    Flow& f = slots_[s];
    if (f.id == 0 || f.rate <= 0) continue;
    // A flow whose remaining time rounds to now is done.
    if (f.remaining <= kDoneBytes || f.remaining / f.rate <= 1e-12 * std::max(1.0, last_ms_)) {
      finished.push_back(std::move(f.done));
      Free(s);
    }
  }
  if (interval_ms_ <= 0 || last_ms_ - last_recompute_ms_ >= interval_ms_) {
    Recompute();
  } else {
    // Hand the freed bandwidth out at the next tick; until then the other
    // flows keep their rates.
    dirty_ = true;
    if (!settle_pending_) {
      settle_pending_ = true;
      queue_->At(last_recompute_ms_ + interval_ms_, [this] { Settle(); });
    }
    ScheduleNext();
  }
  for (auto& d : finished) d(true);
}

}  // namespace loft::sim
