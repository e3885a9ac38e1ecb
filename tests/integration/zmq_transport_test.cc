// ZmqTransport over real tcp loopback (integration: opens sockets):
// RingAllReduce across 3 and 4 threads equals the reducer applied to the
// full vectors; tag floors drop stale messages; a silent peer gives
// DeadlineExceeded.
#include "edge_agent/zmq_transport.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "edge_agent/link_emulator.h"
#include "models/reducers.h"
#include "models/ring_allreduce.h"

using loft::agent::ZmqTransport;
using loft::agent::ZmqTransportOptions;

namespace {

std::vector<std::unique_ptr<ZmqTransport>> MakeRing(
    zmq::context_t* ctx, int n, const std::vector<loft::agent::RingLinkEmulation>& links = {}) {
  std::vector<std::unique_ptr<ZmqTransport>> ts;
  std::map<int, std::string> eps;
  for (int r = 0; r < n; ++r) {
    ZmqTransportOptions o;
    o.rank = r;
    o.world_size = n;
    if (!links.empty()) o.link = links[static_cast<size_t>(r)];
    auto t = ZmqTransport::Create(ctx, o);
    REQUIRE(t.ok());
    eps[r] = (*t)->endpoint();
    ts.push_back(std::move(*t));
  }
  for (int r = 0; r < n; ++r) {
    auto others = eps;
    others.erase(r);
    REQUIRE((*ts[r]).SetPeers(others).ok());
  }
  return ts;
}

void CheckRing(int n, loft::models::ReducerKind kind, size_t d) {
  zmq::context_t ctx(1);
  auto ts = MakeRing(&ctx, n);
  std::mt19937 rng(42 + n);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<std::vector<float>> in(n, std::vector<float>(d));
  for (auto& v : in)
    for (float& x : v) x = g(rng);
  in[0][3] = 1e6f;  // an outlier coordinate
  std::vector<double> w;
  for (int r = 0; r < n; ++r) w.push_back(100.0 + 10 * r);
  loft::models::ReducerOptions ro;
  ro.kind = kind;
  ro.trim_count = 1;
  std::vector<float> want;
  REQUIRE(loft::models::Reduce(ro, in, w, &want).ok());

  std::vector<std::vector<float>> got = in;
  std::vector<loft::Status> st(n);
  std::vector<int> members;
  for (int r = 0; r < n; ++r) members.push_back(r);
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r) {
    th.emplace_back([&, r] {
      loft::models::AllReduceOptions ao;
      ao.reducer = ro;
      ao.timeout_ms = 20000;
      loft::models::RingAllReduce ring(ts[r].get(), ao);
      for (uint32_t round = 1; round <= 2 && st[r].ok(); ++round) {
        got[r] = in[r];
        st[r] = ring.Run(loft::models::RingView{7, members}, round, got[r], w);
      }
    });
  }
  for (auto& t : th) t.join();
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << st[r].ToString());
    REQUIRE(st[r].ok());
    REQUIRE(got[r] == want);  // bitwise: coordinate-wise reducers are exact
  }
}

}  // namespace

TEST_CASE("ring all-reduce over tcp loopback equals the direct computation") {
  CheckRing(3, loft::models::ReducerKind::kWeightedMean, 1001);
  CheckRing(4, loft::models::ReducerKind::kTrimmedMean, 235146);
  CheckRing(4, loft::models::ReducerKind::kMedian, 999);
}

TEST_CASE("tag floor drops stale messages, a silent peer times out") {
  zmq::context_t ctx(1);
  auto ts = MakeRing(&ctx, 2);
  std::vector<std::byte> a{std::byte{1}}, b{std::byte{2}};
  REQUIRE(ts[0]->Send(1, 10, a).ok());
  REQUIRE(ts[0]->Send(1, 20, b).ok());
  auto got20 = ts[1]->Recv(0, 20, 5000);  // buffers tag 10 on the way
  REQUIRE(got20.ok());
  REQUIRE(*got20 == b);
  ts[1]->SetTagFloor(15);
  auto got10 = ts[1]->Recv(0, 10, 300);
  REQUIRE(got10.status().code() == loft::StatusCode::kDeadlineExceeded);
  REQUIRE(ts[0]->Send(1, 12, a).ok());  // below the floor: dropped on arrival
  REQUIRE(ts[1]->Recv(0, 12, 300).status().code() == loft::StatusCode::kDeadlineExceeded);
  REQUIRE(ts[1]->Send(5, 30, a).code() == loft::StatusCode::kUnavailable);  // unknown rank
  ZmqTransportOptions bad;
  bad.rank = 3;
  bad.world_size = 2;
  REQUIRE(!ZmqTransport::Create(&ctx, bad).ok());
}

namespace {

struct CurveRing {
  zmq::context_t ctx{1};
  std::unique_ptr<loft::ZapAuthenticator> zap;
  std::vector<loft::CurveKeyPair> keys;
  std::vector<std::string> names;
  std::vector<std::unique_ptr<ZmqTransport>> ts;
};

// n CURVE transports in one context (one ZAP handler, like one agent's
// context holds one), allow-list = the n node keys.
std::unique_ptr<CurveRing> MakeCurveRing(int n, uint32_t round_window = 0) {
  auto c = std::make_unique<CurveRing>();
  std::map<std::string, std::string> allowed;
  std::vector<std::string> pubs;
  for (int r = 0; r < n; ++r) {
    c->keys.push_back(loft::GenerateCurveKeyPair().value());
    c->names.push_back("node-" + std::to_string(r));
    allowed[c->keys.back().public_key] = c->names.back();
    pubs.push_back(c->keys.back().public_key);
  }
  auto zap = loft::ZapAuthenticator::Start(c->ctx, allowed);
  REQUIRE(zap.ok());
  c->zap = std::move(*zap);
  std::map<int, std::string> eps;
  for (int r = 0; r < n; ++r) {
    ZmqTransportOptions o;
    o.rank = r;
    o.world_size = n;
    o.curve_own = c->keys[r];
    o.round_window = round_window;
    o.public_keys = pubs;
    o.rank_names = c->names;
    auto t = ZmqTransport::Create(&c->ctx, o);
    REQUIRE(t.ok());
    eps[r] = (*t)->endpoint();
    c->ts.push_back(std::move(*t));
  }
  for (int r = 0; r < n; ++r) {
    auto others = eps;
    others.erase(r);
    REQUIRE(c->ts[r]->SetPeers(others).ok());
  }
  return c;
}

}  // namespace

TEST_CASE(
    "CURVE ring: the all-reduce works, an unlisted key and a listed key claiming another rank are refused") {
  auto c = MakeCurveRing(3);
  std::vector<std::vector<float>> data{{1, 2, 3, 4}, {3, 2, 1, 0}, {5, 5, 5, 5}};
  std::vector<loft::Status> st(3);
  std::vector<std::thread> th;
  for (int r = 0; r < 3; ++r) {
    th.emplace_back([&, r] {
      loft::models::AllReduceOptions ao;
      ao.timeout_ms = 10000;
      loft::models::RingAllReduce ring(c->ts[r].get(), ao);
      st[r] = ring.Run(loft::models::RingView{1, {0, 1, 2}}, 1, data[r], {});
    });
  }
  for (auto& t : th) t.join();
  for (int r = 0; r < 3; ++r) {
    INFO(st[r].ToString());
    REQUIRE(st[r].ok());
    CHECK(data[r] == std::vector<float>{3, 3, 3, 3});
  }
  const uint64_t accepted = c->zap->accepted();
  CHECK(accepted >= 6);  // every DEALER -> ROUTER connection completed a CURVE handshake

  const std::string ep0 = c->ts[0]->endpoint();
  // A tag above the floor the all-reduce left (view 1, round 1).
  const uint64_t t9 = loft::models::MakeTag(5, 0, 9);
  unsigned char tag[8];
  for (int i = 0; i < 8; ++i) tag[i] = static_cast<unsigned char>(t9 >> (8 * i));
  auto send_raw = [&](const loft::CurveKeyPair& own, const std::string& routing_id) {
    zmq::socket_t s(c->ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::routing_id, routing_id);
    s.set(zmq::sockopt::curve_publickey, own.public_key);
    s.set(zmq::sockopt::curve_secretkey, own.secret_key);
    s.set(zmq::sockopt::curve_serverkey, c->keys[0].public_key);
    s.connect(ep0);
    s.send(zmq::buffer(tag, 8), zmq::send_flags::sndmore);
    s.send(zmq::str_buffer("hello"), zmq::send_flags::none);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  };
  // 1. An unlisted key claiming rank 1: the handshake is denied, nothing arrives.
  const uint64_t denied = c->zap->denied();
  send_raw(loft::GenerateCurveKeyPair().value(), "1");
  auto got = c->ts[0]->Recv(1, t9, 300);
  CHECK(got.status().code() == loft::StatusCode::kDeadlineExceeded);
  CHECK(c->zap->denied() > denied);
  // 2. node-2's (listed) key claiming rank 1: authenticated, but dropped.
  send_raw(c->keys[2], "1");
  got = c->ts[0]->Recv(1, t9, 300);
  CHECK(got.status().code() == loft::StatusCode::kDeadlineExceeded);
  CHECK(c->ts[0]->rejected_identity() >= 1);
  // 3. node-1's own key as rank 1 is accepted.
  send_raw(c->keys[1], "1");
  got = c->ts[0]->Recv(1, t9, 2000);
  REQUIRE(got.ok());
  CHECK(got->size() == 5);
}

TEST_CASE("a request is answered by the peer's handler while it waits in Recv, no answer times out") {
  zmq::context_t ctx(1);
  auto ts = MakeRing(&ctx, 2);
  ts[1]->SetRequestHandler(0xFD, [](int from, uint64_t tag, std::span<const std::byte> body) {
    std::vector<std::byte> out(body.begin(), body.end());
    out.push_back(static_cast<std::byte>(from));
    out.push_back(static_cast<std::byte>(tag & 0xFF));
    return out;
  });
  std::thread server([&] { (void)ts[1]->Recv(0, 12345, 2000); });  // pumps (and serves) while waiting
  const std::byte body[3] = {std::byte{7}, std::byte{8}, std::byte{9}};
  auto ans = ts[0]->Request(1, loft::models::MakeTag(3, 4, 0xFD), body, 3000);
  server.join();
  REQUIRE(ans.ok());
  CHECK(*ans ==
        std::vector<std::byte>{std::byte{7}, std::byte{8}, std::byte{9}, std::byte{0}, std::byte{0xFD}});
  // Nobody pumps rank 1 now: the request times out with a clear error.
  auto late = ts[0]->Request(1, loft::models::MakeTag(3, 5, 0xFD), body, 200);
  CHECK(late.status().code() == loft::StatusCode::kDeadlineExceeded);
  CHECK(late.status().message().find("no answer from rank 1") != std::string::npos);
}

TEST_CASE("an abort check ends a waiting Recv early") {
  zmq::context_t ctx(1);
  auto ts = MakeRing(&ctx, 2);
  int calls = 0;
  ts[0]->SetAbortCheck(
      [&] { return ++calls >= 3 ? loft::Unavailable("node 1 left the view") : loft::OkStatus(); });
  auto t0 = std::chrono::steady_clock::now();
  auto got = ts[0]->Recv(1, 77, 20000);
  CHECK(got.status().code() == loft::StatusCode::kUnavailable);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
}

TEST_CASE("an abort check ends a waiting Request early (shutdown, or the holder left the view)") {
  zmq::context_t ctx(1);
  auto ts = MakeRing(&ctx, 2);  // rank 1 never pumps: no answer will come
  int calls = 0;
  ts[0]->SetAbortCheck([&] { return ++calls >= 3 ? loft::Aborted("shutting down") : loft::OkStatus(); });
  const std::byte body[1] = {std::byte{1}};
  auto t0 = std::chrono::steady_clock::now();
  auto ans = ts[0]->Request(1, loft::models::MakeTag(3, 4, 0xFD), body, 20000);
  CHECK(ans.status().code() == loft::StatusCode::kAborted);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
}

TEST_CASE("CURVE ring: a listed key claiming another rank's routing id cannot take over its replies") {
  // node-2's (listed) key connects to rank 0 claiming routing id "1" and
  // stays connected. Rank 1's state request to rank 0 must still be
  // answered to rank 1 (not routed to the impostor's connection).
  auto c = MakeCurveRing(3);
  c->ts[0]->SetRequestHandler(0xFD, [](int from, uint64_t, std::span<const std::byte>) {
    return std::vector<std::byte>{static_cast<std::byte>(from), std::byte{42}};
  });
  const std::byte body[1] = {std::byte{1}};
  std::atomic<bool> serving{true};
  std::thread server([&] {
    while (serving) (void)c->ts[0]->Poll(20);
  });
  // Rank 1's connection to rank 0 is up and answered before the impostor comes.
  auto first = c->ts[1]->Request(0, loft::models::MakeTag(2, 1, 0xFD), body, 5000);
  REQUIRE(first.ok());

  zmq::socket_t imp(c->ctx, zmq::socket_type::dealer);
  imp.set(zmq::sockopt::linger, 0);
  imp.set(zmq::sockopt::routing_id, "1");
  imp.set(zmq::sockopt::curve_publickey, c->keys[2].public_key);
  imp.set(zmq::sockopt::curve_secretkey, c->keys[2].secret_key);
  imp.set(zmq::sockopt::curve_serverkey, c->keys[0].public_key);
  imp.connect(c->ts[0]->endpoint());
  // Make sure the impostor's handshake completed (it is a listed key).
  const uint64_t t = loft::models::MakeTag(2, 9, 7);
  unsigned char tb[8];
  for (int i = 0; i < 8; ++i) tb[i] = static_cast<unsigned char>(t >> (8 * i));
  imp.send(zmq::buffer(tb, 8), zmq::send_flags::sndmore);
  imp.send(zmq::str_buffer("x"), zmq::send_flags::none);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));

  auto ans = c->ts[1]->Request(0, loft::models::MakeTag(2, 2, 0xFD), body, 3000);
  serving = false;
  server.join();
  INFO(ans.status().ToString());
  REQUIRE(ans.ok());
  CHECK(*ans == std::vector<std::byte>{std::byte{1}, std::byte{42}});
  // The impostor received nothing.
  zmq::message_t m;
  CHECK_FALSE(imp.recv(m, zmq::recv_flags::dontwait));
}

TEST_CASE("ring routing ids: rank/nonce or a bare rank, anything else is malformed") {
  using loft::agent::RankOfRoutingId;
  CHECK(RankOfRoutingId("3/0a1b2c") == 3);
  CHECK(RankOfRoutingId("12") == 12);
  CHECK(RankOfRoutingId("") == -1);
  CHECK(RankOfRoutingId("/abc") == -1);
  CHECK(RankOfRoutingId("3/") == -1);
  CHECK(RankOfRoutingId("1abc") == -1);  // std::stoi used to read this as rank 1
  CHECK(RankOfRoutingId("-1/x") == -1);
  CHECK(RankOfRoutingId("99999999999/x") == -1);
}

namespace {

// Runs one ring all-reduce of d floats among n ranks; returns its wall time in ms.
double TimedRing(int n, size_t d, const std::vector<loft::agent::RingLinkEmulation>& links) {
  zmq::context_t ctx(1);
  auto ts = MakeRing(&ctx, n, links);
  std::vector<std::vector<float>> v(n, std::vector<float>(d, 1.0f));
  std::vector<double> w(n, 1.0);
  std::vector<int> members;
  for (int r = 0; r < n; ++r) members.push_back(r);
  std::vector<loft::Status> st(n);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r) {
    th.emplace_back([&, r] {
      loft::models::AllReduceOptions ao;
      ao.timeout_ms = 20000;
      loft::models::RingAllReduce ring(ts[r].get(), ao);
      st[r] = ring.Run(loft::models::RingView{1, members}, 1, v[r], w);
    });
  }
  for (auto& t : th) t.join();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << st[r].ToString());
    REQUIRE(st[r].ok());
    CHECK(v[r][0] == Approx(1.0f));
  }
  return ms;
}

}  // namespace

TEST_CASE("link emulation shapes the ring: 2(N-1) steps at min(up, down) plus the latency per step") {
  // 4 ranks, 200,000 floats: 50,000 per chunk = 200 kB per step. Rank 2's
  // downlink (40 Mbit/s) is the slowest link: 40 ms per step; 6 steps =
  // 240 ms, less a 16 KiB burst per step, plus 5 ms of latency per step.
  const int n = 4;
  const size_t d = 200000;
  loft::SystemClock clock;
  std::vector<std::unique_ptr<loft::agent::TokenBucket>> up, down;
  std::vector<loft::agent::RingLinkEmulation> links(n);
  for (int r = 0; r < n; ++r) {
    up.push_back(loft::agent::MakeLinkBucket(&clock, loft::NetworkSpec{}, 100.0));
    down.push_back(loft::agent::MakeLinkBucket(&clock, loft::NetworkSpec{}, r == 2 ? 40.0 : 100.0));
    links[r].clock = &clock;
    links[r].up = up.back().get();
    links[r].down = down.back().get();
    links[r].up_mbps = {100.0, 100.0, 100.0, 100.0};
    links[r].latency_ms = {5.0, 5.0, 5.0, 5.0};
    links[r].self = r;
  }
  const double bytes_per_step = 4.0 * d / n;
  const double model_ms = 6 * (bytes_per_step * 8 / (40.0 * 1000) + 5.0);
  const double shaped = TimedRing(n, d, links);
  const double plain = TimedRing(n, d, {});
  INFO("shaped " << shaped << " ms, unshaped " << plain << " ms, modelled " << model_ms << " ms");
  CHECK(shaped > 0.8 * model_ms);
  CHECK(shaped < 2.0 * model_ms + plain);
  CHECK(plain < 0.5 * shaped);
}

TEST_CASE("RecvOrLater: the awaited message first, else the sender's later round once it waited the grace") {
  using loft::models::MakeTag;
  zmq::context_t ctx(1);
  auto ts = MakeRing(&ctx, 2);
  const std::vector<std::byte> a{std::byte{1}}, b{std::byte{2}, std::byte{2}};
  auto any = [](uint64_t, std::span<const std::byte>) { return true; };
  const uint64_t want = MakeTag(3, 10, 0xFE);

  // Both buffered: the awaited one is taken, the later one stays.
  REQUIRE(ts[1]->Send(0, want, a).ok());
  REQUIRE(ts[1]->Send(0, MakeTag(3, 11, 0xFE), b).ok());
  auto got = ts[0]->RecvOrLater(1, want, 2000, 0, any);
  REQUIRE(got.ok());
  CHECK(got->tag == want);
  CHECK(got->body == a);

  // Only the later round came: it stands in once it waited the grace, and
  // stays buffered for its own round.
  const auto t0 = std::chrono::steady_clock::now();
  got = ts[0]->RecvOrLater(1, want, 5000, 120, any);
  const auto waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(got.ok());
  CHECK(got->tag == MakeTag(3, 11, 0xFE));
  CHECK(got->body == b);
  CHECK(waited >= 120);
  auto again = ts[0]->Recv(1, MakeTag(3, 11, 0xFE), 0);
  REQUIRE(again.ok());
  CHECK(*again == b);

  // Not taken: another view, another phase, another sender's later round,
  // or one `usable` refuses: the wait ends with DeadlineExceeded.
  REQUIRE(ts[1]->Send(0, MakeTag(4, 11, 0xFE), b).ok());
  REQUIRE(ts[1]->Send(0, MakeTag(3, 12, 0x01), b).ok());
  auto none = ts[0]->RecvOrLater(1, want, 300, 0, any);
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == loft::StatusCode::kDeadlineExceeded);
  REQUIRE(ts[1]->Send(0, MakeTag(3, 13, 0xFE), b).ok());
  int asked = 0;
  auto refuse = [&](uint64_t tag, std::span<const std::byte>) {
    ++asked;
    CHECK(tag == MakeTag(3, 13, 0xFE));
    return false;
  };
  none = ts[0]->RecvOrLater(1, want, 300, 0, refuse);
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == loft::StatusCode::kDeadlineExceeded);
  CHECK(asked > 0);
  CHECK(ts[0]->Recv(1, MakeTag(3, 13, 0xFE), 0).ok());  // still buffered
}

namespace {

// A DEALER with node `key`'s CURVE key claiming `routing_id`, connected to `c`'s rank 0.
zmq::socket_t Jammer(CurveRing* c, int key, const std::string& routing_id) {
  zmq::socket_t s(c->ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::sndhwm, 0);
  s.set(zmq::sockopt::routing_id, routing_id);
  s.set(zmq::sockopt::curve_publickey, c->keys[key].public_key);
  s.set(zmq::sockopt::curve_secretkey, c->keys[key].secret_key);
  s.set(zmq::sockopt::curve_serverkey, c->keys[0].public_key);
  s.connect(c->ts[0]->endpoint());
  return s;
}

void SendTagged(zmq::socket_t& s, uint64_t tag, std::string_view body) {
  unsigned char tb[8];
  for (int i = 0; i < 8; ++i) tb[i] = static_cast<unsigned char>(tag >> (8 * i));
  s.send(zmq::buffer(tb, 8), zmq::send_flags::sndmore);
  s.send(zmq::buffer(body.data(), body.size()), zmq::send_flags::none);
}

}  // namespace

TEST_CASE("a jamming member fills only its own inbox quota: another member's message of the round survives") {
  // Rank 1 (its own listed key) sends 6,000 one-byte messages tagged with
  // far-future views after rank 2's message of the current round arrived.
  // One inbox shared by all senders, dropping the lowest tag when full,
  // lost rank 2's message for good.
  using loft::models::MakeTag;
  auto c = MakeCurveRing(3, 1u << 20);
  const uint64_t now = MakeTag(3, 40, 1);
  const std::vector<std::byte> honest{std::byte{7}, std::byte{7}};
  REQUIRE(c->ts[2]->Send(0, now, honest).ok());
  REQUIRE(c->ts[0]->Poll(2000).ok());  // rank 2's message is buffered
  REQUIRE(c->ts[0]->Peek(2, now).has_value());

  zmq::socket_t jam = Jammer(c.get(), 1, "1/jam");
  const int kJam = 6000;
  for (int i = 0; i < kJam; ++i)
    SendTagged(jam, MakeTag(0xFFFFF0u + static_cast<uint32_t>(i % 16), i, 1), "x");
  const auto& stats = c->ts[0]->stats();
  for (int i = 0; i < 100 && c->ts[0]->buffered_from(1) + stats.over_quota < static_cast<uint64_t>(kJam); ++i)
    REQUIRE(c->ts[0]->Poll(100).ok());
  INFO("buffered from rank 1: " << c->ts[0]->buffered_from(1) << ", over quota: " << stats.over_quota);
  CHECK(c->ts[0]->buffered_from(1) == 1024);  // ZmqTransportOptions::max_buffered_per_sender
  CHECK(stats.over_quota == static_cast<uint64_t>(kJam) - 1024);

  auto got = c->ts[0]->Recv(2, now, 2000);
  REQUIRE(got.ok());
  CHECK(*got == honest);

  // Now rank 0 has a current tag: a view more than 16 ahead of it is
  // dropped on arrival, whoever sends it (and, with a round window of 2^20,
  // a round more than 2^20 ahead).
  const uint64_t before = stats.out_of_window;
  REQUIRE(c->ts[2]->Send(0, MakeTag(3 + 17, 40, 1), honest).ok());
  REQUIRE(c->ts[2]->Send(0, MakeTag(3, 40 + (1u << 20) + 1, 1), honest).ok());
  for (int i = 0; i < 100 && stats.out_of_window < before + 2; ++i) REQUIRE(c->ts[0]->Poll(50).ok());
  CHECK(stats.out_of_window == before + 2);
  REQUIRE(c->ts[2]->Send(0, MakeTag(3 + 16, 41, 1), honest).ok());  // the window's edge
  got = c->ts[0]->Recv(2, MakeTag(3 + 16, 41, 1), 2000);
  REQUIRE(got.ok());
  CHECK(c->ts[0]->buffered_from(2) == 0);
}

// The ring socket took up to 100,000 messages of up to 16 MiB per
// connection before anything judged the sender. Now a sender's messages
// leave ZeroMQ's queue (at most 1,000 per connection) into its own quota,
// bytes as well as messages: 150 messages of 1 MiB from one member hold at
// most 64 MiB here (ZmqTransportOptions::max_buffered_bytes_per_sender),
// the rest are dropped and counted, and another member's message of the
// round still arrives.
TEST_CASE("a member's large messages fill only its byte quota: the rest are dropped and another's survives") {
  using loft::models::MakeTag;
  auto c = MakeCurveRing(3, 1u << 20);
  const uint64_t now = MakeTag(3, 40, 1);
  zmq::socket_t jam = Jammer(c.get(), 1, "1/big");
  const std::string mib(1u << 20, 'x');
  const int kBig = 150;
  for (int i = 0; i < kBig; ++i) SendTagged(jam, MakeTag(3, 41 + static_cast<uint32_t>(i), 1), mib);
  const std::vector<std::byte> honest{std::byte{7}, std::byte{7}};
  REQUIRE(c->ts[2]->Send(0, now, honest).ok());
  const auto& stats = c->ts[0]->stats();
  for (int i = 0; i < 300 && c->ts[0]->buffered_from(1) + stats.over_quota < static_cast<uint64_t>(kBig); ++i)
    REQUIRE(c->ts[0]->Poll(100).ok());
  INFO("buffered from rank 1: " << c->ts[0]->buffered_from(1) << ", over quota: " << stats.over_quota);
  CHECK(c->ts[0]->buffered_from(1) <= 64);  // 64 MiB of 1 MiB messages
  CHECK(c->ts[0]->buffered_from(1) >= 60);
  CHECK(c->ts[0]->buffered_from(1) + stats.over_quota == static_cast<uint64_t>(kBig));
  auto got = c->ts[0]->Recv(2, now, 5000);
  REQUIRE(got.ok());
  CHECK(*got == honest);
}

TEST_CASE("state requests: a rate per requester, and the sender check refuses a rank (an evicted node)") {
  using loft::models::MakeTag;
  zmq::context_t ctx(1);
  auto ts = MakeRing(&ctx, 3);
  int served = 0;
  ts[1]->SetRequestHandler(0xFD, [&served](int, uint64_t, std::span<const std::byte>) {
    ++served;
    return std::vector<std::byte>(1000, std::byte{1});
  });
  std::atomic<bool> evicted{false};  // rank 2, once the view drops it
  ts[1]->SetSenderCheck([&](int rank, uint32_t, bool) { return !(rank == 2 && evicted); });
  std::atomic<bool> serving{true};
  std::thread server([&] {
    while (serving) (void)ts[1]->Poll(10);
  });
  const std::byte body[8] = {};
  // A burst of 4 (ZmqTransportOptions::request_burst) is answered, the 5th not.
  for (uint32_t r = 1; r <= 4; ++r) {
    auto ans = ts[0]->Request(1, MakeTag(2, r, 0xFD), body, 3000);
    INFO("request " << r << ": " << ans.status().ToString());
    CHECK(ans.ok());
  }
  auto over = ts[0]->Request(1, MakeTag(2, 5, 0xFD), body, 300);
  CHECK(over.status().code() == loft::StatusCode::kDeadlineExceeded);
  // Another requester has its own rate.
  CHECK(ts[2]->Request(1, MakeTag(2, 5, 0xFD), body, 3000).ok());
  // One more per 500 ms (request_interval_ms).
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  CHECK(ts[0]->Request(1, MakeTag(2, 6, 0xFD), body, 3000).ok());

  // Rank 2 leaves the view: neither its requests nor its messages are taken.
  evicted = true;
  CHECK(ts[2]->Request(1, MakeTag(3, 7, 0xFD), body, 300).status().code() ==
        loft::StatusCode::kDeadlineExceeded);
  REQUIRE(ts[2]->Send(1, MakeTag(3, 7, 1), body).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  serving = false;
  server.join();
  CHECK(served == 6);
  CHECK(ts[1]->stats().requests_limited == 1);
  CHECK(ts[1]->stats().refused_sender == 2);
  CHECK(ts[1]->buffered_from(2) == 0);
}
