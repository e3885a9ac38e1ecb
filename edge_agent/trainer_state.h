// The training state a ModelTrainer installs from a peer (AdoptState) and
// the optimiser settings it takes from the spec (SgdOptionsFromSpec).
//
// Not responsible for: fetching the bytes (ModelTrainer::SyncState).
// Thread-safety: pure functions (AdoptState writes only its arguments).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/cluster_spec.h"
#include "core/status.h"
#include "models/model.h"
#include "models/sgd.h"

namespace loft::agent {

// Installs a state answer [i64 last_round][u64 hash][checkpoint] from
// `source` into model/sgd if it is the wanted (round, hash): it decodes
// (models::DecodeCheckpoint: length, CRC, architecture, finite values), its
// optimizer step is at most want_round + 1 (one step per applied round),
// and the BLAKE2b digest of what it installs (parameters, optimizer step
// and velocity: models::TrainingStateHash) gives want_hash. Otherwise an
// error naming `source`, and model/sgd unchanged.
Status AdoptState(std::span<const std::byte> answer, int64_t want_round, uint64_t want_hash,
                  const std::string& source, models::Model* model, models::Sgd* sgd);

// The optimiser settings of training.learning_rate / momentum / lr_schedule.
StatusOr<models::SgdOptions> SgdOptionsFromSpec(const TrainingSpec& training);

}  // namespace loft::agent
