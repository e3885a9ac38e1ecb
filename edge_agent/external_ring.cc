#include "edge_agent/external_ring.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "edge_agent/model_trainer.h"
#include "edge_agent/ring_bytes.h"
#include "edge_agent/round_retry.h"
#include "models/ring_allreduce.h"
#include "models/transport.h"

namespace loft::agent {
namespace {

constexpr uint8_t kWeightsPhase = 0xFE;  // [f64 b][i64 state_round][u64 hash][u64 partition][u64 d]
constexpr uint8_t kStatePhase = 0xFD;    // request: [] ; answer: [i64 round][u64 hash][blob]
constexpr size_t kExchangeBytes = 5 * 8;

std::string Hex(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace

uint64_t StateHash(std::span<const std::byte> blob) {
  if (blob.empty()) return 0;
  uint64_t h = 1469598103934665603ull;
  for (std::byte b : blob) {
    h ^= static_cast<uint64_t>(b);
    h *= 1099511628211ull;
  }
  return h == 0 ? 1 : h;
}

ExternalRing::~ExternalRing() = default;

StatusOr<std::unique_ptr<ExternalRing>> ExternalRing::Create(const ClusterSpec& spec,
                                                             ExternalRingOptions options) {
  if (options.node < 0 || options.node >= spec.num_nodes())
    return InvalidArgument("external ring: node " + std::to_string(options.node) + " is not in the spec");
  if (options.context == nullptr) return InvalidArgument("external ring: no ZeroMQ context");
  std::unique_ptr<ExternalRing> r(new ExternalRing());
  r->options_ = options;
  r->views_ = std::make_unique<ViewBook>(ViewBookOptions{options.node, options.view_wait_ms, options.stop});
  auto red = ReducerFor(spec.training.aggregation);
  if (!red.ok()) return red.status().WithContext("training.aggregation");
  r->reducer_ = *red;
  LOFT_ASSIGN_OR_RETURN(
      r->transport_, ZmqTransport::Create(options.context, RingTransportOptions(options, spec.num_nodes())));
  ExternalRing* self = r.get();
  r->transport_->SetRequestHandler(
      kStatePhase, [self](int, uint64_t, std::span<const std::byte>) { return self->ServeState(); });
  spdlog::info("training external (the consumer's model), aggregation {}; ring endpoint {} ({})",
               spec.training.aggregation, r->ring_endpoint(), options.curve_own ? "CURVE" : "plain TCP");
  return r;
}

void ExternalRing::OnView(const v1::MembershipView& view) {
  views_->OnView(view);
}

StatusOr<ExternalRing::Members> ExternalRing::ViewMembers(int64_t v) {
  LOFT_ASSIGN_OR_RETURN(Members m, views_->Members(v));
  LOFT_RETURN_IF_ERROR(transport_->SetPeers(m.endpoints));
  return m;
}

std::vector<std::byte> ExternalRing::ServeState() {
  std::vector<std::byte> out;
  AppendLe(&out, blob_round_);
  AppendLe(&out, blob_hash_);
  const auto* p = reinterpret_cast<const std::byte*>(blob_.data());
  out.insert(out.end(), p, p + blob_.size());
  return out;
}

void ExternalRing::PublishState(std::string blob) {
  blob_hash_ = StateHash(std::as_bytes(std::span(blob.data(), blob.size())));
  blob_round_ = consumer_round_;
  blob_ = std::move(blob);
}

void ExternalRing::ResetConsumer() {
  consumer_round_ = -1;
  carry_.clear();
  carry_b_ = 0;
}

void ExternalRing::Serve() {
  Status st = transport_->Poll(0);
  if (!st.ok()) spdlog::warn("ring poll: {}", st.ToString());
}

StatusOr<std::string> ExternalRing::FetchFrom(const Members& m, uint32_t round, int64_t want_round,
                                              uint64_t want_hash, const std::vector<int>& holders) {
  const uint64_t tag = models::MakeTag(m.view, round, kStatePhase);
  Status last = Unavailable("no member holds the state");
  for (int h : holders) {
    auto ans = transport_->Request(h, tag, {}, options_.state_timeout_ms);
    if (!ans.ok()) {
      last = ans.status().WithContext("state from node " + std::to_string(h));
      continue;
    }
    if (ans->size() < 16) {
      last = DataLoss("state from node " + std::to_string(h) + ": " + std::to_string(ans->size()) + " bytes");
      continue;
    }
    const auto r = LoadLe<int64_t>(*ans, 0);
    const auto hash = LoadLe<uint64_t>(*ans, 8);
    std::span<const std::byte> blob(ans->data() + 16, ans->size() - 16);
    if (r != want_round || hash != want_hash || StateHash(blob) != want_hash) {
      last = FailedPrecondition("node " + std::to_string(h) + " holds round " + std::to_string(r) + " hash " +
                                Hex(StateHash(blob)) + ", not the agreed round " +
                                std::to_string(want_round) + " hash " + Hex(want_hash));
      continue;
    }
    return std::string(reinterpret_cast<const char*>(blob.data()), blob.size());
  }
  return last;
}

StatusOr<ExternalRing::State> ExternalRing::FetchState() {
  const int64_t latest = views_->Latest();
  if (latest < 0) return Unavailable("no membership view yet: the agent has not joined the job");
  LOFT_ASSIGN_OR_RETURN(Members m, ViewMembers(latest));
  std::vector<int64_t> rounds;
  std::vector<uint64_t> hashes;
  std::vector<int> who;
  std::map<int, std::vector<std::byte>> answers;
  for (int n : m.nodes) {
    std::vector<std::byte> a = n == options_.node ? ServeState() : std::vector<std::byte>{};
    if (n != options_.node) {
      auto ans =
          transport_->Request(n, models::MakeTag(m.view, 0, kStatePhase), {}, options_.state_timeout_ms);
      if (!ans.ok()) {
        spdlog::warn("state sync: node {}: {}", n, ans.status().ToString());
        continue;
      }
      a = std::move(*ans);
    }
    if (a.size() < 16) continue;
    rounds.push_back(LoadLe<int64_t>(a, 0));
    hashes.push_back(LoadLe<uint64_t>(a, 8));
    who.push_back(n);
    answers[n] = std::move(a);
  }
  auto [round, hash] = AgreedState(rounds, hashes);
  State s;
  if (round < 0) return s;  // nobody has progress: keep the consumer's own state
  if (hash == 0)
    return FailedPrecondition("the ring majority holds round " + std::to_string(round) +
                              " but has published no state (consumers must publish it: "
                              "loft_consumer_put_state / allreduce_gradients(..., optimizer))");
  for (size_t i = 0; i < who.size(); ++i) {
    if (rounds[i] != round || hashes[i] != hash) continue;
    const auto& a = answers[who[i]];
    std::span<const std::byte> blob(a.data() + 16, a.size() - 16);
    if (StateHash(blob) != hash) continue;
    s.round = round;
    s.hash = hash;
    s.blob.assign(reinterpret_cast<const char*>(blob.data()), blob.size());
    consumer_round_ = round;
    blob_round_ = round;
    blob_hash_ = hash;
    blob_ = s.blob;
    spdlog::info("state sync: took round {} (hash {}, {} bytes) from node {}", round, Hex(hash),
                 s.blob.size(), who[i]);
    return s;
  }
  return DataLoss("state sync: no answer for round " + std::to_string(round) + " matches its hash");
}

// Round's inputs and what its successful attempt found, shared by its phases.
struct ExternalRing::RoundState {
  uint32_t round = 0;
  size_t n = 0;
  uint64_t partition = 0;
  std::span<const float> grad;
  bool consumer = false;
  uint64_t d_mine = 0;
  double b = 0;
  int64_t my_round = -2;
  uint64_t my_hash = 0;
  Outcome out;
  std::vector<float> data;
  std::pair<int64_t, uint64_t> target{-1, 0};
  bool stale = false, bad_len = false;
  uint64_t D = 0;
  int ring_members = 0;  // of the attempt that succeeded (members past the round left out)
  Status data_loss;      // an attempt that ended the round with nothing applied
  int data_loss_members = 0;
};

// One attempt's exchange, one entry per member of the view (in m.nodes order).
struct ExternalRing::Exchange {
  std::vector<double> bs;
  std::vector<int64_t> rounds;
  std::vector<uint64_t> hashes, parts, ds;
  std::vector<int> past;  // members whose later round's exchange came instead: past this round
};

ExternalRing::Outcome ExternalRing::CarryLate(uint32_t round, size_t n, uint64_t partition,
                                              std::span<const float> grad) {
  Outcome out;
  // A second partition of a done round: its samples join the next round.
  if (n > 0) {
    if (!carry_.empty() && carry_.size() != grad.size()) {
      out.message = "gradient has " + std::to_string(grad.size()) + " floats, the carried one " +
                    std::to_string(carry_.size());
      return out;
    }
    if (carry_.empty()) carry_.assign(grad.size(), 0.0f);
    for (size_t j = 0; j < grad.size(); ++j) carry_[j] += static_cast<float>(n) * grad[j];
    carry_b_ += static_cast<double>(n);
  }
  out.kind = Kind::kCarried;
  spdlog::info("partition {} of round {} arrived after the round: its {} samples go into the next round",
               partition, round, n);
  return out;
}

StatusOr<ExternalRing::Exchange> ExternalRing::ExchangeWith(const Members& m, const RoundState& rs) {
  const uint32_t round = rs.round;
  const double b = rs.b;
  const uint64_t tag = models::MakeTag(m.view, round, kWeightsPhase);
  std::vector<std::byte> buf;
  AppendLe(&buf, b);
  AppendLe(&buf, rs.my_round);
  AppendLe(&buf, rs.my_hash);
  AppendLe(&buf, rs.n > 0 ? rs.partition : uint64_t{0});
  AppendLe(&buf, rs.d_mine);
  for (int node : m.nodes) {
    if (node != options_.node) LOFT_RETURN_IF_ERROR(transport_->Send(node, tag, buf));
  }
  Exchange ex;
  for (int node : m.nodes) {
    if (node == options_.node) {
      ex.bs.push_back(b);
      ex.rounds.push_back(rs.my_round);
      ex.hashes.push_back(rs.my_hash);
      ex.parts.push_back(rs.n > 0 ? rs.partition : 0);
      ex.ds.push_back(rs.d_mine);
      continue;
    }
    LOFT_ASSIGN_OR_RETURN(
        auto got, transport_->RecvOrLater(node, tag, options_.ring_timeout_ms, options_.past_grace_ms,
                                          [round](uint64_t, std::span<const std::byte> b) {
                                            // Only a member that skipped this round: one
                                            // holding it is waited for as before.
                                            return b.size() == kExchangeBytes &&
                                                   LoadLe<int64_t>(b, 8) < static_cast<int64_t>(round);
                                          }));
    const std::vector<std::byte>& bytes = got.body;
    if (got.tag != tag) {
      // It skipped this round and waits in a later one: its state
      // votes, it gets no weight and no place in the all-reduce.
      ex.past.push_back(node);
      ex.bs.push_back(0);
      ex.rounds.push_back(LoadLe<int64_t>(bytes, 8));
      ex.hashes.push_back(LoadLe<uint64_t>(bytes, 16));
      ex.parts.push_back(0);
      ex.ds.push_back(0);
      spdlog::info(
          "round {}: node {} is past it (its exchange of round {} came instead): it takes no part "
          "in this round's all-reduce",
          round, node, models::TagRound(got.tag));
      continue;
    }
    if (bytes.size() != kExchangeBytes) {  // malformed: no weight, a state nobody holds
      ex.bs.push_back(0);
      ex.rounds.push_back(std::numeric_limits<int64_t>::min());
      ex.hashes.push_back(0);
      ex.parts.push_back(0);
      ex.ds.push_back(0);
      continue;
    }
    double x = LoadLe<double>(bytes, 0);
    ex.bs.push_back(std::isfinite(x) && x >= 0 ? x : 0);
    ex.rounds.push_back(LoadLe<int64_t>(bytes, 8));
    ex.hashes.push_back(LoadLe<uint64_t>(bytes, 16));
    ex.parts.push_back(LoadLe<uint64_t>(bytes, 24));
    ex.ds.push_back(LoadLe<uint64_t>(bytes, 32));
  }
  return ex;
}

void ExternalRing::FetchMajorityState(const Members& m, const Exchange& ex, RoundState& rs) {
  const auto& target = rs.target;
  std::vector<int> holders;
  for (size_t i = 0; i < m.nodes.size(); ++i) {
    if (m.nodes[i] != options_.node && std::pair{ex.rounds[i], ex.hashes[i]} == target)
      holders.push_back(m.nodes[i]);
  }
  if (target.second != 0) {
    auto blob = FetchFrom(m, rs.round, target.first, target.second, holders);
    if (blob.ok()) {
      rs.out.state = std::move(*blob);
      rs.out.state_round = target.first;
    } else {
      spdlog::warn("round {}: cannot fetch the majority's state: {}", rs.round, blob.status().ToString());
    }
  }
}

Status ExternalRing::AllReduce(const Members& m, const Exchange& ex, const std::vector<double>& w,
                               int present, bool mine_in, RoundState& rs) {
  models::AllReduceOptions ao;
  ao.reducer = reducer_;
  if (ao.reducer.kind == models::ReducerKind::kTrimmedMean) {
    int k = std::max(1, static_cast<int>(std::floor(0.2 * present)));
    while (k > 0 && present <= 2 * k) --k;
    ao.reducer.trim_count = k;
  }
  if (ao.reducer.kind == models::ReducerKind::kMultiKrum && present < ao.reducer.krum_f + 3)
    ao.reducer.krum_f = 0;
  ao.timeout_ms = options_.ring_timeout_ms;
  models::RingAllReduce ring(transport_.get(), ao);
  std::vector<int> ring_nodes;
  std::vector<double> ring_w;
  for (size_t i = 0; i < m.nodes.size(); ++i) {
    if (std::find(ex.past.begin(), ex.past.end(), m.nodes[i]) != ex.past.end()) continue;
    ring_nodes.push_back(m.nodes[i]);
    ring_w.push_back(w[i]);
  }
  LOFT_RETURN_IF_ERROR(ring.Run(models::RingView{m.view, ring_nodes}, rs.round, rs.data, ring_w));
  rs.ring_members = static_cast<int>(ring_nodes.size());
  Outcome& out = rs.out;
  out.applied.clear();
  out.included = mine_in;
  for (size_t i = 0; i < m.nodes.size(); ++i) {
    if (w[i] > 0 && ex.parts[i] != 0) out.applied.emplace_back(ex.parts[i], m.nodes[i]);
  }
  std::sort(out.applied.begin(), out.applied.end());
  return OkStatus();
}

Status ExternalRing::Attempt(const Members& m, RoundState& rs) {
  LOFT_ASSIGN_OR_RETURN(Exchange ex, ExchangeWith(m, rs));
  const uint32_t round = rs.round;
  const size_t n = rs.n;
  const double b = rs.b;
  const std::vector<double>& bs = ex.bs;
  const std::vector<uint64_t>& ds = ex.ds;
  // The state most members' consumers hold, and the gradient length most members with samples sent.
  rs.target = AgreedState(ex.rounds, ex.hashes);
  std::map<uint64_t, int> dcount;
  for (size_t i = 0; i < m.nodes.size(); ++i) {
    if (bs[i] > 0 && ds[i] > 0) ++dcount[ds[i]];
  }
  uint64_t& D = rs.D;
  D = 0;
  int best = 0;
  for (const auto& [d, c] : dcount) {
    if (c > best) {
      best = c;
      D = d;
    }
  }
  std::vector<double> eff(m.nodes.size(), 0.0);
  for (size_t i = 0; i < m.nodes.size(); ++i) {
    const bool in_step = ex.rounds[i] == rs.target.first && ex.hashes[i] == rs.target.second;
    if (bs[i] > 0 && in_step && ds[i] == D) eff[i] = bs[i];
  }
  rs.stale = rs.consumer && std::pair{rs.my_round, rs.my_hash} != rs.target;
  rs.bad_len = b > 0 && rs.d_mine != D;
  if (D == 0) return DataLoss("round " + std::to_string(round) + ": no member has samples");
  std::vector<double> w = models::AggregationWeights(reducer_.kind, eff);
  const int present = static_cast<int>(std::count_if(w.begin(), w.end(), [](double x) { return x > 0; }));
  if (present == 0)
    return DataLoss("round " + std::to_string(round) + ": no member with samples holds the agreed state");
  rs.data.assign(D, 0.0f);
  const bool mine_in = b > 0 && !rs.stale && !rs.bad_len;
  if (mine_in) {
    for (size_t j = 0; j < D; ++j) {
      const double sum =
          (n > 0 ? static_cast<double>(n) * rs.grad[j] : 0.0) + (carry_b_ > 0 ? carry_[j] : 0.0);
      rs.data[j] = static_cast<float>(sum / b);
    }
  }
  // Fetch the majority's state now, while its holders are in this round.
  if (rs.stale && rs.consumer) FetchMajorityState(m, ex, rs);
  return AllReduce(m, ex, w, present, mine_in, rs);
}

ExternalRing::Outcome ExternalRing::Conclude(RoundState& rs) {
  Outcome& out = rs.out;
  const uint32_t round = rs.round;
  const auto& target = rs.target;
  if (out.included || rs.stale) {
    carry_.clear();
    carry_b_ = 0;
  }
  if (rs.stale) {
    if (out.state.empty()) {
      out.kind = Kind::kError;
      out.message = "this trainer's state (round " + std::to_string(rs.my_round) + ", hash " +
                    Hex(rs.my_hash) + ") is not the ring majority's (round " + std::to_string(target.first) +
                    ", hash " + Hex(target.second) +
                    ") and no member served that state: call loft_consumer_sync_state";
      return std::move(out);
    }
    out.kind = Kind::kStale;
    out.message = "this trainer's state (round " + std::to_string(rs.my_round) + ", hash " + Hex(rs.my_hash) +
                  ") is not the ring majority's (round " + std::to_string(target.first) + ", hash " +
                  Hex(target.second) + "): load the majority's state, then apply the aggregate";
    out.aggregate = std::move(rs.data);
    consumer_round_ = round;
    return std::move(out);
  }
  if (rs.bad_len) {
    out.kind = Kind::kError;
    out.message = "gradient has " + std::to_string(rs.d_mine) +
                  " floats, the ring's members with samples have " + std::to_string(rs.D) +
                  " (a different model?)";
    return std::move(
        out);  // the consumer applies nothing: it is behind from now on and will be brought in step
  }
  const bool finite = std::all_of(rs.data.begin(), rs.data.end(), [](float x) { return std::isfinite(x); });
  if (!finite) {
    // Nobody applies it: the parameters (and a blob of them) stay as they are, one round on.
    if (blob_round_ == consumer_round_) blob_round_ = round;
    consumer_round_ = round;
    out.kind = Kind::kError;
    out.message = "the aggregate of round " + std::to_string(round) + " is not finite (aggregation " +
                  std::string(models::ReducerKindName(reducer_.kind)) +
                  " passes a member's NaN/Inf on): not applied by any member";
    return std::move(out);
  }
  consumer_round_ = round;  // the published blob keeps its (older) round
  out.kind = Kind::kApplied;
  out.aggregate = std::move(rs.data);
  return std::move(out);
}

StatusOr<ExternalRing::Outcome> ExternalRing::Round(int64_t view, uint32_t round, size_t n,
                                                    uint64_t partition, std::span<const float> grad,
                                                    bool consumer) {
  const auto t0 = std::chrono::steady_clock::now();
  if (n > 0 && grad.empty())
    return InvalidArgument("a gradient of 0 floats for " + std::to_string(n) + " samples");
  if (static_cast<int64_t>(round) <= round_done_) return CarryLate(round, n, partition, grad);
  RoundState rs;
  rs.round = round;
  rs.n = n;
  rs.partition = partition;
  rs.grad = grad;
  rs.consumer = consumer;
  const double b_mine = consumer ? static_cast<double>(n) + carry_b_ : 0.0;
  if (b_mine > 0) rs.d_mine = n > 0 ? grad.size() : carry_.size();
  if (b_mine > 0 && n > 0 && !carry_.empty() && carry_.size() != grad.size()) {
    carry_.clear();  // a consumer that changed its model: the carried gradient is of no use
    carry_b_ = 0;
  }
  rs.b = consumer ? static_cast<double>(n) + carry_b_ : 0.0;
  rs.my_round = consumer ? consumer_round_ : -2;  // no consumer: no state to vote with
  rs.my_hash = (consumer && blob_round_ == consumer_round_) ? blob_hash_ : 0;
  auto connect = [this](const Members& m) { return transport_->SetPeers(m.endpoints); };
  auto attempt = [&](const Members& m) -> Status {
    ++rs.out.attempts;
    transport_->SetAbortCheck([this, &m] { return views_->CheckAlive(m); });
    Status st = Attempt(m, rs);
    transport_->SetAbortCheck(nullptr);
    if (st.code() == StatusCode::kDataLoss) {
      // Every member sees the same exchange: the round is done, nothing
      // applied (not retried: RunWithViewRetry ends the round).
      rs.data_loss = st;
      rs.data_loss_members = static_cast<int>(m.nodes.size());
    }
    return st;
  };
  // The retry rule of ModelTrainer's ring (edge_agent/round_retry.h): a
  // failed attempt restarts among the newest view's live members.
  auto res = RunWithViewRetry(views_.get(), options_.node, view, round, connect, attempt);
  if (!rs.data_loss.ok()) {
    round_done_ = round;
    rs.out.kind = Kind::kError;
    rs.out.message = rs.data_loss.message();
    rs.out.members = rs.data_loss_members;
    return std::move(rs.out);
  }
  if (!res.ok()) return res.status();
  round_done_ = round;
  rs.out.members = rs.ring_members;
  rs.out.allreduce_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!consumer) return std::move(rs.out);  // a weight-0 join alone: the consumer (if any comes) is behind
  return Conclude(rs);
}

std::optional<std::pair<int64_t, uint32_t>> ExternalRing::PendingJoin() {
  Status st = transport_->Poll(0);
  if (!st.ok()) {
    spdlog::warn("ring poll: {}", st.ToString());
    return std::nullopt;
  }
  const int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  std::optional<std::pair<int64_t, uint32_t>> join;
  std::set<std::pair<int, uint64_t>> present;
  for (const auto& [from, tag] : transport_->Buffered()) {
    if ((tag & 0xFF) != kWeightsPhase) continue;
    if (static_cast<int64_t>(models::TagRound(tag)) <= round_done_) {
      transport_->Discard(from, tag);
      continue;
    }
    if (idle_refused_.count(tag & ~uint64_t{0xFF})) continue;
    present.insert({from, tag});
    auto [it, fresh] = idle_seen_us_.emplace(std::pair{from, tag}, now);
    if (!fresh && now - it->second >= options_.idle_join_grace_ms * 1000 && !join)
      join = std::pair<int64_t, uint32_t>{models::TagView(tag), models::TagRound(tag)};
  }
  for (auto it = idle_seen_us_.begin(); it != idle_seen_us_.end();) {
    it = present.count(it->first) ? std::next(it) : idle_seen_us_.erase(it);
  }
  if (join) idle_seen_us_.clear();
  return join;
}

void ExternalRing::RefuseIdle(int64_t view, uint32_t round) {
  idle_refused_.insert(models::MakeTag(static_cast<uint32_t>(view), round, 0));
  if (idle_refused_.size() > 256) idle_refused_.erase(idle_refused_.begin());
}

}  // namespace loft::agent
