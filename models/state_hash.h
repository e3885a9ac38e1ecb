// The digest of a training state: what ring members vote on and what a
// restarted member checks a state it is given against
// (edge_agent/trainer_state.h AdoptState).
//
// TrainingStateDigest is BLAKE2b-256 (libsodium crypto_generichash,
// unkeyed) over, in order: the 24 bytes "loft.training-state.v1" plus two
// zero bytes, the optimizer step (i64 LE), the parameter count (u64 LE),
// the parameters' bytes, the velocity count (u64 LE) and the velocity's
// bytes (floats as stored: little-endian IEEE 754 on every supported
// host). Unlike a 64-bit FNV-1a, it cannot be inverted: no one can build
// another state with a given digest, nor one with a given 64-bit hash
// short of ~2^64 BLAKE2b evaluations. The optimizer state is covered, so a
// state with the agreed parameters but another step or momentum is not it.
//
// TrainingStateHash is the digest's first 8 bytes (LE): the 64-bit value
// the ring's hello (RingHello.param_hash) and RoundResult carry.
//
// Not responsible for: which state a member votes (ModelTrainer).
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "models/model.h"
#include "models/sgd.h"

namespace loft::models {

using StateDigest = std::array<unsigned char, 32>;

StateDigest TrainingStateDigest(std::span<const float> params, int64_t step, std::span<const float> velocity);
// The digest's first 8 bytes, little-endian.
uint64_t DigestWord(const StateDigest& digest);
uint64_t TrainingStateHash(std::span<const float> params, int64_t step, std::span<const float> velocity);
// Of a model and its optimizer.
uint64_t TrainingStateHash(const Model& model, const Sgd& sgd);
// The same 64-bit word of BLAKE2b-256 over the parameter bytes alone:
// equal for two models iff their parameters are bitwise identical (tests,
// tools). Not what the ring votes on (that covers the optimizer too).
uint64_t ParameterHash(std::span<const float> params);
// An opaque state blob (training.model external: the consumer's
// parameters and optimizer state, serialized by the consumer): the first 8
// bytes (LE) of BLAKE2b-256 over "loft.external-state.v1" plus two zero
// bytes and the blob. 0 for an empty blob ("not published"); a non-empty
// blob whose word is 0 gets 1.
uint64_t BlobStateHash(std::span<const std::byte> blob);

}  // namespace loft::models
