// RingGuard: the pure rules a training agent applies to ring messages it
// did not ask for.
//  - Window: a hello of a round beyond max(last applied round, highest
//    iteration the scheduler gave this agent) + round_window is out of
//    window (a member pushing last_round towards 2^32 to freeze training).
//    Not judged while this agent knows neither (a fresh agent).
//  - Join quorum: a member with no partition joins a newer round with
//    weight 0 only when at least f+1 distinct live members announce it
//    with a partition (f = training.byzantine_tolerance). Honest members
//    announce only rounds the scheduler planned (their partition's
//    iteration), so with at most f Byzantine members a round nobody
//    planned is never joined, and a weight-0 hello never creates a round.
//  - Offences: malformed or out-of-window messages (and chunks that do
//    not match their replicas) are dropped and counted per sender; a
//    sender is reported to the scheduler at its report_after-th offence
//    and every report_after offences after that (a lost report is resent).
//  - Silence: a live member whose hello of a round does not arrive within
//    the ring timeout holds up every member. At its silent_after-th such
//    round in a row (and every silent_after after that) it is reported
//    (reason "silent"); any hello from it starts the count again. With f
//    >= 1 one member's reports alone evict nobody (f+1 reporters needed,
//    scheduler/accusations.h), so a member that cannot reach the others
//    (and finds them all silent) cannot evict them.
//
// Not responsible for: reading or dropping messages, evicting (the
// scheduler does, scheduler/accusations.h).
// Thread-safety: not thread-safe; the trainer thread uses it.
#pragma once

#include <cstdint>
#include <map>

namespace loft::agent {

struct RingGuardOptions {
  int tolerance = 0;            // f
  int64_t round_window = 1024;  // rounds ahead of what this agent knows
  int64_t report_after = 8;     // offences before a report, > 0
  int64_t silent_after = 2;     // silent rounds in a row before a report, > 0
};

class RingGuard {
 public:
  explicit RingGuard(RingGuardOptions options = {}) : options_(options) {}

  // The scheduler gave this agent a partition of `iteration`.
  void Planned(int64_t iteration) { planned_ = iteration > planned_ ? iteration : planned_; }
  int64_t planned() const { return planned_; }
  bool OutOfWindow(int64_t last_round, int64_t round) const;
  // Announcers needed before a weight-0 join.
  int JoinQuorum() const { return options_.tolerance + 1; }
  // Counts an offence by `from`; true when it is to be reported now.
  bool Offence(int from);
  int64_t offences(int from) const;
  // `from` sent no hello of a round within the ring timeout; true when it
  // is to be reported now.
  bool Silent(int from);
  // A hello from `from` arrived.
  void Heard(int from) { silent_.erase(from); }
  int64_t silent_rounds(int from) const {
    auto it = silent_.find(from);
    return it == silent_.end() ? 0 : it->second;
  }
  int64_t total_offences() const { return total_; }

 private:
  RingGuardOptions options_;
  int64_t planned_ = -1;
  std::map<int, int64_t> offences_;
  std::map<int, int64_t> silent_;  // silent rounds in a row, per member
  int64_t total_ = 0;
};

}  // namespace loft::agent
