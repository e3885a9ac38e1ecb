// Fuzz target: a ring member adopting the training state a peer sent
// (agent::AdoptState over models::DecodeCheckpoint): the answer
// [i64 last_round][u64 hash][checkpoint] comes from the input, into a small
// softmax model (4 inputs, 3 classes) or MLP (4-3-3) with its SGD state.
//
// Input: a mode byte, an i64 wanted round, then the answer.
//   mode bit 0: recompute the checkpoint's trailing CRC-32 (so mutations
//               reach the checks behind it: name, counts, finite values);
//   mode bit 1: want the (round, hash) the answer's header claims;
//   mode bit 2: want the hash of what the checkpoint decodes to in a
//               scratch model, written into the answer's header too (so a
//               mutated checkpoint can be adopted, and the step check and
//               the install path run);
//   mode bit 3: the MLP instead of the softmax model.
//
// Properties beyond "no crash, no sanitizer report":
//  - refused: the model's parameters, the optimizer's step and velocity
//    are bit for bit what they were, and the error names the source;
//  - adopted: the installed state hashes to the wanted hash, and its
//    optimizer step is possible after the wanted round.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "edge_agent/trainer_state.h"
#include "fuzz_input.h"
#include "models/checkpoint.h"
#include "models/model.h"
#include "models/sgd.h"
#include "models/state_hash.h"

namespace {

using loft::fuzz::Fail;
using loft::fuzz::FuzzInput;

struct Trained {
  std::unique_ptr<loft::models::Model> model;
  std::unique_ptr<loft::models::Sgd> sgd;
};

Trained Make(bool mlp) {
  loft::models::ModelOptions mo;
  mo.kind = mlp ? loft::models::ModelKind::kMlp : loft::models::ModelKind::kSoftmax;
  mo.input_dim = 4;
  mo.num_classes = 3;
  mo.hidden = {3};
  auto m = loft::models::MakeModel(mo);
  if (!m.ok()) Fail("model: " + m.status().ToString());
  Trained t;
  t.model = std::move(*m);
  t.model->Init(7);
  auto sgd = loft::models::Sgd::Create({}, t.model->num_params());
  if (!sgd.ok()) Fail("sgd: " + sgd.status().ToString());
  t.sgd = std::make_unique<loft::models::Sgd>(std::move(*sgd));
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  const uint8_t mode = in.U8();
  int64_t want_round = static_cast<int64_t>(in.U64());
  std::string answer = in.Take(in.remaining());
  uint64_t want_hash = 0;
  if ((mode & 1) && answer.size() >= 16 + 4) {
    const uint32_t crc = static_cast<uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef*>(answer.data() + 16), static_cast<uInt>(answer.size() - 20)));
    std::memcpy(answer.data() + answer.size() - 4, &crc, 4);
  }
  const bool mlp = (mode & 8) != 0;
  if ((mode & 4) && answer.size() >= 16) {
    Trained scratch = Make(mlp);
    std::span<const char> ck(answer.data() + 16, answer.size() - 16);
    if (loft::models::DecodeCheckpoint(ck, "scratch", scratch.model.get(), scratch.sgd.get()).ok()) {
      const uint64_t h = loft::models::TrainingStateHash(*scratch.model, *scratch.sgd);
      std::memcpy(answer.data() + 8, &h, 8);
    }
  }
  if ((mode & 6) && answer.size() >= 16) {
    std::memcpy(&want_round, answer.data(), 8);
    std::memcpy(&want_hash, answer.data() + 8, 8);
  }
  Trained t = Make(mlp);
  const std::vector<float> params(t.model->params().begin(), t.model->params().end());
  const std::vector<float> velocity(t.sgd->velocity().begin(), t.sgd->velocity().end());
  const int64_t step = t.sgd->step();
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(answer.data()), answer.size());
  loft::Status st =
      loft::agent::AdoptState(bytes, want_round, want_hash, "peer-x", t.model.get(), t.sgd.get());
  if (loft::fuzz::Tracing()) std::fprintf(stderr, "adopt: %s\n", st.ToString().c_str());
  if (!st.ok()) {
    if (st.message().find("peer-x") == std::string::npos) Fail("a refusal that does not name the source");
    const auto p = t.model->params();
    const auto v = t.sgd->velocity();
    if (t.sgd->step() != step || p.size() != params.size() || v.size() != velocity.size() ||
        std::memcmp(p.data(), params.data(), p.size() * sizeof(float)) != 0 ||
        std::memcmp(v.data(), velocity.data(), v.size() * sizeof(float)) != 0)
      Fail("a refused state changed the model: " + st.ToString());
    return 0;
  }
  if (loft::models::TrainingStateHash(*t.model, *t.sgd) != want_hash) Fail("adopted a state of another hash");
  if (want_round < 0 ? t.sgd->step() != 0 : t.sgd->step() - 1 > want_round)
    Fail("adopted optimizer step " + std::to_string(t.sgd->step()) + " after round " +
         std::to_string(want_round));
  return 0;
}
