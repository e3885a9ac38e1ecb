#include "edge_agent/zmq_transport.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/zmq_util.h"

namespace loft::agent {
namespace {

uint64_t LoadTag(const zmq::message_t& m) {
  uint64_t t = 0;
  const auto* b = static_cast<const unsigned char*>(m.data());
  for (int i = 7; i >= 0; --i) t = (t << 8) | b[i];
  return t;
}

}  // namespace

int RankOfRoutingId(std::string_view id) {
  const size_t slash = id.find('/');
  const std::string_view digits = id.substr(0, slash);
  if (digits.empty() || digits.size() > 9 || slash + 1 == id.size()) return -1;
  int rank = 0;
  for (char ch : digits) {
    if (ch < '0' || ch > '9') return -1;
    rank = rank * 10 + (ch - '0');
  }
  return rank;
}

StatusOr<std::unique_ptr<ZmqTransport>> ZmqTransport::Create(zmq::context_t* ctx,
                                                             ZmqTransportOptions options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return InvalidArgument("ring transport: rank " + std::to_string(options.rank) + " not in [0, " +
                           std::to_string(options.world_size) + ")");
  }
  std::unique_ptr<ZmqTransport> t(new ZmqTransport(ctx, std::move(options)));
  SocketOptions so;
  so.max_message_bytes = t->options_.max_message_bytes;
  // Messages waiting in ZeroMQ per connection before Pump reads them
  // (and checks their sender); senders queue the rest on their side.
  so.recv_hwm = 1000;
  if (t->options_.curve_own) {
    const auto ws = static_cast<size_t>(t->options_.world_size);
    if (t->options_.public_keys.size() != ws || t->options_.rank_names.size() != ws) {
      return InvalidArgument("ring transport: CURVE needs a public key and a node name per rank (" +
                             std::to_string(ws) + " ranks)");
    }
    so.curve_own = t->options_.curve_own;
    so.curve_server = true;
  }
  LOFT_ASSIGN_OR_RETURN(t->router_, MakeSocket(*ctx, zmq::socket_type::router, so));
  try {
    t->router_.set(zmq::sockopt::router_handover, 1);  // a restarted peer takes over its routing id
  } catch (const zmq::error_t& e) {
    return Internal(std::string("ring ROUTER handover: ") + e.what());
  }
  LOFT_RETURN_IF_ERROR(Bind(t->router_, t->options_.bind));
  LOFT_ASSIGN_OR_RETURN(t->endpoint_, LastEndpoint(t->router_));
  return t;
}

Status ZmqTransport::SetPeers(const std::map<int, std::string>& endpoints) {
  for (const auto& [r, ep] : endpoints) {
    if (r < 0 || r >= options_.world_size) {
      return InvalidArgument("ring transport: peer rank " + std::to_string(r) + " not in [0, " +
                             std::to_string(options_.world_size) + ")");
    }
    if (ep.empty())
      return InvalidArgument("ring transport: rank " + std::to_string(r) + " has no ring endpoint");
    auto it = peers_.find(r);
    if (it != peers_.end() && it->second.endpoint == ep) continue;
    SocketOptions so;
    so.max_message_bytes = options_.max_message_bytes;
    so.send_hwm = 100000;
    // "<rank>/<random>": unique per connection, and secret under CURVE (sent
    // encrypted in the handshake). With the bare rank as routing id, a
    // listed key claiming that id took it over (router_handover) and got
    // this rank's request answers; a restarted agent gets a fresh id.
    so.routing_id = UniqueRoutingId(std::to_string(options_.rank));
    if (options_.curve_own) {
      if (options_.public_keys[static_cast<size_t>(r)].empty())
        return Unavailable("ring transport: no CURVE public key for rank " + std::to_string(r));
      so.curve_own = options_.curve_own;
      so.curve_server_public = options_.public_keys[static_cast<size_t>(r)];
    }
    LOFT_ASSIGN_OR_RETURN(zmq::socket_t s, MakeSocket(*ctx_, zmq::socket_type::dealer, so));
    LOFT_RETURN_IF_ERROR(Connect(s, ep).WithContext("ring peer " + std::to_string(r)));
    peers_[r] = Peer{ep, std::move(s)};
  }
  return OkStatus();
}

Status ZmqTransport::Send(int to_rank, uint64_t tag, std::span<const std::byte> payload) {
  auto it = peers_.find(to_rank);
  if (it == peers_.end())
    return Unavailable("ring transport: no endpoint for rank " + std::to_string(to_rank));
  unsigned char tb[8];
  for (int i = 0; i < 8; ++i) tb[i] = static_cast<unsigned char>(tag >> (8 * i));
  options_.link.BeforeSend(static_cast<int64_t>(payload.size()));  // emulated uplink (waits)
  try {
    auto r1 = it->second.sock.send(zmq::buffer(tb, 8), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    if (!r1) return Unavailable("ring transport: send queue to rank " + std::to_string(to_rank) + " is full");
    auto r2 = it->second.sock.send(zmq::buffer(payload.data(), payload.size()), zmq::send_flags::dontwait);
    if (!r2) return Unavailable("ring transport: send queue to rank " + std::to_string(to_rank) + " is full");
  } catch (const zmq::error_t& e) {
    return Unavailable(std::string("ring transport: send to rank ") + std::to_string(to_rank) + ": " +
                       e.what());
  }
  return OkStatus();
}

Status ZmqTransport::Pump(int64_t timeout_ms) {
  zmq::pollitem_t item{router_.handle(), 0, ZMQ_POLLIN, 0};
  try {
    zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms));
    while (true) {
      zmq::message_t id, tag, body;
      if (!router_.recv(id, zmq::recv_flags::dontwait)) return OkStatus();
      std::vector<zmq::message_t> frames;
      while (router_.get(zmq::sockopt::rcvmore)) {
        zmq::message_t m;
        (void)router_.recv(m, zmq::recv_flags::none);
        if (frames.size() < 3) frames.push_back(std::move(m));  // more is malformed: not kept
      }
      // Malformed messages (not [tag][payload], or an unknown sender) are dropped.
      if (frames.size() != 2 || frames[0].size() != 8) continue;
      const int from = RankOfRoutingId(id.to_string());
      if (from < 0 || from >= options_.world_size) continue;
      if (options_.curve_own &&
          FrameProperty(frames[0], "User-Id") != options_.rank_names[static_cast<size_t>(from)]) {
        ++rejected_identity_;  // a listed key claiming another rank's routing id
        continue;
      }
      const uint64_t t = LoadTag(frames[0]);
      if (handler_ && static_cast<uint8_t>(t & 0xFF) == request_phase_) {
        if (AdmitRequest(from, t)) Answer(id, from, t, frames[1]);
        continue;
      }
      if (t < floor_ || !Admit(from, t, frames[1].size())) continue;
      Usage& u = usage_[from];
      ++u.messages;
      u.bytes += frames[1].size();
      inbox_[{from, t}].push_back(Buffered1{std::move(frames[1]), options_.link.enabled() ? NowUs() : 0});
    }
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return OkStatus();
    return Internal(std::string("ring transport: receive: ") + e.what());
  }
}

StatusOr<std::vector<std::byte>> ZmqTransport::Recv(int from_rank, uint64_t tag, int64_t timeout_ms) {
  LOFT_ASSIGN_OR_RETURN(zmq::message_t m, Take(from_rank, tag, timeout_ms));
  const auto* p = static_cast<const std::byte*>(m.data());
  return std::vector<std::byte>(p, p + m.size());
}

StatusOr<size_t> ZmqTransport::RecvInto(int from_rank, uint64_t tag, int64_t timeout_ms,
                                        std::span<std::byte> out) {
  LOFT_ASSIGN_OR_RETURN(zmq::message_t m, Take(from_rank, tag, timeout_ms));
  if (m.size() == out.size() && !out.empty()) std::memcpy(out.data(), m.data(), m.size());
  return m.size();
}

StatusOr<zmq::message_t> ZmqTransport::Take(int from_rank, uint64_t tag, int64_t timeout_ms) {
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max<int64_t>(0, timeout_ms));
  current_ = std::max(current_, tag);
  while (true) {
    auto it = inbox_.find({from_rank, tag});
    if (it != inbox_.end() && !it->second.empty()) {
      Buffered1 msg = std::move(it->second.front());
      it->second.erase(it->second.begin());
      if (it->second.empty()) inbox_.erase(it);
      Forget(from_rank, 1, msg.body.size());
      // Emulated downlink and latency (waits; nothing when emulation is off).
      options_.link.AfterReceive(from_rank, static_cast<int64_t>(msg.body.size()), msg.arrived_us);
      return std::move(msg.body);
    }
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 && timeout_ms >= 0) {
      // One last non-blocking look before giving up.
      LOFT_RETURN_IF_ERROR(Pump(0));
      auto again = inbox_.find({from_rank, tag});
      if (again != inbox_.end() && !again->second.empty()) continue;
      return DeadlineExceeded("ring transport: nothing from rank " + std::to_string(from_rank) +
                              " with tag " + std::to_string(tag) + " within " + std::to_string(timeout_ms) +
                              " ms");
    }
    if (abort_check_) LOFT_RETURN_IF_ERROR(abort_check_());
    LOFT_RETURN_IF_ERROR(Pump(std::min<int64_t>(left.count(), 50)));
  }
}

StatusOr<ZmqTransport::Taken> ZmqTransport::RecvOrLater(int from_rank, uint64_t tag, int64_t timeout_ms,
                                                        int64_t grace_ms, const LaterUsable& usable) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max<int64_t>(0, timeout_ms));
  uint64_t later = 0;  // the later tag being watched (0 = none)
  Clock::time_point later_since;
  while (true) {
    const int64_t left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    auto m = Take(from_rank, tag, std::clamp<int64_t>(left, 0, 50));
    if (m.ok()) {
      const auto* p = static_cast<const std::byte*>(m->data());
      return Taken{tag, std::vector<std::byte>(p, p + m->size())};
    }
    if (m.status().code() != StatusCode::kDeadlineExceeded) return m.status();
    if (left <= 0) {
      return DeadlineExceeded("ring transport: nothing from rank " + std::to_string(from_rank) +
                              " with tag " + std::to_string(tag) + " within " + std::to_string(timeout_ms) +
                              " ms");
    }
    // The sender's lowest buffered tag of the same view and phase, later round.
    for (auto it = inbox_.upper_bound({from_rank, tag});
         it != inbox_.end() && it->first.first == from_rank &&
         models::TagView(it->first.second) == models::TagView(tag);
         ++it) {
      if ((it->first.second & 0xFF) != (tag & 0xFF) || it->second.empty()) continue;
      const auto now = Clock::now();
      if (it->first.second != later) {
        later = it->first.second;
        later_since = now;
      }
      const zmq::message_t& body = it->second.front().body;
      const std::span<const std::byte> bytes(static_cast<const std::byte*>(body.data()), body.size());
      if (now - later_since >= std::chrono::milliseconds(grace_ms) && usable(later, bytes))
        return Taken{later, std::vector<std::byte>(bytes.begin(), bytes.end())};
      break;
    }
  }
}

void ZmqTransport::SetTagFloor(uint64_t floor) {
  if (floor <= floor_) return;
  floor_ = floor;
  current_ = std::max(current_, floor);
  for (auto it = inbox_.begin(); it != inbox_.end();) {
    if (it->first.second < floor_) {
      size_t bytes = 0;
      for (const Buffered1& m : it->second) bytes += m.body.size();
      Forget(it->first.first, it->second.size(), bytes);
      it = inbox_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace loft::agent

namespace loft::agent {

void ZmqTransport::SetRequestHandler(uint8_t phase, RequestHandler handler) {
  request_phase_ = phase;
  handler_ = std::move(handler);
}

StatusOr<std::vector<std::byte>> ZmqTransport::Request(int to_rank, uint64_t tag,
                                                       std::span<const std::byte> body, int64_t timeout_ms) {
  LOFT_RETURN_IF_ERROR(Send(to_rank, tag, body));
  current_ = std::max(current_, tag);
  zmq::socket_t& sock = peers_.at(to_rank).sock;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max<int64_t>(0, timeout_ms));
  try {
    while (true) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      if (abort_check_) LOFT_RETURN_IF_ERROR(abort_check_());
      zmq::pollitem_t items[2] = {{sock.handle(), 0, ZMQ_POLLIN, 0}, {router_.handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 2, std::chrono::milliseconds(std::min<int64_t>(left.count(), 50)));
      if (items[1].revents & ZMQ_POLLIN) LOFT_RETURN_IF_ERROR(Pump(0));  // keep serving and buffering
      if (!(items[0].revents & ZMQ_POLLIN)) continue;
      std::vector<zmq::message_t> frames;
      do {
        zmq::message_t m;
        if (!sock.recv(m, zmq::recv_flags::dontwait)) break;
        frames.push_back(std::move(m));
      } while (sock.get(zmq::sockopt::rcvmore));
      if (frames.size() != 2 || frames[0].size() != 8 || LoadTag(frames[0]) != tag) continue;  // stale answer
      const auto* p = static_cast<const std::byte*>(frames[1].data());
      if (options_.link.enabled())
        options_.link.AfterReceive(to_rank, static_cast<int64_t>(frames[1].size()), NowUs());
      return std::vector<std::byte>(p, p + frames[1].size());
    }
  } catch (const zmq::error_t& e) {
    return Unavailable(std::string("ring transport: request to rank ") + std::to_string(to_rank) + ": " +
                       e.what());
  }
  return DeadlineExceeded("ring transport: no answer from rank " + std::to_string(to_rank) + " within " +
                          std::to_string(timeout_ms) + " ms");
}

std::vector<std::pair<int, uint64_t>> ZmqTransport::Buffered() const {
  std::vector<std::pair<int, uint64_t>> out;
  for (const auto& [key, msgs] : inbox_) {
    if (!msgs.empty()) out.push_back(key);
  }
  return out;
}

std::optional<std::span<const std::byte>> ZmqTransport::Peek(int from_rank, uint64_t tag) const {
  auto it = inbox_.find({from_rank, tag});
  if (it == inbox_.end() || it->second.empty()) return std::nullopt;
  const zmq::message_t& m = it->second.front().body;
  return std::span<const std::byte>(static_cast<const std::byte*>(m.data()), m.size());
}

void ZmqTransport::Discard(int from_rank, uint64_t tag) {
  auto it = inbox_.find({from_rank, tag});
  if (it == inbox_.end()) return;
  size_t bytes = 0;
  for (const Buffered1& m : it->second) bytes += m.body.size();
  Forget(from_rank, it->second.size(), bytes);
  inbox_.erase(it);
}

size_t ZmqTransport::buffered_from(int rank) const {
  auto it = usage_.find(rank);
  return it == usage_.end() ? 0 : it->second.messages;
}

void ZmqTransport::Forget(int from, size_t count, size_t bytes) {
  auto it = usage_.find(from);
  if (it == usage_.end()) return;
  it->second.messages -= std::min(count, it->second.messages);
  it->second.bytes -= std::min(bytes, it->second.bytes);
  if (it->second.messages == 0) usage_.erase(it);
}

bool ZmqTransport::Admit(int from, uint64_t tag, size_t bytes) {
  using models::TagRound;
  using models::TagView;
  if (sender_check_ && !sender_check_(from, TagView(tag), /*request=*/false)) {
    ++stats_.refused_sender;
    return false;
  }
  if (current_ != 0 && (uint64_t{TagView(tag)} > uint64_t{TagView(current_)} + options_.view_window ||
                        (options_.round_window > 0 &&
                         uint64_t{TagRound(tag)} > uint64_t{TagRound(current_)} + options_.round_window))) {
    ++stats_.out_of_window;
    return false;
  }
  auto it = usage_.find(from);
  const Usage u = it == usage_.end() ? Usage{} : it->second;
  if (u.messages >= options_.max_buffered_per_sender ||
      u.bytes + bytes > options_.max_buffered_bytes_per_sender) {
    ++stats_.over_quota;
    return false;
  }
  return true;
}

bool ZmqTransport::AdmitRequest(int from, uint64_t tag) {
  if (sender_check_ && !sender_check_(from, models::TagView(tag), /*request=*/true)) {
    ++stats_.refused_sender;
    return false;
  }
  const auto now = std::chrono::steady_clock::now();
  const double burst = std::max(1, options_.request_burst);
  auto [it, fresh] = request_buckets_.try_emplace(from, Bucket{burst, now});
  Bucket& b = it->second;
  if (!fresh && options_.request_interval_ms > 0) {
    const double ms = std::chrono::duration<double, std::milli>(now - b.last).count();
    b.tokens = std::min(burst, b.tokens + ms / static_cast<double>(options_.request_interval_ms));
  }
  b.last = now;
  if (b.tokens < 1.0) {
    ++stats_.requests_limited;
    return false;
  }
  b.tokens -= 1.0;
  return true;
}

void ZmqTransport::Answer(const zmq::message_t& id, int from, uint64_t tag, const zmq::message_t& body) {
  std::vector<std::byte> answer = handler_(
      from, tag, std::span<const std::byte>(static_cast<const std::byte*>(body.data()), body.size()));
  unsigned char tb[8];
  for (int i = 0; i < 8; ++i) tb[i] = static_cast<unsigned char>(tag >> (8 * i));
  options_.link.BeforeSend(static_cast<int64_t>(answer.size()));  // emulated uplink (waits)
  auto r1 =
      router_.send(zmq::buffer(id.data(), id.size()), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
  if (r1) r1 = router_.send(zmq::buffer(tb, 8), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
  if (r1) (void)router_.send(zmq::buffer(answer.data(), answer.size()), zmq::send_flags::dontwait);
}

}  // namespace loft::agent
