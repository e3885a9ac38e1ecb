#include "edge_agent/peer_fetcher.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "core/zmq_util.h"

namespace loft::agent {

void PeerFetcher::Warm(const v1::MembershipView& view, int32_t self) {
  for (const v1::Member& m : view.members()) {
    if (m.node() == self || m.peer_endpoint().empty()) continue;
    PeerInfo p;
    p.node = m.node();
    p.name = m.name();
    p.endpoint = m.peer_endpoint();
    std::lock_guard lock(conns_mu_);
    if (conns_.count(m.node()) != 0) continue;  // never replaces one (FetchAll may be using it)
    if (auto s = SocketForLocked(p); !s.ok()) {
      spdlog::warn("peer fetch: cannot connect to node {} ahead of its first fetch: {}", m.node(),
                   s.status().ToString());
    }
  }
}

size_t PeerFetcher::connections() const {
  std::lock_guard lock(conns_mu_);
  return conns_.size();
}

StatusOr<zmq::socket_t*> PeerFetcher::SocketFor(const PeerInfo& peer) {
  std::lock_guard lock(conns_mu_);
  return SocketForLocked(peer);
}

StatusOr<zmq::socket_t*> PeerFetcher::SocketForLocked(const PeerInfo& peer) {
  auto it = conns_.find(peer.node);
  if (it != conns_.end() && it->second.endpoint == peer.endpoint) return &it->second.socket;
  if (peer.endpoint.empty())
    return Unavailable(fmt::format("node {} has no peer endpoint in the view", peer.node));
  SocketOptions so;
  // See PeerFetcherOptions: bounded per peer (never 0 = unlimited).
  so.max_message_bytes = std::min(options_.max_message_bytes, options_.max_frame_bytes);
  so.send_timeout_ms = options_.timeout_ms;
  so.recv_hwm = std::max(1, options_.recv_hwm);
  so.tos = options_.request_tos;
  if (options_.own_keys) {
    so.curve_own = options_.own_keys;
    auto key = ReadCurvePublicKey((std::filesystem::path(options_.keys_dir) / (peer.name + ".pub")).string());
    if (!key.ok())
      return key.status().WithContext(fmt::format("server key of node {} ('{}')", peer.node, peer.name));
    so.curve_server_public = *key;
  }
  LOFT_ASSIGN_OR_RETURN(zmq::socket_t s, MakeSocket(*ctx_, zmq::socket_type::dealer, so));
  // The monitor before the connect, and its reader connected before any
  // event: an event with no PAIR peer yet is dropped.
  zmq::socket_t mon;
  const std::string mon_ep = fmt::format("inproc://loft-peer-monitor-{}-{}-{}",
                                         static_cast<const void*>(this), next_monitor_++, peer.node);
  if (zmq_socket_monitor(s.handle(), mon_ep.c_str(), ZMQ_EVENT_HANDSHAKE_SUCCEEDED) == 0) {
    try {
      mon = zmq::socket_t(*ctx_, zmq::socket_type::pair);
      mon.connect(mon_ep);
    } catch (const zmq::error_t& e) {
      spdlog::warn("peer fetch: no handshake monitor for node {}: {}", peer.node, e.what());
      mon = zmq::socket_t();
    }
  }
  LOFT_RETURN_IF_ERROR(Connect(s, peer.endpoint));
  conns_[peer.node] = Conn{peer.endpoint, std::move(s), std::move(mon), false};
  return &conns_[peer.node].socket;
}

int PeerFetcher::HandshakenAmong(const std::vector<int32_t>& nodes) {
  std::lock_guard lock(conns_mu_);
  int ready = 0;
  for (int32_t node : nodes) {
    auto it = conns_.find(node);
    if (it == conns_.end()) continue;
    Conn& c = it->second;
    while (!c.handshaken && c.monitor.handle() != nullptr) {
      // An event: [uint16 event, uint32 value] then the endpoint.
      zmq::message_t ev, addr;
      auto got = c.monitor.recv(ev, zmq::recv_flags::dontwait);
      if (!got) break;
      if (ev.more()) (void)c.monitor.recv(addr, zmq::recv_flags::dontwait);
      uint16_t id = 0;
      if (ev.size() >= sizeof(id)) std::memcpy(&id, ev.data(), sizeof(id));
      if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) c.handshaken = true;
    }
    ready += c.handshaken ? 1 : 0;
  }
  return ready;
}

// One FetchAll: its requests not answered yet and what each peer returned.
struct PeerFetcher::Fetch {
  struct Pending {
    int32_t peer;
    size_t offset;  // index of the first id in the peer's group
    std::vector<uint64_t> ids;
    int64_t resend_at_us = -1;  // >= 0: waiting to resend after "no grant yet"
  };
  uint64_t partition_id = 0;
  int32_t requester = 0;
  std::vector<int32_t> decoded_peers;  // their requests say decoded
  int64_t epoch = 0;
  Clock* clock = nullptr;
  int64_t t0 = 0;
  std::map<int32_t, PeerFetchResult> out;
  std::map<uint64_t, Pending> pending;
  std::map<int32_t, zmq::socket_t*> sockets;
  std::map<int32_t, std::string> endpoints;  // as looked up when the fetch started
  std::map<int32_t, int> open_chunks;

  // Sends request `rid` (pd's ids) to its peer.
  Status Send(uint64_t rid, Pending& pd) {
    v1::Envelope env;
    auto* r = env.mutable_fetch_request();
    r->set_request_id(rid);
    r->set_partition_id(partition_id);
    r->set_requester(requester);
    for (uint64_t id : pd.ids) r->add_sample_ids(id);
    if (std::find(decoded_peers.begin(), decoded_peers.end(), pd.peer) != decoded_peers.end()) {
      r->set_decoded(true);
      r->set_epoch(epoch);
    }
    pd.resend_at_us = -1;
    return SendEnvelope(*sockets[pd.peer], env);
  }
  // `peer` failed with `st`: its requests are dropped.
  void Fail(int32_t peer, const Status& st) {
    out[peer].status = st;
    out[peer].ms = static_cast<double>(clock->NowMicros() - t0) / 1000.0;
    std::erase_if(pending, [&](const auto& kv) { return kv.second.peer == peer; });
    open_chunks[peer] = 0;
  }
};

void PeerFetcher::StartRequests(Fetch& f, const std::map<int32_t, std::vector<uint64_t>>& ids_by_peer) {
  for (const auto& [peer, ids] : ids_by_peer) {
    PeerFetchResult& res = f.out[peer];
    res.records.resize(ids.size());
    auto info = lookup_(peer);
    if (!info) {
      f.Fail(peer, Unavailable(fmt::format("node {} is not in the current view", peer)));
      continue;
    }
    auto sock = SocketFor(*info);
    if (!sock.ok()) {
      f.Fail(peer, sock.status());
      continue;
    }
    f.sockets[peer] = *sock;
    f.endpoints[peer] = info->endpoint;
    for (size_t off = 0; off < ids.size(); off += static_cast<size_t>(options_.fetch_batch)) {
      size_t end = std::min(ids.size(), off + static_cast<size_t>(options_.fetch_batch));
      uint64_t rid = next_request_id_++;
      f.pending[rid] = Fetch::Pending{peer, off, std::vector<uint64_t>(ids.begin() + off, ids.begin() + end)};
      ++f.open_chunks[peer];
    }
  }
  std::vector<uint64_t> rids;
  for (const auto& kv : f.pending) rids.push_back(kv.first);
  for (uint64_t rid : rids) {
    auto it = f.pending.find(rid);
    if (it == f.pending.end()) continue;  // its peer failed already
    Status st = f.Send(rid, it->second);
    if (!st.ok()) f.Fail(it->second.peer, st);
  }
}

void PeerFetcher::FailPeersOutOfView(Fetch& f) {
  // A peer the current view drops (or gives a new endpoint: it restarted
  // and lost nothing we asked for) will never answer: fail it now rather
  // than at the deadline.
  for (const auto& [peer, s] : f.sockets) {
    if (f.open_chunks[peer] == 0) continue;
    auto info = lookup_(peer);
    if (!info) {
      f.Fail(peer, Unavailable(fmt::format("node {} left the view while serving this partition", peer)));
    } else if (auto e = f.endpoints.find(peer); e != f.endpoints.end() && info->endpoint != e->second) {
      f.Fail(peer, Unavailable(fmt::format("node {} restarted while serving this partition", peer)));
    }
  }
}

void PeerFetcher::ReadReplies(Fetch& f, int32_t peer) {
  while (f.open_chunks[peer] > 0) {
    auto frames = RecvMultipart(*f.sockets[peer], /*dontwait=*/true, 4097);
    if (!frames.ok()) {
      f.Fail(peer, frames.status());
      break;
    }
    if (frames->empty()) break;
    auto env = Decode(std::string_view(static_cast<const char*>((*frames)[0].data()), (*frames)[0].size()),
                      options_.max_message_bytes);
    if (!env.ok()) {
      f.Fail(peer, env.status().WithContext(fmt::format("reply from peer {}", peer)));
      break;
    }
    uint64_t rid = env->has_fetch_reply() ? env->fetch_reply().request_id()
                   : env->has_error()     ? env->error().request_id()
                                          : 0;
    auto it = f.pending.find(rid);
    if (it == f.pending.end() || it->second.peer != peer) continue;  // stale reply of an older partition
    Fetch::Pending& pd = it->second;
    if (env->has_error()) {
      Status st = StatusFromError(env->error());
      if (st.code() == StatusCode::kUnavailable) {
        pd.resend_at_us = clock_->NowMicros() + options_.retry_backoff_ms * 1000;
        continue;
      }
      if (st.code() == StatusCode::kDataLoss) {
        // The peer names the ids whose stored record failed its check;
        // keep only ids this request asked for (a peer cannot get others
        // quarantined).
        std::vector<uint64_t>& bad = f.out[peer].bad_samples;
        for (uint64_t id : env->error().bad_samples())
          if (std::find(pd.ids.begin(), pd.ids.end(), id) != pd.ids.end() &&
              std::find(bad.begin(), bad.end(), id) == bad.end())
            bad.push_back(id);
      }
      f.Fail(peer, st.WithContext(fmt::format("peer {}", peer)));
      break;
    }
    if (!env->has_fetch_reply() || env->fetch_reply().count() != static_cast<int32_t>(pd.ids.size()) ||
        frames->size() != pd.ids.size() + 1) {
      f.Fail(peer, DataLoss(fmt::format("peer {} sent a malformed fetch reply ({} frames for {} ids)", peer,
                                        frames->size(), pd.ids.size())));
      break;
    }
    PeerFetchResult& res = f.out[peer];
    int64_t bytes = 0;
    for (size_t i = 0; i < pd.ids.size(); ++i) {
      auto& fr = (*frames)[i + 1];
      res.records[pd.offset + i].assign(static_cast<const char*>(fr.data()), fr.size());
      bytes += static_cast<int64_t>(fr.size());
    }
    res.bytes += bytes;
    if (options_.down) options_.down->Acquire(bytes);
    f.pending.erase(it);
    if (--f.open_chunks[peer] == 0) res.ms = static_cast<double>(clock_->NowMicros() - f.t0) / 1000.0;
  }
}

std::map<int32_t, PeerFetchResult> PeerFetcher::FetchAll(
    uint64_t partition_id, int32_t requester, const std::map<int32_t, std::vector<uint64_t>>& ids_by_peer) {
  return FetchAllDecoded(partition_id, requester, ids_by_peer, {}, 0);
}

std::map<int32_t, PeerFetchResult> PeerFetcher::FetchAllDecoded(
    uint64_t partition_id, int32_t requester, const std::map<int32_t, std::vector<uint64_t>>& ids_by_peer,
    const std::vector<int32_t>& decoded_peers, int64_t epoch) {
  Fetch f;
  f.partition_id = partition_id;
  f.requester = requester;
  f.decoded_peers = decoded_peers;
  f.epoch = epoch;
  f.clock = clock_;
  f.t0 = clock_->NowMicros();
  int64_t deadline = f.t0 + int64_t{options_.timeout_ms} * 1000;
  if (options_.latency_ms > 0) latency_.Sleep(static_cast<int64_t>(options_.latency_ms * 1000));
  StartRequests(f, ids_by_peer);

  while (!f.pending.empty()) {
    int64_t now = clock_->NowMicros();
    if (now >= deadline) {
      std::vector<int32_t> late;
      for (const auto& kv : f.pending) late.push_back(kv.second.peer);
      for (int32_t peer : late) {
        if (f.open_chunks[peer] > 0)
          f.Fail(peer, DeadlineExceeded(
                           fmt::format("peer {} did not answer within {} ms", peer, options_.timeout_ms)));
      }
      break;
    }
    FailPeersOutOfView(f);
    if (f.pending.empty()) break;
    for (auto& [rid, pd] : f.pending) {
      if (pd.resend_at_us >= 0 && now >= pd.resend_at_us) {
        Status st = f.Send(rid, pd);
        if (!st.ok()) pd.resend_at_us = now + options_.retry_backoff_ms * 1000;
      }
    }
    std::vector<zmq::pollitem_t> items;
    std::vector<int32_t> item_peer;
    for (const auto& [peer, s] : f.sockets) {
      if (f.open_chunks[peer] == 0) continue;
      items.push_back({s->handle(), 0, ZMQ_POLLIN, 0});
      item_peer.push_back(peer);
    }
    if (items.empty()) break;
    // Sleep until a reply arrives, the next resend, the next view check
    // or the deadline, whichever is first.
    int64_t wait_us = std::min<int64_t>(deadline - now, int64_t{options_.view_check_ms} * 1000);
    for (const auto& [rid, pd] : f.pending)
      if (pd.resend_at_us >= 0) wait_us = std::min(wait_us, pd.resend_at_us - now);
    const int64_t wait_ms = std::max<int64_t>(1, (wait_us + 999) / 1000);
    try {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(wait_ms));
    } catch (const zmq::error_t& e) {
      for (int32_t p : item_peer) f.Fail(p, ZmqError(e, "poll"));
      break;
    }
    for (size_t k = 0; k < items.size(); ++k) {
      if (!(items[k].revents & ZMQ_POLLIN)) continue;
      ReadReplies(f, item_peer[k]);
    }
  }
  return std::move(f.out);
}

}  // namespace loft::agent
