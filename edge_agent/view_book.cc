#include "edge_agent/view_book.h"

#include <algorithm>
#include <chrono>

#include "core/membership.h"

namespace loft::agent {

void ViewBook::OnView(const v1::MembershipView& view) {
  {
    std::lock_guard lock(mu_);
    views_[view.view()] = view;
    while (views_.size() > 64) views_.erase(views_.begin());
  }
  cv_.notify_all();
}

template <typename Pred>
bool ViewBook::Wait(std::unique_lock<std::mutex>& lock, Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.view_wait_ms);
  while (!pred()) {
    if (Stopping() || std::chrono::steady_clock::now() >= deadline) return pred();
    cv_.wait_for(lock, std::chrono::milliseconds(100), pred);
  }
  return true;
}

bool ViewBook::Has(int64_t v) {
  std::lock_guard lock(mu_);
  return views_.count(v) > 0;
}

bool ViewBook::IsLive(int64_t v, int node) {
  std::lock_guard lock(mu_);
  auto it = views_.find(v);
  if (it == views_.end()) return false;
  return IsMember(it->second, node);
}

int ViewBook::LiveCount(int64_t v) {
  std::lock_guard lock(mu_);
  auto it = views_.find(v);
  return it == views_.end() ? 0 : it->second.members_size();
}

bool ViewBook::MayRing(int node, uint32_t tag_view, bool request) {
  std::lock_guard lock(mu_);
  if (views_.empty()) return !request;
  const auto& [latest, view] = *views_.rbegin();
  if (IsMember(view, node)) return true;
  return !request && tag_view > (static_cast<uint64_t>(latest) & 0xFFFFFFu);
}

int64_t ViewBook::Latest() {
  std::lock_guard lock(mu_);
  return views_.empty() ? -1 : views_.rbegin()->first;
}

StatusOr<RingMembers> ViewBook::Members(int64_t v) {
  std::unique_lock lock(mu_);
  if (!Wait(lock, [&] { return views_.count(v) > 0; })) {
    if (Stopping()) return Aborted("shutting down");
    return Unavailable("membership view " + std::to_string(v) + " never arrived within " +
                       std::to_string(options_.view_wait_ms) + " ms");
  }
  const v1::MembershipView& mv = views_.at(v);
  if (v < 0 || v >= (int64_t{1} << 24)) return OutOfRange("view " + std::to_string(v) + " exceeds 2^24");
  RingMembers m;
  m.view = static_cast<uint32_t>(v);
  std::map<int, std::string> eps;
  for (const v1::Member& member : mv.members()) {
    m.nodes.push_back(member.node());
    eps[member.node()] = member.ring_endpoint();
  }
  std::sort(m.nodes.begin(), m.nodes.end());
  lock.unlock();
  if (std::find(m.nodes.begin(), m.nodes.end(), options_.node) == m.nodes.end()) {
    return FailedPrecondition("this node is not live in view " + std::to_string(v));
  }
  eps.erase(options_.node);
  for (int n : m.nodes) {
    if (n != options_.node && eps[n].empty())
      return Unavailable("node " + std::to_string(n) + " has no ring endpoint in view " + std::to_string(v));
  }
  m.endpoints = std::move(eps);
  return m;
}

Status ViewBook::CheckAlive(const RingMembers& m) {
  if (Stopping()) return Aborted("shutting down");
  std::lock_guard lock(mu_);
  if (views_.empty() || views_.rbegin()->first <= static_cast<int64_t>(m.view)) return OkStatus();
  const v1::MembershipView& nv = views_.rbegin()->second;
  for (int n : m.nodes) {
    if (n == options_.node) continue;
    const v1::Member* member = FindMember(nv, n);
    if (member == nullptr)
      return Unavailable("node " + std::to_string(n) + " is not live in view " + std::to_string(nv.view()));
    auto it = m.endpoints.find(n);
    if (it != m.endpoints.end() && !member->ring_endpoint().empty() &&
        member->ring_endpoint() != it->second) {
      return Unavailable("node " + std::to_string(n) + " restarted (new ring endpoint in view " +
                         std::to_string(nv.view()) + ")");
    }
  }
  return OkStatus();
}

std::optional<v1::MembershipView> ViewBook::NewerView(int64_t v) {
  std::unique_lock lock(mu_);
  auto newer = [&] { return !views_.empty() && views_.rbegin()->first > v; };
  if (!Wait(lock, newer)) return std::nullopt;
  return views_.rbegin()->second;
}

}  // namespace loft::agent
