// InMemoryNetwork: a set of Transport endpoints for one process, backed by
// per-rank mailboxes (mutex + condition variable + queue). For unit tests
// of RingAllReduce: one thread per rank, each using its own endpoint.
//
// Test hooks: Kill(rank) makes sends to that rank fail with Unavailable and
// its own sends fail too (a crashed process); `sent_messages()` and
// `sent_bytes()` count deliveries and their payload bytes.
//
// Not responsible for: real time injection (timeouts use the steady clock),
// byte limits.
// Thread-safety: thread-safe; each endpoint is meant for one thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "models/transport.h"

namespace loft::models {

class InMemoryNetwork {
 public:
  explicit InMemoryNetwork(int world_size);
  ~InMemoryNetwork();
  InMemoryNetwork(const InMemoryNetwork&) = delete;
  InMemoryNetwork& operator=(const InMemoryNetwork&) = delete;

  int world_size() const { return static_cast<int>(boxes_.size()); }
  // The endpoint of `rank`; owned by the network, valid for its lifetime.
  Transport* endpoint(int rank) { return endpoints_[rank].get(); }
  void Kill(int rank);
  int64_t sent_messages() const { return sent_.load(); }
  int64_t sent_bytes() const { return sent_bytes_.load(); }

 private:
  friend class InMemoryEndpoint;
  struct Message {
    int from;
    uint64_t tag;
    std::vector<std::byte> payload;
  };
  struct Mailbox {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Message> queue;
    uint64_t floor = 0;
    bool dead = false;
  };
  std::vector<std::unique_ptr<Mailbox>> boxes_;
  std::vector<std::unique_ptr<Transport>> endpoints_;
  std::atomic<int64_t> sent_{0};
  std::atomic<int64_t> sent_bytes_{0};
};

}  // namespace loft::models
