// libloft's consumer (capi/src/consumer_session.h) waiting for a batch
// while signals arrive: a SIGALRM every 5 ms (a handler without
// SA_RESTART, as a training program's timers or its data loader's SIGCHLD)
// must not end the wait. The agent's side is a ROUTER on an ipc://
// endpoint in a temp dir, served by a second thread.
#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "capi/src/consumer_session.h"
#include "core/codec.h"

namespace {

volatile sig_atomic_t g_alarms = 0;
void OnAlarm(int) {
  g_alarms = g_alarms + 1;
}

}  // namespace

TEST_CASE("a consumer's wait for a batch survives signals") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("loft-consumer-signals-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string endpoint = "ipc://" + (dir / "consumer").string();
  zmq::context_t ctx{1};
  zmq::socket_t router{ctx, zmq::socket_type::router};
  router.set(zmq::sockopt::linger, 0);
  router.bind(endpoint);

  auto session = loft::capi::ConsumerSession::Open(endpoint, "signals-test");
  REQUIRE(session.ok());
  std::vector<zmq::message_t> hello;
  REQUIRE(zmq::recv_multipart(router, std::back_inserter(hello)));
  REQUIRE(hello.size() == 2);
  const std::string id = hello[0].to_string();

  // The agent sends one batch after 300 ms, from a thread that does not take SIGALRM.
  std::thread agent([&] {
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &block, nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    loft::v1::Envelope env;
    auto* b = env.mutable_consumer_batch();
    b->set_partition_id(42);
    b->add_sample_ids(7);
    b->add_labels(3);
    b->add_payload_sizes(4);
    auto frame = loft::Encode(env);
    router.send(zmq::buffer(id), zmq::send_flags::sndmore);
    router.send(zmq::buffer(*frame), zmq::send_flags::sndmore);
    router.send(zmq::str_buffer("abcd"), zmq::send_flags::none);
  });

  struct sigaction sa = {};
  struct sigaction old = {};
  sa.sa_handler = OnAlarm;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocking call returns EINTR
  REQUIRE(sigaction(SIGALRM, &sa, &old) == 0);
  itimerval every5ms{{0, 5000}, {0, 5000}};
  REQUIRE(setitimer(ITIMER_REAL, &every5ms, nullptr) == 0);

  auto batch = (*session)->Next(3000);

  itimerval off{};
  setitimer(ITIMER_REAL, &off, nullptr);
  sigaction(SIGALRM, &old, nullptr);
  agent.join();
  std::filesystem::remove_all(dir);

  INFO(batch.status().ToString());
  REQUIRE(batch.ok());
  CHECK(g_alarms > 10);  // the wait was interrupted, many times
  CHECK((*batch)->partition_id == 42);
  CHECK((*batch)->sample_ids == std::vector<uint64_t>{7});
  CHECK(std::string(static_cast<const char*>((*batch)->payload.data()), (*batch)->payload.size()) == "abcd");
}
