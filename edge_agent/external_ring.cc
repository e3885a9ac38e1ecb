#include "edge_agent/external_ring.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "edge_agent/model_trainer.h"
#include "edge_agent/ring_bytes.h"
#include "edge_agent/ring_round.h"
#include "edge_agent/round_retry.h"
#include "models/ring_allreduce.h"
#include "models/state_hash.h"
#include "models/transport.h"

namespace loft::agent {
namespace {

constexpr uint8_t kStatePhase = 0xFD;  // request: [] ; answer: [i64 round][u64 hash][blob]

std::string Hex(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace

uint64_t StateHash(std::span<const std::byte> blob) {
  return models::BlobStateHash(blob);
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
  r->tolerance_ = spec.training.byzantine_tolerance;
  r->offences_ = RingOffenceLog(RingGuardOptions{spec.training.byzantine_tolerance});
  r->delta_ = spec.training.exchange.period_auto || spec.training.exchange.period > 1;
  auto compression = models::ParseCompression(spec.training.exchange.compression);
  if (!compression.ok()) return compression.status().WithContext("training.exchange.compression");
  r->compression_ = *compression;
  r->global_batch_ = static_cast<double>(spec.training.global_batch);
  r->num_nodes_ = spec.num_nodes();
  LOFT_ASSIGN_OR_RETURN(
      r->transport_, ZmqTransport::Create(options.context, RingTransportOptions(options, spec.num_nodes())));
  ExternalRing* self = r.get();
  r->transport_->SetRequestHandler(
      kStatePhase, [self](int, uint64_t, std::span<const std::byte>) { return self->ServeState(); });
  // The ring follows the membership view: an evicted node is not heard.
  r->transport_->SetSenderCheck(
      [self](int from, uint32_t view, bool request) { return self->views_->MayRing(from, view, request); });
  spdlog::info(
      "training external (the consumer's model), aggregation {}, exchange {}, compression {}; ring endpoint "
      "{} "
      "({})",
      spec.training.aggregation, r->delta_ ? "of model deltas after local steps" : "of gradients every step",
      models::CompressionName(r->compression_), r->ring_endpoint(),
      options.curve_own ? "CURVE" : "plain TCP");
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
  round_samples_ = 0;  // a new consumer's steps are not this round's
}

double ExternalRing::LocalScale(size_t n, int64_t view) const {
  if (!delta_) return 1.0;
  const int live = views_->LiveCount(view);
  return LocalStepScale(n, global_batch_, live > 0 ? live : num_nodes_);
}

void ExternalRing::LocalStepTaken(size_t n) {
  round_samples_ += static_cast<double>(n);
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
  int64_t steps = 1;     // planned steps the round spans (delta exchange)
  int ring_members = 0;  // of the attempt that succeeded (members past the round left out)
  Status data_loss;      // an attempt that ended the round with nothing applied
  int data_loss_members = 0;
};

ExternalRing::Outcome ExternalRing::CarryLate(uint32_t round, size_t n, uint64_t partition,
                                              std::span<const float> grad) {
  Outcome out;
  if (delta_) {
    // The consumer took the step on its parameters: it is a local step of
    // the next round (the delta holds it; its samples weigh there).
    round_samples_ += static_cast<double>(n);
    out.kind = Kind::kCarried;
    spdlog::info(
        "partition {} of round {} arrived after the round's exchange: a local step of the next round",
        partition, round);
    return out;
  }
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

StatusOr<RoundHellos> ExternalRing::ExchangeWith(const Members& m, const RoundState& rs) {
  MemberHello mine;
  mine.b = rs.b;
  // No consumer (rs.my_round -2): no state to vote with; the hello says
  // (-1, 0) and VoteOf below reads it as such.
  mine.last_round = std::max<int64_t>(rs.my_round, -1);
  mine.hash = rs.my_round < -1 ? 0 : rs.my_hash;
  mine.partition = rs.n > 0 && rs.b > 0 ? rs.partition : 0;
  mine.length = rs.b > 0 ? rs.d_mine : 0;
  HelloExchangeOptions o;
  o.self = options_.node;
  o.last_round = round_done_;
  o.ring_timeout_ms = options_.ring_timeout_ms;
  o.past_grace_ms = options_.past_grace_ms;
  // Only a member that skipped this round is past it: one holding it is
  // waited for (this ring does not take another member's result over).
  o.past_only_behind = true;
  return ExchangeHellos(transport_.get(), &offences_, o, m, rs.round, mine);
}

namespace {

// The state a hello votes with: (-1, 0) is a member without a consumer
// (or one that published nothing and holds no round), which loses a tie
// to a published state (AgreedState: ties go to the later round).
std::pair<int64_t, uint64_t> VoteOf(const MemberHello& h) {
  if (h.last_round == -1 && h.hash == 0) return {-2, 0};
  return {h.last_round, h.hash};
}

}  // namespace

void ExternalRing::FetchMajorityState(const Members& m, const RoundHellos& x, RoundState& rs) {
  const auto& target = rs.target;
  std::vector<int> holders;
  for (size_t i = 0; i < m.nodes.size() && i < x.hellos.size(); ++i) {
    if (m.nodes[i] != options_.node && VoteOf(x.hellos[i]) == target) holders.push_back(m.nodes[i]);
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

Status ExternalRing::AllReduce(const Members& m, const RoundHellos& px, RoundPlan& plan, bool mine_in,
                               RoundState& rs) {
  models::AllReduceOptions ao;
  ao.reducer = plan.reducer;
  ao.timeout_ms = options_.ring_timeout_ms;
  ao.tolerance = tolerance_;
  ao.compression = compression_;
  // int8: this member's rounding is carried into its next contribution
  // (a weight-0 member's zeros keep it for later).
  std::vector<float> unused;
  LOFT_RETURN_IF_ERROR(CompressedAllReduce(transport_.get(), ao, models::RingView{m.view, px.members},
                                           rs.round, rs.data, plan.weights, &offences_,
                                           mine_in ? &residual_ : &unused));
  rs.ring_members = static_cast<int>(px.members.size());
  rs.out.included = mine_in;
  rs.out.applied = std::move(plan.applied);
  return OkStatus();
}

Status ExternalRing::Attempt(const Members& m, RoundState& rs) {
  LOFT_ASSIGN_OR_RETURN(RoundHellos x, ExchangeWith(m, rs));
  const uint32_t round = rs.round;
  const size_t n = rs.n;
  const double b = rs.b;
  // The state most members' consumers hold (round_decision.h AgreedState),
  // and the gradient length most members with samples sent (ties: the smaller).
  std::vector<int64_t> rounds;
  std::vector<uint64_t> hashes;
  std::map<uint64_t, int> dcount;
  for (const MemberHello& h : x.hellos) {
    rounds.push_back(VoteOf(h).first);
    hashes.push_back(VoteOf(h).second);
    if (h.b > 0 && h.length > 0) ++dcount[h.length];
  }
  rs.target = AgreedState(rounds, hashes);
  uint64_t& D = rs.D;
  D = 0;
  int best = 0;
  for (const auto& [d, c] : dcount) {
    if (c > best) {
      best = c;
      D = d;
    }
  }
  MemberHello me;
  me.last_round = rs.my_round < -1 ? -1 : rs.my_round;
  me.hash = rs.my_round < -1 ? 0 : rs.my_hash;
  rs.stale = rs.consumer && VoteOf(me) != rs.target;
  rs.bad_len = b > 0 && rs.d_mine != D;
  if (D == 0) return DataLoss("round " + std::to_string(round) + ": no member has samples");
  // Weight only for members holding the agreed state with the agreed
  // length: a gradient of other parameters (or another model) is not mixed
  // in. A delta exchange weighs a member not holding the agreed state too,
  // with a zero delta (ModelTrainer's rule: its steps were taken from
  // other parameters).
  RoundHellos px = Participants(x);
  for (MemberHello& h : px.hellos) {
    if ((!delta_ && VoteOf(h) != rs.target) || h.length != D) {
      h.b = 0;
      h.partition = 0;
    }
  }
  // trimmed_mean caps each member's weight at an even share of the
  // exchange's samples: the global batch per planned step of the round.
  rs.steps =
      delta_ ? std::max<int64_t>(1, static_cast<int64_t>(round) - std::max<int64_t>(rs.target.first, -1)) : 1;
  auto plan = PlanRound(options_.node, round, px, reducer_,
                        delta_ ? global_batch_ * static_cast<double>(rs.steps) : 0.0);
  if (!plan.ok())
    return DataLoss("round " + std::to_string(round) + ": no member with samples holds the agreed state");
  rs.data.assign(D, 0.0f);
  const bool mine_in = b > 0 && (delta_ || !rs.stale) && !rs.bad_len;
  if (mine_in && delta_) {
    if (!rs.stale) std::copy(rs.grad.begin(), rs.grad.begin() + static_cast<ptrdiff_t>(D), rs.data.begin());
  } else if (mine_in) {
    for (size_t j = 0; j < D; ++j) {
      const double sum =
          (n > 0 ? static_cast<double>(n) * rs.grad[j] : 0.0) + (carry_b_ > 0 ? carry_[j] : 0.0);
      rs.data[j] = static_cast<float>(sum / b);
    }
  }
  // Fetch the majority's state now, while its holders are in this round.
  if (rs.stale && rs.consumer) FetchMajorityState(m, x, rs);
  return AllReduce(m, px, *plan, mine_in, rs);
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
    out.round_steps = rs.steps;
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
  out.round_steps = rs.steps;
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
  if (delta_) {
    // The round's samples: its local steps' and this last step's (none
    // without the consumer's delta); the next round starts from zero.
    rs.b = consumer && !grad.empty() ? round_samples_ + static_cast<double>(n) : 0.0;
    rs.d_mine = rs.b > 0 ? grad.size() : 0;
    round_samples_ = 0;
  }
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
  auto join = ScanIdleJoin(transport_.get(), views_.get(), &offences_, round_done_,
                           options_.idle_join_grace_ms, &idle_);
  if (!join) return std::nullopt;
  return std::pair<int64_t, uint32_t>{join->view, join->round};
}

void ExternalRing::RefuseIdle(int64_t view, uint32_t round) {
  idle_.Refuse(models::MakeTag(static_cast<uint32_t>(view), round, 0));
}

void ExternalRing::Planned(int64_t iteration) {
  offences_.guard().Planned(iteration);
}

std::vector<RingOffence> ExternalRing::TakeOffences() {
  return offences_.Take();
}

}  // namespace loft::agent
