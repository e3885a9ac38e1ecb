// The Byzantine behaviours of a ModelTrainer (the spec's nodes[].byzantine):
// what an attacker does, so that `loftctl cluster run` can reproduce each
// attack. Honest agents never run this code (byzantine: none).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>

#include "edge_agent/model_trainer.h"
#include "edge_agent/ring_hello.h"
#include "models/transport.h"

namespace loft::agent {

void ModelTrainer::Corrupt(std::span<float> g) {
  switch (byzantine_) {
    case ByzantineKind::kNone:
    case ByzantineKind::kChunkGarbage:  // these attack the ring, not the gradient
    case ByzantineKind::kChunkScale:
    case ByzantineKind::kPhantomRound:
    case ByzantineKind::kPoisonServe:
    case ByzantineKind::kPoisonDecoded: return;  // attacks the data it serves, not its gradient
    case ByzantineKind::kSignFlip:
      for (float& x : g) x = static_cast<float>(-byzantine_scale_ * x);
      return;
    case ByzantineKind::kRandom: {
      std::normal_distribution<float> d(0.0f, static_cast<float>(byzantine_scale_));
      for (float& x : g) x = d(rng_);
      return;
    }
    case ByzantineKind::kNaN: std::fill(g.begin(), g.end(), std::numeric_limits<float>::quiet_NaN()); return;
  }
}

void ModelTrainer::CorruptChunk(std::span<float> c) {
  if (byzantine_ == ByzantineKind::kChunkScale) {
    for (float& x : c) x = static_cast<float>(byzantine_scale_ * x);
    return;
  }
  std::uniform_real_distribution<float> d(-static_cast<float>(byzantine_scale_),
                                          static_cast<float>(byzantine_scale_));
  for (float& x : c) x = d(rng_);
}

void ModelTrainer::AnnouncePhantoms(int64_t view) {
  if (view < 0 || view >= (int64_t{1} << 24) || last_round_ < 0 || !views_->Has(view)) return;
  auto m = views_->Members(view);
  if (!m.ok()) return;
  MemberHello h;  // only this member's weight, and a last round far ahead
  h.b = 1000;
  h.partition = 0xBAD;
  h.last_round = std::numeric_limits<uint32_t>::max();
  const uint32_t next = static_cast<uint32_t>(last_round_);
  for (uint32_t round : {next + 3, next + (1u << 31)}) {
    for (int n : m->nodes) {
      if (n != options_.node)
        (void)transport_->Send(n, models::MakeTag(m->view, round, kHelloPhase), EncodeHello(h));
    }
  }
}

}  // namespace loft::agent
