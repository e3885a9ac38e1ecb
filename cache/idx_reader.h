// Fashion-MNIST IDX reader: gzip-compressed (or plain) IDX files as
// published by Zalando (and MNIST). Checks the magic numbers (0x00000803
// images, 0x00000801 labels), the dimensions, that the image and label
// counts agree and that each file holds exactly the bytes its header
// promises; errors name the file and what was wrong.
//
// Not responsible for: normalising pixels, shuffling, placement.
// Thread-safety: free functions without shared state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace loft::cache {

struct IdxDataset {
  int64_t count = 0;
  int rows = 0, cols = 0;
  std::vector<uint8_t> images;  // count*rows*cols, row-major
  std::vector<uint8_t> labels;  // count
};

StatusOr<IdxDataset> ReadIdx(const std::string& images_gz_path, const std::string& labels_gz_path);

// split: "train" (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz)
// or "test" (t10k-…). Also checks that every label is in 0…9.
StatusOr<IdxDataset> LoadFashionMnist(const std::string& dir, std::string_view split);

inline constexpr const char* kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";
inline constexpr int kFashionMnistClasses = 10;

}  // namespace loft::cache
