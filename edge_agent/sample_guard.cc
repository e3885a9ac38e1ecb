#include "edge_agent/sample_guard.h"

#include <fmt/format.h>

namespace loft::agent {

void SampleGuard::SetManifest(cache::Manifest m) {
  auto p = std::make_shared<const cache::Manifest>(std::move(m));
  std::lock_guard lock(mu_);
  manifest_ = std::move(p);
}

std::shared_ptr<const cache::Manifest> SampleGuard::manifest() const {
  std::lock_guard lock(mu_);
  return manifest_;
}

Status CheckAgainstManifest(const cache::Manifest& m, const cache::Sample& s, int32_t peer) {
  switch (m.Check(s.id, s.label, s.payload)) {
    case cache::ManifestCheck::kMatch: return OkStatus();
    case cache::ManifestCheck::kMismatch:
      return DataLoss(fmt::format(
          "sample {} from peer {} does not match the dataset manifest (label or payload forged: poisoned)",
          s.id, peer));
    case cache::ManifestCheck::kUnknownId:
      return DataLoss(fmt::format("sample {} from peer {} is outside the dataset manifest ({} samples)", s.id,
                                  peer, m.size()));
  }
  return Internal("unreachable");
}

Status PoisonRecords(std::span<const uint64_t> ids, cache::RecordBatch* batch) {
  if (ids.size() != batch->size())
    return Internal(fmt::format("poison_serve: {} ids for {} records", ids.size(), batch->size()));
  cache::RecordBatch out;
  out.data.reserve(batch->data.size());
  out.ends.reserve(batch->size());
  std::string rec;
  for (size_t k = 0; k < ids.size(); ++k) {
    auto s = cache::DecodeRecord(ids[k], (*batch)[k]);
    if (!s.ok()) return s.status();
    cache::EncodeRecordTo(ids[k], static_cast<uint16_t>((s->label + 1) % 10), s->payload, &rec);
    out.data += rec;
    out.ends.push_back(out.data.size());
  }
  *batch = std::move(out);
  return OkStatus();
}

}  // namespace loft::agent
