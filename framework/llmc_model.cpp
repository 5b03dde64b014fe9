#include "framework/llmc_model.h"

#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "framework/error.h"
#include "framework/ops/bf16.h"

namespace shardlab::llmc {
namespace {

static_assert(std::endian::native == std::endian::little, "llm.c's files are little-endian, as this host must be");

constexpr int64_t kHeaderInts = 256;
constexpr int64_t kHeaderBytes = kHeaderInts * 4;
constexpr int32_t kVersionFp32 = 3, kVersionBf16 = 5;
constexpr float kNormEps = 1e-5f;  // llm.c's layernorm_forward

struct Header {
  int64_t version = 0, maxT = 0, V = 0, L = 0, NH = 0, C = 0, Vp = 0;
};

// llm.c's tensors in file order: shardlab's name (within a block for the stacked ones).
struct Stacked {
  const char* llmc;
  const char* name;
  bool per_layer;
};
constexpr std::array<Stacked, 16> kTensors = {{
    {"wte", "wte.weight", false},          {"wpe", "wpe.weight", false},
    {"ln1w", "norm1.weight", true},        {"ln1b", "norm1.bias", true},
    {"qkvw", "attn.wqkv.weight", true},    {"qkvb", "attn.wqkv.bias", true},
    {"attprojw", "attn.wo.weight", true},  {"attprojb", "attn.wo.bias", true},
    {"ln2w", "norm2.weight", true},        {"ln2b", "norm2.bias", true},
    {"fcw", "mlp.fc.weight", true},        {"fcb", "mlp.fc.bias", true},
    {"fcprojw", "mlp.fc2.weight", true},   {"fcprojb", "mlp.fc2.bias", true},
    {"lnfw", "norm_f.weight", false},      {"lnfb", "norm_f.bias", false},
}};

std::string block_name(const Stacked& t, int64_t layer) {
  return t.per_layer ? "blocks." + std::to_string(layer) + "." + t.name : t.name;
}

// The model's parameters by name, after checking every one is in llm.c's list.
std::map<std::string, Shape> llmc_parameters(const nn::ModelConfig& c) {
  std::map<std::string, Shape> shapes;
  for (const auto& [name, shape] : model_parameters(c)) shapes[name] = shape;
  std::set<std::string> listed;
  for (const Stacked& t : kTensors) {
    for (int64_t l = 0; l < (t.per_layer ? c.n_layers : 1); ++l) listed.insert(block_name(t, l));
  }
  SL_ASSERT(listed.size() == shapes.size(), "llm.c's 16 tensors cover the gpt model's parameters");
  for (const std::string& name : listed) SL_ASSERT(shapes.count(name), name);
  return shapes;
}

// The refusal of a model llm.c's GPT-2 is not, naming what differs.
void check_llmc_model(const nn::ModelConfig& c, const std::string& what) {
  const auto fail = [&](const std::string& why) {
    throw UserError(what + ": llm.c's model file holds GPT-2 models, " + why);
  };
  if (c.arch != nn::Arch::Gpt) fail("not " + nn::arch_name(c.arch) + "; export a llama model with --format hf");
  if (c.experts > 0) fail("not mixture-of-experts models; export a dense model");
  if (c.d_ff != 4 * c.d_model) {
    fail("whose MLP width is 4 x d_model (" + std::to_string(4 * c.d_model) + "), not d_ff " + std::to_string(c.d_ff) +
         "; use --format hf for this model");
  }
  if (c.norm_eps != kNormEps) {
    fail("whose LayerNorm eps is 1e-5, not " + format_number(c.norm_eps) + "; use --format hf for this model");
  }
}

Header read_header(const std::string& path, std::ifstream& in) {
  const auto fail = [&](const std::string& what) { return UserError("llm.c model file '" + path + "': " + what); };
  in.open(path, std::ios::binary);
  if (!in) throw fail(std::string("cannot open it (") + std::strerror(errno) + ")");
  std::error_code error;
  const uint64_t size = std::filesystem::file_size(path, error);
  std::array<int32_t, kHeaderInts> h{};
  if (error || size < kHeaderBytes || !in.read(reinterpret_cast<char*>(h.data()), kHeaderBytes)) {
    throw fail("it has " + std::to_string(error ? 0 : size) + " bytes, fewer than the " +
               std::to_string(kHeaderBytes) + " of llm.c's header");
  }
  if (h[0] != kModelMagic) {
    throw fail("it starts with " + std::to_string(h[0]) + ", not llm.c's model magic " + std::to_string(kModelMagic) +
               (h[0] == 20240520 ? " (that is llm.c's token shard magic: give it to --data)" : "") +
               "; give an llm.c GPT-2 model file (gpt2_124M.bin) or a shardlab checkpoint");
  }
  Header r{h[1], h[2], h[3], h[4], h[5], h[6], h[7]};
  if (r.version != kVersionFp32 && r.version != kVersionBf16) {
    throw fail("version " + std::to_string(r.version) + "; shardlab reads version 3 (fp32) and 5 (bf16) model files");
  }
  // Bounds far above any GPT-2 (C 1600, L 48) that keep the byte count below 2^63.
  const struct {
    const char* name;
    int64_t value, most;
  } fields[] = {{"maxT", r.maxT, 1 << 24}, {"V", r.V, 1 << 24}, {"L", r.L, 1 << 12},
                {"NH", r.NH, 1 << 16},     {"C", r.C, 1 << 18}, {"Vp", r.Vp, 1 << 24}};
  for (const auto& f : fields) {
    if (f.value <= 0 || f.value > f.most) {
      throw fail("header field " + std::string(f.name) + " is " + std::to_string(f.value) + ", not between 1 and " +
                 std::to_string(f.most) + "; the header is corrupt");
    }
  }
  if (r.Vp < r.V) {
    throw fail("padded vocabulary Vp " + std::to_string(r.Vp) + " is smaller than the vocabulary V " + std::to_string(r.V));
  }
  if (r.C % r.NH != 0) {
    throw fail("channels C " + std::to_string(r.C) + " are not divisible by the heads NH " + std::to_string(r.NH));
  }
  // fill_in_parameter_sizes' sum: wte, wpe, then per layer ln1w/b (2C), qkvw (3C^2), qkvb (3C),
  // attprojw (C^2), attprojb (C), ln2w/b (2C), fcw (4C^2), fcb (4C), fcprojw (4C^2), fcprojb (C),
  // and lnfw/b (2C).
  const uint64_t Vp = r.Vp, T = r.maxT, L = r.L, C = r.C;
  const uint64_t params = Vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C;
  const uint64_t needed = kHeaderBytes + params * (r.version == kVersionFp32 ? 4 : 2);
  if (size != needed) {
    throw fail("it has " + std::to_string(size) + " bytes, but the header's model (maxT " + std::to_string(r.maxT) +
               ", Vp " + std::to_string(r.Vp) + ", L " + std::to_string(r.L) + ", C " + std::to_string(r.C) +
               ", version " + std::to_string(r.version) + ") needs " + std::to_string(needed) +
               (size < needed ? "; the file is truncated" : "; the file has trailing bytes or a wrong header"));
  }
  return r;
}

nn::ModelConfig config_of(const Header& h) {
  nn::ModelConfig c;
  c.arch = nn::Arch::Gpt;
  c.vocab = h.V;
  c.context = h.maxT;
  c.d_model = h.C;
  c.n_layers = h.L;
  c.n_heads = c.n_kv_heads = h.NH;
  c.d_ff = 4 * h.C;
  c.norm_eps = kNormEps;
  return c;
}

// `count` values from `in` at the file's dtype, widened to fp32.
std::vector<float> read_values(std::ifstream& in, int64_t count, bool bf16, const std::string& path) {
  std::vector<float> out(static_cast<size_t>(count));
  if (!bf16) {
    in.read(reinterpret_cast<char*>(out.data()), count * 4);
  } else {
    std::vector<Bf16> raw(static_cast<size_t>(count));
    in.read(reinterpret_cast<char*>(raw.data()), count * 2);
    to_float(raw.data(), out.data(), count);
  }
  if (!in) throw UserError("llm.c model file '" + path + "': reading it failed");
  return out;
}

}  // namespace

bool is_model_file(const std::string& path) {
  int32_t magic = 0;
  std::ifstream(path, std::ios::binary).read(reinterpret_cast<char*>(&magic), 4);
  return magic == kModelMagic;
}

nn::ModelConfig read_config(const std::string& path) {
  std::ifstream in;
  const nn::ModelConfig c = config_of(read_header(path, in));
  try {
    c.validate();
  } catch (const UserError& e) {
    throw UserError("llm.c model file '" + path + "': not a model shardlab can build: " + e.what());
  }
  return c;
}

void import_model(const std::string& path, const nn::ModelConfig& config, const ParamSink& params) {
  std::ifstream in;
  const Header h = read_header(path, in);
  const nn::ModelConfig stored = config_of(h);
  if (stored.describe() != config.describe()) {
    throw UserError("llm.c model file '" + path + "' holds " + stored.describe() + ", but the model is " +
                    config.describe());
  }
  const std::map<std::string, Shape> shapes = llmc_parameters(config);
  const bool bf16 = h.version == kVersionBf16;
  for (const Stacked& t : kTensors) {
    if (std::string(t.llmc) == "wte") {
      const std::vector<float> wte = read_values(in, h.Vp * h.C, bf16, path);
      for (int64_t i = h.V * h.C; i < h.Vp * h.C; ++i) {
        if (wte[i] != 0.0f) {
          throw UserError("llm.c model file '" + path + "': row " + std::to_string(i / h.C) + " of wte holds " +
                          format_number(wte[i]) + ", but rows " + std::to_string(h.V) + " to " +
                          std::to_string(h.Vp - 1) + " pad the vocabulary (V " + std::to_string(h.V) + ", Vp " +
                          std::to_string(h.Vp) + ") and llm.c keeps them zero; the header's V does not fit the weights");
        }
      }
      params(t.name, shapes.at(t.name), std::span(wte).subspan(0, static_cast<size_t>(h.V * h.C)));
      continue;
    }
    const int64_t layers = t.per_layer ? h.L : 1;
    const Shape& shape = shapes.at(block_name(t, 0));
    const int64_t per = numel_of(shape);
    const std::vector<float> all = read_values(in, layers * per, bf16, path);
    for (int64_t l = 0; l < layers; ++l) {
      params(block_name(t, l), shape, std::span(all).subspan(static_cast<size_t>(l * per), static_cast<size_t>(per)));
    }
  }
}

void import_checkpoint(const std::string& path, const nn::ModelConfig& config, const std::string& ckpt) {
  write_weights_checkpoint(ckpt, config, [&](const ParamSink& sink) { import_model(path, config, sink); });
}

void export_model(const nn::ModelConfig& c, const ParamSource& params, const std::string& path) {
  check_llmc_model(c, "cannot export to '" + path + "'");
  const std::map<std::string, Shape> shapes = llmc_parameters(c);
  const int64_t Vp = (c.vocab + kVocabMultiple - 1) / kVocabMultiple * kVocabMultiple;
  std::array<int32_t, kHeaderInts> header{};
  const int64_t fields[] = {kModelMagic, kVersionFp32, c.context, c.vocab, c.n_layers, c.n_heads, c.d_model, Vp};
  for (size_t i = 0; i < std::size(fields); ++i) {
    if (fields[i] > INT32_MAX) throw UserError("cannot export to '" + path + "': a size exceeds llm.c's int32 header");
    header[i] = static_cast<int32_t>(fields[i]);
  }
  const std::string tmp = path + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  const auto write = [&](std::span<const float> v) {
    out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size_bytes()));
  };
  out.write(reinterpret_cast<const char*>(header.data()), kHeaderBytes);
  for (const Stacked& t : kTensors) {
    for (int64_t l = 0; l < (t.per_layer ? c.n_layers : 1); ++l) {
      const std::string name = block_name(t, l);
      write(params(name, shapes.at(name)));
    }
    if (std::string(t.llmc) == "wte") write(std::vector<float>(static_cast<size_t>((Vp - c.vocab) * c.d_model), 0.0f));
  }
  out.close();
  if (!out) {
    std::filesystem::remove(tmp);
    throw UserError("cannot write llm.c model file '" + path + "' (" + std::strerror(errno) +
                    "); check that its directory exists, is writable and has space");
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace shardlab::llmc
