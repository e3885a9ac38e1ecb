#include "cache/idx_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace loft::cache {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;
constexpr uint32_t kLabelsMagic = 0x00000801;
// Sanity bound on one file's decompressed size (Fashion-MNIST train: 47 MB).
constexpr int64_t kMaxIdxBytes = int64_t{4} << 30;
// The data is read (and its buffer grown) this much at a time.
constexpr size_t kReadChunkBytes = size_t{16} << 20;

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

// Reads exactly n bytes; fewer means the file is truncated.
Status ReadExact(gzFile f, const std::string& path, void* out, size_t n, std::string_view what) {
  auto* p = static_cast<unsigned char*>(out);
  size_t done = 0;
  while (done < n) {
    const size_t chunk = std::min<size_t>(n - done, size_t{1} << 30);
    const int got = gzread(f, p + done, static_cast<unsigned>(chunk));
    if (got < 0) {
      int errnum = 0;
      const char* msg = gzerror(f, &errnum);
      return DataLoss(path + ": corrupt gzip stream while reading " + std::string(what) + ": " +
                      (msg != nullptr ? msg : "unknown zlib error"));
    }
    if (got == 0) {
      int errnum = 0;
      const char* msg = gzerror(f, &errnum);
      std::string detail =
          (errnum != Z_OK && msg != nullptr && *msg != '\0') ? std::string(" (") + msg + ")" : "";
      return DataLoss(path + ": truncated: " + std::string(what) + " needs " + std::to_string(n) +
                      " bytes but the file ends after " + std::to_string(done) + detail);
    }
    done += static_cast<size_t>(got);
  }
  return OkStatus();
}

uint32_t BigEndian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

struct IdxFile {
  std::vector<uint32_t> dims;
  std::vector<uint8_t> data;
};

StatusOr<IdxFile> ReadIdxFile(const std::string& path, uint32_t magic, size_t ndims) {
  errno = 0;
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "rb"));
  if (!f) {
    const int e = errno;
    return NotFound(path + ": cannot open: " + (e != 0 ? std::strerror(e) : "gzopen failed"));
  }
  gzbuffer(f.get(), 1 << 17);
  unsigned char header[16];
  const size_t header_bytes = 4 + 4 * ndims;
  LOFT_RETURN_IF_ERROR(ReadExact(f.get(), path, header, header_bytes, "the IDX header"));
  const uint32_t got_magic = BigEndian32(header);
  if (got_magic != magic) {
    char buf[128];
    std::snprintf(buf, sizeof buf, ": bad magic number 0x%08x (expected 0x%08x, an IDX %s file)", got_magic,
                  magic, magic == kImagesMagic ? "images" : "labels");
    return InvalidArgument(path + buf);
  }
  IdxFile out;
  int64_t total = 1;
  for (size_t i = 0; i < ndims; ++i) {
    const uint32_t d = BigEndian32(header + 4 + 4 * i);
    if (d == 0 || d > (1u << 30)) {
      return InvalidArgument(path + ": dimension " + std::to_string(i) + " is " + std::to_string(d) +
                             " (must be in 1 … 2^30)");
    }
    out.dims.push_back(d);
    total *= d;
    if (total > kMaxIdxBytes) {
      return InvalidArgument(path + ": header promises more than " + std::to_string(kMaxIdxBytes) + " bytes");
    }
  }
  // Grown as the data arrives, so a header that promises more than the file
  // holds costs what the file holds (a 35-byte file promising 4 GiB
  // allocated 4 GiB before it was found truncated).
  const auto want = static_cast<size_t>(total);
  while (out.data.size() < want) {
    const size_t at = out.data.size();
    const size_t n = std::min(want - at, kReadChunkBytes);
    out.data.resize(at + n);
    LOFT_RETURN_IF_ERROR(ReadExact(f.get(), path, out.data.data() + at, n,
                                   "the data (" + std::to_string(total) +
                                       " bytes per the header, from byte " + std::to_string(at) + ")"));
  }
  unsigned char extra = 0;
  const int more = gzread(f.get(), &extra, 1);
  if (more < 0) {
    int errnum = 0;
    const char* msg = gzerror(f.get(), &errnum);
    return DataLoss(path + ": corrupt gzip stream after the data: " + (msg != nullptr ? msg : "zlib error"));
  }
  if (more > 0) {
    return InvalidArgument(path + ": trailing bytes after the " + std::to_string(total) +
                           " data bytes the header promises");
  }
  return out;
}

}  // namespace

StatusOr<IdxDataset> ReadIdx(const std::string& images_gz_path, const std::string& labels_gz_path) {
  LOFT_ASSIGN_OR_RETURN(IdxFile images, ReadIdxFile(images_gz_path, kImagesMagic, 3));
  LOFT_ASSIGN_OR_RETURN(IdxFile labels, ReadIdxFile(labels_gz_path, kLabelsMagic, 1));
  if (images.dims[0] != labels.dims[0]) {
    return InvalidArgument(images_gz_path + " holds " + std::to_string(images.dims[0]) + " images but " +
                           labels_gz_path + " holds " + std::to_string(labels.dims[0]) + " labels");
  }
  IdxDataset ds;
  ds.count = images.dims[0];
  ds.rows = static_cast<int>(images.dims[1]);
  ds.cols = static_cast<int>(images.dims[2]);
  ds.images = std::move(images.data);
  ds.labels = std::move(labels.data);
  return ds;
}

StatusOr<IdxDataset> LoadFashionMnist(const std::string& dir, std::string_view split) {
  std::string prefix;
  if (split == "train") {
    prefix = "train";
  } else if (split == "test") {
    prefix = "t10k";
  } else {
    return InvalidArgument("unknown Fashion-MNIST split '" + std::string(split) + "' (train|test)");
  }
  const std::string base = dir.empty() ? std::string(".") : dir;
  const std::string images = base + "/" + prefix + "-images-idx3-ubyte.gz";
  const std::string labels = base + "/" + prefix + "-labels-idx1-ubyte.gz";
  LOFT_ASSIGN_OR_RETURN(IdxDataset ds, ReadIdx(images, labels));
  for (size_t i = 0; i < ds.labels.size(); ++i) {
    if (ds.labels[i] >= kFashionMnistClasses) {
      return InvalidArgument(labels + ": label " + std::to_string(ds.labels[i]) + " at index " +
                             std::to_string(i) + " is outside 0 … " +
                             std::to_string(kFashionMnistClasses - 1));
    }
  }
  return ds;
}

}  // namespace loft::cache
