#include "framework/checkpoint_recording.h"

#include <cstring>
#include <type_traits>

#include "framework/error.h"

namespace shardlab {

void CheckpointRecording::write(const std::string& name, const Shape& shape, std::span<const float> data) {
  bytes_ += static_cast<int64_t>(data.size_bytes());
  entries_.push_back({.kind = Kind::kWrite, .name = name, .shape = shape, .data = {data.begin(), data.end()}});
}

void CheckpointRecording::write_range(const std::string& name, const Shape& shape, int64_t flat_offset,
                                      std::span<const float> data) {
  bytes_ += static_cast<int64_t>(data.size_bytes());
  entries_.push_back(
      {.kind = Kind::kRange, .name = name, .shape = shape, .offset = flat_offset, .data = {data.begin(), data.end()}});
}

void CheckpointRecording::set_attribute(const std::string& key, const AttributeValue& value) {
  entries_.push_back({.kind = Kind::kAttribute, .name = key, .value = value});
}

void CheckpointRecording::set_config(const Attributes& config) {
  entries_.push_back({.kind = Kind::kConfig, .config = config});
}

void CheckpointRecording::replay(CheckpointWriter& writer) const {
  for (const Entry& e : entries_) {
    switch (e.kind) {
      case Kind::kWrite: writer.write(e.name, e.shape, e.data); break;
      case Kind::kRange: writer.write_range(e.name, e.shape, e.offset, e.data); break;
      case Kind::kAttribute: writer.set_attribute(e.name, e.value); break;
      case Kind::kConfig: writer.set_config(e.config); break;
    }
  }
}

void CheckpointRecording::append(CheckpointRecording&& other) {
  for (Entry& e : other.entries_) entries_.push_back(std::move(e));
  bytes_ += other.bytes_;
  other.entries_.clear();
  other.bytes_ = 0;
}

namespace {

// Little-endian fields, as this machine lays them out (the ranks of one job share it).
class Bytes {
 public:
  void raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  template <typename T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    raw(&v, sizeof v);
  }
  void put(const std::string& s) {
    put<uint64_t>(s.size());
    raw(s.data(), s.size());
  }
  void put(const AttributeValue& v) {
    put<uint8_t>(static_cast<uint8_t>(v.index()));
    std::visit([this](const auto& x) { put(x); }, v);
  }
  std::vector<uint8_t> out_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}
  void raw(void* p, size_t n) {
    if (n > in_.size() - at_) throw UserError("a checkpoint recording ends early: not a serialized recording");
    if (n == 0) return;  // an empty span's data() may be null, which memcpy may not be given
    std::memcpy(p, in_.data() + at_, n);
    at_ += n;
  }
  template <typename T>
  T get() {
    T v;
    raw(&v, sizeof v);
    return v;
  }
  std::string text() {
    std::string s(get<uint64_t>(), '\0');
    raw(s.data(), s.size());
    return s;
  }
  AttributeValue value() {
    switch (get<uint8_t>()) {
      case 0: return get<int64_t>();
      case 1: return get<double>();
      case 2: return text();
    }
    throw UserError("a checkpoint recording holds an attribute of unknown type");
  }
  bool done() const { return at_ == in_.size(); }

 private:
  std::span<const uint8_t> in_;
  size_t at_ = 0;
};

}  // namespace

std::vector<uint8_t> CheckpointRecording::serialize() const {
  Bytes b;
  b.put<uint64_t>(entries_.size());
  for (const Entry& e : entries_) {
    b.put<uint8_t>(static_cast<uint8_t>(e.kind));
    b.put(e.name);
    b.put<uint64_t>(e.shape.size());
    for (int64_t d : e.shape) b.put(d);
    b.put(e.offset);
    b.put<uint64_t>(e.data.size());
    b.raw(e.data.data(), e.data.size() * sizeof(float));
    b.put(e.value);
    b.put<uint64_t>(e.config.size());
    for (const auto& [key, value] : e.config) {
      b.put(key);
      b.put(value);
    }
  }
  return std::move(b.out_);
}

CheckpointRecording CheckpointRecording::deserialize(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  CheckpointRecording recording;
  const uint64_t count = r.get<uint64_t>();
  for (uint64_t i = 0; i < count; ++i) {
    Entry e;
    const uint8_t kind = r.get<uint8_t>();
    if (kind > static_cast<uint8_t>(Kind::kConfig)) throw UserError("a checkpoint recording holds an unknown entry");
    e.kind = static_cast<Kind>(kind);
    e.name = r.text();
    e.shape.resize(r.get<uint64_t>());
    for (int64_t& d : e.shape) d = r.get<int64_t>();
    e.offset = r.get<int64_t>();
    e.data.resize(r.get<uint64_t>());
    r.raw(e.data.data(), e.data.size() * sizeof(float));
    e.value = r.value();
    const uint64_t keys = r.get<uint64_t>();
    for (uint64_t k = 0; k < keys; ++k) {
      std::string key = r.text();
      e.config[key] = r.value();
    }
    recording.bytes_ += static_cast<int64_t>(e.data.size() * sizeof(float));
    recording.entries_.push_back(std::move(e));
  }
  if (!r.done()) throw UserError("a checkpoint recording has bytes past its last entry");
  return recording;
}

}  // namespace shardlab
