#include "edge_agent/trainer_state.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "edge_agent/ring_bytes.h"
#include "models/checkpoint.h"
#include "models/state_hash.h"

namespace loft::agent {
Status AdoptState(std::span<const std::byte> answer, int64_t want_round, uint64_t want_hash,
                  const std::string& source, models::Model* model, models::Sgd* sgd) {
  if (answer.size() < 16)
    return DataLoss("state from " + source + ": " + std::to_string(answer.size()) + " bytes");
  const int64_t lr = LoadLe<int64_t>(answer, 0);
  const uint64_t hash = LoadLe<uint64_t>(answer, 8);
  if (lr != want_round || hash != want_hash) {
    return FailedPrecondition(source + " now holds round " + std::to_string(lr) + ", not the agreed round " +
                              std::to_string(want_round));
  }
  std::span<const char> ck(reinterpret_cast<const char*>(answer.data()) + 16, answer.size() - 16);
  // Decode installs what passes its own checks; keep ours to put back if
  // the result is not the agreed state.
  const std::vector<float> own_params(model->params().begin(), model->params().end());
  const std::vector<float> own_velocity(sgd->velocity().begin(), sgd->velocity().end());
  const int64_t own_step = sgd->step();
  LOFT_RETURN_IF_ERROR(models::DecodeCheckpoint(ck, "state from " + source, model, sgd));
  Status bad;
  if (want_round < 0 ? sgd->step() != 0 : sgd->step() - 1 > want_round) {
    // One optimizer step per applied round at most.
    bad = DataLoss("state from " + source + ": optimizer step " + std::to_string(sgd->step()) +
                   " is impossible after round " + std::to_string(want_round));
  } else if (models::TrainingStateHash(*model, *sgd) != want_hash) {
    // The BLAKE2b digest of everything installed: parameters, step, velocity.
    bad = DataLoss("state from " + source +
                   " does not match the agreed hash (parameters, optimizer step and velocity)");
  }
  if (bad.ok()) return OkStatus();
  std::copy(own_params.begin(), own_params.end(), model->params().begin());
  Status restored = sgd->Restore(own_step, own_velocity);
  if (!restored.ok()) return restored.WithContext(bad.ToString());
  return bad;
}

StatusOr<models::SgdOptions> SgdOptionsFromSpec(const TrainingSpec& tr) {
  models::SgdOptions so;
  so.learning_rate = tr.learning_rate;
  so.momentum = tr.momentum;
  const auto& ls = tr.lr_schedule;
  auto kind = models::ParseLrSchedule(ls.kind);
  if (!kind.ok()) return kind.status().WithContext("training.lr_schedule.kind");
  so.schedule = *kind;
  so.step_every = ls.step_every;
  so.step_gamma = ls.gamma;
  so.total_steps = ls.total_steps > 0 ? ls.total_steps : tr.iterations;
  so.min_learning_rate = ls.min_learning_rate;
  so.warmup_steps = ls.warmup_steps;
  if (so.schedule != models::LrSchedule::kCosine && so.total_steps == 0) so.total_steps = 1;
  Status st = so.Validate();
  if (!st.ok()) return st.WithContext("training.lr_schedule");
  return so;
}

}  // namespace loft::agent
