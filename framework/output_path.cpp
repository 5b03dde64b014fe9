#include "framework/output_path.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "framework/error.h"

namespace shardlab {

void check_writable_directory(const std::string& dir, const std::string& flag) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  const std::string probe = (std::filesystem::path(dir) / ".shardlab_write_check").string();
  if (!error) {
    std::FILE* f = std::fopen(probe.c_str(), "w");
    if (!f) error = std::error_code(errno, std::generic_category());
    else std::fclose(f), std::remove(probe.c_str());
  }
  if (error) {
    throw UserError(flag + " '" + dir + "' cannot be written (" + error.message() +
                    "); choose a directory this user can create and write");
  }
}

void check_writable_file(const std::string& path, const std::string& flag) {
  if (path.empty()) return;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) check_writable_directory(parent.string(), flag + " directory");
  const bool existed = std::filesystem::exists(path);
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (!f || std::filesystem::is_directory(path)) {
    if (f) std::fclose(f);
    throw UserError(flag + " '" + path + "' cannot be written (" + std::strerror(errno) +
                    "); give a file path this user can write");
  }
  std::fclose(f);
  if (!existed) std::remove(path.c_str());
}

void write_file(const std::string& path, const std::string& text, const std::string& what) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (!file) throw UserError("cannot write " + what + " '" + path + "': " + std::strerror(errno));
  // fclose flushes: a full disk may first show there.
  const bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  const int error = errno;
  if (std::fclose(file) != 0 || !written) {
    const int reason = written ? errno : error;
    std::remove(path.c_str());
    throw UserError("cannot write " + what + " '" + path + "': " + std::strerror(reason) +
                    "; the partial file was removed; free space on its disk or choose another path");
  }
}

}  // namespace shardlab
