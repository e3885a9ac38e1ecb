// Golden decisions: a fixed script of events (plans, sends, acks, failures,
// timeouts, a dead and re-registered worker, duplicate acks) is driven
// through JobDriver with the test's own FakePolicy, and every update it
// returns is hashed in its journal encoding, together with the final
// state digest. The expected values were recorded before the sampler,
// state, ledger and journal were optimized for speed: a change to them
// must not change which samples are planned where, nor any journaled byte.
// (A deliberate change of decisions updates the constants, and says so.
// 2026-11-27: the cost model's warm-up (each law's first two reports are
// not fitted), cold-start outlier rule (cold_k) and non-negative laws: the fitted cost models, which
// the journaled updates and the state digest hold, changed; the update
// counts and the partitions (FakePolicy) did not.
// 2026-12: WorkerDead carries now_ms (where the wait for a dead holder
// starts, scheduler/holder_wait.h): the journaled bytes of the script's
// deaths changed, so the update digests did; without that field they are
// the earlier constants (checked), the state digests did not change.)
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/driver.h"
#include "scheduler/journal.h"
#include "state_fakes.h"

using loft::sched::JobDriver;
using loft::sched::Journal;
using loft::sched::Updates;
using loft::sched::testing::FakePolicy;
using loft::sched::testing::SmallSpec;

namespace {

struct Digests {
  uint64_t updates = 1469598103934665603ULL;  // FNV-1a over every update's journal value
  uint64_t state = 0;                         // SchedulerState::Digest() at the end
  int64_t count = 0;                          // updates
  int64_t retries = 0;                        // ledger: child partitions created
};

void Hash(uint64_t& h, const std::string& bytes) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ULL;
  }
}

Digests Run(int64_t samples, int replication, int64_t batch, int nodes, bool locality, int iterations) {
  const loft::ClusterSpec spec = SmallSpec(samples, replication, batch, nodes);
  auto driver = JobDriver::CreateWithPolicy(spec, std::make_unique<FakePolicy>(locality));
  REQUIRE(driver.ok());
  JobDriver& d = **driver;
  Digests out;
  auto record = [&](const loft::StatusOr<Updates>& u) {
    REQUIRE(u.ok());
    for (const auto& x : *u) {
      Hash(out.updates, Journal::EncodeValue(x));
      ++out.count;
    }
  };
  uint64_t rng = 0x9E3779B97F4A7C15ULL;
  auto next = [&rng] {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  };
  double t = 0;
  for (int n = 0; n < nodes; ++n) record(d.RegisterWorker(n, t));
  for (int it = 0; it < iterations; ++it) {
    auto planned = d.PlanNextIteration(t);
    record(planned);
    std::vector<loft::v1::Partition> parts = JobDriver::PartitionsToSend(*planned);
    for (const auto& p : parts) record(d.OnPartitionSent(p.id(), p.attempt(), t));
    if (it % 5 == 2) {  // a worker dies, a plan runs without it, it comes back
      const auto victim = static_cast<int32_t>(next() % static_cast<uint64_t>(nodes));
      record(d.OnWorkerDead(victim, "golden", t + 1));
      auto more = d.PlanNextIteration(t + 1);
      record(more);
      for (const auto& p : JobDriver::PartitionsToSend(*more)) parts.push_back(p);
      record(d.RegisterWorker(victim, t + 2));
    }
    int k = 0;
    for (const auto& p : parts) {
      ++k;
      const uint64_t roll = next() % 29;
      if (roll == 0) {
        loft::v1::PartitionFailed f = loft::sched::testing::FailedReport(p, "golden");
        record(d.OnPartitionFailed(f, t + 3));
        continue;
      }
      if (roll == 1) continue;  // never acked: times out below
      loft::v1::PartitionDone done;
      done.set_partition_id(p.id());
      done.set_attempt(p.attempt());
      done.set_node(p.worker());
      done.mutable_timings()->set_local_read_ms(1.0 + k % 7);
      done.mutable_timings()->set_remote_read_ms(2.0 + k % 5);
      done.mutable_timings()->set_compute_ms(3.0 + k % 3);
      record(d.OnPartitionDone(done, t + 4));
      if (k % 11 == 0) record(d.OnPartitionDone(done, t + 5));  // duplicate ack
    }
    record(d.CheckTimeouts(t + 1e9));
    t += 10;
  }
  out.state = d.state().Digest();
  out.retries = d.state().ledger().counters().retries;
  return out;
}

}  // namespace

TEST_CASE("Decisions golden: locality-aware plans, one replica", "[golden]") {
  const Digests g = Run(3000, 1, 256, 8, true, 40);
  CHECK(g.retries > 0);
  CHECK(g.count == 807);
  CHECK(g.updates == 0x220747bda8e3b5eaULL);
  CHECK(g.state == 0x786430abdaa3247aULL);
}

TEST_CASE("Decisions golden: locality-aware plans, two replicas", "[golden]") {
  const Digests g = Run(3000, 2, 256, 8, true, 40);
  CHECK(g.retries > 0);
  CHECK(g.count == 909);
  CHECK(g.updates == 0x6895e4ed74743d02ULL);
  CHECK(g.state == 0x930a9c7351b9ac63ULL);
}

TEST_CASE("Decisions golden: global-shuffle plans, one and three replicas", "[golden]") {
  const Digests one = Run(2000, 1, 300, 6, false, 30);
  CHECK(one.retries > 0);
  CHECK(one.count == 624);
  CHECK(one.updates == 0x022267d09f665aeeULL);
  CHECK(one.state == 0xf7cff5ee261f4adeULL);
  const Digests three = Run(2000, 3, 300, 6, false, 30);
  CHECK(three.retries > 0);
  CHECK(three.count == 504);
  CHECK(three.updates == 0xeea377489c5ece7dULL);
  CHECK(three.state == 0x8260cc9cb9b27986ULL);
}
