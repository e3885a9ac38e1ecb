// DecodedServer with a fake serve function that holds each request until
// the test releases it. The only socket is the server's inproc wake pair.
#include "edge_agent/decoded_server.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace loft;
using namespace loft::agent;

namespace {

// Serves a request once the test has released it; records what it saw.
struct HeldServe {
  std::mutex mu;
  std::condition_variable cv;
  int released = 0;  // requests allowed to finish
  int running = 0, most_running = 0;
  std::vector<uint64_t> started;  // request ids, in the order served

  PeerReply operator()(const v1::FetchRequest& req) {
    std::unique_lock lock(mu);
    started.push_back(req.request_id());
    ++running;
    most_running = std::max(most_running, running);
    cv.notify_all();
    const size_t mine = started.size();
    cv.wait(lock, [&] { return static_cast<size_t>(released) >= mine; });
    --running;
    PeerReply r;
    r.header.mutable_fetch_reply()->set_request_id(req.request_id());
    return r;
  }
  void Release(int n) {
    std::lock_guard lock(mu);
    released += n;
    cv.notify_all();
  }
  bool WaitStarted(size_t n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(10), [&] { return started.size() >= n; });
  }
};

v1::FetchRequest Request(uint64_t id) {
  v1::FetchRequest r;
  r.set_request_id(id);
  r.set_decoded(true);
  r.add_sample_ids(id);
  return r;
}

}  // namespace

TEST_CASE("Decoded server: at most max_in_flight requests run at once, the others wait in order") {
  zmq::context_t ctx;
  HeldServe held;
  auto server = DecodedServer::Create(
      &ctx, [&](const v1::FetchRequest& r) { return held(r); }, 2);
  REQUIRE(server.ok());
  DecodedServer& s = **server;
  for (uint64_t id = 1; id <= 6; ++id) s.Submit("peer-" + std::to_string(id), Request(id));
  REQUIRE(held.WaitStarted(2));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a third would have started by now
  {
    std::lock_guard lock(held.mu);
    CHECK(held.started.size() == 2);
  }
  CHECK(s.pending() == 6);
  CHECK(s.TakeFinished().empty());
  held.Release(6);
  std::vector<DecodedServer::Finished> done;
  for (int i = 0; i < 1000 && done.size() < 6; ++i) {
    zmq::pollitem_t wake{s.wake_socket().handle(), 0, ZMQ_POLLIN, 0};
    (void)zmq::poll(&wake, 1, std::chrono::milliseconds(10));
    s.DrainWakes();
    for (auto& f : s.TakeFinished()) done.push_back(std::move(f));
  }
  REQUIRE(done.size() == 6);  // none dropped
  for (const auto& f : done)
    CHECK(f.route == "peer-" + std::to_string(f.reply.header.fetch_reply().request_id()));
  std::lock_guard lock(held.mu);
  CHECK(held.most_running == 2);
  CHECK(held.started == std::vector<uint64_t>{1, 2, 3, 4, 5, 6});  // served in arrival order
  CHECK(s.pending() == 0);
}

TEST_CASE("Decoded server: Stop finishes the requests being served and drops the waiting ones") {
  zmq::context_t ctx;
  HeldServe held;
  auto server = DecodedServer::Create(
      &ctx, [&](const v1::FetchRequest& r) { return held(r); }, 1);
  REQUIRE(server.ok());
  DecodedServer& s = **server;
  s.Submit("a", Request(1));
  s.Submit("b", Request(2));
  REQUIRE(held.WaitStarted(1));
  std::thread stopper([&] { s.Stop(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  held.Release(2);
  stopper.join();
  auto done = s.TakeFinished();
  REQUIRE(done.size() == 1);
  CHECK(done[0].route == "a");
  {
    std::lock_guard lock(held.mu);
    CHECK(held.started == std::vector<uint64_t>{1});
  }
  s.Submit("c", Request(3));  // after Stop: dropped
  CHECK(s.pending() == 0);
  s.Stop();  // idempotent
}

TEST_CASE("Decoded server: the destructor waits for the request being served and drops the waiting ones") {
  zmq::context_t ctx;
  HeldServe held;
  auto server = DecodedServer::Create(
      &ctx, [&](const v1::FetchRequest& r) { return held(r); }, 1);
  REQUIRE(server.ok());
  for (uint64_t id = 1; id <= 3; ++id) (*server)->Submit("p", Request(id));
  REQUIRE(held.WaitStarted(1));
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the destructor is waiting by now
    held.Release(3);
  });
  server->reset();
  later.join();
  std::lock_guard lock(held.mu);
  CHECK(held.started == std::vector<uint64_t>{1});
  CHECK(held.running == 0);
}

TEST_CASE("Decoded server: max_in_flight must be at least 1") {
  zmq::context_t ctx;
  auto bad = DecodedServer::Create(
      &ctx, [](const v1::FetchRequest&) { return PeerReply{}; }, 0);
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
}
