// Metrics and logs, on real loopback sockets:
// the metrics HTTP endpoint caps its open connections (idle connections
// cannot pile up file descriptors) and refused CURVE handshakes are not
// logged one line each.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/curve.h"
#include "core/log_limiter.h"
#include "core/metrics.h"
#include "core/metrics_http.h"
#include "core/zmq_util.h"

using namespace loft;
using namespace std::chrono_literals;

namespace {

int ConnectTcp(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// Reads until EOF or the 2 s timeout; returns what arrived and whether EOF came.
std::pair<std::string, bool> ReadAll(int fd) {
  std::string got;
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) return {got, true};
    if (n < 0) return {got, false};
    got.append(buf, static_cast<size_t>(n));
  }
}

std::string Get(uint16_t port) {
  int fd = ConnectTcp(port);
  const std::string req = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  (void)::send(fd, req.data(), req.size(), 0);
  auto [got, eof] = ReadAll(fd);
  ::close(fd);
  return got;
}

}  // namespace

TEST_CASE("LogRateLimiter lets a burst through per window and counts the rest") {
  LogRateLimiter lim(3, std::chrono::milliseconds(1000));
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  int64_t dropped = -1;
  CHECK(lim.Allow(t0, &dropped));
  CHECK(dropped == 0);
  CHECK(lim.Allow(t0 + 1ms));
  CHECK(lim.Allow(t0 + 2ms));
  for (int i = 0; i < 100; ++i) CHECK_FALSE(lim.Allow(t0 + 3ms));
  CHECK(lim.Allow(t0 + 1000ms, &dropped));
  CHECK(dropped == 100);
  CHECK(lim.Allow(t0 + 1001ms, &dropped));
  CHECK(dropped == 0);
}

TEST_CASE("The metrics endpoint closes connections over its cap at once and serves again below it") {
  metrics::Registry reg;
  auto c = reg.AddCounter("loft_cap_test_total", "A test counter.");
  REQUIRE(c.ok());
  // Default cap: MetricsHttpServer::kDefaultMaxConnections = 32.
  auto server = MetricsHttpServer::Start(&reg, "127.0.0.1", 0);
  REQUIRE(server.ok());
  const uint16_t port = (*server)->port();
  CHECK(Get(port).find("loft_cap_test_total") != std::string::npos);

  std::vector<int> idle;
  for (int i = 0; i < 32; ++i) idle.push_back(ConnectTcp(port));
  std::this_thread::sleep_for(300ms);  // the server accepts them
  // Over the cap: closed at once (EOF well before the 5 s read deadline).
  const auto start = std::chrono::steady_clock::now();
  int extra = ConnectTcp(port);
  auto [got, eof] = ReadAll(extra);
  ::close(extra);
  CHECK(eof);
  CHECK(got.empty());
  CHECK(std::chrono::steady_clock::now() - start < 1500ms);

  for (int fd : idle) ::close(fd);
  std::string body;
  for (int i = 0; i < 40 && body.find("loft_cap_test_total") == std::string::npos; ++i) {
    std::this_thread::sleep_for(50ms);
    body = Get(port);
  }
  CHECK(body.find("200 OK") != std::string::npos);
}

TEST_CASE("Refused CURVE handshakes are counted but logged at most 10 times per 10 s") {
  std::ostringstream captured;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(captured);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  {
    zmq::context_t ctx(1);
    auto zap = ZapAuthenticator::Start(ctx, {});
    REQUIRE(zap.ok());
    auto server_keys = GenerateCurveKeyPair();
    REQUIRE(server_keys.ok());
    SocketOptions so;
    so.curve_own = *server_keys;
    so.curve_server = true;
    auto server = MakeSocket(ctx, zmq::socket_type::router, so);
    REQUIRE(server.ok());
    REQUIRE(Bind(*server, "tcp://127.0.0.1:*").ok());
    const std::string endpoint = *LastEndpoint(*server);
    std::vector<zmq::socket_t> clients;
    for (int i = 0; i < 40; ++i) {
      SocketOptions co;
      co.curve_own = *GenerateCurveKeyPair();
      co.curve_server_public = server_keys->public_key;
      auto s = MakeSocket(ctx, zmq::socket_type::dealer, co);
      REQUIRE(s.ok());
      REQUIRE(Connect(*s, endpoint).ok());
      clients.push_back(std::move(*s));
    }
    for (int i = 0; i < 200 && (*zap)->denied() < 40; ++i) std::this_thread::sleep_for(25ms);
    CHECK((*zap)->denied() >= 40);
    clients.clear();
  }
  spdlog::set_default_logger(previous);
  const std::string log = captured.str();
  size_t lines = 0;
  for (size_t at = 0; (at = log.find("ZAP: refused", at)) != std::string::npos; ++at) ++lines;
  CHECK(lines >= 1);
  CHECK(lines <= 10);
}
