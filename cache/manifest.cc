#include "cache/manifest.h"

#include <fcntl.h>
#include <sodium.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/le_bytes.h"

namespace loft::cache {
namespace {

constexpr char kMagic[8] = {'L', 'O', 'F', 'T', 'M', 'A', 'N', '1'};
constexpr size_t kRootBytes = 32;

std::string Blake2b256(std::string_view bytes) {
  std::string out(kRootBytes, '\0');
  crypto_generichash(reinterpret_cast<unsigned char*>(out.data()), out.size(),
                     reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), nullptr, 0);
  return out;
}

}  // namespace

std::string Hex(std::string_view b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (char c : b) {
    s += d[static_cast<uint8_t>(c) >> 4];
    s += d[static_cast<uint8_t>(c) & 0xf];
  }
  return s;
}

std::string SampleDigest(uint64_t id, uint16_t label, std::span<const uint8_t> payload) {
  // Picks libsodium's fastest BLAKE2b implementation once (thread-safe).
  static const bool sodium_ready = sodium_init() >= 0;
  (void)sodium_ready;
  char head[10];
  StoreLe<uint64_t>(head, id);
  head[8] = static_cast<char>(label & 0xff);
  head[9] = static_cast<char>(label >> 8);
  crypto_generichash_state st;
  crypto_generichash_init(&st, nullptr, 0, kSampleDigestBytes);
  crypto_generichash_update(&st, reinterpret_cast<const unsigned char*>(head), sizeof head);
  if (!payload.empty()) crypto_generichash_update(&st, payload.data(), payload.size());
  std::string out(kSampleDigestBytes, '\0');
  crypto_generichash_final(&st, reinterpret_cast<unsigned char*>(out.data()), out.size());
  return out;
}

StatusOr<Manifest> Manifest::FromDigests(std::string digests) {
  if (digests.size() % kSampleDigestBytes != 0) {
    return InvalidArgument("dataset manifest: " + std::to_string(digests.size()) +
                           " digest bytes is not a multiple of " + std::to_string(kSampleDigestBytes));
  }
  Manifest m;
  m.digests_ = std::move(digests);
  return m;
}

StatusOr<Manifest> Manifest::Build(const IdxDataset& ds, int64_t samples, const PayloadEncoding& encoding) {
  const size_t dim = static_cast<size_t>(ds.rows) * static_cast<size_t>(ds.cols);
  if (samples < 0 || samples > ds.count || ds.images.size() < static_cast<size_t>(ds.count) * dim ||
      ds.labels.size() < static_cast<size_t>(ds.count)) {
    return InvalidArgument("dataset manifest: " + std::to_string(samples) +
                           " samples asked of a dataset of " + std::to_string(ds.count));
  }
  Manifest m;
  m.digests_.reserve(static_cast<size_t>(samples) * kSampleDigestBytes);
  PayloadEncoder encoder(encoding);
  for (int64_t i = 0; i < samples; ++i) {
    const auto id = static_cast<uint64_t>(i);
    LOFT_ASSIGN_OR_RETURN(std::span<const uint8_t> payload, encoder.Encode(ds, id));
    m.digests_ += SampleDigest(id, ds.labels[id], payload);
  }
  return m;
}

std::string Manifest::RootHex() const {
  return Hex(Blake2b256(digests_));
}

std::string Manifest::Root() const {
  return Blake2b256(digests_);
}

ManifestCheck Manifest::Check(uint64_t id, uint16_t label, std::span<const uint8_t> payload) const {
  if (id >= static_cast<uint64_t>(size())) return ManifestCheck::kUnknownId;
  const std::string d = SampleDigest(id, label, payload);
  // Digests are public: a constant-time compare is not needed.
  return std::memcmp(d.data(), digests_.data() + id * kSampleDigestBytes, kSampleDigestBytes) == 0
             ? ManifestCheck::kMatch
             : ManifestCheck::kMismatch;
}

Status WriteManifestFile(const std::string& path, const Manifest& m) {
  std::string bytes(kMagic, sizeof kMagic);
  char n[8];
  StoreLe<uint64_t>(n, static_cast<uint64_t>(m.size()));
  bytes.append(n, 8);
  bytes += m.digests();
  bytes += Blake2b256(bytes);
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return IOError("cannot write dataset manifest " + tmp + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0) {
      const int e = errno;
      ::close(fd);
      return IOError("cannot write dataset manifest " + tmp + ": " + std::strerror(e));
    }
    done += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0)
    return IOError("cannot sync dataset manifest " + tmp + ": " + std::strerror(errno));
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return IOError("cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
  return OkStatus();
}

StatusOr<Manifest> ReadManifestFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("dataset manifest " + path + " cannot be opened (written by `loftctl ingest`)");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string what = "dataset manifest " + path + ": ";
  if (bytes.size() < 16 + kRootBytes || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return DataLoss(what + "not a manifest file (bad magic or shorter than its header)");
  const uint64_t n = LoadLe<uint64_t>(bytes.data() + 8);
  if (n > (bytes.size() - 16 - kRootBytes) / kSampleDigestBytes ||
      16 + n * kSampleDigestBytes + kRootBytes != bytes.size()) {
    return DataLoss(what + "header names " + std::to_string(n) + " samples but the file has " +
                    std::to_string(bytes.size()) + " bytes");
  }
  const size_t body = 16 + n * kSampleDigestBytes;
  if (Blake2b256(std::string_view(bytes).substr(0, body)) != bytes.substr(body))
    return DataLoss(what + "root digest mismatch (file damaged)");
  return Manifest::FromDigests(bytes.substr(16, n * kSampleDigestBytes));
}

}  // namespace loft::cache
