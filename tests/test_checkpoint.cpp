// HDF5 checkpoints: bit-exact round trips, pieces and hyperslabs, atomic commit, and a
// UserError (never a crash) for every kind of bad file.
#include <doctest/doctest.h>
#include <hdf5.h>
#include <omp.h>
#include <zlib.h>

#include <cstring>
#include <cmath>
#include <filesystem>
#include <limits>
#include <fstream>
#include <iterator>

#include "framework/checkpoint.h"
#include "framework/checkpoint_recording.h"
#include "framework/file_seal.h"
#include "framework/error.h"
#include "framework/slab.h"
#include "tests/temp_dir.h"
#include "tests/user_error.h"

using namespace shardlab;

using shardlab::testing::user_error_of;

namespace {

// Distinct, non-round values (exact bits matter), including a negative zero and a denormal.
std::vector<float> pattern(int64_t n, float salt) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = salt + static_cast<float>(i) * 1.0009765625f + 1.0f / (3.0f + i);
  if (n > 2) v[1] = -0.0f, v[2] = 1e-40f;
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}


bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

const Shape kBig = {300, 257};  // several chunks
const Shape kSmall = {4, 5, 3};

void write_reference(const std::string& path, float salt) {
  CheckpointWriter w(path);
  w.write("params/big", kBig, pattern(numel_of(kBig), salt));
  w.write("params/blocks.0.small", kSmall, pattern(numel_of(kSmall), salt));
  w.write("optim/m/blocks.0.small", kSmall, pattern(numel_of(kSmall), -salt));
  w.write("scalar", {}, std::vector<float>{salt});
  w.set_attribute("step", int64_t{123});
  w.set_attribute("loss", 2.5);
  w.set_attribute("note", std::string("héllo"));
  w.set_config({{"model", std::string("gpt2")}, {"n_layer", int64_t{4}}, {"lr", 3e-4}});
  w.commit();
}

std::vector<float> read_all(const CheckpointReader& r, const std::string& name, const Shape& shape) {
  std::vector<float> out(numel_of(shape));
  r.read(name, shape, out);
  return out;
}

}  // namespace

TEST_CASE("flat ranges split into boxes in element order") {
  auto boxes = flat_range_boxes({4, 5}, 3, 13);
  REQUIRE(boxes.size() == 3);
  CHECK(boxes[0].offset == Shape{0, 3});
  CHECK(boxes[0].count == Shape{1, 2});
  CHECK(boxes[1].offset == Shape{1, 0});
  CHECK(boxes[1].count == Shape{1, 5});
  CHECK(boxes[2].offset == Shape{2, 0});
  CHECK(boxes[2].count == Shape{1, 3});
  CHECK(flat_range_boxes({4, 5}, 5, 15).size() == 1);  // whole rows
  CHECK(flat_range_boxes({4, 5}, 7, 7).empty());
  CHECK(flat_range_boxes({}, 0, 1).size() == 1);

  const Shape shape = {3, 4, 5};  // every range: boxes cover it exactly, in order
  for (int64_t begin = 0; begin <= 60; begin += 7) {
    for (int64_t end = begin; end <= 60; end += 11) {
      int64_t next = begin;
      for (const Box& box : flat_range_boxes(shape, begin, end)) {
        CHECK(box_inside(shape, box));
        CHECK((box.offset[0] * 4 + box.offset[1]) * 5 + box.offset[2] == next);
        next += numel_of(box.count);
      }
      CHECK(next == end);
    }
  }
}

TEST_CASE("checkpoint round trip is bit exact, with attributes and config") {
  TempDir dir;
  const std::string path = dir.file("ckpt.h5");
  write_reference(path, 0.5f);
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));

  CheckpointReader r(path);
  CHECK(r.tensor_names() ==
        std::vector<std::string>{"optim/m/blocks.0.small", "params/big", "params/blocks.0.small", "scalar"});
  CHECK(r.shape("params/big") == kBig);
  CHECK(r.shape("scalar") == Shape{});
  CHECK(same_bits(read_all(r, "params/big", kBig), pattern(numel_of(kBig), 0.5f)));
  CHECK(same_bits(read_all(r, "optim/m/blocks.0.small", kSmall), pattern(numel_of(kSmall), -0.5f)));
  CHECK(read_all(r, "scalar", {}) == std::vector<float>{0.5f});
  CHECK(r.int_attribute("step") == 123);
  CHECK(r.float_attribute("loss") == 2.5);
  CHECK(r.string_attribute("note") == "héllo");
  const Attributes config = r.config();
  CHECK(config.size() == 3);
  CHECK(std::get<std::string>(config.at("model")) == "gpt2");
  CHECK(std::get<int64_t>(config.at("n_layer")) == 4);
  CHECK(std::get<double>(config.at("lr")) == 3e-4);
}

// --ckpt-async with pipeline stages: each stage's part recorded, sent as bytes, joined on
// the writer's rank, replayed into the file.
TEST_CASE("recordings joined from bytes replay into the file a direct write gives") {
  TempDir dir;
  write_reference(dir.file("direct.h5"), 0.5f);
  CheckpointRecording first, second;
  first.write("params/big", kBig, pattern(numel_of(kBig), 0.5f));
  const std::vector<float> small = pattern(numel_of(kSmall), 0.5f);
  second.write_range("params/blocks.0.small", kSmall, 0, std::span(small).first(25));  // in two pieces
  second.write_range("params/blocks.0.small", kSmall, 25, std::span(small).subspan(25));
  second.write("optim/m/blocks.0.small", kSmall, pattern(numel_of(kSmall), -0.5f));
  second.write("scalar", {}, std::vector<float>{0.5f});
  second.set_attribute("step", int64_t{123});
  second.set_attribute("loss", 2.5);
  second.set_attribute("note", std::string("héllo"));
  second.set_config({{"model", std::string("gpt2")}, {"n_layer", int64_t{4}}, {"lr", 3e-4}});
  const std::vector<uint8_t> bytes = second.serialize();
  first.append(CheckpointRecording::deserialize(bytes));
  CHECK(first.bytes() == 4 * (numel_of(kBig) + 2 * numel_of(kSmall) + 1));
  {
    CheckpointWriter w(dir.file("joined.h5"));
    first.replay(w);
    w.commit();
  }
  const CheckpointReader direct(dir.file("direct.h5")), joined(dir.file("joined.h5"));
  CHECK(joined.tensor_names() == direct.tensor_names());
  for (const auto& [name, shape] : {std::pair{"params/big", kBig}, std::pair{"params/blocks.0.small", kSmall},
                                    std::pair{"optim/m/blocks.0.small", kSmall}, std::pair{"scalar", Shape{}}}) {
    CHECK(same_bits(read_all(joined, name, shape), read_all(direct, name, shape)));
  }
  CHECK(joined.int_attribute("step") == 123);
  CHECK(joined.string_attribute("note") == "héllo");
  CHECK(std::get<double>(joined.config().at("lr")) == 3e-4);

  // Bytes that are not a recording: a clear error, never a crash.
  CHECK(contains(user_error_of([&] { CheckpointRecording::deserialize(std::span(bytes).first(bytes.size() - 3)); }),
                 "ends early"));
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  CHECK(contains(user_error_of([&] { CheckpointRecording::deserialize(longer); }), "past its last entry"));
}

TEST_CASE("tensors written in pieces equal tensors written whole; hyperslab reads") {
  TempDir dir;
  const std::string path = dir.file("pieces.h5");
  const std::vector<float> big = pattern(numel_of(kBig), 1.0f), small = pattern(numel_of(kSmall), 2.0f);
  {
    CheckpointWriter w(path);
    for (int64_t row = 0; row < 300; row += 100) {  // row ranges, as a row-sharded rank would
      w.write_slab("params/big", kBig, {row, 0}, {100, 257},
                   std::span<const float>(big).subspan(row * 257, 100 * 257));
    }
    const int64_t cuts[] = {0, 7, 29, 30, 60};  // flat ranges across row boundaries, as ZeRO shards
    for (int i = 0; i + 1 < 5; ++i) {
      w.write_range("params/small", kSmall, cuts[i],
                    std::span<const float>(small).subspan(cuts[i], cuts[i + 1] - cuts[i]));
    }
    w.commit();
  }
  CheckpointReader r(path);
  CHECK(same_bits(read_all(r, "params/big", kBig), big));
  CHECK(same_bits(read_all(r, "params/small", kSmall), small));

  std::vector<float> columns(300 * 57);  // a column block, as a tensor-parallel rank reads
  r.read_slab("params/big", kBig, {0, 200}, {300, 57}, columns);
  for (int64_t i = 0; i < 300; ++i) {
    for (int64_t j = 0; j < 57; ++j) REQUIRE(columns[i * 57 + j] == big[i * 257 + 200 + j]);
  }
  std::vector<float> range(41);
  r.read_range("params/small", kSmall, 13, range);
  CHECK(same_bits(range, std::vector<float>(small.begin() + 13, small.begin() + 54)));
}

TEST_CASE("an uncommitted or killed write leaves the previous checkpoint intact") {
  TempDir dir;
  const std::string path = dir.file("ckpt.h5");
  write_reference(path, 0.5f);
  {
    CheckpointWriter w(path);  // aborted: destroyed without commit
    w.write("params/big", kBig, pattern(numel_of(kBig), 9.0f));
    w.set_attribute("step", int64_t{999});
    CHECK(std::filesystem::exists(path + ".tmp"));
  }
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
  // A killed process leaves a half-written temporary file behind.
  std::ofstream(path + ".tmp", std::ios::binary) << "\x89HDF\r\n\x1a\n half a checkpoint";
  {
    CheckpointReader r(path);
    CHECK(r.int_attribute("step") == 123);
    CHECK(same_bits(read_all(r, "params/big", kBig), pattern(numel_of(kBig), 0.5f)));
  }
  write_reference(path, 0.75f);  // the next write replaces both
  CheckpointReader r(path);
  CHECK(same_bits(read_all(r, "params/big", kBig), pattern(numel_of(kBig), 0.75f)));
}

TEST_CASE("a non-finite value is never committed: later writes are skipped, commit throws, the previous file stays") {
  TempDir dir;
  const std::string path = dir.file("ckpt.h5");
  write_reference(path, 0.5f);
  for (const float bad : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
    std::vector<float> values = pattern(numel_of(kBig), 9.0f);
    values[17] = bad;
    CheckpointWriter w(path);
    w.write("params/big", kBig, values);
    w.write("params/small", kSmall, pattern(numel_of(kSmall), 1.0f));  // skipped, not an error
    w.set_attribute("step", int64_t{999});
    try {
      w.commit();
      FAIL("committed a non-finite value");
    } catch (const UserError& e) {
      CHECK(std::string(e.what()).find("tensor 'params/big' holds a non-finite value") != std::string::npos);
    }
  }
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
  CheckpointReader r(path);
  CHECK(r.int_attribute("step") == 123);
}

TEST_CASE("corrupt, truncated and foreign files raise a UserError naming the file") {
  TempDir dir;
  const std::string good = dir.file("good.h5");
  write_reference(good, 0.5f);
  std::ifstream in(good, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());

  const std::string truncated = dir.file("truncated.h5");
  std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  std::string msg = user_error_of([&] { CheckpointReader r(truncated); });
  CHECK(contains(msg, truncated));
  CHECK(contains(msg, "earlier checkpoint"));

  const std::string garbage = dir.file("garbage.h5");
  std::ofstream(garbage, std::ios::binary) << "this is not an HDF5 file at all";
  CHECK(contains(user_error_of([&] { CheckpointReader r(garbage); }), "not an HDF5 file"));
  const std::string tiny = dir.file("tiny.h5");
  std::ofstream(tiny, std::ios::binary) << "";
  CHECK(contains(user_error_of([&] { CheckpointReader r(tiny); }), "not a shardlab checkpoint"));

  const std::string missing = dir.file("missing.h5");
  CHECK(contains(user_error_of([&] { CheckpointReader r(missing); }), missing + "' does not exist"));

  // Flip one byte inside the stored data of params/big: the file's seal catches it before
  // HDF5 reads anything.
  const std::vector<float> values = pattern(numel_of(kBig), 0.5f);
  const std::string needle(reinterpret_cast<const char*>(&values[40000]), 64);
  const size_t at = bytes.find(needle);
  REQUIRE(at != std::string::npos);
  std::string damaged = bytes;
  damaged[at + 10] ^= 0x55;
  const std::string flipped = dir.file("flipped.h5");
  std::ofstream(flipped, std::ios::binary) << damaged;
  msg = user_error_of([&] { CheckpointReader r(flipped); });
  CHECK(contains(msg, flipped));
  CHECK(contains(msg, "does not match its checksum"));

  // A damaged seal (its magic) is not mistaken for a file without one.
  std::string unsealed = bytes;
  unsealed[0] ^= 0x01;
  const std::string broken_seal = dir.file("broken_seal.h5");
  std::ofstream(broken_seal, std::ios::binary) << unsealed;
  CHECK(contains(user_error_of([&] { CheckpointReader r(broken_seal); }), "seal is damaged"));

  const std::string foreign = dir.file("foreign.h5");
  H5Fclose(H5Fcreate(foreign.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  CHECK(contains(user_error_of([&] { CheckpointReader r(foreign); }), "an HDF5 file without a seal"));
}

TEST_CASE("a checkpoint that does not match the model raises a UserError naming tensor and shapes") {
  TempDir dir;
  const std::string path = dir.file("ckpt.h5");
  write_reference(path, 0.5f);
  CheckpointReader r(path);
  std::vector<float> out(300 * 256);
  std::string msg = user_error_of([&] { r.read("params/big", {300, 256}, out); });
  CHECK(contains(msg, path));
  CHECK(contains(msg, "'params/big' has shape [300, 257] but the model expects [300, 256]"));
  msg = user_error_of([&] { r.read("params/blocks.1.small", kSmall, out); });
  CHECK(contains(msg, "no tensor 'params/blocks.1.small'"));
  CHECK(contains(user_error_of([&] { r.int_attribute("data_position"); }), "no attribute 'data_position'"));
  CHECK(contains(user_error_of([&] { r.int_attribute("note"); }), "'note' is not an integer"));
}

TEST_CASE("any damaged byte gives a UserError or the exact stored values, never a crash") {
  TempDir dir;
  const std::string good = dir.file("good.h5");
  const std::vector<float> values = pattern(1000, 0.25f);
  {
    CheckpointWriter w(good);
    w.write("params/x", {10, 100}, values);
    w.set_attribute("step", int64_t{3});
    w.set_config({{"model", std::string("gpt2")}});
    w.commit();
  }
  std::ifstream in(good, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string damaged_path = dir.file("damaged.h5");
  int refused = 0;
  for (size_t at = 0; at < bytes.size(); at += 17) {
    std::string damaged = bytes;
    damaged[at] ^= 0xff;
    std::ofstream(damaged_path, std::ios::binary | std::ios::trunc) << damaged;
    try {
      CheckpointReader r(damaged_path);
      const bool intact = same_bits(read_all(r, "params/x", {10, 100}), values) && r.int_attribute("step") == 3 &&
                          r.config().size() == 1;
      CHECK_MESSAGE(intact, "byte " << at << " changed what the checkpoint reads without an error");
    } catch (const UserError&) {
      ++refused;
    }
  }
  // The seal covers every byte: none reaches HDF5 damaged.
  CHECK(refused == static_cast<int>((bytes.size() + 16) / 17));
}

TEST_CASE("the seal's CRC, taken by threads in pieces, is one pass of zlib's CRC-32; a damaged piece breaks it") {
  TempDir dir;
  const std::string path = dir.file("sealed.bin");
  // 50 MiB after the header: three pieces of 16 MiB or more, on three threads.
  std::string bytes(kSealBytes + (size_t{50} << 20), '\0');
  uint32_t x = 12345;
  for (size_t i = kSealBytes; i < bytes.size(); ++i) bytes[i] = static_cast<char>((x = x * 1664525u + 1013904223u) >> 24);
  std::ofstream(path, std::ios::binary) << bytes;
  const int threads = omp_get_max_threads();
  omp_set_num_threads(3);
  seal_file(path);
  omp_set_num_threads(threads);
  std::ifstream in(path, std::ios::binary);
  const std::string sealed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t stored = 0;
  std::memcpy(&stored, sealed.data() + 24, 8);
  const uLong one_pass = crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(sealed.data() + 32),
                               static_cast<uInt>(sealed.size() - 32));
  CHECK(stored == one_pass);
  CHECK(check_seal(path).state == SealCheck::kSealed);
  for (const size_t at : {sealed.size() / 2, sealed.size() - 1}) {  // in the second piece, and the last byte
    std::string damaged = sealed;
    damaged[at] ^= 0x01;
    std::ofstream(path, std::ios::binary | std::ios::trunc) << damaged;
    CHECK_MESSAGE(check_seal(path).state == SealCheck::kBroken, "byte " << at);
  }
}

TEST_CASE("an HDF5 file without a seal is refused before HDF5 walks it, even one laid out as a checkpoint") {
  TempDir dir;
  const std::string path = dir.file("legacy.h5");
  {
    const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t scalar = H5Screate(H5S_SCALAR);
    const std::string format = "shardlab-checkpoint";
    const hid_t text = H5Tcopy(H5T_C_S1);
    H5Tset_size(text, format.size());
    const hid_t a = H5Acreate2(file, "format", text, scalar, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, text, format.data());
    const int64_t version = 1;
    const hid_t v = H5Acreate2(file, "format_version", H5T_STD_I64LE, scalar, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(v, H5T_NATIVE_INT64, &version);
    const hsize_t dims[2] = {2, 3};
    const hid_t space = H5Screate_simple(2, dims, nullptr);
    const hid_t links = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(links, 1);
    const hid_t d = H5Dcreate2(file, "params/w", H5T_IEEE_F32LE, space, links, H5P_DEFAULT, H5P_DEFAULT);
    H5Pclose(links);
    const std::vector<float> w = pattern(6, 0.5f);
    H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, w.data());
    for (hid_t id : {d, a, v}) H5Oclose(id);
    for (hid_t id : {space, scalar}) H5Sclose(id);
    H5Tclose(text);
    H5Fclose(file);
  }
  REQUIRE(check_seal(path).state == SealCheck::kUnsealed);
  CHECK(contains(user_error_of([&] { CheckpointReader r(path); }), "before checkpoint format 2"));
  // Sealed as the writer does -- after room was left for the seal -- it would read; the
  // seal is not something a file can have by accident.
  CHECK_THROWS_AS(seal_file(dir.file("missing.h5")), UserError);
}
