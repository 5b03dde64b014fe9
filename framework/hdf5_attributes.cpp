#include "framework/hdf5_attributes.h"

#include <algorithm>
#include <vector>

#include "framework/error.h"
#include "framework/hdf5_handle.h"

namespace shardlab::hdf5 {
namespace {

constexpr const char* kDiskHint = "check that the directory is writable and the disk is not full";
constexpr const char* kCorruptHint = "the file is truncated or corrupt; resume from an earlier checkpoint";

// Strings are stored fixed-length, inside the (checksummed) attribute message; variable-length
// strings live in HDF5's global heap, which has no checksum, and a damaged one crashes HDF5.
Handle fixed_string_type(size_t length, const std::string& what) {
  Handle type(checked(H5Tcopy(H5T_C_S1), what, kDiskHint), H5Tclose);
  checked(H5Tset_size(type.get(), std::max<size_t>(length, 1)), what, kDiskHint);
  checked(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), what, kDiskHint);
  checked(H5Tset_cset(type.get(), H5T_CSET_UTF8), what, kDiskHint);
  return type;
}

herr_t collect_attribute_name(hid_t, const char* name, const H5A_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}

}  // namespace

void write_attribute(hid_t location, const std::string& key, const AttributeValue& value, const std::string& what) {
  if (H5Aexists(location, key.c_str()) > 0) checked(H5Adelete(location, key.c_str()), what, kDiskHint);
  Handle space(checked(H5Screate(H5S_SCALAR), what, kDiskHint), H5Sclose);
  Handle owned;  // keeps a string type alive while it is used
  hid_t file_type, memory_type;
  const void* buffer;
  if (const auto* i = std::get_if<int64_t>(&value)) {
    file_type = H5T_STD_I64LE, memory_type = H5T_NATIVE_INT64, buffer = i;
  } else if (const auto* f = std::get_if<double>(&value)) {
    file_type = H5T_IEEE_F64LE, memory_type = H5T_NATIVE_DOUBLE, buffer = f;
  } else {
    const std::string& text = std::get<std::string>(value);
    owned = fixed_string_type(text.size(), what);
    file_type = memory_type = owned.get(), buffer = text.empty() ? "" : text.data();
  }
  Handle attribute(checked(H5Acreate2(location, key.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                           what, kDiskHint),
                   H5Aclose);
  checked(H5Awrite(attribute.get(), memory_type, buffer), what, kDiskHint);
}

AttributeValue read_attribute(hid_t location, const std::string& key, const std::string& where) {
  const std::string what = where + ": cannot read attribute '" + key + "'";
  Handle attribute(checked(H5Aopen(location, key.c_str(), H5P_DEFAULT), what, kCorruptHint), H5Aclose);
  Handle space(checked(H5Aget_space(attribute.get()), what, kCorruptHint), H5Sclose);
  Handle type(checked(H5Aget_type(attribute.get()), what, kCorruptHint), H5Tclose);
  const H5T_class_t type_class = H5Tget_class(type.get());
  const bool scalar = H5Sget_simple_extent_npoints(space.get()) == 1;
  if (scalar && type_class == H5T_INTEGER) {
    int64_t v = 0;
    checked(H5Aread(attribute.get(), H5T_NATIVE_INT64, &v), what, kCorruptHint);
    return v;
  }
  if (scalar && type_class == H5T_FLOAT) {
    double v = 0;
    checked(H5Aread(attribute.get(), H5T_NATIVE_DOUBLE, &v), what, kCorruptHint);
    return v;
  }
  if (scalar && type_class == H5T_STRING && H5Tis_variable_str(type.get()) == 0) {
    std::string v(H5Tget_size(type.get()), '\0');
    checked(H5Aread(attribute.get(), type.get(), v.data()), what, kCorruptHint);
    return v.substr(0, v.find('\0'));
  }
  throw UserError(what + ": only scalar integers, floats and fixed-length strings are supported; "
                         "write it with h5py as an int, a float or numpy.bytes_");
}

Attributes read_attributes(hid_t location, const std::string& where) {
  std::vector<std::string> keys;
  checked(H5Aiterate2(location, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_attribute_name, &keys),
          where + ": cannot list attributes", kCorruptHint);
  Attributes attributes;
  for (const std::string& key : keys) attributes[key] = read_attribute(location, key, where);
  return attributes;
}

}  // namespace shardlab::hdf5
