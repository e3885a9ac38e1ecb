#include "scheduler/epoch_sampler.h"

#include <algorithm>
#include <cassert>
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

// Validates that every id is in range, distinct, and in state `want`, in
// O(ids) without sorting: ids seen are marked in `state` (kSeen) and
// restored before returning.
constexpr uint8_t kSeen = 0xFF;
Status CheckIds(std::span<const uint64_t> ids, std::vector<uint8_t>& state, uint8_t want, const char* what) {
  static const char* kNames[] = {"pooled", "taken", "committed"};
  Status status = OkStatus();
  size_t k = 0;
  for (; k < ids.size(); ++k) {
    const uint64_t id = ids[k];
    if (id >= state.size()) {
      status = OutOfRange(std::string(what) + ": sample id " + std::to_string(id) +
                          " >= " + std::to_string(state.size()));
      break;
    }
    if (state[id] == kSeen) {
      status = InvalidArgument(std::string(what) + ": sample id " + std::to_string(id) + " listed twice");
      break;
    }
    if (state[id] != want) {
      status = FailedPrecondition(std::string(what) + ": sample id " + std::to_string(id) + " is " +
                                  kNames[state[id]] + ", expected " + kNames[want]);
      break;
    }
    state[id] = kSeen;
  }
  // Restore the marks (ids[0..k) are in range and were `want`, or a
  // repeat of one of them, which is kSeen-then-want again: harmless).
  for (size_t i = 0; i < k; ++i) state[ids[i]] = want;
  return status;
}
}  // namespace

EpochSampler::EpochSampler(const Placement* placement, uint64_t seed) : placement_(placement), seed_(seed) {
  StartEpoch(0);
}

uint64_t EpochSampler::EpochMix(int64_t epoch) {
  uint64_t s = static_cast<uint64_t>(epoch) * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL;
  return SplitMix64(s);
}

void EpochSampler::BuildOrder(int64_t epoch, std::vector<uint64_t>& order, std::vector<int32_t>& holder_at,
                              std::vector<std::vector<uint64_t>>& node_order) const {
  const auto n = static_cast<uint64_t>(placement_->num_samples());
  const int nodes = placement_->num_nodes();
  SeededPermutation(n, seed_ ^ EpochMix(epoch), order);  // reuses the buffer
  node_order.resize(nodes);                              // keeps each list's capacity across epochs
  // Node j's list = the ids it holds in permutation order; filled through
  // a write cursor per node (sizes are known: SamplesOf(j)), in the same
  // pass that records each position's holder (replication 1).
  std::vector<uint64_t*> tail(static_cast<size_t>(nodes));
  for (int j = 0; j < nodes; ++j) {
    node_order[j].resize(placement_->SamplesOf(j).size());
    tail[j] = node_order[j].data();
  }
  constexpr uint64_t kAhead = 16;  // prefetch distance for the random Holders reads
  const bool single = placement_->replication() == 1;
  if (single) {
    holder_at.resize(n);
  } else {
    holder_at.clear();
  }
  for (uint64_t p = 0; p < n; ++p) {
    if (p + kAhead < n) __builtin_prefetch(placement_->Holders(order[p + kAhead]).data());
    const uint64_t id = order[p];
    const auto holders = placement_->Holders(id);
    if (single) holder_at[p] = holders[0];
    for (int32_t h : holders) *tail[h]++ = id;
  }
}

void EpochSampler::PrepareEpoch(int64_t epoch) {
  if (prepared_epoch_ == epoch || epoch == epoch_) return;
  BuildOrder(epoch, prepared_order_, prepared_holder_at_, prepared_node_order_);
  prepared_epoch_ = epoch;
}

std::unique_ptr<EpochSampler> EpochSampler::SplitOffEpoch(int64_t next_epoch) {
  auto old = std::make_unique<EpochSampler>(std::move(*this));
  // The moved-from vectors and sets here are empty; StartEpoch rebuilds
  // every per-epoch field (positions on first use). The prepared buffers
  // belong to the next epoch.
  prepared_epoch_ = old->prepared_epoch_;
  prepared_order_.swap(old->prepared_order_);
  prepared_holder_at_.swap(old->prepared_holder_at_);
  prepared_node_order_.swap(old->prepared_node_order_);
  old->prepared_epoch_ = -1;
  StartEpoch(next_epoch);
  return old;
}

void EpochSampler::StartEpoch(int64_t epoch) {
  const auto n = static_cast<uint64_t>(placement_->num_samples());
  const int nodes = placement_->num_nodes();
  if (prepared_epoch_ == epoch) {
    order_.swap(prepared_order_);
    holder_at_.swap(prepared_holder_at_);
    node_order_.swap(prepared_node_order_);
  } else {
    BuildOrder(epoch, order_, holder_at_, node_order_);
  }
  prepared_epoch_ = -1;
  epoch_ = epoch;
  positions_ready_ = false;  // inverted on first use (EnsurePositions)
  state_.assign(n, kPooled);
  pooled_bits_.assign((n + 63) / 64, ~uint64_t{0});
  if (n % 64 != 0) pooled_bits_.back() = (uint64_t{1} << (n % 64)) - 1;
  // Committing clears origins, so after a whole epoch origin_ is already
  // all 0 (with_origin_ counts the non-zero entries).
  if (origin_.size() != n || with_origin_ != 0) origin_.assign(n, 0);
  with_origin_ = 0;
  available_.assign(nodes, 0);
  for (int j = 0; j < nodes; ++j) available_[j] = static_cast<int64_t>(placement_->SamplesOf(j).size());
  node_cursor_.assign(nodes, 0);
  node_behind_.assign(nodes, {});
  global_cursor_ = 0;
  global_behind_.clear();
  trial_ = false;
  trial_taken_.clear();
  trial_node_cursors_.clear();
  trial_ops_.clear();
  trial_node_touched_.assign(nodes, 0);
  pooled_ = static_cast<int64_t>(n);
  taken_ = 0;
  committed_ = 0;
}

void EpochSampler::Unpool(uint64_t id, int holder) {
  ClearPooledBit(id);
  if (trial_) {
    trial_taken_.push_back(id);
  } else {
    state_[id] = kTaken;
  }
  --pooled_;
  ++taken_;
  if (holder >= 0 && placement_->replication() == 1) {
    --available_[holder];
  } else {
    for (int32_t h : placement_->Holders(id)) --available_[h];
  }
}

void EpochSampler::UnpoolTaken(std::span<const uint64_t> ids, int holder) {
  if (trial_) {
    trial_taken_.insert(trial_taken_.end(), ids.begin(), ids.end());
  } else {
    for (uint64_t id : ids) state_[id] = kTaken;
  }
  const auto count = static_cast<int64_t>(ids.size());
  pooled_ -= count;
  taken_ += count;
  if (placement_->replication() == 1) {
    available_[holder] -= count;
  } else {
    for (uint64_t id : ids) {
      for (int32_t h : placement_->Holders(id)) --available_[h];
    }
  }
}

void EpochSampler::EnsurePositions() const {
  if (positions_ready_) return;
  position_.resize(order_.size());
  for (size_t p = 0; p < order_.size(); ++p) position_[order_[p]] = static_cast<int64_t>(p);
  positions_ready_ = true;
}

void EpochSampler::Pool(uint64_t id) {
  state_[id] = kPooled;
  SetPooledBit(id);
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
  const size_t first = out.size();
  int64_t got = 0;
  TouchNodeCursor(node);
  // Pooled positions behind the cursor (returned samples) come first:
  // they precede everything at or after it.
  auto& behind = node_behind_[node];
  while (got < max_count && !behind.empty()) {
    const int64_t pos = *behind.begin();
    EraseBehind(node, pos);
    const uint64_t id = order_[pos];
    if (!IsPooled(id)) continue;
    ClearPooledBit(id);
    out.push_back(id);
    ++got;
  }
  // Then the node's list from its cursor. The cursor ends just past the
  // last id taken (or at the end of the list).
  // (Written through local pointers: this loop runs once per sample
  // planned.)
  const auto& list = node_order_[node];
  size_t cursor = node_cursor_[node];
  if (got < max_count && cursor < list.size()) {
    const auto room =
        static_cast<size_t>(std::min<int64_t>(max_count - got, static_cast<int64_t>(list.size() - cursor)));
    const size_t base = out.size();
    out.resize(base + room);
    uint64_t* dst = out.data() + base;
    uint64_t* const bits = pooled_bits_.data();
    const uint64_t* const ids = list.data();
    const size_t end = list.size();
    size_t n = 0;
    while (n < room && cursor < end) {
      const uint64_t id = ids[cursor++];
      const uint64_t mask = uint64_t{1} << (id & 63);
      if ((bits[id >> 6] & mask) == 0) continue;
      bits[id >> 6] &= ~mask;
      dst[n++] = id;
    }
    out.resize(base + n);
    got += static_cast<int64_t>(n);
  }
  node_cursor_[node] = cursor;
  UnpoolTaken(std::span<const uint64_t>(out).subspan(first), node);
  return got;
}

int64_t EpochSampler::TakeInOrder(int64_t max_count, const std::function<bool(uint64_t)>& assignable,
                                  std::vector<uint64_t>& out, std::vector<int32_t>* primary_holders) {
  const bool single = !holder_at_.empty();
  auto holder_of = [&](uint64_t id, size_t pos) {
    return single ? holder_at_[pos] : placement_->Holders(id)[0];
  };
  int64_t got = 0;
  for (auto it = global_behind_.begin(); it != global_behind_.end() && got < max_count;) {
    const int64_t pos = *it;
    const uint64_t id = order_[pos];
    ++it;  // erasing `pos` below leaves `it` valid
    if (!IsPooled(id)) {
      EraseBehind(-1, pos);
      continue;
    }
    if (assignable && !assignable(id)) continue;
    const int32_t holder = holder_of(id, static_cast<size_t>(pos));
    Unpool(id, holder);
    out.push_back(id);
    if (primary_holders != nullptr) primary_holders->push_back(holder);
    ++got;
    EraseBehind(-1, pos);
  }
  while (got < max_count && global_cursor_ < order_.size()) {
    const uint64_t id = order_[global_cursor_];
    if (IsPooled(id)) {
      if (!assignable || assignable(id)) {
        const int32_t holder = holder_of(id, global_cursor_);
        Unpool(id, holder);
        out.push_back(id);
        if (primary_holders != nullptr) primary_holders->push_back(holder);
        ++got;
      } else {
        InsertBehind(-1, static_cast<int64_t>(global_cursor_));
      }
    }
    ++global_cursor_;
  }
  return got;
}

void EpochSampler::EraseBehind(int set, int64_t pos) {
  auto& s = set < 0 ? global_behind_ : node_behind_[set];
  if (s.erase(pos) > 0 && trial_) trial_ops_.push_back({set, false, pos});
}

void EpochSampler::InsertBehind(int set, int64_t pos) {
  auto& s = set < 0 ? global_behind_ : node_behind_[set];
  if (s.insert(pos).second && trial_) trial_ops_.push_back({set, true, pos});
}

void EpochSampler::TouchNodeCursor(int node) {
  if (!trial_ || trial_node_touched_[node]) return;
  trial_node_touched_[node] = 1;
  trial_node_cursors_.emplace_back(node, node_cursor_[node]);
}

void EpochSampler::BeginTrial() {
  trial_ = true;
  trial_global_cursor_ = global_cursor_;
  trial_pooled_ = pooled_;
  trial_taken_count_ = taken_;
  trial_available_ = available_;
  trial_taken_.clear();
  trial_node_cursors_.clear();
  trial_ops_.clear();
  if (trial_node_touched_.size() != node_cursor_.size()) trial_node_touched_.assign(node_cursor_.size(), 0);
}

void EpochSampler::RollbackTrial() {
  if (!trial_) return;
  trial_ = false;
  // Trial takes cleared only pooled bits and moved counters.
  for (uint64_t id : trial_taken_) SetPooledBit(id);
  pooled_ = trial_pooled_;
  taken_ = trial_taken_count_;
  available_.swap(trial_available_);
  global_cursor_ = trial_global_cursor_;
  for (const auto& [node, cursor] : trial_node_cursors_) {
    node_cursor_[node] = cursor;
    trial_node_touched_[node] = 0;
  }
  for (auto it = trial_ops_.rbegin(); it != trial_ops_.rend(); ++it) {
    auto& s = it->set < 0 ? global_behind_ : node_behind_[it->set];
    if (it->inserted) {
      s.erase(it->pos);
    } else {
      s.insert(it->pos);
    }
  }
  trial_taken_.clear();
  trial_node_cursors_.clear();
  trial_ops_.clear();
}

int64_t EpochSampler::CountAssignable(const std::function<bool(uint64_t)>& assignable) const {
  int64_t count = 0;
  for (uint64_t id = 0; id < state_.size(); ++id) {
    if (IsPooled(id) && assignable(id)) ++count;
  }
  return count;
}

Status EpochSampler::MarkTaken(std::span<const uint64_t> ids) {
  return MarkTaken(ids, {});
}

Status EpochSampler::MarkTaken(std::span<const uint64_t> ids, std::span<const int32_t> holders) {
  if (!holders.empty() && holders.size() != ids.size()) {
    return InvalidArgument("take: " + std::to_string(holders.size()) + " holders for " +
                           std::to_string(ids.size()) + " sample ids");
  }
  // One pass validates and takes; on an error the ids taken so far are
  // put back (pooled bit, state, available), so nothing changed. The
  // index maintenance that cannot be undone cheaply (behind sets, cursors)
  // runs only after every id was accepted.
  const uint64_t n = state_.size();
  const bool hinted = !holders.empty() && placement_->replication() == 1;
  uint8_t* const state = state_.data();
  int64_t* const available = available_.data();
  constexpr size_t kAhead = 16;  // prefetch distance for the random state reads
  for (size_t k = 0; k < ids.size(); ++k) {
    if (k + kAhead < ids.size() && ids[k + kAhead] < n) __builtin_prefetch(state + ids[k + kAhead]);
    const uint64_t id = ids[k];
    if (id >= n || state[id] != kPooled || !IsPooled(id)) {
      Status status;
      if (id >= n) {
        status = OutOfRange("take: sample id " + std::to_string(id) + " >= " + std::to_string(n));
      } else if (state[id] == kPooled ||
                 (state[id] == kTaken && std::find(ids.begin(), ids.begin() + k, id) != ids.begin() + k)) {
        status = InvalidArgument("take: sample id " + std::to_string(id) + " listed twice");
      } else {
        status = FailedPrecondition("take: sample id " + std::to_string(id) + " is " +
                                    (state[id] == kTaken ? "taken" : "committed") + ", expected pooled");
      }
      // ids[0, k) are distinct (a repeat would have stopped earlier).
      for (size_t i = 0; i < k; ++i) {
        state[ids[i]] = kPooled;
        SetPooledBit(ids[i]);
        if (hinted) {
          ++available[holders[i]];
        } else {
          for (int32_t h : placement_->Holders(ids[i])) ++available[h];
        }
      }
      return status;
    }
    ClearPooledBit(id);
    state[id] = kTaken;
    if (hinted) {
      assert(placement_->Holds(holders[k], id));  // the caller's contract
      --available[holders[k]];
    } else {
      for (int32_t h : placement_->Holders(id)) --available[h];
    }
  }
  pooled_ -= static_cast<int64_t>(ids.size());
  taken_ += static_cast<int64_t>(ids.size());
  // Keep the indexes tight so later takes (and dry runs) do not rescan
  // what is no longer pooled: drop behind-set entries of the taken ids
  // (the sets are usually empty: only returns and dead holders fill them)
  // and move every cursor over non-pooled entries. Each list entry is
  // passed once per epoch, so the walks are amortized O(replication) per
  // sample plus O(nodes) per call.
  bool any_behind = !global_behind_.empty();
  for (const auto& b : node_behind_) any_behind = any_behind || !b.empty();
  if (any_behind) {
    EnsurePositions();
    for (uint64_t id : ids) {
      const int64_t pos = position_[id];
      if (!global_behind_.empty()) EraseBehind(-1, pos);
      for (int32_t h : placement_->Holders(id)) {
        if (!node_behind_[h].empty()) EraseBehind(h, pos);
      }
    }
  }
  for (size_t h = 0; h < node_order_.size(); ++h) {
    const auto& list = node_order_[h];
    size_t c = node_cursor_[h];
    while (c < list.size() && !IsPooled(list[c])) ++c;
    node_cursor_[h] = c;
  }
  size_t g = global_cursor_;
  while (g < order_.size() && !IsPooled(order_[g])) ++g;
  global_cursor_ = g;
  return OkStatus();
}

Status EpochSampler::Untake(std::span<const uint64_t> ids) {
  LOFT_RETURN_IF_ERROR(CheckIds(ids, state_, kTaken, "untake"));
  EnsurePositions();
  for (uint64_t id : ids) Pool(id);
  return OkStatus();
}

Status EpochSampler::Return(std::span<const uint64_t> ids, uint64_t from_partition) {
  LOFT_RETURN_IF_ERROR(CheckIds(ids, state_, kTaken, "return"));
  EnsurePositions();
  for (uint64_t id : ids) {
    Pool(id);
    with_origin_ += (from_partition != 0 ? 1 : 0) - (origin_[id] != 0 ? 1 : 0);
    origin_[id] = from_partition;
  }
  return OkStatus();
}

Status EpochSampler::Commit(std::span<const uint64_t> ids, int64_t* duplicates) {
  const uint64_t n = state_.size();
  uint8_t* const state = state_.data();
  constexpr size_t kAhead = 16;  // prefetch distance for the random state reads
  for (size_t k = 0; k < ids.size(); ++k) {
    if (k + kAhead < ids.size() && ids[k + kAhead] < n) __builtin_prefetch(state + ids[k + kAhead]);
    const uint64_t id = ids[k];
    if (id >= n) {
      return OutOfRange("commit: sample id " + std::to_string(id) + " >= " + std::to_string(n));
    }
    if (state[id] == kPooled) {
      return FailedPrecondition("commit: sample id " + std::to_string(id) + " is pooled, not taken");
    }
  }
  int64_t dups = 0;
  if (with_origin_ == 0) {
    // No sample has an origin (origin_ is all 0): nothing to clear.
    for (uint64_t id : ids) {
      if (state[id] == kCommitted) {
        ++dups;
      } else {
        state[id] = kCommitted;
      }
    }
  } else {
    for (uint64_t id : ids) {
      if (state[id] == kCommitted) {
        ++dups;
        continue;
      }
      state[id] = kCommitted;
      if (origin_[id] != 0) --with_origin_;
      origin_[id] = 0;
    }
  }
  const auto done = static_cast<int64_t>(ids.size()) - dups;
  taken_ -= done;
  committed_ += done;
  if (duplicates != nullptr) *duplicates = dups;
  return OkStatus();
}

Status EpochSampler::Restore(int64_t epoch, std::span<const uint8_t> states,
                             std::span<const std::pair<uint64_t, uint64_t>> origins) {
  if (trial_) return FailedPrecondition("sampler: restore inside a trial");
  const uint64_t n = state_.size();
  if (epoch < 0) return InvalidArgument("sampler: epoch " + std::to_string(epoch) + " < 0");
  if (states.size() != n) {
    return InvalidArgument("sampler: " + std::to_string(states.size()) + " sample states for " +
                           std::to_string(n) + " samples");
  }
  for (uint64_t id = 0; id < n; ++id) {
    if (states[id] > kCommitted) {
      return InvalidArgument("sampler: sample " + std::to_string(id) + " has state " +
                             std::to_string(states[id]));
    }
  }
  for (size_t k = 0; k < origins.size(); ++k) {
    const auto [id, from] = origins[k];
    if (id >= n || from == 0 || (k > 0 && id <= origins[k - 1].first) || states[id] == kCommitted) {
      return InvalidArgument("sampler: origin of sample " + std::to_string(id) + " (partition " +
                             std::to_string(from) +
                             ") is out of range, 0, not ascending or on a committed sample");
    }
  }
  // Replays the calls that led there: samples with an origin are taken and
  // returned from their partition, then every sample not pooled is taken
  // and the committed ones committed. Validated above, so none fails.
  StartEpoch(epoch);
  std::vector<uint64_t> ids;
  ids.reserve(origins.size());
  for (const auto& [id, from] : origins) ids.push_back(id);
  LOFT_RETURN_IF_ERROR(MarkTaken(ids));
  std::vector<std::pair<uint64_t, uint64_t>> by_partition;
  by_partition.reserve(origins.size());
  for (const auto& [id, from] : origins) by_partition.emplace_back(from, id);
  std::sort(by_partition.begin(), by_partition.end());
  for (size_t k = 0; k < by_partition.size();) {
    const uint64_t from = by_partition[k].first;
    ids.clear();
    for (; k < by_partition.size() && by_partition[k].first == from; ++k)
      ids.push_back(by_partition[k].second);
    LOFT_RETURN_IF_ERROR(Return(ids, from));
  }
  ids.clear();
  std::vector<uint64_t> committed;
  for (uint64_t id = 0; id < n; ++id) {
    if (states[id] != kPooled) ids.push_back(id);
    if (states[id] == kCommitted) committed.push_back(id);
  }
  LOFT_RETURN_IF_ERROR(MarkTaken(ids));
  int64_t dups = 0;
  LOFT_RETURN_IF_ERROR(Commit(committed, &dups));
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
