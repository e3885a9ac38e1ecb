#include "scheduler/epoch_sampler.h"

#include <algorithm>
#include <string>

namespace loft::sched {

namespace {
constexpr uint8_t kPooled = static_cast<uint8_t>(EpochSampler::SampleState::kPooled);
constexpr uint8_t kTaken = static_cast<uint8_t>(EpochSampler::SampleState::kTaken);
constexpr uint8_t kCommitted = static_cast<uint8_t>(EpochSampler::SampleState::kCommitted);

void Fnv(uint64_t& h, uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    h ^= (v >> (8 * i)) & 0xff;
    h *= 1099511628211ULL;
  }
}

// Validates that every id is in range, distinct, and in state `want`.
Status CheckIds(std::span<const uint64_t> ids, const std::vector<uint8_t>& state, uint8_t want,
                const char* what) {
  std::vector<uint64_t> sorted(ids.begin(), ids.end());
  std::sort(sorted.begin(), sorted.end());
  for (size_t k = 0; k < sorted.size(); ++k) {
    const uint64_t id = sorted[k];
    if (id >= state.size()) {
      return OutOfRange(std::string(what) + ": sample id " + std::to_string(id) +
                        " >= " + std::to_string(state.size()));
    }
    if (k > 0 && sorted[k - 1] == id) {
      return InvalidArgument(std::string(what) + ": sample id " + std::to_string(id) + " listed twice");
    }
    if (state[id] != want) {
      static const char* kNames[] = {"pooled", "taken", "committed"};
      return FailedPrecondition(std::string(what) + ": sample id " + std::to_string(id) + " is " +
                                kNames[state[id]] + ", expected " + kNames[want]);
    }
  }
  return OkStatus();
}
}  // namespace

EpochSampler::EpochSampler(const Placement* placement, uint64_t seed) : placement_(placement), seed_(seed) {
  StartEpoch(0);
}

uint64_t EpochSampler::EpochMix(int64_t epoch) {
  uint64_t s = static_cast<uint64_t>(epoch) * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL;
  return SplitMix64(s);
}

void EpochSampler::StartEpoch(int64_t epoch) {
  const auto n = static_cast<uint64_t>(placement_->num_samples());
  const int nodes = placement_->num_nodes();
  epoch_ = epoch;
  order_ = SeededPermutation(n, seed_ ^ EpochMix(epoch));
  position_.assign(n, 0);
  for (uint64_t p = 0; p < n; ++p) position_[order_[p]] = static_cast<int64_t>(p);
  state_.assign(n, kPooled);
  origin_.assign(n, 0);
  available_.assign(nodes, 0);
  node_order_.assign(nodes, {});
  for (int j = 0; j < nodes; ++j) {
    available_[j] = static_cast<int64_t>(placement_->SamplesOf(j).size());
    node_order_[j].reserve(placement_->SamplesOf(j).size());
  }
  for (uint64_t p = 0; p < n; ++p) {
    for (int32_t h : placement_->Holders(order_[p])) node_order_[h].push_back(order_[p]);
  }
  node_cursor_.assign(nodes, 0);
  node_behind_.assign(nodes, {});
  global_cursor_ = 0;
  global_behind_.clear();
  pooled_ = static_cast<int64_t>(n);
  taken_ = 0;
  committed_ = 0;
}

void EpochSampler::Unpool(uint64_t id) {
  state_[id] = kTaken;
  --pooled_;
  ++taken_;
  for (int32_t h : placement_->Holders(id)) --available_[h];
}

void EpochSampler::Pool(uint64_t id) {
  state_[id] = kPooled;
  ++pooled_;
  --taken_;
  const int64_t pos = position_[id];
  for (int32_t h : placement_->Holders(id)) {
    ++available_[h];
    const size_t c = node_cursor_[h];
    if (c > 0 && pos <= position_[node_order_[h][c - 1]]) node_behind_[h].insert(pos);
  }
  if (static_cast<size_t>(pos) < global_cursor_) global_behind_.insert(pos);
}

int64_t EpochSampler::TakeHeldBy(int node, int64_t max_count, std::vector<uint64_t>& out) {
  int64_t got = 0;
  auto& behind = node_behind_[node];
  auto& list = node_order_[node];
  size_t& cursor = node_cursor_[node];
  while (got < max_count) {
    while (!behind.empty() && state_[order_[*behind.begin()]] != kPooled) behind.erase(behind.begin());
    uint64_t id;
    if (!behind.empty()) {
      id = order_[*behind.begin()];
      behind.erase(behind.begin());
    } else {
      while (cursor < list.size() && state_[list[cursor]] != kPooled) ++cursor;
      if (cursor == list.size()) break;
      id = list[cursor++];
    }
    Unpool(id);
    out.push_back(id);
    ++got;
  }
  return got;
}

int64_t EpochSampler::TakeInOrder(int64_t max_count, const std::function<bool(uint64_t)>& assignable,
                                  std::vector<uint64_t>& out) {
  int64_t got = 0;
  for (auto it = global_behind_.begin(); it != global_behind_.end() && got < max_count;) {
    const uint64_t id = order_[*it];
    if (state_[id] != kPooled) {
      it = global_behind_.erase(it);
      continue;
    }
    if (!assignable(id)) {
      ++it;
      continue;
    }
    Unpool(id);
    out.push_back(id);
    ++got;
    it = global_behind_.erase(it);
  }
  while (got < max_count && global_cursor_ < order_.size()) {
    const uint64_t id = order_[global_cursor_];
    if (state_[id] == kPooled) {
      if (assignable(id)) {
        Unpool(id);
        out.push_back(id);
        ++got;
      } else {
        global_behind_.insert(static_cast<int64_t>(global_cursor_));
      }
    }
    ++global_cursor_;
  }
  return got;
}

int64_t EpochSampler::CountAssignable(const std::function<bool(uint64_t)>& assignable) const {
  int64_t count = 0;
  for (uint64_t id = 0; id < state_.size(); ++id) {
    if (state_[id] == kPooled && assignable(id)) ++count;
  }
  return count;
}

Status EpochSampler::MarkTaken(std::span<const uint64_t> ids) {
  LOFT_RETURN_IF_ERROR(CheckIds(ids, state_, kPooled, "take"));
  for (uint64_t id : ids) Unpool(id);
  return OkStatus();
}

Status EpochSampler::Untake(std::span<const uint64_t> ids) {
  LOFT_RETURN_IF_ERROR(CheckIds(ids, state_, kTaken, "untake"));
  for (uint64_t id : ids) Pool(id);
  return OkStatus();
}

Status EpochSampler::Return(std::span<const uint64_t> ids, uint64_t from_partition) {
  LOFT_RETURN_IF_ERROR(CheckIds(ids, state_, kTaken, "return"));
  for (uint64_t id : ids) {
    Pool(id);
    origin_[id] = from_partition;
  }
  return OkStatus();
}

Status EpochSampler::Commit(std::span<const uint64_t> ids, int64_t* duplicates) {
  for (uint64_t id : ids) {
    if (id >= state_.size()) {
      return OutOfRange("commit: sample id " + std::to_string(id) + " >= " + std::to_string(state_.size()));
    }
    if (state_[id] == kPooled) {
      return FailedPrecondition("commit: sample id " + std::to_string(id) + " is pooled, not taken");
    }
  }
  int64_t dups = 0;
  for (uint64_t id : ids) {
    if (state_[id] == kCommitted) {
      ++dups;
      continue;
    }
    state_[id] = kCommitted;
    origin_[id] = 0;
    --taken_;
    ++committed_;
  }
  if (duplicates != nullptr) *duplicates = dups;
  return OkStatus();
}

uint64_t EpochSampler::Digest() const {
  uint64_t h = 1469598103934665603ULL;
  Fnv(h, static_cast<uint64_t>(epoch_));
  for (uint64_t id = 0; id < state_.size(); ++id) {
    Fnv(h, state_[id]);
    Fnv(h, origin_[id]);
  }
  return h;
}

}  // namespace loft::sched
