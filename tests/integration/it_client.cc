// it_client: a scripted ZeroMQ client for loft-scheduler integration tests.
//   it_client garbage ENDPOINT N        send N random/malformed messages, then
//                                       require a valid StatusReply
//   it_client slow-agent ENDPOINT NODE  a fake agent that grants 1 credit and
//                                       withholds the next: the scheduler must
//                                       not send a second partition until it
//                                       grants again
//   it_client flood ENDPOINT KEYS_DIR NAME NODE SECONDS
//                                       an authenticated agent (CURVE key NAME)
//                                       that never registers: a 100 KB failure
//                                       reason must get an Error naming the
//                                       field, then a 15 MB one, then SECONDS of
//                                       reports for unknown partitions as fast as
//                                       the scheduler takes them; prints counts
//   it_client hijack ENDPOINT KEYS_DIR KEY ROUTING_ID SECONDS
//                                       connect with KEYS_DIR/KEY.key (a listed
//                                       key) under another node's routing id,
//                                       reconnecting every second; print one
//                                       JSON line counting what arrived, by body
//   it_client register ENDPOINT NODE PEER_EP RING_EP COUNT INTERVAL_MS
//                                       register NODE COUNT times, each as a
//                                       new process would (new incarnation);
//                                       "@N" as an endpoint = N bytes of junk;
//                                       prints replies and errors as JSON
//   it_client dup-assign ENDPOINT       a scheduler (insecure ROUTER bound at
//                                       ENDPOINT) for one real agent of a
//                                       1-node spec: sends one assignment 3
//                                       times (twice at once, once after its
//                                       report), then attempt 1 of it; prints
//                                       the reports per attempt as JSON
//   it_client accuse ENDPOINT NODE PEER SECONDS
//                                       a Byzantine agent (insecure) registered
//                                       as NODE: first a poisoning report
//                                       accusing node PEER for a partition that
//                                       does not exist, then for SECONDS it fails
//                                       every partition it is given naming all
//                                       its samples as corrupt records
//                                       (bad_samples); prints one JSON line: its
//                                       failures, the samples it named and the
//                                       scheduler's status at the end
//   it_client status ENDPOINT KEYS_DIR KEY FROM
//                                       one StatusRequest with include_rows and
//                                       rows_from FROM, with CURVE key KEY; prints
//                                       one JSON line: the error code and message,
//                                       or the page's rows, rows_from, rows_kept
//                                       and the reply's bytes
//   it_client log-flood ENDPOINT KEYS_DIR NAME NODE PEERS SECONDS
//                                       an authenticated agent (CURVE key NAME,
//                                       node NODE of PEERS) that sends, for
//                                       SECONDS, Error envelopes with 4,096-byte
//                                       messages, PeerReports with 256-byte
//                                       reasons and poisoning reports for made-up
//                                       partitions (4,096-byte reasons), and
//                                       Errors whose text is not UTF-8 (protobuf
//                                       refuses them), round robin, as fast as
//                                       the scheduler takes them; prints the
//                                       counts per kind as JSON
//   it_client consumer-flood ENDPOINT SECONDS
//                                       a local consumer of an agent (compute_mode
//                                       external) that sends, for SECONDS,
//                                       undecodable frames, refused hellos with a
//                                       64 KB client name, reports from a
//                                       connection that is not the consumer, and
//                                       hellos that connect and disconnect;
//                                       prints the counts per kind as JSON
// Exit 0 = the checks held; 1 = a check failed (message on stderr).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "core/codec.h"
#include "core/curve.h"
#include "core/zmq_util.h"

namespace {
using Clock = std::chrono::steady_clock;

int Fail(const std::string& m) {
  std::fprintf(stderr, "FAIL: %s\n", m.c_str());
  return 1;
}

// Receives until `pred` matches an envelope or the timeout passes.
template <typename Pred>
std::optional<loft::v1::Envelope> Await(zmq::socket_t& s, int timeout_ms, Pred pred,
                                        const std::function<void()>& idle = {}) {
  auto end = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (Clock::now() < end) {
    zmq::pollitem_t it[] = {{s.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(it, 1, std::chrono::milliseconds(100));
    if (idle) idle();
    if (!(it[0].revents & ZMQ_POLLIN)) continue;
    auto env = loft::RecvEnvelope(s);
    if (env.ok() && pred(*env)) return *env;
  }
  return std::nullopt;
}

std::optional<nlohmann::json> Status(zmq::socket_t& s) {
  loft::v1::Envelope req;
  req.mutable_status_request();
  if (!loft::SendEnvelope(s, req).ok()) return std::nullopt;
  auto r = Await(s, 5000, [](const loft::v1::Envelope& e) { return e.has_status_reply(); });
  if (!r) return std::nullopt;
  return nlohmann::json::parse(r->status_reply().json());
}

int Garbage(const std::string& ep, int n) {
  zmq::context_t ctx(1);
  loft::SocketOptions so;
  so.send_timeout_ms = 2000;
  auto s = loft::MakeSocket(ctx, zmq::socket_type::dealer, so);
  if (!s.ok() || !loft::Connect(*s, ep).ok()) return Fail("cannot connect");
  std::mt19937_64 rng(12345);
  int sent = 0;
  for (int i = 0; i < n; ++i) {
    std::vector<zmq::message_t> frames;
    int kind = static_cast<int>(rng() % 6);
    if (kind == 0) {  // random bytes
      std::string b(rng() % 300, '\0');
      for (auto& c : b) c = static_cast<char>(rng());
      frames.emplace_back(b.data(), b.size());
    } else if (kind == 1) {  // valid envelope, wrong version
      loft::v1::Envelope e;
      e.set_protocol_version(99);
      e.mutable_status_request();
      frames.emplace_back(e.SerializeAsString());
    } else if (kind == 2) {  // valid version, no body
      loft::v1::Envelope e;
      e.set_protocol_version(loft::kProtocolVersion);
      frames.emplace_back(e.SerializeAsString());
    } else if (kind == 3) {  // a message type the scheduler does not accept
      loft::v1::Envelope e;
      e.set_protocol_version(loft::kProtocolVersion);
      e.mutable_fetch_request()->set_request_id(rng());
      frames.emplace_back(e.SerializeAsString());
    } else if (kind == 4) {  // multipart garbage
      for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k) frames.emplace_back(std::to_string(rng()));
    } else {  // bogus acks and heartbeats for unknown/unregistered nodes
      loft::v1::Envelope e;
      e.set_protocol_version(loft::kProtocolVersion);
      if (rng() % 2) {
        auto* d = e.mutable_partition_done();
        d->set_partition_id(rng());
        d->set_node(static_cast<int32_t>(rng() % 8) - 2);
      } else {
        e.mutable_heartbeat()->set_node(static_cast<int32_t>(rng() % 8) - 2);
      }
      frames.emplace_back(e.SerializeAsString());
    }
    if (loft::SendMultipart(*s, frames).ok()) ++sent;
    // Drain error replies so our receive queue stays small.
    while (true) {
      auto r = loft::RecvMultipart(*s, /*dontwait=*/true);
      if (!r.ok() || r->empty()) break;
    }
  }
  std::fprintf(stderr, "sent %d garbage messages\n", sent);
  if (sent < n / 2) return Fail("could not send most garbage messages");
  auto st = Status(*s);
  if (!st) return Fail("no StatusReply after garbage");
  std::printf("%s\n", st->dump().c_str());
  return 0;
}

int SlowAgent(const std::string& ep, const std::string& node_name) {
  zmq::context_t ctx(1);
  loft::SocketOptions so;
  so.routing_id = node_name;
  auto s = loft::MakeSocket(ctx, zmq::socket_type::dealer, so);
  if (!s.ok() || !loft::Connect(*s, ep).ok()) return Fail("cannot connect");
  loft::v1::Envelope reg;
  auto* rr = reg.mutable_register_request();
  rr->set_node_name(node_name);
  rr->set_peer_endpoint("tcp://127.0.0.1:1");
  rr->set_credits(1);
  if (!loft::SendEnvelope(*s, reg).ok()) return Fail("send register");
  auto reply =
      Await(*s, 5000, [](const loft::v1::Envelope& e) { return e.has_register_reply() || e.has_error(); });
  if (!reply || !reply->has_register_reply()) return Fail("no RegisterReply");
  int32_t node = reply->register_reply().node();
  auto last_hb = Clock::now();
  auto heartbeat = [&] {
    if (Clock::now() - last_hb < std::chrono::milliseconds(200)) return;
    last_hb = Clock::now();
    loft::v1::Envelope hb;
    hb.mutable_heartbeat()->set_node(node);
    (void)loft::SendEnvelope(*s, hb);
  };
  auto is_assignment = [](const loft::v1::Envelope& e) { return e.has_assignment(); };
  auto first = Await(*s, 10000, is_assignment, heartbeat);
  if (!first) return Fail("no first assignment");
  // Ack it but grant no new credit: nothing more may arrive.
  loft::v1::Envelope done;
  auto* d = done.mutable_partition_done();
  d->set_partition_id(first->assignment().partition().id());
  d->set_attempt(first->assignment().partition().attempt());
  d->set_node(node);
  if (!loft::SendEnvelope(*s, done).ok()) return Fail("send done");
  auto extra = Await(*s, 2500, is_assignment, heartbeat);
  if (extra) return Fail("the scheduler sent a partition beyond the granted credit");
  auto st = Status(*s);
  if (!st) return Fail("no status");
  const auto& w = (*st)["workers"][node];
  std::fprintf(stderr, "worker status while starved: %s\n", w.dump().c_str());
  if (w["credits"] != 0 || w["in_flight"] != 0 || w["max_in_flight"] != 1) return Fail("credit accounting");
  if (w["queued"].get<int64_t>() > 1)
    return Fail("scheduler queued more than one partition for a starved agent");
  // Grant one credit: exactly the next partition arrives.
  loft::v1::Envelope cg;
  cg.mutable_credit_grant()->set_node(node);
  cg.mutable_credit_grant()->set_credits(1);
  if (!loft::SendEnvelope(*s, cg).ok()) return Fail("send credit");
  auto second = Await(*s, 5000, is_assignment, heartbeat);
  if (!second) return Fail("no assignment after granting a credit");
  auto third = Await(*s, 1500, is_assignment, heartbeat);
  if (third) return Fail("a second partition arrived on a single credit");
  st = Status(*s);
  if (!st || (*st)["workers"][node]["max_in_flight"] != 1) return Fail("max_in_flight != 1");
  std::printf("ok\n");
  return 0;
}

int Flood(const std::string& ep, const std::string& keys, const std::string& name, int32_t node,
          double seconds) {
  zmq::context_t ctx(1);
  loft::SocketOptions so;
  so.send_timeout_ms = 0;
  auto own = loft::ReadCurveKeyPair(keys + "/" + name + ".key");
  auto server = loft::ReadCurvePublicKey(keys + "/scheduler.pub");
  if (!own.ok() || !server.ok()) return Fail("cannot read CURVE keys from " + keys);
  so.curve_own = *own;
  so.curve_server_public = *server;
  auto s = loft::MakeSocket(ctx, zmq::socket_type::dealer, so);
  if (!s.ok() || !loft::Connect(*s, ep).ok()) return Fail("cannot connect");
  auto failed = [&](uint64_t id, size_t reason_bytes) {
    loft::v1::Envelope e;
    e.set_protocol_version(loft::kProtocolVersion);
    auto* f = e.mutable_partition_failed();
    f->set_partition_id(id);
    f->set_node(node);
    f->set_reason(std::string(reason_bytes, 'x'));
    return e;
  };
  // 1. An oversized field in a message of acceptable size: an Error naming
  // it. (A failed check is reported at the end: the flood still runs.)
  int failed_check = 0;
  {
    auto e = failed(1, 100 * 1000);
    if (!loft::SendEnvelope(*s, e).ok()) return Fail("send 100 KB reason");
    auto r = Await(*s, 5000, [](const loft::v1::Envelope& x) { return x.has_error(); });
    if (!r) {
      failed_check = Fail("no Error for a 100 KB PartitionFailed.reason");
    } else {
      std::fprintf(stderr, "100 KB reason: %s\n", r->error().message().c_str());
      if (r->error().message().find("PartitionFailed.reason") == std::string::npos)
        failed_check = Fail("the Error does not name PartitionFailed.reason: " + r->error().message());
    }
  }
  // 2. A 15 MB reason (over the scheduler's inbound limit: the connection is
  // dropped by ZeroMQ, the message never reaches the scheduler).
  {
    auto e = failed(2, 15u << 20);
    (void)loft::SendEnvelope(*s, e, /*dontwait=*/true);
    std::this_thread::sleep_for(std::chrono::milliseconds(2000));
    s->close();
    so.linger_ms = 5000;  // the flood's queued messages are delivered before exit
    s = loft::MakeSocket(ctx, zmq::socket_type::dealer, so);
    if (!s.ok() || !loft::Connect(*s, ep).ok()) return Fail("cannot reconnect");
  }
  // 3. Flood: unknown partitions, max-size reasons (random printable text,
  // which RocksDB cannot compress away) and timings.
  std::mt19937_64 rng(7);
  std::vector<std::string> reasons(1024, std::string(4000, ' '));
  for (auto& r : reasons)
    for (auto& ch : r) ch = static_cast<char>('!' + rng() % 94);
  int64_t sent = 0, blocked = 0, errors = 0;
  const auto end = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  while (Clock::now() < end) {
    loft::v1::Envelope e;
    if (rng() % 2) {
      e = failed(rng() | 1, 0);
      e.mutable_partition_failed()->set_reason(reasons[rng() % reasons.size()]);
    } else {
      e.set_protocol_version(loft::kProtocolVersion);
      auto* d = e.mutable_partition_done();
      d->set_partition_id(rng() | 1);
      d->set_node(node);
      d->mutable_timings()->set_compute_ms(1);
    }
    if (loft::SendEnvelope(*s, e, /*dontwait=*/true).ok()) {
      ++sent;
    } else {
      ++blocked;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    while (true) {
      auto r = loft::RecvMultipart(*s, /*dontwait=*/true);
      if (!r.ok() || r->empty()) break;
      ++errors;
    }
  }
  std::printf("{\"sent\": %lld, \"blocked\": %lld, \"replies\": %lld}\n", static_cast<long long>(sent),
              static_cast<long long>(blocked), static_cast<long long>(errors));
  return failed_check;
}

// A holder of a listed key (loftctl's, another node's) claims a node's
// routing id. Each second it reconnects (so it would also take the id back
// after the real agent reconnected) and sends a StatusRequest (a message
// any listed key may send). Everything that arrives is counted by body.
int Hijack(const std::string& ep, const std::string& keys_dir, const std::string& key,
           const std::string& routing_id, int seconds) {
  auto own = loft::ReadCurveKeyPair(keys_dir + "/" + key + ".key");
  auto sched = loft::ReadCurvePublicKey(keys_dir + "/scheduler.pub");
  if (!own.ok() || !sched.ok()) return Fail("cannot read the keys in " + keys_dir);
  zmq::context_t ctx(1);
  std::map<std::string, int> got;
  const auto end = Clock::now() + std::chrono::seconds(seconds);
  while (Clock::now() < end) {
    loft::SocketOptions so;
    so.routing_id = routing_id;
    so.curve_own = *own;
    so.curve_server_public = *sched;
    auto s = loft::MakeSocket(ctx, zmq::socket_type::dealer, so);
    if (!s.ok() || !loft::Connect(*s, ep).ok()) return Fail("cannot connect");
    loft::v1::Envelope req;
    req.mutable_status_request();
    (void)loft::SendEnvelope(*s, req, /*dontwait=*/true);
    const auto round_end = std::min(end, Clock::now() + std::chrono::seconds(1));
    while (Clock::now() < round_end) {
      zmq::pollitem_t it[] = {{s->handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(it, 1, std::chrono::milliseconds(50));
      if (!(it[0].revents & ZMQ_POLLIN)) continue;
      auto env = loft::RecvEnvelope(*s);
      if (env.ok()) ++got[std::string(loft::BodyName(*env))];
    }
    s->set(zmq::sockopt::linger, 0);
  }
  nlohmann::json j = got;
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

std::string EndpointArg(const std::string& a) {
  if (!a.empty() && a[0] == '@') return "tcp://" + std::string(std::stoul(a.substr(1)), 'x') + ":1";
  return a == "-" ? std::string() : a;
}

int Register(const std::string& ep, const std::string& node, const std::string& peer_ep,
             const std::string& ring_ep, int count, int interval_ms) {
  zmq::context_t ctx(1);
  loft::SocketOptions so;
  auto s = loft::MakeSocket(ctx, zmq::socket_type::dealer, so);
  if (!s.ok() || !loft::Connect(*s, ep).ok()) return Fail("cannot connect");
  int registered = 0;
  std::vector<std::string> errors;
  for (int i = 0; i < count; ++i) {
    loft::v1::Envelope reg;
    auto* rr = reg.mutable_register_request();
    rr->set_node_name(node);
    rr->set_peer_endpoint(EndpointArg(peer_ep));
    rr->set_ring_endpoint(EndpointArg(ring_ep));
    rr->set_credits(1);
    rr->set_incarnation(1000 + static_cast<uint64_t>(i));
    if (!loft::SendEnvelope(*s, reg).ok()) return Fail("send register");
    auto reply =
        Await(*s, 5000, [](const loft::v1::Envelope& e) { return e.has_register_reply() || e.has_error(); });
    if (!reply) return Fail("no reply to a RegisterRequest");
    if (reply->has_register_reply()) ++registered;
    if (reply->has_error()) errors.push_back(loft::StatusFromError(reply->error()).ToString());
    std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
  }
  auto st = Status(*s);
  if (!st) return Fail("no status");
  nlohmann::json j;
  j["registered"] = registered;
  j["errors"] = errors;
  j["view"] = (*st)["view"];
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

int DupAssign(const std::string& ep) {
  zmq::context_t ctx(1);
  loft::SocketOptions so;
  auto r = loft::MakeSocket(ctx, zmq::socket_type::router, so);
  if (!r.ok() || !loft::Bind(*r, ep).ok()) return Fail("cannot bind " + ep);
  std::string agent;  // the agent's routing id
  auto recv = [&](int timeout_ms) -> std::optional<loft::v1::Envelope> {
    zmq::pollitem_t it[] = {{r->handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(it, 1, std::chrono::milliseconds(timeout_ms));
    if (!(it[0].revents & ZMQ_POLLIN)) return std::nullopt;
    auto frames = loft::RecvMultipart(*r, /*dontwait=*/true);
    if (!frames.ok() || frames->size() != 2) return std::nullopt;
    agent = (*frames)[0].to_string();
    auto env = loft::Decode((*frames)[1].to_string_view());
    if (!env.ok()) return std::nullopt;
    return *env;
  };
  auto send = [&](const loft::v1::Envelope& e) {
    zmq::message_t id(agent.data(), agent.size());
    return loft::SendEnvelopeTo(*r, id, e).ok();
  };
  std::optional<loft::v1::Envelope> reg;
  for (auto end = Clock::now() + std::chrono::seconds(20); Clock::now() < end && !reg;) {
    auto e = recv(100);
    if (e && e->has_register_request()) reg = e;
  }
  if (!reg) return Fail("no RegisterRequest from the agent");
  loft::v1::Envelope rr;
  rr.mutable_register_reply()->set_node(0);
  rr.mutable_register_reply()->set_view(1);
  rr.mutable_register_reply()->set_job(77);
  loft::v1::Envelope view;
  view.mutable_view()->set_view(1);
  auto* member = view.mutable_view()->add_members();
  member->set_node(0);
  member->set_peer_endpoint(reg->register_request().peer_endpoint());
  member->set_ring_endpoint(reg->register_request().ring_endpoint());
  member->set_name(reg->register_request().node_name());
  if (!send(rr) || !send(view)) return Fail("cannot answer the agent");
  auto assignment = [](int32_t attempt) {
    loft::v1::Envelope a;
    auto* p = a.mutable_assignment()->mutable_partition();
    p->set_id(42);
    p->set_job(77);
    p->set_worker(0);
    p->set_attempt(attempt);
    p->set_view(1);
    for (uint64_t s = 0; s < 16; ++s) {
      p->add_sample_ids(s);
      p->add_sources(0);
    }
    return a;
  };
  std::map<std::string, int> reports;  // "done/0", "failed/1", ...
  auto collect = [&](int ms) {
    for (auto end = Clock::now() + std::chrono::milliseconds(ms); Clock::now() < end;) {
      auto e = recv(50);
      if (e && e->has_partition_done()) ++reports["done/" + std::to_string(e->partition_done().attempt())];
      if (e && e->has_partition_failed())
        ++reports["failed/" + std::to_string(e->partition_failed().attempt())];
    }
  };
  if (!send(assignment(0)) || !send(assignment(0))) return Fail("cannot send assignments");
  collect(2000);
  if (!send(assignment(0))) return Fail("cannot send the assignment again");
  collect(1500);
  if (!send(assignment(1))) return Fail("cannot send attempt 1");
  collect(2000);
  nlohmann::json j = reports;
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

int Accuse(const std::string& ep, const std::string& name, int32_t peer, double seconds) {
  zmq::context_t ctx(1);
  loft::SocketOptions so;
  so.routing_id = name;
  auto s = loft::MakeSocket(ctx, zmq::socket_type::dealer, so);
  if (!s.ok() || !loft::Connect(*s, ep).ok()) return Fail("cannot connect");
  // A peer endpoint that accepts connections and never answers.
  zmq::socket_t serve(ctx, zmq::socket_type::router);
  serve.bind("tcp://127.0.0.1:0");
  const std::string serve_ep = serve.get(zmq::sockopt::last_endpoint);
  loft::v1::Envelope reg;
  auto* rr = reg.mutable_register_request();
  rr->set_node_name(name);
  rr->set_peer_endpoint(serve_ep);
  rr->set_credits(2);
  if (!loft::SendEnvelope(*s, reg).ok()) return Fail("send register");
  auto reply =
      Await(*s, 10000, [](const loft::v1::Envelope& e) { return e.has_register_reply() || e.has_error(); });
  if (!reply || !reply->has_register_reply()) return Fail("no RegisterReply");
  const int32_t node = reply->register_reply().node();
  // 1. A poisoning report for a partition that never existed.
  {
    loft::v1::Envelope e;
    auto* f = e.mutable_partition_failed();
    f->set_partition_id((uint64_t{1} << 40) + 7);
    f->set_node(node);
    f->set_reason("refused forged samples");
    f->add_poisoned_by(peer);
    f->add_poisoned_samples(5);
    if (!loft::SendEnvelope(*s, e).ok()) return Fail("send poisoning report");
  }
  // 2. Fail every partition, naming all its samples.
  int32_t members = 1;
  auto last_hb = Clock::now() - std::chrono::seconds(1);
  auto heartbeat = [&] {
    if (Clock::now() - last_hb < std::chrono::milliseconds(200)) return;
    last_hb = Clock::now();
    loft::v1::Envelope hb;
    hb.mutable_heartbeat()->set_node(node);
    hb.mutable_heartbeat()->set_peers_ready(std::max(0, members - 1));
    (void)loft::SendEnvelope(*s, hb);
  };
  std::map<uint64_t, int> named;
  int64_t failures = 0;
  const auto end = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  while (Clock::now() < end) {
    auto env = Await(
        *s, 200, [](const loft::v1::Envelope& e) { return e.has_assignment() || e.has_view(); }, heartbeat);
    if (!env) continue;
    if (env->has_view()) {
      members = env->view().members_size();
      continue;
    }
    const auto& p = env->assignment().partition();
    loft::v1::Envelope e;
    auto* f = e.mutable_partition_failed();
    f->set_partition_id(p.id());
    f->set_attempt(p.attempt());
    f->set_node(node);
    f->set_reason("stored records failed their check");
    for (uint64_t id : p.sample_ids()) {
      f->add_bad_samples(id);
      ++named[id];
    }
    if (!loft::SendEnvelope(*s, e).ok()) return Fail("send failure");
    ++failures;
    loft::v1::Envelope cg;
    cg.mutable_credit_grant()->set_node(node);
    cg.mutable_credit_grant()->set_credits(1);
    if (!loft::SendEnvelope(*s, cg).ok()) return Fail("send credit");
  }
  int most = 0;
  for (const auto& [id, n] : named) most = std::max(most, n);
  auto st = Status(*s);
  if (!st) return Fail("no status");
  nlohmann::json out = {{"failures", failures},
                        {"samples_named", named.size()},
                        {"most_reports_of_one_sample", most},
                        {"status", *st}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

// ASCII text (valid UTF-8, as protobuf requires of a string field) with
// what a log line must not carry raw: line breaks, terminal escapes.
std::string Junk(size_t bytes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(bytes, '\0');
  for (auto& c : s) c = static_cast<char>(rng() % 2 ? '\n' : static_cast<char>(rng() % 128));
  return s;
}

// Sends `e` (dontwait), counting it in got[kind] when it left; drains replies.
void SendCounted(zmq::socket_t& s, const loft::v1::Envelope& e, const std::string& kind,
                 std::map<std::string, int64_t>& got) {
  if (loft::SendEnvelope(s, e, /*dontwait=*/true).ok()) {
    ++got[kind];
  } else {
    ++got["blocked"];
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  while (true) {
    auto r = loft::RecvMultipart(s, /*dontwait=*/true);
    if (!r.ok() || r->empty()) break;
    ++got["replies"];
  }
}

int LogFlood(const std::string& ep, const std::string& keys, const std::string& name, int32_t node,
             int32_t peers, double seconds) {
  auto own = loft::ReadCurveKeyPair(keys + "/" + name + ".key");
  auto server = loft::ReadCurvePublicKey(keys + "/scheduler.pub");
  if (!own.ok() || !server.ok()) return Fail("cannot read CURVE keys from " + keys);
  zmq::context_t ctx(1);
  loft::SocketOptions so;
  so.curve_own = *own;
  so.curve_server_public = *server;
  so.linger_ms = 2000;
  auto s = loft::MakeSocket(ctx, zmq::socket_type::dealer, so);
  if (!s.ok() || !loft::Connect(*s, ep).ok()) return Fail("cannot connect");
  std::map<std::string, int64_t> got;
  std::mt19937_64 rng(11);
  const auto end = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  for (uint64_t i = 0; Clock::now() < end; ++i) {
    loft::v1::Envelope e;
    e.set_protocol_version(loft::kProtocolVersion);
    if (i % 4 == 3) {  // not UTF-8: protobuf refuses to parse it (and complains)
      e.mutable_error()->set_code(static_cast<int>(loft::StatusCode::kInternal));
      e.mutable_error()->set_message("@@@@");
      std::string bad = e.SerializeAsString();
      bad.replace(bad.find("@@@@"), 4, "\xff\xfe\xfd\xfc");
      if (s->send(zmq::buffer(bad), zmq::send_flags::dontwait)) ++got["not_utf8"];
    } else if (i % 4 == 0) {
      e.mutable_error()->set_code(static_cast<int>(loft::StatusCode::kInternal));
      e.mutable_error()->set_message(Junk(4096, i));
      SendCounted(*s, e, "error", got);
    } else if (i % 4 == 1) {
      auto* pr = e.mutable_peer_report();
      pr->set_node(node);
      pr->set_accused((node + 1) % peers);
      pr->set_reason(Junk(256, i));
      pr->set_count(8);
      SendCounted(*s, e, "peer_report", got);
    } else {
      auto* f = e.mutable_partition_failed();
      f->set_partition_id(rng() | (uint64_t{1} << 62));  // no such partition
      f->set_node(node);
      f->set_reason(Junk(4096, i));
      f->add_poisoned_by((node + 1) % peers);
      f->add_poisoned_samples(1);
      SendCounted(*s, e, "poison_report", got);
    }
  }
  nlohmann::json j = got;
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

int ConsumerFlood(const std::string& ep, double seconds) {
  zmq::context_t ctx(1);
  loft::SocketOptions so;
  so.linger_ms = 0;
  std::map<std::string, int64_t> got;
  auto s = loft::MakeSocket(ctx, zmq::socket_type::dealer, so);
  if (!s.ok() || !loft::Connect(*s, ep).ok()) return Fail("cannot connect to " + ep);
  const std::string big_name = Junk(64 << 10, 3);
  const auto end = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  for (uint64_t i = 0; Clock::now() < end; ++i) {
    loft::v1::Envelope e;
    e.set_protocol_version(loft::kProtocolVersion);
    switch (i % 4) {
      case 0: {  // not an envelope
        const std::string junk = Junk(64, i);
        if (s->send(zmq::buffer(junk), zmq::send_flags::dontwait)) ++got["undecodable"];
        break;
      }
      case 1:  // a hello the agent refuses, with a long name full of line breaks
        e.mutable_consumer_hello()->set_client(big_name);
        e.mutable_consumer_hello()->set_consumer_protocol(999);
        SendCounted(*s, e, "refused_hello", got);
        break;
      case 2:  // a report from a connection that is not the consumer
        e.mutable_consumer_report()->set_partition_id(i);
        SendCounted(*s, e, "not_consumer", got);
        break;
      default:
        if (i % 64 == 3) {  // become the consumer and leave: connected + disconnected
          auto c = loft::MakeSocket(ctx, zmq::socket_type::dealer, so);
          if (!c.ok() || !loft::Connect(*c, ep).ok()) return Fail("cannot connect to " + ep);
          e.mutable_consumer_hello()->set_client(Junk(300, i));
          e.mutable_consumer_hello()->set_consumer_protocol(2);
          SendCounted(*c, e, "connect_disconnect", got);
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        break;
    }
    while (true) {
      auto r = loft::RecvMultipart(*s, /*dontwait=*/true);
      if (!r.ok() || r->empty()) break;
      ++got["replies"];
    }
  }
  nlohmann::json j = got;
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

int StatusRows(const std::string& ep, const std::string& keys_dir, const std::string& key, int64_t from) {
  auto own = loft::ReadCurveKeyPair(keys_dir + "/" + key + ".key");
  auto sched = loft::ReadCurvePublicKey(keys_dir + "/scheduler.pub");
  if (!own.ok() || !sched.ok()) return Fail("cannot read the keys in " + keys_dir);
  zmq::context_t ctx(1);
  loft::SocketOptions so;
  so.curve_own = *own;
  so.curve_server_public = *sched;
  auto s = loft::MakeSocket(ctx, zmq::socket_type::dealer, so);
  if (!s.ok() || !loft::Connect(*s, ep).ok()) return Fail("cannot connect");
  loft::v1::Envelope req;
  req.mutable_status_request()->set_include_rows(true);
  req.mutable_status_request()->set_rows_from(from);
  if (!loft::SendEnvelope(*s, req).ok()) return Fail("cannot send");
  auto r =
      Await(*s, 10000, [](const loft::v1::Envelope& e) { return e.has_status_reply() || e.has_error(); });
  if (!r) return Fail("no reply");
  nlohmann::json out;
  if (r->has_error()) {
    out = {{"error", static_cast<int>(r->error().code())}, {"message", r->error().message()}};
  } else {
    const auto& run = r->status_reply().run();
    out = {{"rows", run.rows_size()},
           {"rows_from", run.rows_from()},
           {"rows_kept", run.rows_kept()},
           {"bytes", r->ByteSizeLong()}};
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: it_client garbage ENDPOINT N | slow-agent ENDPOINT NODE\n");
    return 2;
  }
  std::string mode = argv[1];
  try {
    if (mode == "garbage") return Garbage(argv[2], std::stoi(argv[3]));
    if (mode == "slow-agent") return SlowAgent(argv[2], argv[3]);
    if (mode == "flood" && argc == 7)
      return Flood(argv[2], argv[3], argv[4], std::stoi(argv[5]), std::stod(argv[6]));
    if (mode == "dup-assign") return DupAssign(argv[2]);
    if (mode == "register" && argc >= 8)
      return Register(argv[2], argv[3], argv[4], argv[5], std::stoi(argv[6]), std::stoi(argv[7]));
    if (mode == "hijack" && argc >= 7) return Hijack(argv[2], argv[3], argv[4], argv[5], std::stoi(argv[6]));
    if (mode == "log-flood" && argc >= 8)
      return LogFlood(argv[2], argv[3], argv[4], std::stoi(argv[5]), std::stoi(argv[6]), std::stod(argv[7]));
    if (mode == "consumer-flood" && argc >= 4) return ConsumerFlood(argv[2], std::stod(argv[3]));
    if (mode == "status" && argc >= 6) return StatusRows(argv[2], argv[3], argv[4], std::stoll(argv[5]));
    if (mode == "accuse" && argc >= 6)
      return Accuse(argv[2], argv[3], std::stoi(argv[4]), std::stod(argv[5]));
  } catch (const std::exception& e) {
    return Fail(e.what());
  }
  return 2;
}
