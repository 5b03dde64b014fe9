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

void silence_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

namespace {

herr_t collect_reason(unsigned depth, const H5E_error2_t* error, void* out) {
  auto& reasons = *static_cast<std::string*>(out);
  // Outermost and innermost entries say the most: "unable to open file: truncated file ...".
  if (depth == 0) reasons = error->desc ? error->desc : "";
  else if (error->desc && *error->desc) reasons = reasons.substr(0, reasons.find(": ")) + ": " + error->desc;
  return 0;
}

}  // namespace

std::string last_error() {
  std::string reason;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_reason, &reason);
  H5Eclear2(H5E_DEFAULT);
  return reason.empty() ? "HDF5 gave no reason" : reason;
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
