// PayloadEncoder: what a record's payload holds for a dataset sample
// (dataset.encoding), the one place ingest and the dataset manifest make
// it, so a manifest digest matches the record an ingest wrote.
//   raw   the image's pixel bytes as the dataset holds them (784 for
//         Fashion-MNIST), a view into the dataset: no copy.
//   jpeg  the image resized (bilinear) to image_size x image_size and
//         encoded as a greyscale JPEG at jpeg_quality (preprocess/
//         jpeg_codec.h): sizes vary per image. Decoding it is the
//         preprocessing stage's job (preprocess/preprocessor.h).
//
// Not responsible for: the record around the payload (sample_cache.h).
// Thread-safety: an encoder holds a TurboJPEG handle and a buffer: one per
// thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "cache/idx_reader.h"
#include "core/cluster_spec.h"
#include "core/status.h"

namespace loft::preprocess {
class JpegEncoder;
}  // namespace loft::preprocess

namespace loft::cache {

struct PayloadEncoding {
  DatasetEncoding encoding = DatasetEncoding::kRaw;
  int image_size = 96;    // jpeg: the stored image's side
  int jpeg_quality = 90;  // jpeg: 1..100

  static PayloadEncoding FromSpec(const DatasetSpec& dataset) {
    return {dataset.encoding, dataset.image_size, dataset.jpeg_quality};
  }
};

class PayloadEncoder {
 public:
  explicit PayloadEncoder(const PayloadEncoding& encoding);
  ~PayloadEncoder();
  PayloadEncoder(const PayloadEncoder&) = delete;
  PayloadEncoder& operator=(const PayloadEncoder&) = delete;

  // Sample `id` of `ds` as a record payload. Raw: a view into ds.images.
  // Jpeg: the encoded bytes, valid until the next call on this encoder.
  // OutOfRange when id >= ds.count.
  StatusOr<std::span<const uint8_t>> Encode(const IdxDataset& ds, uint64_t id);

  const PayloadEncoding& encoding() const { return encoding_; }

 private:
  PayloadEncoding encoding_;
  std::unique_ptr<preprocess::JpegEncoder> jpeg_;
};

}  // namespace loft::cache
