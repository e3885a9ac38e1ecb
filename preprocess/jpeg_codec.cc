#include "preprocess/jpeg_codec.h"

#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace loft::preprocess {

void ResizeBilinear(std::span<const uint8_t> src, int w, int h, std::span<uint8_t> dst, int ow, int oh) {
  const double sx = static_cast<double>(w) / ow;
  const double sy = static_cast<double>(h) / oh;
  for (int y = 0; y < oh; ++y) {
    const double fy = std::clamp((y + 0.5) * sy - 0.5, 0.0, static_cast<double>(h - 1));
    const int y0 = static_cast<int>(fy);
    const int y1 = std::min(y0 + 1, h - 1);
    const double ty = fy - y0;
    for (int x = 0; x < ow; ++x) {
      const double fx = std::clamp((x + 0.5) * sx - 0.5, 0.0, static_cast<double>(w - 1));
      const int x0 = static_cast<int>(fx);
      const int x1 = std::min(x0 + 1, w - 1);
      const double tx = fx - x0;
      const auto at = [&](int yy, int xx) {
        return static_cast<double>(src[static_cast<size_t>(yy) * w + xx]);
      };
      const double top = at(y0, x0) * (1 - tx) + at(y0, x1) * tx;
      const double bottom = at(y1, x0) * (1 - tx) + at(y1, x1) * tx;
      dst[static_cast<size_t>(y) * ow + x] = static_cast<uint8_t>(std::lround(top * (1 - ty) + bottom * ty));
    }
  }
}

JpegEncoder::JpegEncoder() : handle_(tjInitCompress()) {}
JpegEncoder::~JpegEncoder() {
  if (handle_ != nullptr) tjDestroy(handle_);
}

StatusOr<std::span<const uint8_t>> JpegEncoder::EncodeGrey(std::span<const uint8_t> pixels, int w, int h,
                                                           int size, int quality) {
  if (handle_ == nullptr) return Internal("jpeg: cannot create a TurboJPEG compressor");
  if (w < 1 || h < 1 || pixels.size() != static_cast<size_t>(w) * static_cast<size_t>(h))
    return InvalidArgument("jpeg: image buffer does not hold " + std::to_string(w) + "x" + std::to_string(h) +
                           " pixels");
  if (size < 1 || size > kMaxDecodedSide)
    return InvalidArgument("jpeg: size must be in [1, " + std::to_string(kMaxDecodedSide) + "]");
  if (quality < 1 || quality > 100) return InvalidArgument("jpeg: quality must be in [1, 100]");
  const uint8_t* src = pixels.data();
  if (w != size || h != size) {
    resized_.resize(static_cast<size_t>(size) * size);
    ResizeBilinear(pixels, w, h, resized_, size, size);
    src = resized_.data();
  }
  out_.resize(tjBufSize(size, size, TJSAMP_GRAY));
  unsigned char* buf = out_.data();
  unsigned long len = out_.size();
  if (tjCompress2(handle_, src, size, 0, size, TJPF_GRAY, &buf, &len, TJSAMP_GRAY, quality,
                  TJFLAG_NOREALLOC | TJFLAG_ACCURATEDCT) != 0) {
    return Internal(std::string("jpeg: encode failed: ") + tjGetErrorStr2(handle_));
  }
  return std::span<const uint8_t>(out_.data(), len);
}

JpegDecoder::JpegDecoder() : handle_(tjInitDecompress()) {}
JpegDecoder::~JpegDecoder() {
  if (handle_ != nullptr) tjDestroy(handle_);
}

Status JpegDecoder::DecodeGrey(uint64_t id, std::span<const uint8_t> jpeg, GreyImage* out) {
  const auto fail = [&](const std::string& what) {
    return DataLoss("sample " + std::to_string(id) + ": JPEG payload (" + std::to_string(jpeg.size()) +
                    " bytes) does not decode: " + what);
  };
  if (handle_ == nullptr) return Internal("jpeg: cannot create a TurboJPEG decompressor");
  if (jpeg.empty()) return fail("empty payload");
  int w = 0, h = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(handle_, jpeg.data(), jpeg.size(), &w, &h, &subsamp, &colorspace) != 0)
    return fail(std::string("header: ") + tjGetErrorStr2(handle_));
  if (w < 1 || h < 1 || w > kMaxDecodedSide || h > kMaxDecodedSide)
    return fail("header claims " + std::to_string(w) + "x" + std::to_string(h) +
                " pixels (sides must be in [1, " + std::to_string(kMaxDecodedSide) + "])");
  out->width = w;
  out->height = h;
  out->pixels.resize(static_cast<size_t>(w) * static_cast<size_t>(h));
  if (tjDecompress2(handle_, jpeg.data(), jpeg.size(), out->pixels.data(), w, 0, h, TJPF_GRAY,
                    TJFLAG_ACCURATEDCT | TJFLAG_STOPONWARNING) != 0) {
    return fail(std::string("data: ") + tjGetErrorStr2(handle_));
  }
  return OkStatus();
}

size_t MaxJpegBytes(int size) {
  const int side = std::clamp(size, 1, kMaxDecodedSide);
  return static_cast<size_t>(tjBufSize(side, side, TJSAMP_GRAY));
}

}  // namespace loft::preprocess
