// JPEG codec of dataset.encoding: jpeg (libjpeg-turbo's TurboJPEG API).
// Ingest encodes each 28x28 grey image resized (bilinear) to image_size²
// at jpeg_quality; the preprocessing stage decodes it back to grey pixels.
// Greyscale throughout (TJSAMP_GRAY, TJPF_GRAY), the accurate integer DCT
// (the same bytes from every build of one libjpeg-turbo version, SIMD or
// not: the dataset manifest's digests are computed from the dataset file
// by whoever ingests, cache/manifest.h).
//
// Not responsible for: cropping, resizing to the model's input,
// normalising (preprocessor.h); storing records (cache/).
// Thread-safety: an encoder or decoder holds a TurboJPEG handle and
// scratch buffers: one per thread. Distinct objects are independent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"

namespace loft::preprocess {

// A grey image, row-major, width*height bytes.
struct GreyImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;
};

// Bilinear resize of a w x h grey image to ow x oh (pixel centres at +0.5,
// edges clamped, rounded to the nearest byte). Used at ingest to enlarge
// the dataset's 28x28 images to dataset.image_size.
void ResizeBilinear(std::span<const uint8_t> src, int w, int h, std::span<uint8_t> dst, int ow, int oh);

class JpegEncoder {
 public:
  JpegEncoder();
  ~JpegEncoder();
  JpegEncoder(const JpegEncoder&) = delete;
  JpegEncoder& operator=(const JpegEncoder&) = delete;

  // The w x h grey image resized to size x size (bilinear; as is when it
  // already is that size) and encoded as a greyscale JPEG of `quality`
  // (1..100). The bytes stay valid until the next call on this encoder.
  StatusOr<std::span<const uint8_t>> EncodeGrey(std::span<const uint8_t> pixels, int w, int h, int size,
                                                int quality);

 private:
  void* handle_ = nullptr;  // tjhandle
  std::vector<uint8_t> resized_;
  std::vector<uint8_t> out_;
};

class JpegDecoder {
 public:
  JpegDecoder();
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  // Decodes `jpeg`, the payload of sample `id`, into grey pixels (`out`'s
  // buffer is reused). A payload that is not a JPEG, is truncated or
  // corrupt (libjpeg-turbo's warnings count: TJFLAG_STOPONWARNING), or
  // whose header claims a side outside [1, kMaxDecodedSide] gives
  // DataLoss "sample <id>: JPEG payload (<n> bytes) does not decode:
  // <what failed>"; `out` then holds nothing usable.
  Status DecodeGrey(uint64_t id, std::span<const uint8_t> jpeg, GreyImage* out);

 private:
  void* handle_ = nullptr;  // tjhandle
};

// Largest width or height a decoded payload may have (dataset.image_size's
// bound): a record cannot make a decoder allocate more than 1 MiB.
inline constexpr int kMaxDecodedSide = 1024;

// The most bytes JpegEncoder::EncodeGrey can produce for a size x size
// image at any quality (TurboJPEG's tjBufSize for greyscale): a bound on
// a dataset.encoding jpeg payload, e.g. for a peer fetch's frame limit.
size_t MaxJpegBytes(int size);

}  // namespace loft::preprocess
