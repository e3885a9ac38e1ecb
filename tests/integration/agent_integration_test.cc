// Integration tests: real ZmqAgentServers on tcp://127.0.0.1 (free ports),
// real RocksDB caches, a fake scheduler (a ROUTER driven by the test).
// clang-format off
#include <utility>  // before Boost 1.74 asio: awaitable.hpp uses std::exchange
// clang-format on
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "core/codec.h"
#include "core/curve.h"
#include "core/metrics_http.h"
#include "core/zmq_util.h"
#include "edge_agent/peer_fetcher.h"
#include "edge_agent/zmq_agent_server.h"
#include "preprocess/jpeg_codec.h"
#include "test_util.h"

using namespace loft;
using namespace loft::agent;
using namespace loft::agent::testing;

namespace {

// Drives agents like loft-scheduler would (README "Protocol").
class FakeScheduler {
 public:
  explicit FakeScheduler(std::optional<CurveKeyPair> keys = std::nullopt) {
    SocketOptions o;
    o.recv_timeout_ms = 5000;
    if (keys) {
      o.curve_own = keys;
      o.curve_server = true;
    }
    auto s = MakeSocket(ctx_, zmq::socket_type::router, o);
    REQUIRE(s.ok());
    sock_ = std::move(*s);
    REQUIRE(Bind(sock_, "tcp://127.0.0.1:*").ok());
    endpoint_ = *LastEndpoint(sock_);
  }
  const std::string& endpoint() const { return endpoint_; }

  // Next message of the given body from anyone (others are skipped), with
  // the sender's node name: agents connect as "<node>/<random>"
  // (UniqueRoutingId); Send(node) uses the routing id last seen from it.
  std::pair<std::string, v1::Envelope> WaitFor(v1::Envelope::BodyCase body) {
    for (int i = 0; i < 1000; ++i) {
      auto frames = RecvMultipart(sock_);
      REQUIRE(frames.ok());
      REQUIRE(frames->size() >= 2);
      auto env = Decode(std::string_view(static_cast<const char*>((*frames)[1].data()), (*frames)[1].size()));
      REQUIRE(env.ok());
      const std::string rid = (*frames)[0].to_string();
      const std::string name = rid.substr(0, rid.find('/'));
      ids_[name] = rid;
      if (env->body_case() == body) return {name, *env};
    }
    FAIL("message not received");
    return {};
  }
  void Send(const std::string& to, const v1::Envelope& env) {
    auto it = ids_.find(to);
    const std::string& rid = it == ids_.end() ? to : it->second;
    zmq::message_t id(rid.data(), rid.size());
    REQUIRE(SendEnvelopeTo(sock_, id, env).ok());
  }

 private:
  zmq::context_t ctx_;
  zmq::socket_t sock_;
  std::string endpoint_;
  std::map<std::string, std::string> ids_;  // node name -> routing id
};

struct RunningAgent {
  std::unique_ptr<ZmqAgentServer> server;
  std::atomic<bool> stop{false};
  std::thread thread;
  Status result;

  void Start() {
    thread = std::thread([this] { result = server->Run(&stop); });
  }
  ~RunningAgent() {
    stop = true;
    if (thread.joinable()) thread.join();
  }
};

AgentConfig Config(const TempDir& dir, const std::string& node, const std::string& spec,
                   const std::string& sched) {
  AgentConfig c;
  c.node_name = node;
  c.cluster_spec = spec;
  c.cache_dir = dir.Sub(node);
  c.check_cache = false;  // hand-made caches (ids 0..999), not the spec's shuffled placement
  c.scheduler_endpoint = sched;
  c.peer_bind = "tcp://127.0.0.1:*";
  c.insecure = true;
  c.fetch_timeout_ms = 1000;
  c.log_level = "warn";
  return c;
}

// Registers both agents and sends them the view; returns name -> routing id.
void RegisterAll(FakeScheduler& sched, std::map<std::string, int32_t> nodes) {
  v1::Envelope view;
  view.mutable_view()->set_view(1);
  std::map<std::string, std::string> endpoints;
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto [from, env] = sched.WaitFor(v1::Envelope::kRegisterRequest);
    CHECK(from == env.register_request().node_name());
    CHECK(env.register_request().credits() == AgentConfig().credits);  // the default window
    CHECK(env.register_request().cache().samples() == 500);
    endpoints[from] = env.register_request().peer_endpoint();
    v1::Envelope reply;
    reply.mutable_register_reply()->set_node(nodes.at(from));
    reply.mutable_register_reply()->set_view(1);
    sched.Send(from, reply);
  }
  for (auto& [name, node] : nodes) {
    v1::Member* m = view.mutable_view()->add_members();
    m->set_node(node);
    m->set_peer_endpoint(endpoints[name]);
    m->set_name(name);
  }
  for (auto& [name, node] : nodes) sched.Send(name, view);
}

v1::Envelope Grant(uint64_t partition, int32_t requester, const std::vector<uint64_t>& ids) {
  v1::Envelope env;
  env.mutable_serve_grant()->set_partition_id(partition);
  env.mutable_serve_grant()->set_requester(requester);
  for (auto id : ids) env.mutable_serve_grant()->add_sample_ids(id);
  return env;
}

v1::Envelope FetchReq(uint64_t partition, int32_t requester, const std::vector<uint64_t>& ids, uint64_t rid) {
  v1::Envelope env;
  auto* f = env.mutable_fetch_request();
  f->set_request_id(rid);
  f->set_partition_id(partition);
  f->set_requester(requester);
  for (auto id : ids) f->add_sample_ids(id);
  return env;
}

// Sum of peer messages the agent accounted for: rejected frames (except
// failed reply sends) plus fetch requests by result.
int64_t HandledPeerMessages(const std::string& text) {
  int64_t total = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    bool rejected = line.rfind("loft_agent_rejected_frames_total{socket=\"peer\"", 0) == 0 &&
                    line.find("send_failed") == std::string::npos;
    bool fetched = line.rfind("loft_agent_fetch_requests_total{", 0) == 0;
    if (rejected || fetched) total += std::stoll(line.substr(line.rfind(' ') + 1));
  }
  return total;
}

}  // namespace

TEST_CASE("Peer fetch round trip between two agents on real caches") {
  TempDir dir;
  MakeCache(dir.Sub("a"), Range(0, 500));
  MakeCache(dir.Sub("b"), Range(500, 1000));
  std::string spec = WriteSpec(dir);
  FakeScheduler sched;
  metrics::Registry ra, rb;
  RunningAgent a, b;
  auto sa = ZmqAgentServer::Create(Config(dir, "a", spec, sched.endpoint()), SystemClock::Default(), &ra);
  REQUIRE(sa.ok());
  a.server = std::move(*sa);
  auto sb = ZmqAgentServer::Create(Config(dir, "b", spec, sched.endpoint()), SystemClock::Default(), &rb);
  REQUIRE(sb.ok());
  b.server = std::move(*sb);
  a.Start();
  b.Start();
  RegisterAll(sched, {{"a", 0}, {"b", 1}});

  // Partition 77 for a: 50 local samples, 100 from b (two fetch batches).
  std::vector<uint64_t> remote = Range(500, 600);
  sched.Send("b", Grant(77, 0, remote));
  v1::Envelope assign;
  auto* p = assign.mutable_assignment()->mutable_partition();
  p->set_id(77);
  p->set_worker(0);
  for (uint64_t id = 0; id < 50; ++id) {
    p->add_sample_ids(id);
    p->add_sources(0);
  }
  for (uint64_t id : remote) {
    p->add_sample_ids(id);
    p->add_sources(1);
  }
  sched.Send("a", assign);
  auto [from, done] = sched.WaitFor(v1::Envelope::kPartitionDone);
  CHECK(from == "a");
  const auto& t = done.partition_done().timings();
  CHECK(done.partition_done().partition_id() == 77);
  CHECK(t.local_samples() == 50);
  CHECK(t.remote_samples() == 100);
  CHECK(t.remote_bytes() == 100 * 804);
  CHECK(t.remote_read_ms_by_peer().count(1) == 1);
  CHECK(t.compute_ms() >= 2.0);  // fixed 1 ms + 150 * 0.01 ms
  auto [from2, credit] = sched.WaitFor(v1::Envelope::kCreditGrant);
  CHECK(from2 == "a");
  CHECK(credit.credit_grant().credits() == 1);
  CHECK(rb.Render().find("loft_agent_served_samples_total 100\n") != std::string::npos);

  // Partition 78 names b as the source of ids b was never told to serve:
  // b refuses, a reports the partition failed.
  v1::Envelope bad = assign;
  bad.mutable_assignment()->mutable_partition()->set_id(78);
  sched.Send("a", bad);
  auto [from3, failed] = sched.WaitFor(v1::Envelope::kPartitionFailed);
  CHECK(failed.partition_failed().partition_id() == 78);
  CHECK(failed.partition_failed().reason().find("peer 1") != std::string::npos);
}

TEST_CASE("10,000 random and malformed frames: the agent stays up and serves a valid request") {
  TempDir dir;
  MakeCache(dir.Sub("b"), Range(500, 1000));
  std::string spec = WriteSpec(dir);
  FakeScheduler sched;
  metrics::Registry rb;
  RunningAgent b;
  AgentConfig cfg = Config(dir, "b", spec, sched.endpoint());
  cfg.max_message_bytes = 64 * 1024;
  auto sb = ZmqAgentServer::Create(cfg, SystemClock::Default(), &rb);
  REQUIRE(sb.ok());
  b.server = std::move(*sb);
  b.Start();
  auto [who, reg] = sched.WaitFor(v1::Envelope::kRegisterRequest);
  v1::Envelope reply;
  reply.mutable_register_reply()->set_node(1);
  sched.Send(who, reply);
  sched.Send("b", Grant(5, 0, Range(500, 564)));

  zmq::context_t ctx;
  std::mt19937_64 rng(12345);
  std::optional<zmq::socket_t> garbage;  // kept open until everything it sent was handled
  {
    SocketOptions o;
    o.send_timeout_ms = 5000;
    o.linger_ms = 10000;  // deliver every queued frame before closing
    auto g = MakeSocket(ctx, zmq::socket_type::dealer, o);
    REQUIRE(g.ok());
    REQUIRE(Connect(*g, b.server->peer_endpoint()).ok());
    auto valid = Encode(FetchReq(5, 0, {500}, 1));
    REQUIRE(valid.ok());
    for (int i = 0; i < 10000; ++i) {
      std::vector<zmq::message_t> frames;
      int kind = i % 8;
      if (kind == 0) {  // random bytes
        std::string s(rng() % 512, '\0');
        for (auto& c : s) c = static_cast<char>(rng());
        frames.emplace_back(s.data(), s.size());
      } else if (kind == 1) {  // truncated valid request
        frames.emplace_back(valid->data(), rng() % valid->size());
      } else if (kind == 2) {  // bit-flipped valid request
        std::string s = *valid;
        s[rng() % s.size()] ^= static_cast<char>(1 << (rng() % 8));
        frames.emplace_back(s.data(), s.size());
      } else if (kind == 3) {  // wrong version
        v1::Envelope e = FetchReq(5, 0, {500}, 1);
        e.set_protocol_version(2);
        frames.emplace_back(e.SerializeAsString());
      } else if (kind == 4) {  // unexpected type / no body
        v1::Envelope e;
        e.set_protocol_version(kProtocolVersion);
        if (i % 16 == 4) e.mutable_heartbeat()->set_node(3);
        frames.emplace_back(e.SerializeAsString());
      } else if (kind == 5) {  // many frames
        for (int k = 0; k < 20; ++k) frames.emplace_back("x", 1);
      } else if (kind == 6) {  // empty frame
        frames.emplace_back();
      } else {  // an ungranted request
        auto e = Encode(FetchReq(6, 0, {900 + static_cast<uint64_t>(i % 50)}, 2));
        frames.emplace_back(e->data(), e->size());
      }
      REQUIRE(SendMultipart(*g, frames).ok());
    }
    garbage = std::move(*g);
  }
  // Every one of the 10,000 messages was counted exactly once, as a
  // rejected frame or as a fetch request with a result.
  int64_t handled = 0;
  std::string text;
  for (int wait = 0; wait < 400 && handled < 10000; ++wait) {
    text = rb.Render();
    handled = HandledPeerMessages(text);
    if (handled < 10000) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  INFO(text);
  CHECK(handled == 10000);
  CHECK(text.find("loft_agent_rejected_frames_total{socket=\"peer\",reason=\"undecodable\"}") !=
        std::string::npos);
  CHECK(text.find("loft_agent_rejected_frames_total{socket=\"peer\",reason=\"version\"}") !=
        std::string::npos);
  CHECK(text.find("loft_agent_rejected_frames_total{socket=\"peer\",reason=\"too_many_frames\"} 1250\n") !=
        std::string::npos);
  {
    // An oversized frame (over ZMQ_MAXMSGSIZE), on its own connection:
    // libzmq drops that connection (with whatever it had queued).
    SocketOptions o;
    o.linger_ms = 2000;
    auto g = MakeSocket(ctx, zmq::socket_type::dealer, o);
    REQUIRE(g.ok());
    REQUIRE(Connect(*g, b.server->peer_endpoint()).ok());
    std::string big(100 * 1024, 'x');
    std::vector<zmq::message_t> frames;
    frames.emplace_back(big.data(), big.size());
    REQUIRE(SendMultipart(*g, frames).ok());
  }
  // A well-behaved peer is still served.
  SocketOptions o;
  o.recv_timeout_ms = 10000;
  auto c = MakeSocket(ctx, zmq::socket_type::dealer, o);
  REQUIRE(c.ok());
  REQUIRE(Connect(*c, b.server->peer_endpoint()).ok());
  REQUIRE(SendEnvelope(*c, FetchReq(5, 0, Range(510, 520), 99)).ok());
  std::vector<zmq::message_t> records;
  auto env = RecvEnvelope(*c, kDefaultMaxMessageBytes, &records);
  // Replies to earlier garbage never reach this new connection.
  REQUIRE(env.ok());
  REQUIRE(env->has_fetch_reply());
  CHECK(env->fetch_reply().request_id() == 99);
  REQUIRE(records.size() == 10);
  auto s = cache::DecodeRecord(
      515, std::string_view(static_cast<const char*>(records[5].data()), records[5].size()));
  REQUIRE(s.ok());
  CHECK(s->payload == Payload(515));
  CHECK(HandledPeerMessages(rb.Render()) == 10001);
}

TEST_CASE("CURVE: an unknown key cannot fetch, a listed key can") {
  TempDir dir;
  MakeCache(dir.Sub("b"), Range(500, 1000));
  std::string spec = WriteSpec(dir);
  std::string keys = dir.Sub("keys");
  std::map<std::string, CurveKeyPair> kp;
  for (std::string name : {"a", "b", "scheduler"}) {
    auto k = GenerateCurveKeyPair();
    REQUIRE(k.ok());
    kp[name] = *k;
    REQUIRE(WriteCurveKeyPair(keys, name, *k).ok());
  }
  FakeScheduler sched(kp["scheduler"]);
  metrics::Registry rb;
  RunningAgent b;
  AgentConfig cfg = Config(dir, "b", spec, sched.endpoint());
  cfg.insecure = false;
  cfg.keys_dir = keys;
  auto sb = ZmqAgentServer::Create(cfg, SystemClock::Default(), &rb);
  REQUIRE(sb.ok());
  b.server = std::move(*sb);
  b.Start();
  auto [who, reg] = sched.WaitFor(v1::Envelope::kRegisterRequest);
  v1::Envelope reply;
  reply.mutable_register_reply()->set_node(1);
  sched.Send(who, reply);
  v1::Envelope view;
  view.mutable_view()->set_view(2);
  v1::Member* a_member = view.mutable_view()->add_members();
  a_member->set_node(0);
  a_member->set_peer_endpoint("tcp://127.0.0.1:1");
  a_member->set_name("a");
  v1::Member* b_member = view.mutable_view()->add_members();
  b_member->set_node(1);
  b_member->set_peer_endpoint(b.server->peer_endpoint());
  b_member->set_name("b");
  sched.Send("b", view);
  sched.Send("b", Grant(5, 0, Range(500, 600)));

  zmq::context_t ctx;
  auto try_fetch = [&](std::optional<CurveKeyPair> own, uint64_t first_id) -> StatusOr<v1::Envelope> {
    SocketOptions o;
    o.recv_timeout_ms = 1500;
    if (own) {
      o.curve_own = own;
      o.curve_server_public = kp["b"].public_key;
    }
    LOFT_ASSIGN_OR_RETURN(zmq::socket_t s, MakeSocket(ctx, zmq::socket_type::dealer, o));
    LOFT_RETURN_IF_ERROR(Connect(s, b.server->peer_endpoint()));
    o.send_timeout_ms = 1000;
    LOFT_RETURN_IF_ERROR(SendEnvelope(s, FetchReq(5, 0, {first_id, first_id + 1}, 7), /*dontwait=*/false));
    return RecvEnvelope(s);
  };
  auto intruder = GenerateCurveKeyPair();
  REQUIRE(intruder.ok());
  auto denied = try_fetch(*intruder, 500);
  CHECK(denied.status().code() == StatusCode::kDeadlineExceeded);  // the handshake never completes
  auto plain = try_fetch(std::nullopt, 502);
  CHECK(plain.status().code() == StatusCode::kDeadlineExceeded);
  // b's own key is listed but names node "b", not requester 0 ("a").
  auto spoof = try_fetch(kp["b"], 504);
  REQUIRE(spoof.ok());
  REQUIRE(spoof->has_error());
  CHECK(spoof->error().code() == static_cast<int>(StatusCode::kPermissionDenied));
  auto ok = try_fetch(kp["a"], 506);
  REQUIRE(ok.ok());
  CHECK(ok->has_fetch_reply());
}

TEST_CASE("Insecure mode refuses non-loopback endpoints") {
  TempDir dir;
  MakeCache(dir.Sub("b"), Range(500, 510));
  std::string spec = WriteSpec(dir);
  metrics::Registry r;
  AgentConfig cfg = Config(dir, "b", spec, "tcp://10.1.2.3:7400");
  auto s = ZmqAgentServer::Create(cfg, SystemClock::Default(), &r);
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().code() == StatusCode::kPermissionDenied);
}

TEST_CASE("The metrics HTTP server answers GET /metrics with the registry's text") {
  metrics::Registry reg;
  auto c = reg.AddCounter("loft_test_total", "A test counter.");
  REQUIRE(c.ok());
  (*c)->Get().Increment(7);
  auto server = MetricsHttpServer::Start(&reg, "127.0.0.1", 0);
  REQUIRE(server.ok());
  REQUIRE((*server)->port() > 0);
  auto get = [&](const std::string& target) {
    namespace beast = boost::beast;
    namespace http = beast::http;
    boost::asio::io_context io;
    boost::asio::ip::tcp::socket sock(io);
    sock.connect({boost::asio::ip::make_address("127.0.0.1"), (*server)->port()});
    http::request<http::empty_body> req{http::verb::get, target, 11};
    req.set(http::field::host, "127.0.0.1");
    http::write(sock, req);
    beast::flat_buffer buf;
    http::response<http::string_body> res;
    http::read(sock, buf, res);
    return res;
  };
  auto ok = get("/metrics");
  CHECK(ok.result_int() == 200);
  CHECK(ok[boost::beast::http::field::content_type] == "text/plain; version=0.0.4");
  CHECK(ok.body() ==
        "# HELP loft_test_total A test counter.\n# TYPE loft_test_total counter\nloft_test_total 7\n");
  CHECK(get("/nope").result_int() == 404);
  (*server)->Stop();
}

TEST_CASE("A peer fetch fails at once when the serving node leaves the view or restarts") {
  zmq::context_t ctx(1);
  // A "peer" that accepts the connection but never answers (a crashed agent).
  zmq::socket_t silent(ctx, zmq::socket_type::router);
  silent.set(zmq::sockopt::linger, 0);
  silent.bind("tcp://127.0.0.1:*");
  const std::string ep = silent.get(zmq::sockopt::last_endpoint);
  for (const char* change : {"left", "restarted"}) {
    std::atomic<bool> changed{false};
    auto lookup = [&](int32_t n) -> std::optional<PeerInfo> {
      if (!changed) return PeerInfo{n, "peer", ep};
      if (std::string(change) == "left") return std::nullopt;
      return PeerInfo{n, "peer", "tcp://127.0.0.1:1"};  // its new endpoint
    };
    PeerFetcherOptions fo;
    fo.timeout_ms = 20000;
    PeerFetcher fetcher(&ctx, SystemClock::Default(), fo, lookup);
    std::thread flip([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      changed = true;
    });
    auto t0 = std::chrono::steady_clock::now();
    auto res = fetcher.FetchAll(7, 0, {{1, {10, 11, 12}}});
    const auto took = std::chrono::steady_clock::now() - t0;
    flip.join();
    INFO(change << ": " << res[1].status.ToString());
    CHECK(res[1].status.code() == StatusCode::kUnavailable);
    CHECK(res[1].status.message().find(change) != std::string::npos);
    // Not the 20 s deadline (~0.2 s when the process gets the CPU; 10 s
    // leaves room for a loaded machine).
    CHECK(took < std::chrono::seconds(10));
  }
}

TEST_CASE("A fetch waiting on a slow peer sleeps between view checks instead of polling every millisecond") {
  zmq::context_t ctx(1);
  zmq::socket_t silent(ctx, zmq::socket_type::router);  // never answers: a slow link's long transfer
  silent.set(zmq::sockopt::linger, 0);
  silent.bind("tcp://127.0.0.1:*");
  const std::string ep = silent.get(zmq::sockopt::last_endpoint);
  std::atomic<int> lookups{0};
  PeerFetcherOptions fo;
  fo.timeout_ms = 400;
  PeerFetcher fetcher(&ctx, SystemClock::Default(), fo, [&](int32_t n) -> std::optional<PeerInfo> {
    ++lookups;  // once when the fetch starts, then once per wake-up (the view check)
    return PeerInfo{n, "peer", ep};
  });
  auto res = fetcher.FetchAll(7, 0, {{1, {10, 11, 12}}});
  CHECK(res[1].status.code() == StatusCode::kDeadlineExceeded);
  // 400 ms at one view check per 20 ms: about 21 wake-ups (the loop used
  // to wake every millisecond: about 400).
  INFO("lookups: " << lookups.load());
  CHECK(lookups.load() >= 2);
  CHECK(lookups.load() <= 60);
}

TEST_CASE("Unsolicited frames from a peer queue only up to the fetcher's bound and are never used") {
  zmq::context_t ctx(1);
  // A lying "peer": answers fetches correctly but also pushes frames nobody
  // asked for. ROUTER_MANDATORY makes its non-blocking sends fail (EAGAIN)
  // once the path to the fetcher is full instead of dropping silently.
  zmq::socket_t peer(ctx, zmq::socket_type::router);
  peer.set(zmq::sockopt::linger, 0);
  peer.set(zmq::sockopt::router_mandatory, 1);
  peer.bind("tcp://127.0.0.1:*");
  const std::string ep = peer.get(zmq::sockopt::last_endpoint);
  PeerFetcherOptions fo;
  fo.timeout_ms = 20000;
  fo.recv_hwm = 64;
  PeerFetcher fetcher(&ctx, SystemClock::Default(), fo, [&](int32_t n) -> std::optional<PeerInfo> {
    return PeerInfo{n, "peer", ep};
  });
  std::string routing_id;
  // Answers one FetchRequest with genuine records.
  auto serve_one = [&] {
    zmq::pollitem_t item{peer.handle(), 0, ZMQ_POLLIN, 0};
    REQUIRE(zmq::poll(&item, 1, std::chrono::milliseconds(10000)) == 1);
    auto frames = RecvMultipart(peer);
    REQUIRE(frames.ok());
    REQUIRE(frames->size() == 2);
    routing_id.assign(static_cast<const char*>((*frames)[0].data()), (*frames)[0].size());
    auto env = Decode(std::string_view(static_cast<const char*>((*frames)[1].data()), (*frames)[1].size()));
    REQUIRE(env.ok());
    REQUIRE(env->has_fetch_request());
    v1::Envelope rep;
    rep.set_protocol_version(kProtocolVersion);
    rep.mutable_fetch_reply()->set_request_id(env->fetch_request().request_id());
    rep.mutable_fetch_reply()->set_count(env->fetch_request().sample_ids_size());
    auto head = Encode(rep);
    REQUIRE(head.ok());
    peer.send(zmq::buffer(routing_id), zmq::send_flags::sndmore);
    peer.send(zmq::buffer(*head), zmq::send_flags::sndmore);
    for (int i = 0; i < env->fetch_request().sample_ids_size(); ++i) {
      const uint64_t id = env->fetch_request().sample_ids(i);
      std::string rec = cache::EncodeRecord(id, static_cast<uint16_t>(id % 10), Payload(id));
      peer.send(zmq::buffer(rec), i + 1 < env->fetch_request().sample_ids_size() ? zmq::send_flags::sndmore
                                                                                 : zmq::send_flags::none);
    }
  };
  auto fetch = [&](uint64_t partition, std::vector<uint64_t> ids) {
    std::map<int32_t, PeerFetchResult> res;
    std::thread t([&] { res = fetcher.FetchAll(partition, 0, {{1, ids}}); });
    serve_one();
    t.join();
    REQUIRE(res[1].status.ok());
    REQUIRE(res[1].records.size() == ids.size());
    for (size_t k = 0; k < ids.size(); ++k) {
      auto s = cache::DecodeRecord(ids[k], res[1].records[k]);
      REQUIRE(s.ok());
      CHECK(s->payload == Payload(ids[k]));
    }
  };
  fetch(7, {10, 11});  // connects; the peer learns the fetcher's routing id
  REQUIRE_FALSE(routing_id.empty());

  // Flood while the fetcher is idle: 20,000 two-frame messages (a stale
  // FetchReply header and 8 KiB) = 160 MB if nothing bounded them.
  v1::Envelope junk;
  junk.set_protocol_version(kProtocolVersion);
  junk.mutable_fetch_reply()->set_request_id(987654321);
  junk.mutable_fetch_reply()->set_count(1);
  const std::string junk_head = *Encode(junk);
  const std::string pad(8192, 'p');
  int sent = 0, stalls = 0;
  while (sent < 20000 && stalls < 30) {
    zmq::send_result_t r;
    try {
      r = peer.send(zmq::buffer(routing_id), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    } catch (const zmq::error_t&) {
      r = std::nullopt;
    }
    if (!r) {  // the path is full: wait for libzmq/TCP, give up after 30 tries
      ++stalls;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    stalls = 0;
    peer.send(zmq::buffer(junk_head), zmq::send_flags::sndmore);
    peer.send(zmq::buffer(pad), zmq::send_flags::none);
    ++sent;
  }
  INFO("unsolicited messages accepted before the path filled: " << sent);
  // recv_hwm 64 frames + the ROUTER's 1000-frame send queue + the kernel's
  // TCP buffers; unbounded (recv_hwm 0) it takes all 20,000.
  CHECK(sent < 10000);
  // The queued junk is drained and dropped (unknown request id); the next
  // fetch gets its genuine records.
  fetch(8, {20, 21, 22});
}

namespace {
// Counts connections the socket it watches accepted.
class AcceptCounter : public zmq::monitor_t {
 public:
  int accepted = 0;
  void on_event_accepted(const zmq_event_t&, const char*) override { ++accepted; }
};
}  // namespace

TEST_CASE("Warm connects the peer fetcher to every other member of a view before any fetch") {
  zmq::context_t ctx(1);
  zmq::socket_t peer(ctx, zmq::socket_type::router);
  peer.set(zmq::sockopt::linger, 0);
  peer.bind("tcp://127.0.0.1:*");
  const std::string ep = peer.get(zmq::sockopt::last_endpoint);
  AcceptCounter accepts;
  accepts.init(peer, "inproc://warm-monitor", ZMQ_EVENT_ACCEPTED);
  int lookups = 0;
  PeerFetcher fetcher(&ctx, SystemClock::Default(), PeerFetcherOptions{},
                      [&](int32_t n) -> std::optional<PeerInfo> {
                        ++lookups;
                        return PeerInfo{n, "peer", ep};
                      });
  v1::MembershipView view;
  view.set_view(3);
  auto add = [&view](int32_t node, const std::string& endpoint) {
    v1::Member* m = view.add_members();
    m->set_node(node);
    m->set_name("n" + std::to_string(node));
    m->set_peer_endpoint(endpoint);
  };
  add(0, "tcp://127.0.0.1:1");  // this agent itself: skipped
  add(1, ep);
  add(2, "");  // no peer endpoint: skipped
  fetcher.Warm(view, 0);
  CHECK(fetcher.connections() == 1);
  for (int i = 0; i < 100 && accepts.accepted == 0; ++i) accepts.check_event(100);
  CHECK(accepts.accepted == 1);  // the TCP connection exists before any fetch
  fetcher.Warm(view, 0);         // again: nothing new
  CHECK(fetcher.connections() == 1);
  for (int i = 0; i < 3; ++i) accepts.check_event(20);
  CHECK(accepts.accepted == 1);
  CHECK(lookups == 0);
  // The connection's monitor sees its handshake finish (what the agent's
  // heartbeat reports as peers_ready); node 2 has no connection.
  int ready = 0;
  for (int i = 0; i < 300 && ready == 0; ++i) {
    ready = fetcher.HandshakenAmong({1, 2});
    if (ready == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(ready == 1);
  CHECK(fetcher.HandshakenAmong({2}) == 0);
  CHECK(fetcher.HandshakenAmong({}) == 0);
}

TEST_CASE("a peer that never answers is not counted as handshaken") {
  zmq::context_t ctx(1);
  // A plain TCP listener that accepts and says nothing: no ZMTP greeting.
  zmq::socket_t stream(ctx, zmq::socket_type::stream);
  stream.set(zmq::sockopt::linger, 0);
  stream.bind("tcp://127.0.0.1:*");
  const std::string ep = stream.get(zmq::sockopt::last_endpoint);
  PeerFetcher fetcher(&ctx, SystemClock::Default(), PeerFetcherOptions{},
                      [&](int32_t n) -> std::optional<PeerInfo> {
                        return PeerInfo{n, "peer", ep};
                      });
  v1::MembershipView view;
  v1::Member* m = view.add_members();
  m->set_node(1);
  m->set_name("n1");
  m->set_peer_endpoint(ep);
  fetcher.Warm(view, 0);
  CHECK(fetcher.connections() == 1);
  for (int i = 0; i < 30; ++i) {
    CHECK(fetcher.HandshakenAmong({1}) == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// ---------------------------------------------------------------------------
// Decoded serving (README "Decoded serving"): a holder preprocesses a big
// decoded request for one peer while another peer asks it for a record.
namespace {

// A JPEG cache (as `loftctl ingest` with encoding jpeg, image_size 200,
// quality 90 stores it) of ids [0, n), label = id % 10: big images, so
// that preprocessing takes long and the replies stay small (784 levels).
void MakeJpegCache(const std::string& dir, uint64_t n) {
  auto cache = cache::SampleCache::Open(dir);
  REQUIRE(cache.ok());
  preprocess::JpegEncoder enc;
  for (uint64_t id = 0; id < n; ++id) {
    auto jpeg = enc.EncodeGrey(Payload(id), 28, 28, 200, 90);
    REQUIRE(jpeg.ok());
    REQUIRE((*cache)->Put(id, static_cast<uint16_t>(id % 10), *jpeg).ok());
  }
  REQUIRE((*cache)->Flush().ok());
}

std::string WriteJpegSpec(const TempDir& dir, uint64_t samples) {
  return WriteSpec(dir,
                   "{name: test, samples: " + std::to_string(samples) +
                       ", sample_bytes: 784, encoding: jpeg, image_size: 200, jpeg_quality: 90, augment: "
                       "crop_flip, decode_placement: auto}",
                   "jpeg.yaml");
}

zmq::socket_t PeerDealer(zmq::context_t& ctx, const std::string& endpoint) {
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::rcvtimeo, 30000);
  s.connect(endpoint);
  return s;
}

// Sends `req` and waits for its reply (the header, then the record frames).
std::vector<zmq::message_t> Ask(zmq::socket_t& s, const v1::Envelope& req) {
  REQUIRE(SendEnvelope(s, req).ok());
  auto frames = RecvMultipart(s, false, 8192);
  REQUIRE(frames.ok());
  REQUIRE(!frames->empty());
  return std::move(*frames);
}

v1::Envelope HeaderOf(const std::vector<zmq::message_t>& frames) {
  auto env = Decode(std::string_view(static_cast<const char*>(frames[0].data()), frames[0].size()));
  REQUIRE(env.ok());
  return *env;
}

}  // namespace

TEST_CASE("A holder answers a record fetch while it preprocesses another peer's decoded request") {
  constexpr uint64_t kDecoded = 4000;  // one decoded request: ~1 s of preprocessing on one thread
  TempDir dir;
  MakeJpegCache(dir.Sub("b"), kDecoded + 8);
  const std::string spec = WriteJpegSpec(dir, kDecoded + 8);
  FakeScheduler sched;
  metrics::Registry rb;
  RunningAgent b;
  AgentConfig cfg = Config(dir, "b", spec, sched.endpoint());
  cfg.preprocess_threads = 1;
  auto sb = ZmqAgentServer::Create(cfg, SystemClock::Default(), &rb);
  REQUIRE(sb.ok());
  b.server = std::move(*sb);
  b.Start();
  auto [from, reg] = sched.WaitFor(v1::Envelope::kRegisterRequest);
  CHECK(reg.register_request().serves_decoded());
  v1::Envelope reply;
  reply.mutable_register_reply()->set_node(1);
  reply.mutable_register_reply()->set_view(1);
  sched.Send("b", reply);
  // Node 0 may fetch [0, kDecoded) decoded; node 2 one record twice (the
  // probe and the timed fetch), one decoded sample whose requester leaves.
  v1::Envelope decoded = Grant(1, 0, Range(0, kDecoded));
  decoded.mutable_serve_grant()->set_decoded(true);
  sched.Send("b", decoded);
  sched.Send("b", Grant(2, 2, {kDecoded}));
  v1::Envelope gone = Grant(4, 2, Range(0, kDecoded));
  gone.mutable_serve_grant()->set_decoded(true);
  sched.Send("b", gone);
  sched.Send("b", Grant(3, 2, {kDecoded + 1}));

  zmq::context_t ctx(1);
  zmq::socket_t node0 = PeerDealer(ctx, b.server->peer_endpoint());
  zmq::socket_t node2 = PeerDealer(ctx, b.server->peer_endpoint());
  // The grants travel on the scheduler connection: once the last one is in,
  // so are the others.
  for (int i = 0;; ++i) {
    REQUIRE(i < 400);
    v1::Envelope h = HeaderOf(Ask(node2, FetchReq(3, 2, {kDecoded + 1}, 100 + i)));
    if (h.has_fetch_reply()) break;
    REQUIRE(StatusFromError(h.error()).code() == StatusCode::kUnavailable);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  using Clock = std::chrono::steady_clock;
  v1::Envelope req = FetchReq(1, 0, Range(0, kDecoded), 1);
  req.mutable_fetch_request()->set_decoded(true);
  const auto t_decoded = Clock::now();
  REQUIRE(SendEnvelope(node0, req).ok());
  // The holder has taken the decoded request off its socket by now (it is
  // being preprocessed); the record fetch follows it.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto t_record = Clock::now();
  REQUIRE(SendEnvelope(node2, FetchReq(2, 2, {kDecoded}, 2)).ok());
  std::optional<Clock::time_point> record_at, decoded_at;
  std::vector<zmq::message_t> record_frames, decoded_frames;
  while (!record_at || !decoded_at) {
    zmq::pollitem_t items[] = {{node0.handle(), 0, ZMQ_POLLIN, 0}, {node2.handle(), 0, ZMQ_POLLIN, 0}};
    REQUIRE(zmq::poll(items, 2, std::chrono::milliseconds(30000)) > 0);
    if (items[1].revents & ZMQ_POLLIN) {
      auto f = RecvMultipart(node2, false, 8192);
      REQUIRE(f.ok());
      record_frames = std::move(*f);
      record_at = Clock::now();
    }
    if (items[0].revents & ZMQ_POLLIN) {
      auto f = RecvMultipart(node0, false, 8192);
      REQUIRE(f.ok());
      decoded_frames = std::move(*f);
      decoded_at = Clock::now();
    }
  }
  const double record_ms = std::chrono::duration<double, std::milli>(*record_at - t_record).count();
  const double decoded_ms = std::chrono::duration<double, std::milli>(*decoded_at - t_decoded).count();
  std::printf("record reply %.1f ms after its request; decoded reply (%llu samples) %.1f ms after its\n",
              record_ms, static_cast<unsigned long long>(kDecoded), decoded_ms);
  INFO("record reply after " << record_ms << " ms, decoded reply after " << decoded_ms << " ms");
  // The record is answered while the decoded request is still preprocessed,
  // not after it (a big reply may still arrive after a small one that left
  // later, so the arrival order alone would not tell).
  CHECK(record_ms < decoded_ms / 4);
  CHECK(*record_at < *decoded_at);
  v1::Envelope rh = HeaderOf(record_frames);
  REQUIRE(rh.has_fetch_reply());
  CHECK(rh.fetch_reply().request_id() == 2);
  CHECK(record_frames.size() == 2);
  v1::Envelope dh = HeaderOf(decoded_frames);
  INFO(dh.DebugString());
  REQUIRE(dh.has_fetch_reply());
  CHECK(dh.fetch_reply().request_id() == 1);
  CHECK(dh.fetch_reply().count() == static_cast<int32_t>(kDecoded));
  REQUIRE(decoded_frames.size() == kDecoded + 1);
  for (size_t i = 0; i < kDecoded; ++i) {
    auto s = cache::DecodeRecord(i, std::string_view(static_cast<const char*>(decoded_frames[i + 1].data()),
                                                     decoded_frames[i + 1].size()));
    REQUIRE(s.ok());
    CHECK(s->payload.size() == 784);
  }

  // A requester that leaves while its decoded request is preprocessed: the
  // reply to it is dropped and the holder serves on.
  {
    zmq::socket_t leaver = PeerDealer(ctx, b.server->peer_endpoint());
    v1::Envelope req4 = FetchReq(4, 2, Range(0, kDecoded), 9);
    req4.mutable_fetch_request()->set_decoded(true);
    REQUIRE(SendEnvelope(leaver, req4).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Served, and the send of its reply failed (the requester's route is gone).
  auto served_and_dropped = [&rb] {
    const std::string text = rb.Render();
    return text.find("loft_agent_fetch_requests_total{result=\"ok_decoded\"} 2\n") != std::string::npos &&
           text.find("send_failed") != std::string::npos;
  };
  for (int i = 0; !served_and_dropped(); ++i) {
    REQUIRE(i < 3000);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(StatusFromError(HeaderOf(Ask(node2, FetchReq(2, 2, {kDecoded}, 3))).error()).code() ==
        StatusCode::kPermissionDenied);
  b.stop = true;
  b.thread.join();
  CHECK(b.result.ok());
}
