// FuzzInput: reads a fuzz input as a stream of small decisions (the
// stateful targets interpret their input as a program of operations), and
// FuzzProgram, its writer, with which make_seeds.cc builds seed programs.
// Every read past the end returns 0 / empty, so any byte string is a valid
// program: the fuzzer mutates operations and their arguments, not a
// format it first has to learn.
//
// Not responsible for: what the bytes mean (each target documents its own
// operations next to its LLVMFuzzerTestOneInput).
// Thread-safety: plain value types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace loft::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool empty() const { return pos_ >= size_; }
  size_t remaining() const { return empty() ? 0 : size_ - pos_; }

  uint8_t U8() { return empty() ? 0 : data_[pos_++]; }
  uint16_t U16() { return static_cast<uint16_t>(U8() | (U8() << 8)); }
  uint32_t U32() { return U16() | (static_cast<uint32_t>(U16()) << 16); }
  uint64_t U64() { return U32() | (static_cast<uint64_t>(U32()) << 32); }
  bool Bool() { return (U8() & 1) != 0; }
  // One of `n` choices (n > 0).
  int Below(int n) { return static_cast<int>(U8() % static_cast<unsigned>(n)); }
  template <typename T>
  T Pick(std::initializer_list<T> choices) {
    return choices.begin()[Below(static_cast<int>(choices.size()))];
  }
  // A double from a table of values that break arithmetic (NaN, ±inf,
  // negative, huge, denormal) and ordinary ones.
  double Double() {
    static constexpr double kTable[] = {0.0,
                                        1.0,
                                        2.5,
                                        10.0,
                                        -1.0,
                                        1e9,
                                        1e300,
                                        std::numeric_limits<double>::quiet_NaN(),
                                        std::numeric_limits<double>::infinity(),
                                        -std::numeric_limits<double>::infinity(),
                                        std::numeric_limits<double>::denorm_min(),
                                        0.001};
    return kTable[U8() % (sizeof(kTable) / sizeof(kTable[0]))];
  }
  // A length byte, then that many bytes (fewer at the end of the input).
  std::string Bytes() { return Take(U8()); }
  std::string Take(size_t n) {
    if (n > remaining()) n = remaining();
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Writes what FuzzInput reads (seed programs).
class FuzzProgram {
 public:
  FuzzProgram& U8(uint8_t v) {
    bytes_.push_back(static_cast<char>(v));
    return *this;
  }
  FuzzProgram& U16(uint16_t v) { return U8(v & 0xff).U8(v >> 8); }
  FuzzProgram& U32(uint32_t v) { return U16(v & 0xffff).U16(static_cast<uint16_t>(v >> 16)); }
  FuzzProgram& U64(uint64_t v) { return U32(static_cast<uint32_t>(v)).U32(static_cast<uint32_t>(v >> 32)); }
  FuzzProgram& Bytes(std::string_view s) {
    if (s.size() > 255) std::abort();
    U8(static_cast<uint8_t>(s.size()));
    bytes_.append(s);
    return *this;
  }
  FuzzProgram& Raw(std::string_view s) {
    bytes_.append(s);
    return *this;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// LOFT_FUZZ_TRACE=1: targets print what each operation did (to check that
// a seed reaches what it was written for: fuzz_replay_<name> SEED).
inline bool Tracing() {
  static const bool on = std::getenv("LOFT_FUZZ_TRACE") != nullptr;
  return on;
}

// Where targets put their files (journals, caches): $LOFT_FUZZ_SCRATCH, or
// the system's temp directory.
inline std::filesystem::path ScratchBase() {
  const char* dir = std::getenv("LOFT_FUZZ_SCRATCH");
  return dir != nullptr && *dir != '\0' ? std::filesystem::path(dir) : std::filesystem::temp_directory_path();
}

// A property the target checks does not hold: report and crash (libFuzzer
// keeps the input).
[[noreturn]] inline void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz property violated: %s\n", what.c_str());
  std::abort();
}

}  // namespace loft::fuzz
