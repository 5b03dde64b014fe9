#include "framework/safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "framework/error.h"
#include "framework/mapped_file.h"
#include "framework/ops/bf16.h"

namespace shardlab {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian, as this host must be");

int64_t dtype_size(const std::string& dtype) { return dtype == "F32" ? 4 : 2; }

std::string shape_text(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

float f16_to_float(uint16_t bits) {
  const float sign = (bits & 0x8000) ? -1.0f : 1.0f;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -24);  // zero, subnormal
  if (exponent == 31) return mantissa ? std::nanf("") : sign * INFINITY;
  return sign * std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
}

}  // namespace

struct SafetensorsFile::Impl {
  // One tensor of the header (a member type: a type in an anonymous namespace may not be a
  // member of Impl, which has external linkage).
  struct Entry {
    std::string dtype;
    Shape shape;
    uint64_t begin = 0, end = 0;
  };
  explicit Impl(std::string p) : path(std::move(p)), map(path) {}
  std::string path;
  MappedFile map;
  const unsigned char* tensor_data = nullptr;  // just after the header
  std::map<std::string, Entry> entries;
  std::map<std::string, std::string> metadata;

  [[noreturn]] void fail(const std::string& what) const {
    throw UserError("safetensors file '" + path + "': " + what);
  }

  void parse(const std::string& header_text, uint64_t data_size) {
    nlohmann::json header;
    try {
      header = nlohmann::json::parse(header_text);
    } catch (const nlohmann::json::exception& e) {
      fail(std::string("the header is not valid JSON (") + e.what() + ")");
    }
    if (!header.is_object()) fail("the header is not a JSON object");
    std::vector<std::pair<uint64_t, std::string>> by_begin;
    for (const auto& [name, value] : header.items()) {
      if (name == "__metadata__") {
        if (!value.is_object()) fail("'__metadata__' is not an object of strings");
        for (const auto& [key, v] : value.items()) {
          if (!v.is_string()) fail("'__metadata__' field '" + key + "' is not a string");
          metadata[key] = v.get<std::string>();
        }
        continue;
      }
      const std::string where = "tensor '" + name + "'";
      if (!value.is_object()) fail(where + " is not an object with dtype, shape and data_offsets");
      const auto field = [&](const char* key) -> const nlohmann::json& {
        if (!value.contains(key)) fail(where + " has no field '" + key + "'");
        return value.at(key);
      };
      Entry e;
      const nlohmann::json& dtype = field("dtype");
      if (!dtype.is_string()) fail(where + ": field 'dtype' is not a string");
      e.dtype = dtype.get<std::string>();
      if (e.dtype != "F32" && e.dtype != "BF16" && e.dtype != "F16") {
        fail(where + " has dtype '" + e.dtype + "', which shardlab does not read (F32, BF16 or F16)");
      }
      const nlohmann::json& shape = field("shape");
      if (!shape.is_array()) fail(where + ": field 'shape' is not an array");
      uint64_t numel = 1;
      for (const auto& d : shape) {
        if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 40)) {
          fail(where + ": field 'shape' holds " + d.dump() + ", not a dimension");
        }
        const uint64_t size = d.get<uint64_t>();
        if (size != 0 && numel > (uint64_t{1} << 48) / size) fail(where + ": field 'shape' " + shape.dump() + " is too large");
        e.shape.push_back(static_cast<int64_t>(size));
        numel *= size;
      }
      const nlohmann::json& offsets = field("data_offsets");
      if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
          !offsets[1].is_number_unsigned()) {
        fail(where + ": field 'data_offsets' is " + offsets.dump() + ", not [begin, end]");
      }
      e.begin = offsets[0].get<uint64_t>();
      e.end = offsets[1].get<uint64_t>();
      if (e.begin > e.end || e.end > data_size) {
        fail(where + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
             "] lie outside the " + std::to_string(data_size) + " data bytes; the file is truncated or corrupt");
      }
      if (e.end - e.begin != numel * dtype_size(e.dtype)) {
        fail(where + ": data_offsets span " + std::to_string(e.end - e.begin) + " bytes, but shape " +
             shape_text(e.shape) + " of " + e.dtype + " needs " + std::to_string(numel * dtype_size(e.dtype)));
      }
      by_begin.emplace_back(e.begin, name);
      entries[name] = std::move(e);
    }
    std::sort(by_begin.begin(), by_begin.end());
    for (size_t i = 1; i < by_begin.size(); ++i) {
      const Entry& previous = entries.at(by_begin[i - 1].second);
      if (previous.end > by_begin[i].first) {
        fail("tensors '" + by_begin[i - 1].second + "' and '" + by_begin[i].second + "' overlap in data_offsets");
      }
    }
  }

  const Entry& entry(const std::string& name) const {
    const auto it = entries.find(name);
    if (it == entries.end()) fail("no tensor '" + name + "'");
    return it->second;
  }
};

SafetensorsFile::SafetensorsFile(std::string path) : impl_(std::make_unique<Impl>(std::move(path))) {
  if (!impl_->map.ok()) impl_->fail("cannot open it (" + impl_->map.error() + ")");
  const uint64_t size = impl_->map.size();
  if (size < 8) impl_->fail("it has " + std::to_string(size) + " bytes, fewer than the 8 of the header length");
  uint64_t header_size = 0;
  std::memcpy(&header_size, impl_->map.bytes().data(), 8);
  if (header_size > size - 8) {
    impl_->fail("the header length " + std::to_string(header_size) + " runs past the end of the file (" +
                std::to_string(size) + " bytes); the file is truncated or not safetensors");
  }
  impl_->tensor_data = impl_->map.bytes().data() + 8 + header_size;
  impl_->parse(std::string(reinterpret_cast<const char*>(impl_->map.bytes().data()) + 8, header_size),
               size - 8 - header_size);
}

SafetensorsFile::~SafetensorsFile() = default;

const std::string& SafetensorsFile::path() const { return impl_->path; }

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : impl_->entries) out.push_back(name);
  return out;
}

bool SafetensorsFile::has(const std::string& name) const { return impl_->entries.count(name) > 0; }
Shape SafetensorsFile::shape(const std::string& name) const { return impl_->entry(name).shape; }
std::string SafetensorsFile::dtype(const std::string& name) const { return impl_->entry(name).dtype; }
const std::map<std::string, std::string>& SafetensorsFile::metadata() const { return impl_->metadata; }

std::vector<float> SafetensorsFile::read(const std::string& name, const Shape& expected) const {
  const Impl::Entry& e = impl_->entry(name);
  if (e.shape != expected) {
    impl_->fail("tensor '" + name + "' has shape " + shape_text(e.shape) + " but the model expects " +
                shape_text(expected));
  }
  const unsigned char* bytes = impl_->tensor_data + e.begin;
  std::vector<float> out(static_cast<size_t>(numel_of(e.shape)));
  if (e.dtype == "F32") {
    std::memcpy(out.data(), bytes, out.size() * sizeof(float));
    return out;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t bits = 0;
    std::memcpy(&bits, bytes + 2 * i, 2);
    out[i] = e.dtype == "BF16" ? to_float(Bf16{bits}) : f16_to_float(bits);
  }
  return out;
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const SafetensorsEntry& t : tensors) {
    SL_ASSERT(static_cast<int64_t>(t.data.size()) == numel_of(t.shape), t.name);
    const uint64_t bytes = t.data.size() * sizeof(float);
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    const uint64_t n = text.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const SafetensorsEntry& t : tensors) {
      out.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size() * sizeof(float)));
    }
    out.close();
    if (!out) {
      std::filesystem::remove(tmp);
      throw UserError("cannot write safetensors file '" + path + "' (" + std::strerror(errno) +
                      "); check that its directory exists, is writable and has space");
    }
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace shardlab
