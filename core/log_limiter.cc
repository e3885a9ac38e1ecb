#include "core/log_limiter.h"

#include <algorithm>
#include <iterator>

namespace loft {

std::string PeerText(std::string_view text, size_t max_bytes) {
  std::string out;
  const size_t n = std::min(text.size(), max_bytes);
  out.reserve(n + 24);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      fmt::format_to(std::back_inserter(out), "\\x{:02x}", c);
    }
  }
  if (text.size() > n) fmt::format_to(std::back_inserter(out), "...({} bytes)", text.size());
  return out;
}

StatusOr<metrics::CounterFamily*> AddLogSuppressedCounter(metrics::Registry* registry,
                                                          std::string_view prefix) {
  return registry->AddCounter(fmt::format("{}_log_suppressed_total", prefix),
                              "Log lines a peer's messages would have caused that were not logged (at most "
                              "10 per 10 s per kind and peer), by kind.",
                              {"kind"});
}

bool PeerLogLimits::Allow(std::string_view kind, std::string_view peer, TimePoint now, std::string* note) {
  std::string key = fmt::format("{}\n{}", kind, peer);
  auto it = limiters_.find(key);
  if (it == limiters_.end()) {
    // Too many distinct peers: the newcomers of every kind share one limiter per kind.
    if (limiters_.size() >= kMaxLimiters) key = fmt::format("{}\n\x01others", kind);
    it = limiters_.try_emplace(std::move(key), burst_, window_).first;
  }
  int64_t dropped = 0;
  if (!it->second.Allow(now, &dropped)) {
    ++total_suppressed_;
    if (suppressed_ != nullptr) suppressed_->WithLabels({std::string(kind)}).Increment();
    return false;
  }
  if (note != nullptr) *note = dropped > 0 ? fmt::format(" ({} similar lines not logged)", dropped) : "";
  return true;
}

}  // namespace loft
