// ZmqTransport over real tcp loopback (integration: opens sockets):
// RingAllReduce across 3 and 4 threads equals the reducer applied to the
// full vectors; tag floors drop stale messages; a silent peer gives
// DeadlineExceeded.
#include "edge_agent/zmq_transport.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "models/reducers.h"
#include "models/ring_allreduce.h"

using loft::agent::ZmqTransport;
using loft::agent::ZmqTransportOptions;

namespace {

std::vector<std::unique_ptr<ZmqTransport>> MakeRing(zmq::context_t* ctx, int n) {
  std::vector<std::unique_ptr<ZmqTransport>> ts;
  std::map<int, std::string> eps;
  for (int r = 0; r < n; ++r) {
    ZmqTransportOptions o;
    o.rank = r;
    o.world_size = n;
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

TEST_CASE("tag floor drops stale messages; a silent peer times out") {
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
