#include "models/checkpoint.h"

#include <algorithm>
#include <bit>
#include <boost/crc.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>
#include <vector>

namespace loft::models {
namespace {

static_assert(std::endian::native == std::endian::little, "checkpoint I/O assumes a little-endian host");
constexpr char kMagic[8] = {'L', 'O', 'F', 'T', 'C', 'K', 'P', 'T'};

template <typename T>
void Put(std::vector<char>* buf, const T& v) {
  const char* p = reinterpret_cast<const char*>(&v);
  buf->insert(buf->end(), p, p + sizeof(T));
}

uint32_t Crc32(const char* data, size_t n) {
  boost::crc_32_type crc;
  crc.process_bytes(data, n);
  return crc.checksum();
}

}  // namespace

StatusOr<std::vector<char>> EncodeCheckpoint(const Model& model, const Sgd& sgd) {
  std::span<const float> params = model.params();
  std::span<const float> vel = sgd.velocity();
  if (vel.size() != params.size()) {
    return InvalidArgument("checkpoint: optimiser has " + std::to_string(vel.size()) + " floats but model " +
                           model.name() + " has " + std::to_string(params.size()));
  }
  std::vector<char> buf;
  buf.reserve(64 + model.name().size() + 8 * params.size());
  buf.insert(buf.end(), kMagic, kMagic + 8);
  Put(&buf, kCheckpointVersion);
  Put(&buf, static_cast<uint32_t>(model.name().size()));
  buf.insert(buf.end(), model.name().begin(), model.name().end());
  Put(&buf, static_cast<int64_t>(sgd.step()));
  Put(&buf, static_cast<uint64_t>(params.size()));
  const char* pp = reinterpret_cast<const char*>(params.data());
  buf.insert(buf.end(), pp, pp + params.size_bytes());
  const char* vp = reinterpret_cast<const char*>(vel.data());
  buf.insert(buf.end(), vp, vp + vel.size_bytes());
  Put(&buf, Crc32(buf.data(), buf.size()));
  return buf;
}

Status SaveCheckpoint(const std::string& path, const Model& model, const Sgd& sgd) {
  auto encoded = EncodeCheckpoint(model, sgd);
  if (!encoded.ok()) return encoded.status().WithContext(path);
  const std::vector<char>& buf = *encoded;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return IOError("checkpoint: cannot open " + tmp + " for writing");
    out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
    out.flush();
    if (!out) return IOError("checkpoint: write to " + tmp + " failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return IOError("checkpoint: rename " + tmp + " -> " + path + ": " + ec.message());
  return OkStatus();
}

Status LoadCheckpoint(const std::string& path, Model* model, Sgd* sgd) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("checkpoint: cannot open " + path);
  std::vector<char> buf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return IOError("checkpoint: read of " + path + " failed");
  return DecodeCheckpoint(buf, "checkpoint " + path, model, sgd);
}

Status DecodeCheckpoint(std::span<const char> buf, const std::string& where, Model* model, Sgd* sgd) {
  size_t pos = 0;
  auto take = [&](void* dst, size_t n, const char* what) -> Status {
    if (buf.size() - pos < n) {
      return DataLoss(where + ": truncated while reading " + what + " (file has " +
                      std::to_string(buf.size()) + " bytes)");
    }
    std::memcpy(dst, buf.data() + pos, n);
    pos += n;
    return OkStatus();
  };
  char magic[8];
  LOFT_RETURN_IF_ERROR(take(magic, 8, "magic"));
  if (std::memcmp(magic, kMagic, 8) != 0) return DataLoss(where + ": not a loft checkpoint (bad magic)");
  uint32_t version = 0, name_len = 0;
  LOFT_RETURN_IF_ERROR(take(&version, 4, "version"));
  if (version != kCheckpointVersion) {
    return FailedPrecondition(where + ": unsupported version " + std::to_string(version) +
                              " (this build reads " + std::to_string(kCheckpointVersion) + ")");
  }
  LOFT_RETURN_IF_ERROR(take(&name_len, 4, "name length"));
  if (name_len > 4096) return DataLoss(where + ": implausible name length " + std::to_string(name_len));
  std::string name(name_len, '\0');
  LOFT_RETURN_IF_ERROR(take(name.data(), name_len, "model name"));
  int64_t step = 0;
  uint64_t n = 0;
  LOFT_RETURN_IF_ERROR(take(&step, 8, "step"));
  LOFT_RETURN_IF_ERROR(take(&n, 8, "parameter count"));
  // Exact length check before touching any payload.
  const uint64_t remaining = buf.size() - pos;
  if (n > remaining / 8 || remaining != n * 8 + 4) {
    return DataLoss(where + ": length mismatch: header says " + std::to_string(n) +
                    " parameters, which needs " +
                    (n > remaining ? std::string("more") : std::to_string(n * 8 + 4)) +
                    " bytes after the header, file has " + std::to_string(remaining));
  }
  uint32_t stored_crc = 0;
  std::memcpy(&stored_crc, buf.data() + buf.size() - 4, 4);
  const uint32_t crc = Crc32(buf.data(), buf.size() - 4);
  if (crc != stored_crc) return DataLoss(where + ": CRC mismatch (file is corrupt)");
  if (name != model->name()) {  // (checked after the CRC: a corrupt name is reported as corruption)
    return InvalidArgument(where + ": holds model " + name + " but the model is " + model->name());
  }
  if (static_cast<int64_t>(n) != model->num_params()) {
    return InvalidArgument(where + ": holds " + std::to_string(n) + " parameters, model has " +
                           std::to_string(model->num_params()));
  }
  std::vector<float> params(n), vel(n);
  std::memcpy(params.data(), buf.data() + pos, n * 4);
  std::memcpy(vel.data(), buf.data() + pos + n * 4, n * 4);
  // The CRC proves only that the bytes are what the writer encoded: a
  // NaN/Inf would silently poison every later step, so refuse it.
  for (const auto& [v, what] : {std::pair{&params, "parameter"}, std::pair{&vel, "velocity"}}) {
    for (size_t i = 0; i < n; ++i) {
      if (!std::isfinite((*v)[i])) {
        return DataLoss(where + ": " + what + " " + std::to_string(i) + " is not finite");
      }
    }
  }
  LOFT_RETURN_IF_ERROR(sgd->Restore(step, vel).WithContext(where));
  std::copy(params.begin(), params.end(), model->params().begin());
  return OkStatus();
}

}  // namespace loft::models
