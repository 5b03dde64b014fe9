// RAII for HDF5 C handles, and HDF5 failures turned into UserErrors.
//
// Handle owns one hid_t and closes it with the matching H5*close function when it goes
// out of scope. checked() wraps every HDF5 call that returns an id or a status: on
// failure it throws UserError("<what>: <HDF5's own reason>; <hint>"). silence_errors()
// stops HDF5 from printing its error stack to stderr, since the message is ours to give.
//
//   hdf5::silence_errors();
//   hdf5::Handle file(hdf5::checked(H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT), "open " + p, hint), H5Fclose);
#pragma once

#include <hdf5.h>

#include <string>

namespace shardlab::hdf5 {

using CloseFn = herr_t (*)(hid_t);

class Handle {
 public:
  Handle() = default;
  Handle(hid_t id, CloseFn close) : id_(id), close_(close) {}
  ~Handle() { reset(); }
  Handle(Handle&& other) noexcept : id_(other.id_), close_(other.close_) { other.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& other) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  hid_t get() const { return id_; }
  // Closes now; returns false when HDF5 reports the close failed (e.g. a failed flush).
  bool reset();

 private:
  hid_t id_ = H5I_INVALID_HID;
  CloseFn close_ = nullptr;
};

void silence_errors();

// The reason on HDF5's current error stack ("truncated file: eof = 800, ..."); clears it.
std::string last_error();

// Whether the file starts with HDF5's signature (no userblock before it).
bool signature_at_start(const std::string& path);

// Throws UserError naming `what`, HDF5's reason and `hint`.
[[noreturn]] void throw_error(const std::string& what, const std::string& hint);

// Returns `result` when it is non-negative; otherwise throw_error(what, hint).
template <typename T>
T checked(T result, const std::string& what, const std::string& hint) {
  if (result < 0) [[unlikely]] {
    throw_error(what, hint);
  }
  return result;
}

}  // namespace shardlab::hdf5
