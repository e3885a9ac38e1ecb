// Checkpoints: a model's parameters plus the SGD state (step and velocity)
// in one file. Little-endian layout, version 1:
//
//   "LOFTCKPT" | u32 version | u32 name_len | name | i64 step | u64 n |
//   f32 params[n] | f32 velocity[n] | u32 CRC-32 of every preceding byte
//
// Writes go to "<path>.tmp" and are renamed into place, so a crash never
// leaves a half-written checkpoint under `path`. Loading checks magic,
// version, exact length, CRC, architecture name, parameter count and that
// every parameter and velocity value is finite, and changes nothing unless
// all checks pass.
//
// Not responsible for: SgdOptions (the caller configures the optimiser the
// same way on restart), data-loader position.
// Thread-safety: free functions; callers serialise access to the objects.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "models/model.h"
#include "models/sgd.h"

namespace loft::models {

inline constexpr uint32_t kCheckpointVersion = 1;

Status SaveCheckpoint(const std::string& path, const Model& model, const Sgd& sgd);
Status LoadCheckpoint(const std::string& path, Model* model, Sgd* sgd);

// The same bytes in memory (state transfer between agents). Decode makes
// the same checks as LoadCheckpoint (`where` names the source in errors)
// and changes nothing unless all pass.
StatusOr<std::vector<char>> EncodeCheckpoint(const Model& model, const Sgd& sgd);
Status DecodeCheckpoint(std::span<const char> bytes, const std::string& where, Model* model, Sgd* sgd);

}  // namespace loft::models
