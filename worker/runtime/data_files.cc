#include "worker/runtime/data_files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace mapd {

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat("cannot open data file '", path, "': ", std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("data file '", path, "' is not a regular file"));
  }
  std::unique_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat("cannot map data file '", path, "': ", std::strerror(err)));
    }
    f->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return f;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

absl::StatusOr<TokenSequence> TokenSequence::Text(const std::string& path) {
  auto f = MappedFile::Open(path);
  if (!f.ok()) return f.status();
  TokenSequence s;
  s.file_ = std::move(*f);
  s.bytes_per_token_ = 1;
  return s;
}

absl::StatusOr<TokenSequence> TokenSequence::Uint16(const std::string& path) {
  auto f = MappedFile::Open(path);
  if (!f.ok()) return f.status();
  if ((*f)->size() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("token file '", path, "' has ", (*f)->size(),
                                                   " bytes, an odd number; it must hold little-endian uint16 ids"));
  }
  TokenSequence s;
  s.file_ = std::move(*f);
  s.bytes_per_token_ = 2;
  return s;
}

int64_t TokenSequence::MaxId() const {
  int64_t m = -1;
  const size_t n = size();
  for (size_t i = 0; i < n; ++i) m = std::max(m, at(i));
  return m;
}

}  // namespace mapd
