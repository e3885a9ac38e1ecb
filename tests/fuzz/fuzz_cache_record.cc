// Fuzz target: the cache record decoder (cache/sample_cache record codec).
// Any value either fails DecodeRecord with DataLoss naming the sample, or
// decodes to a sample that re-encodes to exactly the same bytes; Decode and
// Verify agree. The first 8 bytes also go through the key codec.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cache/sample_cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  constexpr uint64_t kId = 4242;
  auto sample = loft::cache::DecodeRecord(kId, bytes);
  const loft::Status verified = loft::cache::VerifyRecord(kId, bytes);
  if (sample.ok() != verified.ok()) std::abort();
  if (!sample.ok()) {
    // DataLoss, or FailedPrecondition for a version-1 record (re-ingest).
    if (sample.status().code() != loft::StatusCode::kDataLoss &&
        sample.status().code() != loft::StatusCode::kFailedPrecondition)
      std::abort();
    if (sample.status().message().find("4242") == std::string::npos) std::abort();
  } else {
    if (sample->id != kId) std::abort();
    if (loft::cache::EncodeRecord(sample->id, sample->label, sample->payload) != bytes) std::abort();
  }
  auto key = loft::cache::DecodeKey(bytes.substr(0, 8));
  if (key.ok() && loft::cache::EncodeKey(*key) != bytes.substr(0, 8)) std::abort();
  return 0;
}
