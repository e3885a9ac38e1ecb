// RegisterBackoff: how often one node may register in a way that changes
// the membership view (a new agent process, or one the scheduler had
// dropped). Each such registration bumps the view, fails the node's
// partitions and makes every ring member restart its round, so a node
// re-registering in a loop would halt everyone. The first registration and
// one re-registration (a restart) are admitted at once; the next one after
// `min_ms`; each registration that
// comes before the node was stable for `stable_ms` doubles the wait (up to
// `max_ms`); once it was stable, the wait is back to `min_ms`.
// A reconnect of the same agent process changes nothing and is not limited
// (sched::TakeRegistration, worker_messages.h, decides which is which and
// calls Admit for a new session only).
//
// Not responsible for: answering the refused agent (the service does:
// ResourceExhausted naming the wait).
// Thread-safety: not thread-safe. Time is passed in (ms).
#pragma once

#include <map>

namespace loft::sched {

struct RegisterBackoffOptions {
  double min_ms = 1000;
  double max_ms = 60000;
  double stable_ms = 60000;
};

class RegisterBackoff {
 public:
  explicit RegisterBackoff(RegisterBackoffOptions options = {}) : options_(options) {}

  // 0 when `node` may register now (the registration is recorded), else
  // the milliseconds it still has to wait.
  double Admit(int node, double now_ms);

 private:
  struct Node {
    double last_ms = 0;
    double wait_ms = 0;
  };
  RegisterBackoffOptions options_;
  std::map<int, Node> nodes_;
};

}  // namespace loft::sched
