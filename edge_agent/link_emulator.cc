#include "edge_agent/link_emulator.h"

#include <algorithm>
#include <cmath>

#include "edge_agent/exact_sleep.h"

namespace loft::agent {

TokenBucket::TokenBucket(Clock* clock, double rate_mbps, double burst_bytes)
    : clock_(clock), rate_mbps_(rate_mbps), bytes_per_us_(rate_mbps / 8.0) {
  burst_us_ = std::max(burst_bytes, 0.0) / bytes_per_us_;
  free_at_us_ = static_cast<double>(clock->NowMicros());
}

int64_t TokenBucket::Acquire(int64_t bytes) {
  return AcquireSince(bytes, clock_->NowMicros());
}

int64_t TokenBucket::AcquireSince(int64_t bytes, int64_t since_us) {
  int64_t wait_us = 0;
  {
    std::lock_guard lock(mu_);
    const int64_t now = clock_->NowMicros();
    const double start = std::max(free_at_us_, static_cast<double>(std::min(since_us, now)));
    free_at_us_ = start + static_cast<double>(bytes) / bytes_per_us_;
    const double wait = free_at_us_ - burst_us_ - static_cast<double>(now);
    if (wait > 0) wait_us = static_cast<int64_t>(std::ceil(wait));
  }
  if (wait_us > 0) clock_->SleepForMicros(wait_us);
  return wait_us;
}

std::unique_ptr<TokenBucket> MakeLinkBucket(Clock* clock, const NetworkSpec& network, double rate_mbps) {
  return std::make_unique<TokenBucket>(clock, rate_mbps, LinkBurstBytes(network, rate_mbps));
}

void RingLinkEmulation::BeforeSend(int64_t bytes) const {
  if (enabled() && up != nullptr && bytes > 0) up->Acquire(bytes);
}

void RingLinkEmulation::AfterReceive(int from, int64_t bytes, int64_t arrived_us) const {
  if (!enabled()) return;
  const auto rank = static_cast<size_t>(from);
  int64_t delivered_us = arrived_us;  // when the last byte is through both links
  if (down != nullptr && bytes > 0) {
    const double sender_mbps = rank < up_mbps.size() ? up_mbps[rank] : 0.0;
    const int64_t sent_us =
        sender_mbps > 0 ? static_cast<int64_t>(static_cast<double>(bytes) * 8.0 / sender_mbps) : 0;
    if (down->AcquireSince(bytes, arrived_us - sent_us) > 0) delivered_us = clock->NowMicros();
  }
  double lat = 0;
  if (rank < latency_ms.size()) lat = latency_ms[rank];
  if (static_cast<size_t>(self) < latency_ms.size())
    lat = std::max(lat, latency_ms[static_cast<size_t>(self)]);
  const int64_t ready = delivered_us + static_cast<int64_t>(lat * 1000.0);
  const int64_t now = clock->NowMicros();
  if (ready > now) {
    FineTimerSlack();  // a hold per ring step: not 50 µs of timer slack each (set once per thread)
    clock->SleepForMicros(ready - now);
  }
}

}  // namespace loft::agent
