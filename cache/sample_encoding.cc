#include "cache/sample_encoding.h"

#include <string>

#include "preprocess/jpeg_codec.h"

namespace loft::cache {

PayloadEncoder::PayloadEncoder(const PayloadEncoding& encoding) : encoding_(encoding) {
  if (encoding_.encoding == DatasetEncoding::kJpeg) jpeg_ = std::make_unique<preprocess::JpegEncoder>();
}

PayloadEncoder::~PayloadEncoder() = default;

StatusOr<std::span<const uint8_t>> PayloadEncoder::Encode(const IdxDataset& ds, uint64_t id) {
  if (id >= static_cast<uint64_t>(ds.count)) {
    return OutOfRange("sample id " + std::to_string(id) + " is beyond the dataset's " +
                      std::to_string(ds.count) + " samples");
  }
  const size_t dim = static_cast<size_t>(ds.rows) * static_cast<size_t>(ds.cols);
  const std::span<const uint8_t> pixels(ds.images.data() + id * dim, dim);
  if (encoding_.encoding == DatasetEncoding::kRaw) return pixels;
  auto jpeg = jpeg_->EncodeGrey(pixels, ds.cols, ds.rows, encoding_.image_size, encoding_.jpeg_quality);
  if (!jpeg.ok()) return jpeg.status().WithContext("sample " + std::to_string(id));
  return *jpeg;
}

}  // namespace loft::cache
