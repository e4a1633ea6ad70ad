#include "worker/daemon/rotating_log.h"

#include <filesystem>
#include <system_error>
#include <utility>

namespace mapd {

RotatingLog::RotatingLog(std::string path, int64_t max_bytes) : path_(std::move(path)), max_bytes_(max_bytes) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path_, ec);
  bytes_ = ec ? 0 : static_cast<int64_t>(size);
  out_.open(path_, std::ios::app | std::ios::binary);
}

void RotatingLog::Append(std::string_view text) {
  if (bytes_ > max_bytes_) {
    out_.close();
    std::error_code ec;
    std::filesystem::rename(path_, path_ + ".1", ec);
    out_.clear();
    out_.open(path_, std::ios::trunc | std::ios::binary);
    bytes_ = 0;
  }
  out_.write(text.data(), static_cast<std::streamsize>(text.size()));
  out_.flush();  // readable as it comes (an operator's tail -f)
  if (out_) {
    bytes_ += static_cast<int64_t>(text.size());
  } else {
    out_.clear();  // (dropped; the next chunk tries again)
  }
}

}  // namespace mapd
