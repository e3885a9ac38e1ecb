#include "cache/ingest.h"

#include <chrono>
#include <vector>

namespace loft::cache {

Status CheckSpecAgainstDataset(const ClusterSpec& spec, const IdxDataset& ds, std::string_view split) {
  if (spec.dataset.name != "fashion-mnist") {
    return InvalidArgument(spec.source + ": dataset.name is '" + spec.dataset.name +
                           "' but only 'fashion-mnist' can be ingested");
  }
  const int64_t sample_bytes = int64_t{ds.rows} * ds.cols;
  if (spec.dataset.sample_bytes != sample_bytes) {
    return InvalidArgument(spec.source + ": dataset.sample_bytes is " +
                           std::to_string(spec.dataset.sample_bytes) + " but Fashion-MNIST samples are " +
                           std::to_string(ds.rows) + "x" + std::to_string(ds.cols) + " = " +
                           std::to_string(sample_bytes) + " bytes");
  }
  if (spec.dataset.samples > ds.count) {
    return InvalidArgument(spec.source + ": dataset.samples is " + std::to_string(spec.dataset.samples) +
                           " but the Fashion-MNIST " + std::string(split) + " split has only " +
                           std::to_string(ds.count) + " samples");
  }
  return OkStatus();
}

StatusOr<IngestResult> IngestSamples(SampleCache& cache, const IdxDataset& ds, std::span<const uint64_t> ids,
                                     const IngestOptions& options) {
  if (options.batch_samples == 0) return InvalidArgument("ingest: batch_samples must be > 0");
  const size_t sample_bytes = static_cast<size_t>(ds.rows) * static_cast<size_t>(ds.cols);
  if (ds.images.size() != static_cast<size_t>(ds.count) * sample_bytes ||
      ds.labels.size() != static_cast<size_t>(ds.count)) {
    return InvalidArgument("ingest: dataset buffers do not match count*rows*cols");
  }
  const auto start = std::chrono::steady_clock::now();
  IngestResult result;
  std::vector<SampleRef> batch;
  batch.reserve(options.batch_samples);
  const auto total = static_cast<int64_t>(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint64_t id = ids[i];
    if (id >= static_cast<uint64_t>(ds.count)) {
      return OutOfRange("ingest: sample id " + std::to_string(id) + " is beyond the dataset's " +
                        std::to_string(ds.count) + " samples");
    }
    batch.push_back(SampleRef{id, ds.labels[id],
                              std::span<const uint8_t>(ds.images.data() + id * sample_bytes, sample_bytes)});
    result.payload_bytes += static_cast<int64_t>(sample_bytes);
    if (batch.size() == options.batch_samples || i + 1 == ids.size()) {
      LOFT_RETURN_IF_ERROR(cache.PutBatch(batch, options.skip_wal));
      batch.clear();
      if (options.progress) options.progress(static_cast<int64_t>(i + 1), total);
    }
  }
  LOFT_RETURN_IF_ERROR(cache.Flush());
  result.samples = total;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace loft::cache
