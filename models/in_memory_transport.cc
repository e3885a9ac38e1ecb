#include "models/in_memory_transport.h"

#include <chrono>
#include <string>

namespace loft::models {

class InMemoryEndpoint final : public Transport {
 public:
  InMemoryEndpoint(InMemoryNetwork* net, int rank) : net_(net), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return net_->world_size(); }

  Status Send(int to_rank, uint64_t tag, std::span<const std::byte> payload) override {
    if (to_rank < 0 || to_rank >= world_size() || to_rank == rank_) {
      return InvalidArgument("in-memory transport: rank " + std::to_string(rank_) + " cannot send to rank " +
                             std::to_string(to_rank));
    }
    {
      std::lock_guard<std::mutex> lock(Self().mu);
      if (Self().dead) return Unavailable("in-memory transport: rank " + std::to_string(rank_) + " is dead");
    }
    InMemoryNetwork::Mailbox& box = *net_->boxes_[to_rank];
    {
      std::lock_guard<std::mutex> lock(box.mu);
      if (box.dead) return Unavailable("in-memory transport: rank " + std::to_string(to_rank) + " is dead");
      if (tag < box.floor) return OkStatus();  // stale for the receiver: dropped, like a late network message
      box.queue.push_back({rank_, tag, std::vector<std::byte>(payload.begin(), payload.end())});
    }
    net_->sent_.fetch_add(1);
    net_->sent_bytes_.fetch_add(static_cast<int64_t>(payload.size()));
    box.cv.notify_all();
    return OkStatus();
  }

  StatusOr<std::vector<std::byte>> Recv(int from_rank, uint64_t tag, int64_t timeout_ms) override {
    InMemoryNetwork::Mailbox& box = Self();
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max<int64_t>(0, timeout_ms));
    std::unique_lock<std::mutex> lock(box.mu);
    while (true) {
      if (box.dead) return Unavailable("in-memory transport: rank " + std::to_string(rank_) + " is dead");
      for (auto it = box.queue.begin(); it != box.queue.end(); ++it) {
        if (it->from == from_rank && it->tag == tag) {
          std::vector<std::byte> payload = std::move(it->payload);
          box.queue.erase(it);
          return payload;
        }
      }
      if (box.cv.wait_until(lock, deadline) == std::cv_status::timeout) {
        // One last look: the message may have arrived with the timeout.
        for (auto it = box.queue.begin(); it != box.queue.end(); ++it) {
          if (it->from == from_rank && it->tag == tag) {
            std::vector<std::byte> payload = std::move(it->payload);
            box.queue.erase(it);
            return payload;
          }
        }
        return DeadlineExceeded("rank " + std::to_string(rank_) + ": no message from rank " +
                                std::to_string(from_rank) + " with tag " + std::to_string(tag) + " within " +
                                std::to_string(timeout_ms) + " ms");
      }
    }
  }

  void SetTagFloor(uint64_t floor) override {
    InMemoryNetwork::Mailbox& box = Self();
    std::lock_guard<std::mutex> lock(box.mu);
    if (floor <= box.floor) return;
    box.floor = floor;
    std::erase_if(box.queue, [floor](const InMemoryNetwork::Message& m) { return m.tag < floor; });
  }

 private:
  InMemoryNetwork::Mailbox& Self() { return *net_->boxes_[rank_]; }
  InMemoryNetwork* net_;
  int rank_;
};

InMemoryNetwork::InMemoryNetwork(int world_size) {
  for (int r = 0; r < world_size; ++r) boxes_.push_back(std::make_unique<Mailbox>());
  for (int r = 0; r < world_size; ++r) endpoints_.push_back(std::make_unique<InMemoryEndpoint>(this, r));
}

InMemoryNetwork::~InMemoryNetwork() = default;

void InMemoryNetwork::Kill(int rank) {
  Mailbox& box = *boxes_[rank];
  {
    std::lock_guard<std::mutex> lock(box.mu);
    box.dead = true;
    box.queue.clear();
  }
  box.cv.notify_all();
}

}  // namespace loft::models
