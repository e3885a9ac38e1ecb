// Trainer: the compute step of a partition. The daemon calls
// Compute(batch) once per partition and times it. `SyntheticTrainer` is
// the explicit stand-in until real models land: it spends the
// cluster spec's compute time, fixed_ms + per_sample_ms·b, scaled by
// JitterFactor (core/cluster_spec.h: compute.jitter, jitter_kind), by sleeping on the injected Clock —
// as MLPerf Storage emulates accelerators. A real sleep ends late (the
// thread's timer slack, 50 µs by default, plus the wake-up: 0.15–0.4 ms
// per partition measured on a loaded 2-core testbed), which no spec node
// has: ExactSleep (exact_sleep.h) takes what a sleep overran off the next
// ones, so the mean compute time is the spec's (measured on edge-bandwidth
// loft-epoch: compute_ms 2.67 -> 2.49 for a nominal 2.49). The compute time
// it reports (ReportedComputeMs) is the emulated node's, the time it drew,
// not the sleep's wall time: one sleep that ran 3 ms late and the next one
// shortened to pay it back are the host's noise, not the node's speed, and
// a policy that follows each observation (lbbsp's throughput EWMA) turned
// them into batches of 8 and 380 samples on a loaded testbed
// (docs/testbed.md "Fidelity benchmark"). Likewise the wait of the agent's
// compute thread for a core after its batch was ready (StartedLate, from
// PartitionPipeline): 0.49 ms per partition on average for the busiest
// node of synthetic loft-epoch on edge-bandwidth (8 agents on 2 cores),
// 9 % of its iteration, is taken off the next sleep.
//
// Not responsible for: reading samples, all-reduce.
// Thread-safety: a Trainer is used by one thread at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cache/sample_cache.h"
#include "core/clock.h"
#include "core/cluster_spec.h"
#include "core/proto/loft.pb.h"
#include "core/status.h"
#include "edge_agent/exact_sleep.h"

namespace loft::agent {

// One partition's samples, in the partition's sample_ids order.
struct Batch {
  uint64_t partition_id = 0;
  int64_t iteration = 0;  // the partition's iteration (the all-reduce round)
  int64_t view = 0;       // the membership view it was planned in
  // training.exchange (Partition.local_step / delta_exchange): this step
  // is taken locally (no exchange after it), and the round's exchange
  // combines model deltas rather than gradients.
  bool local_step = false;
  bool delta_exchange = false;
  std::vector<cache::Sample> samples;
  // The preprocessing stage's output (PartitionRunner with a
  // PreprocessPool: dataset.encoding jpeg, or an augment): samples.size()
  // x the model's input floats, in samples' order. Empty: the payloads are
  // the model's input bytes (encoding raw, augment none).
  std::vector<float> inputs;
};

// A ring member this agent caught misbehaving (training only): it dropped
// a message from `node` or detected its chunk (edge_agent/ring_guard.h).
struct RingOffence {
  int32_t node = -1;
  std::string reason;   // malformed_hello | out_of_window | malformed_chunk | chunk_mismatch | silent
  int64_t count = 0;    // offences by `node` so far
  bool report = false;  // to be reported to the scheduler now
};

class Trainer {
 public:
  virtual ~Trainer() = default;
  // Returns the batch loss (NaN when the trainer has none).
  virtual StatusOr<double> Compute(const Batch& batch) = 0;
  // What the last Compute measured for the scheduler (training only).
  virtual std::optional<v1::TrainingReport> TakeReport() { return std::nullopt; }
  // The compute time measured outside the agent for the last Compute
  // (compute_mode external: the consumer's report); nullopt = use wall time.
  virtual std::optional<double> ReportedComputeMs() { return std::nullopt; }
  // Called repeatedly (from the compute thread) while the agent has no
  // partition queued, reading or computing; training uses it to take part
  // in rounds it has no samples for. Returns within a few ms unless it
  // takes part in a round (ModelTrainer: then bounded by its ring, state and
  // view timeouts, and ended early by its stop flag).
  virtual void Idle() {}
  // false: Idle does nothing, and the compute thread sleeps until a
  // partition is ready instead of waking every 10 ms to call it. Called
  // under the pipeline's lock (must not block); must not change over the
  // trainer's life (a thread asleep without a timeout is not asked again).
  virtual bool WantsIdle() const { return true; }
  // A partition of `iteration` (planned in `view`) failed before Compute
  // (its samples could not be read). Training takes part in that round
  // with weight 0, so the ring does not wait for this member — with
  // planning ahead the agent may already hold the next partition and
  // would not be Idle. Bounded like Idle's joins. `local_step`: the
  // partition was a local step of a longer round (training.exchange), so
  // there is no exchange to join.
  virtual void Skip(int64_t view, int64_t iteration, bool local_step) {}
  // The offences seen since the last call (the daemon counts them in
  // loft_agent_ring_offences_total and sends the reports).
  virtual std::vector<RingOffence> TakeOffences() { return {}; }
  // The next Compute starts `micros` after the node could have started it
  // (its batch was read and the previous Compute had ended): the compute
  // thread waited for one of the host's cores. SyntheticTrainer takes that
  // off its next sleep, as it does a sleep's overrun: an emulated node has
  // its own cores. A real trainer's compute is the host's own work; it
  // ignores this.
  virtual void StartedLate(int64_t micros) {}
};

class SyntheticTrainer final : public Trainer {
 public:
  SyntheticTrainer(Clock* clock, ComputeSpec spec, uint64_t seed)
      : clock_(clock), spec_(spec), rng_(seed), sleep_(clock) {}
  StatusOr<double> Compute(const Batch& batch) override;
  // The emulated compute time of the last Compute (nominal × jitter).
  std::optional<double> ReportedComputeMs() override { return last_ms_; }
  void StartedLate(int64_t micros) override { sleep_.Owe(micros); }
  bool WantsIdle() const override { return false; }  // no ring to serve
  // The time Compute will spend for b samples before jitter.
  double NominalMs(size_t b) const { return spec_.fixed_ms + spec_.per_sample_ms * static_cast<double>(b); }

 private:
  Clock* clock_;
  ComputeSpec spec_;
  std::mt19937_64 rng_;
  std::normal_distribution<double> normal_{0.0, 1.0};
  ExactSleep sleep_;
  std::optional<double> last_ms_;
};

}  // namespace loft::agent
