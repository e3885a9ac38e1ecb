// PartitionPipeline: the agent's two partition threads and the queues
// between them and the poll loop (ZmqAgentServer).
//   reader thread: reads the next assigned partition (local reads + peer
//     fetch, PartitionRunner::Read) while
//   compute thread: computes the previous one (PartitionRunner::Finish
//     with the Trainer) and queues its report. The reader holds at most
//     `ready_depth` read partitions ahead of it (core/read_ahead.h: 1, 3
//     with training.exchange.overlap, so the next round's first
//     partitions are read while an exchange runs). While
//     nothing is pending it lets the trainer serve its ring
//     (Trainer::Idle).
//   Preprocessing (dataset.encoding jpeg, or an augment) is the last step
//     of the reader's PartitionRunner::Read (SetPreprocess): each sample's
//     payload is decoded, augmented for the partition's epoch and resized
//     into Batch::inputs by the agent's PreprocessPool before the batch
//     enters `ready_`. So a partition's decode overlaps the previous one's
//     compute (as its fetch does), the compute thread only sees finished
//     floats, a payload that does not decode fails its partition like a
//     corrupt record (before the trainer would have joined the round), and
//     the ready_depth bound on read batches also bounds decoded ones. The
//     pool's own threads do the decoding; the reader waits for them.
//   With the spec's training.overlap false (`overlap` = false) the reader
//     starts a partition only while the compute thread is idle (nothing
//     read and waiting, nothing computing or in its ring), so the node's
//     reads never overlap its compute even when the scheduler plans ahead
//     (the next assignment then waits here instead of on the control path).
// The trainer's ring offences are counted here (loft_agent_ring_offences)
// and queued as PeerReports; the job's offence counts so far are attached
// to every training report. Queuing a report wakes the poll loop through
// an inproc PAIR (wake_socket), so a report leaves at once instead of at
// the next poll timeout.
//
// Not responsible for: sockets other than the wake pair, sending reports
// or CreditGrants (the poll loop takes them with TakeReports), what a
// partition or a report means (AgentService, PartitionRunner).
// Thread-safety: Enqueue, TakeReports and Stop may be called from any
// thread; wake_socket/DrainWakes from the poll loop only. Start once.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "core/proto/loft.pb.h"
#include "core/status.h"
#include "edge_agent/agent_service.h"
#include "edge_agent/trainer.h"

namespace loft::agent {

class PartitionPipeline {
 public:
  // Borrowed, must outlive the pipeline: ctx (the wake pair's context),
  // runner, trainer, service (node()), metrics (ring_offences).
  // `overlap`: the spec's training.overlap (above); `ready_depth`:
  // ReadyDepth(training) (core/read_ahead.h), at least 1.
  static StatusOr<std::unique_ptr<PartitionPipeline>> Create(zmq::context_t* ctx, PartitionRunner* runner,
                                                             Trainer* trainer, const AgentService* service,
                                                             AgentMetrics* metrics, bool overlap = true,
                                                             int ready_depth = 1);
  ~PartitionPipeline();  // Stop()

  // Starts the reader and compute threads.
  void Start();
  // Ends both threads (a partition being read or computed finishes first)
  // and joins them. Idempotent. Reports already queued stay queued.
  void Stop();

  // Partitions to run, in order (accepted assignments).
  void Enqueue(std::vector<v1::Partition> partitions);
  // The queued reports (PartitionDone/Failed and PeerReports), oldest first.
  std::deque<v1::Envelope> TakeReports();

  // Readable when a report was queued; the poll loop polls it and then
  // calls DrainWakes.
  zmq::socket_t& wake_socket() { return wake_rx_; }
  void DrainWakes();

 private:
  PartitionPipeline(PartitionRunner* runner, Trainer* trainer, const AgentService* service,
                    AgentMetrics* metrics, bool overlap, int ready_depth)
      : runner_(runner),
        trainer_(trainer),
        service_(service),
        metrics_(metrics),
        overlap_(overlap),
        ready_depth_(std::max(1, ready_depth)) {}
  void ReaderLoop();
  void ComputeLoop();
  void WakeMainLoop();
  void TakeOffences();                             // under mu_
  void AttachOffenceCounts(v1::Envelope& report);  // under mu_

  PartitionRunner* runner_;
  Trainer* trainer_;
  const AgentService* service_;
  AgentMetrics* metrics_;
  PeerLogLimits offence_log_{metrics_->log_suppressed};  // ring reports' lines, under mu_
  const bool overlap_;                                   // reads may run while the compute thread works
  const size_t ready_depth_;                             // read partitions held ahead of the compute thread
  // wake_tx_: compute thread only; wake_rx_: poll loop only.
  zmq::socket_t wake_rx_, wake_tx_;

  std::mutex mu_;
  // Each thread waits on its own condition and is woken only for what it
  // waits for (one shared condition with notify_all woke the other thread
  // at each of a partition's hand-offs too).
  std::condition_variable reader_cv_;   // assigned_, room in ready_, computing_ (no overlap), stop_
  std::condition_variable compute_cv_;  // ready_, stop_
  bool reader_waits_slot_ = false;      // the reader holds a read and waits for room in ready_
  std::deque<v1::Partition> assigned_;
  struct Ready {
    ReadPartition read;
    int64_t since_us = 0;  // when it was queued (runner clock)
  };
  std::deque<Ready> ready_;  // at most ready_depth_
  bool reading_ = false;     // the reader thread holds a partition
  bool computing_ = false;   // the compute thread holds a partition (until its report is queued)
  std::deque<v1::Envelope> outbox_;
  std::map<std::pair<int32_t, std::string>, int64_t> offence_counts_;  // (offender, reason) -> seen
  bool stop_ = false;
  std::thread reader_, computer_;
};

}  // namespace loft::agent
