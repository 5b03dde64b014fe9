// Scalar HDF5 attributes, the metadata of checkpoint files (framework/checkpoint.h):
// integers, floats and fixed-length UTF-8 strings. Strings are fixed-length so that they
// live inside the checksummed attribute message (HDF5 keeps variable-length strings in its
// global heap, which has no checksum). Failures are UserErrors naming the attribute, as
// checked() gives them (hdf5_handle.h).
//
//   hdf5::write_attribute(file.get(), "step", int64_t{400}, "write " + path);
//   const Attributes all = hdf5::read_attributes(file.get(), path);
#pragma once

#include <hdf5.h>

#include <string>

#include "framework/checkpoint_sink.h"

namespace shardlab::hdf5 {

// Writes attribute `key` on `location` (a file, group or dataset), replacing one of that
// name; `what` names the write in an error.
void write_attribute(hid_t location, const std::string& key, const AttributeValue& value, const std::string& what);

// Attribute `key` of `location`; a UserError naming `where` if it is missing, unreadable or
// of a type checkpoints do not write (an array, a variable-length string).
AttributeValue read_attribute(hid_t location, const std::string& key, const std::string& where);

// Every attribute of `location`, by name.
Attributes read_attributes(hid_t location, const std::string& where);

}  // namespace shardlab::hdf5
