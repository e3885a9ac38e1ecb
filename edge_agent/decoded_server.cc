#include "edge_agent/decoded_server.h"

#include <fmt/format.h>

#include <utility>

#include "core/zmq_util.h"

namespace loft::agent {

StatusOr<std::unique_ptr<DecodedServer>> DecodedServer::Create(zmq::context_t* ctx, Serve serve,
                                                               int max_in_flight) {
  if (ctx == nullptr || !serve) return InvalidArgument("decoded server: a dependency is null");
  if (max_in_flight < 1)
    return InvalidArgument(fmt::format("decoded server: max_in_flight must be >= 1 (got {})", max_in_flight));
  std::unique_ptr<DecodedServer> d(new DecodedServer(std::move(serve), max_in_flight));
  try {
    const std::string ep = fmt::format("inproc://loft-agent-decoded-{}", static_cast<const void*>(d.get()));
    d->wake_rx_ = zmq::socket_t(*ctx, zmq::socket_type::pair);
    d->wake_rx_.set(zmq::sockopt::linger, 0);
    d->wake_rx_.bind(ep);
    d->wake_tx_ = zmq::socket_t(*ctx, zmq::socket_type::pair);
    d->wake_tx_.set(zmq::sockopt::linger, 0);
    d->wake_tx_.connect(ep);
  } catch (const zmq::error_t& e) {
    return ZmqError(e, "decoded reply wake-up socket");
  }
  // Started once the wake pair exists (the threads send on it).
  for (int i = 0; i < max_in_flight; ++i) d->threads_.emplace_back([p = d.get()] { p->Work(); });
  return d;
}

DecodedServer::DecodedServer(Serve serve, int max_in_flight) : serve_(std::move(serve)) {
  threads_.reserve(static_cast<size_t>(max_in_flight));
}

DecodedServer::~DecodedServer() {
  Stop();
}

void DecodedServer::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    waiting_.clear();
  }
  cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

void DecodedServer::Submit(std::string route, v1::FetchRequest request) {
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    waiting_.push_back(Request{std::move(route), std::move(request)});
  }
  cv_.notify_one();
}

std::deque<DecodedServer::Finished> DecodedServer::TakeFinished() {
  std::lock_guard lock(mu_);
  return std::exchange(finished_, {});
}

size_t DecodedServer::pending() const {
  std::lock_guard lock(mu_);
  return waiting_.size() + serving_;
}

void DecodedServer::DrainWakes() {
  zmq::message_t msg;
  try {
    while (wake_rx_.recv(msg, zmq::recv_flags::dontwait)) {
    }
  } catch (const zmq::error_t&) {
    // the context is terminating
  }
}

// One of max_in_flight threads: serves the oldest waiting request.
void DecodedServer::Work() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !waiting_.empty(); });
    if (stop_) return;
    Request r = std::move(waiting_.front());
    waiting_.pop_front();
    ++serving_;
    lock.unlock();
    PeerReply reply = serve_(r.request);
    lock.lock();
    --serving_;
    finished_.push_back(Finished{std::move(r.route), std::move(reply)});
    try {
      // A full pipe means a wake is pending already.
      (void)wake_tx_.send(zmq::const_buffer("", 0), zmq::send_flags::dontwait);
    } catch (const zmq::error_t&) {
      // the context is terminating
    }
  }
}

}  // namespace loft::agent
