#include "worker/runtime/data_files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "model/ir/dtype.h"

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

// ---------------------------------------------------------------- .npy

namespace {

// A reader of the one Python literal an .npy header is: a dict of strings, booleans and a tuple
// of integers.
class LiteralReader {
 public:
  explicit LiteralReader(absl::string_view text) : s_(text) {}

  bool Eat(char c) {
    SkipSpace();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool AtEnd() {
    SkipSpace();
    return i_ == s_.size();
  }
  absl::StatusOr<std::string> String() {
    SkipSpace();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) return Error("a quoted string");
    const char quote = s_[i_++];
    const size_t end = s_.find(quote, i_);
    if (end == absl::string_view::npos) return Error("the string's closing quote");
    std::string out(s_.substr(i_, end - i_));
    i_ = end + 1;
    return out;
  }
  absl::StatusOr<bool> Bool() {
    SkipSpace();
    for (const auto& [word, value] : {std::pair<absl::string_view, bool>{"True", true}, {"False", false}}) {
      if (s_.substr(i_, word.size()) == word) {
        i_ += word.size();
        return value;
      }
    }
    return Error("True or False");
  }
  // (), (n,) or (n, m, ...): non-negative integers.
  absl::StatusOr<std::vector<int64_t>> Tuple() {
    if (!Eat('(')) return Error("a tuple");
    std::vector<int64_t> out;
    while (!Eat(')')) {
      SkipSpace();
      size_t end = i_;
      while (end < s_.size() && absl::ascii_isdigit(static_cast<unsigned char>(s_[end]))) ++end;
      int64_t v = 0;
      if (end == i_ || !absl::SimpleAtoi(s_.substr(i_, end - i_), &v)) return Error("a dimension (a non-negative integer)");
      out.push_back(v);
      i_ = end;
      if (!Eat(',') && (SkipSpace(), i_ >= s_.size() || s_[i_] != ')')) return Error("',' or ')'");
    }
    return out;
  }
  absl::Status Error(absl::string_view wanted) const {
    return absl::InvalidArgumentError(absl::StrCat("expected ", wanted, " at character ", i_, " of the header"));
  }

 private:
  void SkipSpace() {
    while (i_ < s_.size() && absl::ascii_isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  absl::string_view s_;
  size_t i_ = 0;
};

// NumPy's type string (byte order, kind, item size) as a graph dtype; INVALID_ARGUMENT for a
// big-endian or unsupported type.
absl::StatusOr<v1::DType> NpyDType(const std::string& descr) {
  static const std::pair<const char*, v1::DType> kTypes[] = {
      {"f2", v1::FLOAT16}, {"f4", v1::FLOAT32}, {"f8", v1::FLOAT64}, {"i1", v1::INT8}, {"i2", v1::INT16},
      {"i4", v1::INT32},   {"i8", v1::INT64},   {"u1", v1::UINT8},   {"b1", v1::BOOL}};
  if (descr.size() == 3 && (descr[0] == '<' || descr[0] == '|' || descr[0] == '=' || (descr[0] == '>' && descr[2] == '1'))) {
    for (const auto& [code, dtype] : kTypes) {
      if (descr.compare(1, 2, code) == 0) return dtype;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "element type '", descr, "' is not one of float16/32/64, int8/16/32/64, uint8 or bool in little-endian order; "
      "convert it with numpy's astype (e.g. astype('<f4') or astype('<i8')) and save it again"));
}

}  // namespace

absl::StatusOr<NpyHeader> ParseNpyHeader(const std::string& text) {
  LiteralReader r(text);
  NpyHeader h;
  bool has_descr = false, has_order = false, has_shape = false;
  if (!r.Eat('{')) return r.Error("'{'");
  while (!r.Eat('}')) {  // a trailing ',' before '}' is allowed, as numpy writes it
    auto key = r.String();
    if (!key.ok()) return key.status();
    if (!r.Eat(':')) return r.Error("':'");
    if (*key == "descr") {
      auto v = r.String();
      if (!v.ok()) return v.status();
      h.descr = *v;
      has_descr = true;
    } else if (*key == "fortran_order") {
      auto v = r.Bool();
      if (!v.ok()) return v.status();
      h.fortran_order = *v;
      has_order = true;
    } else if (*key == "shape") {
      auto v = r.Tuple();
      if (!v.ok()) return v.status();
      h.shape = *v;
      has_shape = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown key '", *key, "' in the header"));
    }
    if (r.Eat(',')) continue;
    if (r.Eat('}')) break;
    return r.Error("',' or '}'");
  }
  if (!r.AtEnd()) return r.Error("the end after the dict");
  if (!has_descr || !has_order || !has_shape) return absl::InvalidArgumentError("the header lacks descr, fortran_order or shape");
  return h;
}

absl::StatusOr<NpyArray> NpyArray::Open(const std::string& path) {
  auto file = MappedFile::Open(path);
  if (!file.ok()) return file.status();
  const uint8_t* p = (*file)->data();
  const size_t size = (*file)->size();
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not a usable .npy file: ", why));
  };
  static const char kMagic[] = "\x93NUMPY";
  if (size < 10 || std::memcmp(p, kMagic, 6) != 0) return bad("no .npy magic (\\x93NUMPY); save arrays with numpy.save");
  const int major = p[6];
  if (major < 1 || major > 3) return bad(absl::StrCat("format version ", major, " (1 to 3 are read)"));
  const size_t prefix = major == 1 ? 10 : 12;
  if (size < prefix) return bad("truncated header");
  const size_t header_len = major == 1 ? (p[8] | (p[9] << 8))
                                       : (static_cast<size_t>(p[8]) | (static_cast<size_t>(p[9]) << 8) |
                                          (static_cast<size_t>(p[10]) << 16) | (static_cast<size_t>(p[11]) << 24));
  if (header_len > size - prefix) return bad("truncated header");
  auto header = ParseNpyHeader(std::string(reinterpret_cast<const char*>(p + prefix), header_len));
  if (!header.ok()) return bad(header.status().message());
  if (header->fortran_order) return bad("Fortran order; save numpy.ascontiguousarray(a) instead");
  auto dtype = NpyDType(header->descr);
  if (!dtype.ok()) return bad(dtype.status().message());
  NpyArray a;
  a.dtype_ = *dtype;
  a.shape_ = header->shape;
  a.offset_ = prefix + header_len;
  int64_t bytes = DTypeSize(a.dtype_);
  for (int64_t d : a.shape_) {
    if (d != 0 && bytes > std::numeric_limits<int64_t>::max() / d) return bad("a shape whose size overflows");
    bytes *= d;
  }
  if (static_cast<uint64_t>(bytes) != size - a.offset_) {
    return bad(absl::StrCat("its header promises ", bytes, " bytes of data and the file holds ", size - a.offset_));
  }
  a.file_ = std::move(*file);
  return a;
}

}  // namespace mapd
