#include "framework/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "framework/error.h"
#include "framework/file_seal.h"
#include "framework/hdf5_attributes.h"
#include "framework/hdf5_handle.h"
#include "framework/slab.h"

namespace shardlab {
namespace {

using hdf5::checked;
using hdf5::Handle;
using hdf5::read_attribute;
using hdf5::read_attributes;
using hdf5::write_attribute;

constexpr const char* kFormatKey = "format";
constexpr const char* kFormatName = "shardlab-checkpoint";
constexpr const char* kFormatVersionKey = "format_version";
constexpr int64_t kFormatVersion = 2;  // 2: sealed (file_seal.h)
constexpr const char* kConfigGroup = "config";
// 256 KiB chunks fit HDF5's default 1 MiB chunk cache, so pieces that share a chunk
// are merged in memory instead of re-read from disk.
constexpr int64_t kChunkElements = 1 << 16;
constexpr const char* kDiskHint = "check that the directory is writable and the disk is not full";
constexpr const char* kCorruptHint = "the file is truncated or corrupt; resume from an earlier checkpoint";

std::vector<hsize_t> to_hsize(const Shape& s) { return {s.begin(), s.end()}; }

void check_box(const std::string& name, const Shape& shape, const Box& box) {
  SL_ASSERT(box_inside(shape, box), "box offset " + shape_str(box.offset) + " count " + shape_str(box.count) +
                                        " outside tensor " + name + " of shape " + shape_str(shape));
}

// A memory space for a dense box and the file space of `dataset` with that box selected.
struct Selection {
  Handle memory, file;
};

Selection select_box(hid_t dataset, const Shape& offset, const Shape& count, const std::string& what) {
  Selection s;
  s.file = Handle(checked(H5Dget_space(dataset), what, kCorruptHint), H5Sclose);
  if (count.empty()) {
    s.memory = Handle(checked(H5Screate(H5S_SCALAR), what, kCorruptHint), H5Sclose);
    return s;
  }
  const auto off = to_hsize(offset), cnt = to_hsize(count);
  checked(H5Sselect_hyperslab(s.file.get(), H5S_SELECT_SET, off.data(), nullptr, cnt.data(), nullptr), what,
          kCorruptHint);
  s.memory = Handle(checked(H5Screate_simple(static_cast<int>(cnt.size()), cnt.data(), nullptr), what, kCorruptHint),
                    H5Sclose);
  return s;
}

herr_t collect_link_name(hid_t, const char* name, const H5L_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}

Shape dataset_shape(hid_t dataset, const std::string& what) {
  Handle space(checked(H5Dget_space(dataset), what, kCorruptHint), H5Sclose);
  const int ndim = checked(H5Sget_simple_extent_ndims(space.get()), what, kCorruptHint);
  std::vector<hsize_t> dims(ndim);
  checked(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), what, kCorruptHint);
  return Shape(dims.begin(), dims.end());
}

// Chunks of about kChunkElements, whole trailing dims first, so row pieces map to few chunks.
std::vector<hsize_t> chunk_dims(const Shape& shape) {
  std::vector<hsize_t> chunk(shape.size());
  int64_t budget = kChunkElements;
  for (size_t d = shape.size(); d-- > 0;) {
    chunk[d] = static_cast<hsize_t>(std::clamp<int64_t>(budget, 1, shape[d]));
    budget = std::max<int64_t>(1, budget / static_cast<int64_t>(chunk[d]));
  }
  return chunk;
}

// A file descriptor, closed on scope exit; used only to fsync.
class FileDescriptor {
 public:
  FileDescriptor(const std::string& path, int flags) : fd_(::open(path.c_str(), flags)) {
    if (fd_ < 0) throw UserError("cannot open '" + path + "' to sync it: " + std::strerror(errno) + "; " + kDiskHint);
  }
  ~FileDescriptor() { ::close(fd_); }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  void sync(const std::string& path) const {
    if (::fsync(fd_) != 0) throw UserError("fsync '" + path + "' failed: " + std::strerror(errno) + "; " + kDiskHint);
  }

 private:
  int fd_;
};

void sync_path(const std::string& path, int flags) { FileDescriptor(path, flags).sync(path); }

}  // namespace

// ---------------------------------------------------------------------------- writer

struct CheckpointWriter::Impl {
  std::string path, tmp_path;
  Handle file, link_properties;
  struct Progress {
    Shape shape;
    int64_t written = 0;
  };
  std::map<std::string, Progress> tensors;
  bool finished = false;
  std::string failure;  // the first failed write's message; later writes are skipped

  // Runs one write, unless an earlier one failed; a UserError becomes `failure`.
  template <typename Write>
  void attempt(const Write& write) {
    if (!failure.empty()) return;
    try {
      write();
    } catch (const UserError& e) {
      failure = e.what();
    }
  }
  void throw_failure() const {
    if (!failure.empty()) throw UserError(failure);
  }

  // Creates the dataset on first use; later uses must agree on the global shape.
  Progress& dataset(const std::string& name, const Shape& shape) {
    auto it = tensors.find(name);
    if (it != tensors.end()) {
      SL_ASSERT(it->second.shape == shape, "checkpoint tensor " + name + " written as " + shape_str(it->second.shape) +
                                               " and as " + shape_str(shape));
      return it->second;
    }
    const std::string what = "checkpoint '" + tmp_path + "': cannot create tensor '" + name + "'";
    const auto dims = to_hsize(shape);
    Handle space(checked(shape.empty() ? H5Screate(H5S_SCALAR)
                                       : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                         what, kDiskHint),
                 H5Sclose);
    Handle create(checked(H5Pcreate(H5P_DATASET_CREATE), what, kDiskHint), H5Pclose);
    if (!shape.empty() && numel_of(shape) > 0) {
      const auto chunk = chunk_dims(shape);
      checked(H5Pset_chunk(create.get(), static_cast<int>(chunk.size()), chunk.data()), what, kDiskHint);
      checked(H5Pset_fletcher32(create.get()), what, kDiskHint);  // reads detect corrupted data
    }
    Handle created(checked(H5Dcreate2(file.get(), name.c_str(), H5T_IEEE_F32LE, space.get(), link_properties.get(),
                                      create.get(), H5P_DEFAULT),
                           what, "tensor names must be unique and not a prefix group of another"),
                   H5Dclose);
    return tensors[name] = Progress{shape, 0};
  }
};

CheckpointWriter::CheckpointWriter(std::string path, Mode mode) : impl_(std::make_unique<Impl>()) {
  hdf5::silence_errors();
  impl_->path = std::move(path);
  impl_->tmp_path = impl_->path + ".tmp";
  const bool append = mode == Mode::kAppend;
  const std::string what = std::string("cannot ") + (append ? "reopen" : "create") + " checkpoint '" + impl_->tmp_path + "'";
  // The 1.10 format checksums all metadata, chunk indexes included, so a damaged file fails
  // to open or read instead of silently reading wrong values.
  Handle access(checked(H5Pcreate(H5P_FILE_ACCESS), what, kDiskHint), H5Pclose);
  checked(H5Pset_libver_bounds(access.get(), H5F_LIBVER_V110, H5F_LIBVER_LATEST), what, kDiskHint);
  // Room at the start for the seal commit() writes (file_seal.h).
  Handle creation(checked(H5Pcreate(H5P_FILE_CREATE), what, kDiskHint), H5Pclose);
  checked(H5Pset_userblock(creation.get(), static_cast<hsize_t>(kSealBytes)), what, kDiskHint);
  const hid_t file = append ? H5Fopen(impl_->tmp_path.c_str(), H5F_ACC_RDWR, access.get())
                            : H5Fcreate(impl_->tmp_path.c_str(), H5F_ACC_TRUNC, creation.get(), access.get());
  impl_->file = Handle(checked(file, what, append ? "every rank that writes needs the same filesystem" : kDiskHint),
                       H5Fclose);
  impl_->link_properties = Handle(checked(H5Pcreate(H5P_LINK_CREATE), what, kDiskHint), H5Pclose);
  checked(H5Pset_create_intermediate_group(impl_->link_properties.get(), 1), what, kDiskHint);
  if (append) return;
  write_attribute(impl_->file.get(), kFormatKey, std::string(kFormatName), what);
  write_attribute(impl_->file.get(), kFormatVersionKey, kFormatVersion, what);
}

void CheckpointWriter::hand_off() {
  impl_->throw_failure();
  check_complete();
  checked(H5Fflush(impl_->file.get(), H5F_SCOPE_GLOBAL), "cannot flush checkpoint '" + impl_->tmp_path + "'", kDiskHint);
  if (!impl_->file.reset()) hdf5::throw_error("cannot close checkpoint '" + impl_->tmp_path + "'", kDiskHint);
  impl_->finished = true;  // the temporary file stays for the next writer
}

void CheckpointWriter::check_complete() const {
  for (const auto& [name, progress] : impl_->tensors) {
    SL_ASSERT(progress.written == numel_of(progress.shape),
              "checkpoint tensor " + name + " has " + std::to_string(progress.written) + " of " +
                  std::to_string(numel_of(progress.shape)) + " elements written");
  }
}

CheckpointWriter::~CheckpointWriter() {
  if (impl_->finished) return;
  impl_->file.reset();
  std::remove(impl_->tmp_path.c_str());
}

void CheckpointWriter::write(const std::string& name, const Shape& shape, std::span<const float> data) {
  write_slab(name, shape, Shape(shape.size(), 0), shape, data);
}

void CheckpointWriter::write_slab(const std::string& name, const Shape& shape, const Shape& offset,
                                  const Shape& count, std::span<const float> data) {
  SL_ASSERT(!impl_->finished, "write to committed checkpoint " + impl_->path);
  check_box(name, shape, {offset, count});
  SL_ASSERT(static_cast<int64_t>(data.size()) == numel_of(count),
            std::to_string(data.size()) + " values for box " + shape_str(count) + " of " + name);
  impl_->attempt([&] {
    const auto bad = std::find_if(data.begin(), data.end(), [](float v) { return !std::isfinite(v); });
    if (bad != data.end()) {
      throw UserError("checkpoint '" + impl_->path + "': tensor '" + name + "' holds a non-finite value (" +
                      std::to_string(*bad) + "); a checkpoint is never written with one (the run diverged): "
                      "resume from an earlier checkpoint with a lower --lr");
    }
    Impl::Progress& progress = impl_->dataset(name, shape);
    progress.written += numel_of(count);
    SL_ASSERT(progress.written <= numel_of(shape), "overlapping pieces written to checkpoint tensor " + name);
    if (data.empty()) return;
    const std::string what = "checkpoint '" + impl_->tmp_path + "': cannot write tensor '" + name + "'";
    Handle dataset(checked(H5Dopen2(impl_->file.get(), name.c_str(), H5P_DEFAULT), what, kDiskHint), H5Dclose);
    Selection s = select_box(dataset.get(), offset, count, what);
    checked(H5Dwrite(dataset.get(), H5T_NATIVE_FLOAT, s.memory.get(), s.file.get(), H5P_DEFAULT, data.data()), what,
            kDiskHint);
  });
}

void CheckpointWriter::write_range(const std::string& name, const Shape& shape, int64_t flat_offset,
                                   std::span<const float> data) {
  size_t done = 0;
  for (const Box& box : flat_range_boxes(shape, flat_offset, flat_offset + static_cast<int64_t>(data.size()))) {
    const auto n = static_cast<size_t>(numel_of(box.count));
    write_slab(name, shape, box.offset, box.count, data.subspan(done, n));
    done += n;
  }
}

void CheckpointWriter::set_attribute(const std::string& key, const AttributeValue& value) {
  SL_ASSERT(key != kFormatKey && key != kFormatVersionKey, "attribute name " + key + " is reserved");
  impl_->attempt([&] {
    write_attribute(impl_->file.get(), key, value, "checkpoint '" + impl_->tmp_path + "': cannot set attribute " + key);
  });
}

void CheckpointWriter::set_config(const Attributes& config) {
  impl_->attempt([&] {
    const std::string what = "checkpoint '" + impl_->tmp_path + "': cannot write the config";
    hid_t file = impl_->file.get();
    Handle group(H5Lexists(file, kConfigGroup, H5P_DEFAULT) > 0
                     ? checked(H5Gopen2(file, kConfigGroup, H5P_DEFAULT), what, kDiskHint)
                     : checked(H5Gcreate2(file, kConfigGroup, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), what, kDiskHint),
                 H5Gclose);
    for (const auto& [key, value] : config) write_attribute(group.get(), key, value, what);
  });
}

void CheckpointWriter::commit() {
  SL_ASSERT(!impl_->finished, "checkpoint " + impl_->path + " committed twice");
  impl_->throw_failure();
  check_complete();
  const std::string& tmp = impl_->tmp_path;
  checked(H5Fflush(impl_->file.get(), H5F_SCOPE_GLOBAL), "cannot flush checkpoint '" + tmp + "'", kDiskHint);
  if (!impl_->file.reset()) hdf5::throw_error("cannot close checkpoint '" + tmp + "'", kDiskHint);
  seal_file(tmp);
  sync_path(tmp, O_RDONLY);
  if (std::rename(tmp.c_str(), impl_->path.c_str()) != 0) {
    throw UserError("cannot rename '" + tmp + "' to '" + impl_->path + "': " + std::strerror(errno) + "; " + kDiskHint);
  }
  impl_->finished = true;
  const std::string dir = std::filesystem::path(impl_->path).parent_path().string();
  sync_path(dir.empty() ? "." : dir, O_RDONLY | O_DIRECTORY);
}

// ---------------------------------------------------------------------------- reader

struct CheckpointReader::Impl {
  std::string path;
  Handle file;
  std::set<std::string> tensors;

  std::string where() const { return "checkpoint '" + path + "'"; }

  Handle open_tensor(const std::string& name, const Shape& expected) const {
    if (!tensors.count(name)) {
      throw UserError(where() + " has no tensor '" + name + "' (it holds " + std::to_string(tensors.size()) +
                      " tensors); it was written for a different model: resume with the model config it was "
                      "written with (see its 'config' attributes) or start a new run");
    }
    Handle dataset(checked(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT), where() + ": cannot open tensor '" + name + "'",
                           kCorruptHint),
                   H5Dclose);
    const Shape stored = dataset_shape(dataset.get(), where() + ": tensor '" + name + "'");
    if (stored != expected) {
      throw UserError(where() + ": tensor '" + name + "' has shape " + shape_str(stored) + " but the model expects " +
                      shape_str(expected) + "; resume with the model config the checkpoint was written with "
                      "(see its 'config' attributes) or start a new run");
    }
    Handle type(checked(H5Dget_type(dataset.get()), where(), kCorruptHint), H5Tclose);
    if (H5Tget_class(type.get()) != H5T_FLOAT) {
      throw UserError(where() + ": tensor '" + name + "' is not stored as floating point; store tensors as float32");
    }
    return dataset;
  }
};

CheckpointReader::CheckpointReader(std::string path) : impl_(std::make_unique<Impl>()) {
  hdf5::silence_errors();
  impl_->path = std::move(path);
  const std::string where = impl_->where();
  if (!std::filesystem::exists(impl_->path)) {
    throw UserError(where + " does not exist; check the path, or list the run directory for the checkpoints it holds");
  }
  // The seal first: HDF5 never walks a file that is not byte for byte as written
  // (file_seal.h), so no damaged file reaches its parser.
  const SealCheck seal = check_seal(impl_->path);
  if (seal.state == SealCheck::kBroken) throw UserError(where + " " + seal.problem + "; " + kCorruptHint);
  if (seal.state == SealCheck::kUnsealed) {
    const std::string what = hdf5::signature_at_start(impl_->path)
                                 ? "an HDF5 file without a seal: written by another program, or by shardlab before "
                                   "checkpoint format 2, which this build does not read"
                                 : "not an HDF5 file, or a checkpoint whose seal is damaged";
    throw UserError(where + " is not a shardlab checkpoint (" + what + "); pass a checkpoint written by this "
                    "shardlab, or if it was one, " + kCorruptHint);
  }
  impl_->file = Handle(checked(H5Fopen(impl_->path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "cannot open " + where,
                               kCorruptHint),
                       H5Fclose);
  const Attributes root = read_attributes(impl_->file.get(), where);
  auto format = root.find(kFormatKey);
  if (format == root.end() || format->second != AttributeValue(std::string(kFormatName))) {
    throw UserError(where + " is an HDF5 file but not a shardlab checkpoint (no format attribute '" +
                    std::string(kFormatName) + "'); pass a checkpoint written by shardlab");
  }
  auto version = root.find(kFormatVersionKey);
  if (version == root.end() || version->second != AttributeValue(kFormatVersion)) {
    throw UserError(where + " has an unsupported format version; this build reads version " +
                    std::to_string(kFormatVersion) + ": use the shardlab version that wrote it");
  }
  std::vector<std::string> links;
  checked(H5Lvisit(impl_->file.get(), H5_INDEX_NAME, H5_ITER_INC, collect_link_name, &links),
          "cannot list the tensors of " + where, kCorruptHint);
  for (const std::string& link : links) {
    Handle object(checked(H5Oopen(impl_->file.get(), link.c_str(), H5P_DEFAULT), "cannot open '" + link + "' in " + where,
                          kCorruptHint),
                  H5Oclose);
    if (H5Iget_type(object.get()) == H5I_DATASET) impl_->tensors.insert(link);
  }
}

CheckpointReader::~CheckpointReader() = default;

const std::string& CheckpointReader::path() const { return impl_->path; }

std::vector<std::string> CheckpointReader::tensor_names() const {
  return {impl_->tensors.begin(), impl_->tensors.end()};
}

bool CheckpointReader::has_tensor(const std::string& name) const { return impl_->tensors.count(name) > 0; }

Shape CheckpointReader::shape(const std::string& name) const {
  if (!has_tensor(name)) throw UserError(impl_->where() + " has no tensor '" + name + "'");
  Handle dataset(checked(H5Dopen2(impl_->file.get(), name.c_str(), H5P_DEFAULT), impl_->where(), kCorruptHint),
                 H5Dclose);
  return dataset_shape(dataset.get(), impl_->where() + ": tensor '" + name + "'");
}

void CheckpointReader::read(const std::string& name, const Shape& expected_shape, std::span<float> out) const {
  read_slab(name, expected_shape, Shape(expected_shape.size(), 0), expected_shape, out);
}

void CheckpointReader::read_slab(const std::string& name, const Shape& expected_shape, const Shape& offset,
                                 const Shape& count, std::span<float> out) const {
  Handle dataset = impl_->open_tensor(name, expected_shape);
  check_box(name, expected_shape, {offset, count});
  SL_ASSERT(static_cast<int64_t>(out.size()) == numel_of(count),
            std::to_string(out.size()) + " values for box " + shape_str(count) + " of " + name);
  if (out.empty()) return;
  const std::string what = impl_->where() + ": cannot read tensor '" + name + "'";
  Selection s = select_box(dataset.get(), offset, count, what);
  checked(H5Dread(dataset.get(), H5T_NATIVE_FLOAT, s.memory.get(), s.file.get(), H5P_DEFAULT, out.data()), what,
          kCorruptHint);
}

void CheckpointReader::read_range(const std::string& name, const Shape& expected_shape, int64_t flat_offset,
                                  std::span<float> out) const {
  size_t done = 0;
  for (const Box& box : flat_range_boxes(expected_shape, flat_offset, flat_offset + static_cast<int64_t>(out.size()))) {
    const auto n = static_cast<size_t>(numel_of(box.count));
    read_slab(name, expected_shape, box.offset, box.count, out.subspan(done, n));
    done += n;
  }
}

Attributes CheckpointReader::attributes() const { return read_attributes(impl_->file.get(), impl_->where()); }

Attributes CheckpointReader::config() const {
  hid_t file = impl_->file.get();
  if (H5Lexists(file, kConfigGroup, H5P_DEFAULT) <= 0) return {};
  Handle group(checked(H5Gopen2(file, kConfigGroup, H5P_DEFAULT), impl_->where() + ": cannot open the config",
                       kCorruptHint),
               H5Gclose);
  return read_attributes(group.get(), impl_->where() + " config");
}

namespace {

template <typename T>
T typed_attribute(const Attributes& attributes, const std::string& key, const std::string& where, const char* kind) {
  auto it = attributes.find(key);
  if (it == attributes.end()) {
    throw UserError(where + " has no attribute '" + key + "'; it was not written by this version of shardlab's "
                            "training loop: start a new run");
  }
  if (const T* v = std::get_if<T>(&it->second)) return *v;
  throw UserError(where + ": attribute '" + key + "' is not " + kind + "; the file was edited or written by another "
                          "program: start a new run");
}

}  // namespace

int64_t CheckpointReader::int_attribute(const std::string& key) const {
  return typed_attribute<int64_t>(attributes(), key, impl_->where(), "an integer");
}
double CheckpointReader::float_attribute(const std::string& key) const {
  return typed_attribute<double>(attributes(), key, impl_->where(), "a float");
}
std::string CheckpointReader::string_attribute(const std::string& key) const {
  return typed_attribute<std::string>(attributes(), key, impl_->where(), "a string");
}

}  // namespace shardlab
