// Training data files, read without LibTorch: a text file (byte-level language modelling), a
// token file of little-endian uint16 ids (nanoGPT's train.bin) or a NumPy array (.npy). Files
// are memory-mapped, so a large file costs address space, not memory.
#ifndef MAPD_WORKER_RUNTIME_DATA_FILES_H_
#define MAPD_WORKER_RUNTIME_DATA_FILES_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/mapd/v1/graph.pb.h"

namespace mapd {

// A read-only memory-mapped file (an empty file maps nothing).
class MappedFile {
 public:
  // NOT_FOUND when the file cannot be opened; INTERNAL when it cannot be mapped.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// A sequence of token ids: the bytes of a text file, or the uint16 ids of a token file.
class TokenSequence {
 public:
  // Byte-level: each byte is a token (ids 0..255).
  static absl::StatusOr<TokenSequence> Text(const std::string& path);
  // Little-endian uint16 ids; INVALID_ARGUMENT if the size is odd.
  static absl::StatusOr<TokenSequence> Uint16(const std::string& path);

  size_t size() const { return bytes_per_token_ == 1 ? file_->size() : file_->size() / 2; }
  int64_t at(size_t i) const {
    const uint8_t* p = file_->data();
    return bytes_per_token_ == 1 ? p[i] : static_cast<int64_t>(p[2 * i] | (p[2 * i + 1] << 8));
  }
  // The largest id in the sequence (-1 when empty); scans the whole file.
  int64_t MaxId() const;
  const std::string& path() const { return file_->path(); }

 private:
  std::shared_ptr<MappedFile> file_;
  int bytes_per_token_ = 1;
};

// An array in NumPy's .npy format (versions 1-3), C order, little-endian or single-byte
// elements of a type LibTorch has: f2 f4 f8, i1 i2 i4 i8, u1, b1 (numpy.save's output for those).
// The header is a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (N, ...)}.
class NpyArray {
 public:
  // NOT_FOUND for a missing file; INVALID_ARGUMENT naming the file for another format, a
  // Fortran-order or big-endian array, an unsupported element type, or a size that does not
  // match the header (a truncated file).
  static absl::StatusOr<NpyArray> Open(const std::string& path);

  v1::DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  // The first element (aligned as numpy.save aligns it: at least 16 bytes into a mapped page).
  const void* data() const { return file_->data() + offset_; }
  const std::string& path() const { return file_->path(); }

 private:
  std::shared_ptr<MappedFile> file_;
  size_t offset_ = 0;
  v1::DType dtype_ = v1::DTYPE_UNSPECIFIED;
  std::vector<int64_t> shape_;
};

// The dict an .npy header holds (exposed for tests): INVALID_ARGUMENT saying what is wrong.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};
absl::StatusOr<NpyHeader> ParseNpyHeader(const std::string& text);

}  // namespace mapd

#endif  // MAPD_WORKER_RUNTIME_DATA_FILES_H_
