// ChunkCodec: the wire format of one chunk message of the ring all-reduce
// (models/ring_allreduce.h), per compression mode. Pure functions.
//
//   none  the chunk's floats as they are in memory: 4 bytes per element
//         (today's format; the ring sends the caller's buffer itself).
//   int8  [float32 scale, little-endian][int8 q_k for each element]:
//         4 + elements bytes. scale = max_k |x_k| / 127 (float arithmetic);
//         q_k = round(x_k / scale) (half away from zero), clamped to
//         [-127, 127]; decoded x_k = q_k * scale. An all-zero chunk (or one
//         whose scale underflows to 0) has scale 0 and decodes to zeros. A
//         chunk holding a NaN or +-Inf is encoded as scale = NaN with every
//         q_k = 0 and so decodes to all-NaN: the robust reducers discard it
//         as they discard a NaN input (models/reducers.h). Error per element
//         of a finite chunk: at most scale / 2.
// Decoding is one float multiply per element, so every member decodes the
// same payload to the same bits; encoding is deterministic too, so honest
// replicas that reduced the same values send the same bytes.
//
// Not responsible for: framing, versioning (both ends of a ring use the
// same mode: the cluster spec's training.exchange.compression), error
// feedback (the caller keeps the residual, RingAllReduce::Run).
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "core/status.h"

namespace loft::models {

enum class Compression { kNone, kInt8 };

// "none" | "int8".
StatusOr<Compression> ParseCompression(std::string_view name);
std::string_view CompressionName(Compression compression);

// Bytes of one chunk message carrying `elements` floats: 4 * elements
// (none), 4 + elements (int8). The ring's scatter copies and full results
// are chunk messages; its digests (32 bytes) and dispute bitmaps are not.
size_t ChunkWireBytes(Compression compression, size_t elements);

// Int8: writes the encoding of x to `out`, which must hold
// ChunkWireBytes(kInt8, x.size()) bytes.
void EncodeInt8(std::span<const float> x, std::span<std::byte> out);

// Int8: decodes `payload` into `out` and returns true when payload has
// ChunkWireBytes(kInt8, out.size()) bytes; otherwise leaves `out` untouched
// and returns false.
bool DecodeInt8(std::span<const std::byte> payload, std::span<float> out);

}  // namespace loft::models
