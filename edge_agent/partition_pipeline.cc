#include "edge_agent/partition_pipeline.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "core/codec.h"
#include "core/zmq_util.h"

namespace loft::agent {

StatusOr<std::unique_ptr<PartitionPipeline>> PartitionPipeline::Create(
    zmq::context_t* ctx, PartitionRunner* runner, Trainer* trainer, const AgentService* service,
    AgentMetrics* metrics, bool overlap, int ready_depth) {
  if (ctx == nullptr || runner == nullptr || trainer == nullptr || service == nullptr || metrics == nullptr)
    return InvalidArgument("partition pipeline: a dependency is null");
  std::unique_ptr<PartitionPipeline> p(
      new PartitionPipeline(runner, trainer, service, metrics, overlap, ready_depth));
  try {
    const std::string ep = fmt::format("inproc://loft-agent-wake-{}", static_cast<const void*>(p.get()));
    p->wake_rx_ = zmq::socket_t(*ctx, zmq::socket_type::pair);
    p->wake_rx_.bind(ep);
    p->wake_tx_ = zmq::socket_t(*ctx, zmq::socket_type::pair);
    p->wake_tx_.set(zmq::sockopt::linger, 0);
    p->wake_rx_.set(zmq::sockopt::linger, 0);
    p->wake_tx_.connect(ep);
  } catch (const zmq::error_t& e) {
    return ZmqError(e, "report wake-up socket");
  }
  return p;
}

PartitionPipeline::~PartitionPipeline() {
  Stop();
}

void PartitionPipeline::Start() {
  reader_ = std::thread([this] { ReaderLoop(); });
  computer_ = std::thread([this] { ComputeLoop(); });
}

void PartitionPipeline::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  reader_cv_.notify_all();
  compute_cv_.notify_all();
  if (reader_.joinable()) reader_.join();
  if (computer_.joinable()) computer_.join();
}

void PartitionPipeline::Enqueue(std::vector<v1::Partition> partitions) {
  if (partitions.empty()) return;
  std::lock_guard lock(mu_);
  for (auto& p : partitions) assigned_.push_back(std::move(p));
  reader_cv_.notify_one();
}

std::deque<v1::Envelope> PartitionPipeline::TakeReports() {
  std::deque<v1::Envelope> reports;
  std::lock_guard lock(mu_);
  reports.swap(outbox_);
  return reports;
}

void PartitionPipeline::ReaderLoop() {
  while (true) {
    v1::Partition p;
    {
      std::unique_lock lock(mu_);
      // Without overlap: only while the compute thread is idle.
      reader_cv_.wait(lock, [&] {
        return stop_ || (!assigned_.empty() && (overlap_ || (!computing_ && ready_.empty())));
      });
      if (stop_) return;
      p = std::move(assigned_.front());
      assigned_.pop_front();
      reading_ = true;
    }
    ReadPartition r = runner_->Read(p, service_->node());
    std::unique_lock lock(mu_);
    reader_waits_slot_ = true;
    reader_cv_.wait(lock, [&] { return stop_ || ready_.size() < ready_depth_; });
    reader_waits_slot_ = false;
    if (stop_) return;
    reading_ = false;
    ready_.push_back(Ready{std::move(r), runner_->clock()->NowMicros()});
    lock.unlock();  // the woken thread takes mu_ at once
    compute_cv_.notify_one();
  }
}

void PartitionPipeline::ComputeLoop() {
  Clock* clock = runner_->clock();
  int64_t last_end_us = -1;  // when the previous Finish returned
  while (true) {
    ReadPartition r;
    int64_t late_us = 0;
    bool slot_freed = false;
    {
      std::unique_lock lock(mu_);
      const auto ready_or_stop = [&] { return stop_ || !ready_.empty(); };
      // A trainer with nothing to do while idle: sleep until a batch is ready.
      if (!trainer_->WantsIdle()) compute_cv_.wait(lock, ready_or_stop);
      // While nothing is pending, let the trainer serve its ring (state
      // requests, weight-0 joins of rounds it has no partition for).
      while (!ready_or_stop()) {
        if (compute_cv_.wait_for(lock, std::chrono::milliseconds(10), ready_or_stop)) break;
        if (assigned_.empty() && !reading_) {
          lock.unlock();
          trainer_->Idle();
          lock.lock();
          TakeOffences();
        }
      }
      if (stop_) return;
      Ready next = std::move(ready_.front());
      ready_.pop_front();
      r = std::move(next.read);
      computing_ = true;
      // How long the node could already have been computing this batch.
      if (last_end_us >= 0) late_us = clock->NowMicros() - std::max(last_end_us, next.since_us);
      slot_freed = reader_waits_slot_;
    }
    if (slot_freed) reader_cv_.notify_one();  // after unlocking: the reader takes mu_ at once
    trainer_->StartedLate(late_us);
    v1::Envelope report = runner_->Finish(std::move(r), trainer_, service_->node());
    last_end_us = clock->NowMicros();
    {
      std::lock_guard lock(mu_);
      TakeOffences();
      AttachOffenceCounts(report);
      outbox_.push_back(std::move(report));
      computing_ = false;
    }
    if (!overlap_) reader_cv_.notify_one();  // without overlap the reader waits for this
    WakeMainLoop();
  }
}

// Compute thread: a report is queued (a full pipe means a wake is pending).
void PartitionPipeline::WakeMainLoop() {
  try {
    (void)wake_tx_.send(zmq::const_buffer("", 0), zmq::send_flags::dontwait);
  } catch (const zmq::error_t&) {
    // the context is terminating
  }
}

void PartitionPipeline::DrainWakes() {
  zmq::message_t msg;
  while (wake_rx_.recv(msg, zmq::recv_flags::dontwait)) {
  }
}

// Counts and logs the trainer's ring offences; queues the reports.
void PartitionPipeline::TakeOffences() {
  for (const RingOffence& o : trainer_->TakeOffences()) {
    metrics_->ring_offences->WithLabels({std::to_string(o.node), o.reason}).Increment();
    ++offence_counts_[{o.node, o.reason}];
    if (!o.report) continue;
    offence_log_.Log(spdlog::level::warn, "ring_report", std::to_string(o.node),
                     "ring: node {} sent {} {} time(s): reporting it to the scheduler", o.node, o.reason,
                     o.count);
    v1::Envelope env;
    env.set_protocol_version(kProtocolVersion);
    auto* pr = env.mutable_peer_report();
    pr->set_node(service_->node());
    pr->set_accused(o.node);
    pr->set_reason(o.reason);
    pr->set_count(o.count);
    outbox_.push_back(std::move(env));
  }
}

// The job's offences so far, per (offender, reason), on a partition's
// training report (TrainingReport.ring_offences).
void PartitionPipeline::AttachOffenceCounts(v1::Envelope& report) {
  if (offence_counts_.empty() || !report.has_partition_done() ||
      !report.partition_done().timings().has_training())
    return;
  auto* tr = report.mutable_partition_done()->mutable_timings()->mutable_training();
  for (const auto& [key, n] : offence_counts_) {
    auto* o = tr->add_ring_offences();
    o->set_node(key.first);
    o->set_reason(key.second);
    o->set_count(n);
  }
}

}  // namespace loft::agent
