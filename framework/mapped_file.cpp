#include "framework/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace shardlab {

MappedFile::MappedFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    error_ = std::strerror(errno);
    return;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    error_ = std::strerror(errno);
  } else if (S_ISDIR(st.st_mode)) {
    error_ = "it is a directory";
  } else if (st.st_size > 0) {  // mmap refuses length 0: an empty file is an empty span
    void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      error_ = std::string("cannot map it into memory: ") + std::strerror(errno);
    } else {
      data_ = static_cast<const unsigned char*>(p);
      size_ = static_cast<size_t>(st.st_size);
    }
  }
  close(fd);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(other.data_), size_(other.size_), error_(std::move(other.error_)) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) munmap(const_cast<unsigned char*>(data_), size_);
}

}  // namespace shardlab
