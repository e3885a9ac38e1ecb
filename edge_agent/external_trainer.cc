#include "edge_agent/external_trainer.h"

#include <spdlog/spdlog.h>
#include <zmq.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "core/codec.h"
#include "core/zmq_util.h"

namespace loft::agent {

namespace {
std::atomic<uint64_t> g_monitor_seq{0};
}  // namespace

ExternalTrainer::ExternalTrainer(Clock* clock, ExternalTrainerOptions opts)
    : clock_(clock), opts_(std::move(opts)), ctx_(1) {}

ExternalTrainer::~ExternalTrainer() {
  if (router_) zmq_socket_monitor(router_.handle(), nullptr, 0);
}

StatusOr<std::unique_ptr<ExternalTrainer>> ExternalTrainer::Create(Clock* clock,
                                                                   ExternalTrainerOptions opts) {
  if (opts.endpoint.empty()) return InvalidArgument("compute_mode external needs consumer_endpoint");
  if (opts.timeout_ms <= 0) {
    return InvalidArgument("consumer timeout must be > 0 ms (got " + std::to_string(opts.timeout_ms) + ")");
  }
  std::unique_ptr<ExternalTrainer> t(new ExternalTrainer(clock, std::move(opts)));
  SocketOptions so;
  so.max_message_bytes = t->opts_.max_message_bytes;
  LOFT_ASSIGN_OR_RETURN(t->router_, MakeSocket(t->ctx_, zmq::socket_type::router, so));
  std::string mon = "inproc://loft-consumer-monitor-" + std::to_string(g_monitor_seq.fetch_add(1));
  if (zmq_socket_monitor(t->router_.handle(), mon.c_str(), ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED) !=
      0) {
    return Internal("consumer socket monitor: " + std::string(zmq_strerror(zmq_errno())));
  }
  try {
    t->monitor_ = zmq::socket_t(t->ctx_, zmq::socket_type::pair);
    t->monitor_.connect(mon);
  } catch (const zmq::error_t& e) {
    return ZmqError(e, "consumer socket monitor connect");
  }
  LOFT_RETURN_IF_ERROR(Bind(t->router_, t->opts_.endpoint).WithContext("consumer_endpoint"));
  LOFT_ASSIGN_OR_RETURN(t->endpoint_, LastEndpoint(t->router_));
  spdlog::info("compute_mode external: waiting for a consumer on {}", t->endpoint_);
  return t;
}

void ExternalTrainer::PollFor(int ms) {
  zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0}, {monitor_.handle(), 0, ZMQ_POLLIN, 0}};
  try {
    zmq::poll(items, 2, std::chrono::milliseconds(std::max(ms, 0)));
  } catch (const zmq::error_t& e) {
    spdlog::warn("consumer poll: {}", e.what());
  }
}

void ExternalTrainer::Drain(std::optional<uint64_t> waiting_for, std::optional<double>* report_ms,
                            bool* lost) {
  // Monitor events: [uint16 event][uint32 value] then the endpoint frame.
  while (true) {
    auto frames = RecvMultipart(monitor_, /*dontwait=*/true, /*max_frames=*/4);
    if (!frames.ok() || frames->empty()) break;
    if ((*frames)[0].size() < sizeof(uint16_t)) continue;
    uint16_t event = 0;
    std::memcpy(&event, (*frames)[0].data(), sizeof(event));
    if (event == ZMQ_EVENT_ACCEPTED) {
      ++live_connections_;
    } else if (event == ZMQ_EVENT_DISCONNECTED) {
      live_connections_ = std::max<int64_t>(0, live_connections_ - 1);
      if (live_connections_ == 0 && consumer_.has_value()) {
        spdlog::warn("consumer disconnected from {}", endpoint_);
        consumer_.reset();
        if (lost != nullptr) *lost = true;
      }
    }
  }
  while (true) {
    auto frames = RecvMultipart(router_, /*dontwait=*/true, /*max_frames=*/8);
    if (!frames.ok()) {
      if (frames.status().code() == StatusCode::kResourceExhausted) continue;  // too many frames: dropped
      spdlog::warn("consumer receive: {}", frames.status().ToString());
      break;
    }
    if (frames->empty()) break;
    if (frames->size() < 2) continue;
    std::string id((*frames)[0].to_string());
    auto env = Decode((*frames)[1].to_string_view(), opts_.max_message_bytes);
    if (!env.ok()) {
      spdlog::warn("consumer sent an undecodable frame: {}", env.status().ToString());
      continue;
    }
    if (env->has_consumer_hello()) {
      if (consumer_.has_value() && *consumer_ != id && lost != nullptr) *lost = true;  // replaced mid-batch
      consumer_ = id;
      spdlog::info("consumer '{}' connected on {}", env->consumer_hello().client(), endpoint_);
    } else if (env->has_consumer_report()) {
      const auto& r = env->consumer_report();
      if (waiting_for.has_value() && consumer_ == id && r.partition_id() == *waiting_for) {
        double ms = r.compute_ms();
        *report_ms = (std::isfinite(ms) && ms >= 0) ? ms : 0.0;
      } else {
        spdlog::warn("ignoring consumer report for partition {} (not awaited)", r.partition_id());
      }
    } else {
      spdlog::warn("consumer sent unexpected {}", BodyName(*env));
    }
  }
}

StatusOr<double> ExternalTrainer::Compute(const Batch& batch) {
  last_ms_.reset();
  const int64_t deadline = clock_->NowMicros() + int64_t{opts_.timeout_ms} * 1000;
  auto remaining_ms = [&] { return static_cast<int>((deadline - clock_->NowMicros()) / 1000); };
  auto stopped = [&] { return opts_.stop != nullptr && opts_.stop->load(); };
  Drain(std::nullopt, nullptr, nullptr);
  while (!consumer_.has_value()) {
    if (remaining_ms() <= 0 || stopped()) {
      return Unavailable("no consumer connected to " + endpoint_ + " within " +
                         std::to_string(opts_.timeout_ms) + " ms");
    }
    PollFor(std::min(remaining_ms(), 100));
    Drain(std::nullopt, nullptr, nullptr);
  }

  v1::Envelope env;
  auto* cb = env.mutable_consumer_batch();
  cb->set_partition_id(batch.partition_id);
  std::vector<zmq::message_t> frames;
  frames.reserve(batch.samples.size() + 2);
  frames.emplace_back(consumer_->data(), consumer_->size());
  for (const auto& s : batch.samples) {
    cb->add_sample_ids(s.id);
    cb->add_labels(s.label);
  }
  LOFT_ASSIGN_OR_RETURN(zmq::message_t head, EnvelopeFrame(env));
  frames.push_back(std::move(head));
  for (const auto& s : batch.samples) frames.emplace_back(s.payload.data(), s.payload.size());
  Status sent = SendMultipart(router_, frames, /*dontwait=*/true);
  if (!sent.ok()) {
    consumer_.reset();
    return Unavailable("sending partition " + std::to_string(batch.partition_id) +
                       " to the consumer: " + sent.message());
  }

  std::optional<double> report;
  bool lost = false;
  while (true) {
    Drain(batch.partition_id, &report, &lost);
    if (report.has_value()) {
      last_ms_ = report;
      return std::numeric_limits<double>::quiet_NaN();
    }
    if (lost) {
      return Unavailable("consumer disconnected before reporting partition " +
                         std::to_string(batch.partition_id));
    }
    if (remaining_ms() <= 0 || stopped()) {
      return Unavailable("consumer did not report partition " + std::to_string(batch.partition_id) +
                         " within " + std::to_string(opts_.timeout_ms) + " ms");
    }
    PollFor(std::min(remaining_ms(), 100));
  }
}

std::optional<double> ExternalTrainer::ReportedComputeMs() {
  return std::exchange(last_ms_, std::nullopt);
}

}  // namespace loft::agent
