#include "framework/hdf5_handle.h"

#include <cstring>
#include <fstream>

#include "framework/error.h"

namespace shardlab::hdf5 {

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = other.id_;
    close_ = other.close_;
    other.id_ = H5I_INVALID_HID;
  }
  return *this;
}

bool Handle::reset() {
  if (id_ < 0) return true;
  const herr_t status = close_(id_);
  id_ = H5I_INVALID_HID;
  return status >= 0;
}

namespace {

// HDF5 1.10 leaves a file whose close failed (its flush hit a full disk) half-destroyed
// under its id, and the library's teardown at exit dereferences it: a segfault after the
// run's clear error (exit 139). Every file is closed by its Handle before exit, so the
// teardown has nothing to do but that; it is switched off before the library starts
// (H5dont_atexit only counts before the first HDF5 call, hence a static initialiser).
[[maybe_unused]] const herr_t kNoTeardownAtExit = H5dont_atexit();

}  // namespace

void silence_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

namespace {

herr_t collect_reason(unsigned depth, const H5E_error2_t* error, void* out) {
  auto& reasons = *static_cast<std::string*>(out);
  // Outermost and innermost entries say the most: "unable to open file: truncated file ...".
  if (depth == 0) reasons = error->desc ? error->desc : "";
  else if (error->desc && *error->desc) reasons = reasons.substr(0, reasons.find(": ")) + ": " + error->desc;
  return 0;
}

// HDF5's file driver reports a failed system call as one long record ("file write failed:
// time = ..., filename = ..., errno = 28, error message = 'No space left on device', buf =
// ..."): only the system's reason is kept.
std::string system_reason(const std::string& reason) {
  const std::string key = "error message = '";
  const size_t at = reason.find(key), record = reason.find("time = ");
  if (at == std::string::npos || record == std::string::npos || record > at) return reason;
  const size_t end = reason.find('\'', at + key.size());
  return reason.substr(0, record) + reason.substr(at + key.size(), end - at - key.size());
}

}  // namespace

std::string last_error() {
  std::string reason;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_reason, &reason);
  H5Eclear2(H5E_DEFAULT);
  return reason.empty() ? "HDF5 gave no reason" : system_reason(reason);
}

void throw_error(const std::string& what, const std::string& hint) {
  throw UserError(what + ": " + last_error() + "; " + hint);
}

bool signature_at_start(const std::string& path) {
  static constexpr char kSignature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
  char head[8] = {};
  std::ifstream in(path, std::ios::binary);
  in.read(head, sizeof head);
  return in.gcount() == sizeof head && std::memcmp(head, kSignature, sizeof head) == 0;
}

}  // namespace shardlab::hdf5
