#include "cache/ingest.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
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
                           std::to_string(sample_bytes) + " bytes" +
                           (spec.dataset.encoding == DatasetEncoding::kJpeg
                                ? " (with encoding jpeg, sample_bytes is the decoded model input's size)"
                                : ""));
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
  PayloadEncoder encoder(options.encoding);
  const bool copy = options.encoding.encoding != DatasetEncoding::kRaw;
  std::vector<SampleRef> batch;
  batch.reserve(options.batch_samples);
  // Encoded payloads of the batch, back to back (raw payloads are views
  // into ds instead); spans into it are taken once the batch is complete.
  std::vector<uint8_t> arena;
  std::vector<size_t> ends;
  const auto total = static_cast<int64_t>(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint64_t id = ids[i];
    if (id >= static_cast<uint64_t>(ds.count)) {
      return OutOfRange("ingest: sample id " + std::to_string(id) + " is beyond the dataset's " +
                        std::to_string(ds.count) + " samples");
    }
    auto payload = encoder.Encode(ds, id);
    if (!payload.ok()) return payload.status().WithContext("ingest");
    if (copy) {
      arena.insert(arena.end(), payload->begin(), payload->end());
      ends.push_back(arena.size());
    }
    batch.push_back(SampleRef{id, ds.labels[id], *payload});
    result.payload_bytes += static_cast<int64_t>(payload->size());
    if (batch.size() == options.batch_samples || i + 1 == ids.size()) {
      if (copy) {
        for (size_t k = 0; k < batch.size(); ++k) {
          const size_t begin = k == 0 ? 0 : ends[k - 1];
          batch[k].payload = std::span<const uint8_t>(arena.data() + begin, ends[k] - begin);
        }
      }
      LOFT_RETURN_IF_ERROR(cache.PutBatch(batch, options.skip_wal));
      batch.clear();
      arena.clear();
      ends.clear();
      if (options.progress) options.progress(static_cast<int64_t>(i + 1), total);
    }
  }
  LOFT_RETURN_IF_ERROR(cache.Flush());
  result.samples = total;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace loft::cache

namespace loft::cache {
namespace {

Status SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return IOError("cannot open directory '" + dir + "' to sync it: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return IOError("cannot fsync directory '" + dir + "': " + std::strerror(err));
  return OkStatus();
}

}  // namespace

uint64_t IdsDigest(std::span<const uint64_t> ids) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (uint64_t id : ids) {
    for (int b = 0; b < 8; ++b) {
      h ^= (id >> (8 * b)) & 0xff;
      h *= 0x100000001b3ULL;
    }
  }
  return h;
}

Status RemoveIngestMarker(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / kIngestMarkerFile).string();
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return OkStatus();
    return IOError("cannot remove '" + path + "': " + std::strerror(errno));
  }
  return SyncDir(dir);
}

Status WriteIngestMarker(const std::string& dir, const IngestMarker& marker) {
  const nlohmann::json j = {{"format", 1},
                            {"node", marker.node},
                            {"samples", marker.samples},
                            {"ids_digest", fmt::format("{:016x}", marker.ids_digest)},
                            {"spec", marker.spec},
                            {"split", marker.split},
                            {"dataset_samples", marker.dataset_samples}};
  const std::string text = j.dump(2) + "\n";
  const std::string path = (std::filesystem::path(dir) / kIngestMarkerFile).string();
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IOError("cannot create '" + tmp + "': " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return IOError("cannot write '" + tmp + "': " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return IOError("cannot fsync '" + tmp + "': " + std::strerror(err));
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return IOError("cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(err));
  }
  return SyncDir(dir);
}

StatusOr<std::optional<IngestMarker>> ReadIngestMarker(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / kIngestMarkerFile).string();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return std::optional<IngestMarker>();
    return IOError("cannot read '" + path + "'");
  }
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  IngestMarker m;
  // An older loftctl wrote the sample count alone.
  if (!text.empty() && text.find_first_not_of("0123456789\n") == std::string::npos && text[0] != '\n') {
    m.samples = std::stoll(text.substr(0, 18));
    return std::optional<IngestMarker>(m);
  }
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return DataLoss(path + ": not a JSON object");
  try {
    if (j.value("format", 0) != 1) return DataLoss(path + ": unknown marker format (expected 1)");
    m.node = j.at("node").get<std::string>();
    m.samples = j.at("samples").get<int64_t>();
    m.ids_digest = std::stoull(j.at("ids_digest").get<std::string>(), nullptr, 16);
    m.spec = j.value("spec", std::string());
    m.split = j.value("split", std::string());
    m.dataset_samples = j.value("dataset_samples", int64_t{0});
  } catch (const std::exception& e) {
    return DataLoss(path + ": malformed marker: " + e.what());
  }
  if (m.samples < 0) return DataLoss(path + ": samples is negative");
  return std::optional<IngestMarker>(m);
}

}  // namespace loft::cache
