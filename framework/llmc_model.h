// llm.c's GPT-2 model file <-> shardlab parameters (docs/models.md), as karpathy/llm.c's
// train_gpt2.py writes it (write_model) and train_gpt2.c reads it
// (gpt2_build_from_checkpoint, fill_in_parameter_sizes):
//
//   header: 256 int32 (1024 bytes): [0] magic 20240326, [1] version (3: fp32 weights,
//           5: bf16), [2] maxT, [3] V, [4] L, [5] NH, [6] C, [7] Vp (V padded), rest 0
//   then 16 tensors, row-major, each stacked over the L layers where it has an L:
//     wte [Vp, C]  wpe [maxT, C]  ln1w [L, C]  ln1b [L, C]  qkvw [L, 3C, C]  qkvb [L, 3C]
//     attprojw [L, C, C]  attprojb [L, C]  ln2w [L, C]  ln2b [L, C]  fcw [L, 4C, C]
//     fcb [L, 4C]  fcprojw [L, C, 4C]  fcprojb [L, C]  lnfw [C]  lnfb [C]
//
// llm.c's weights are nn.Linear's [out, in], as shardlab's, and qkvw's rows are q | k | v
// as wqkv's: every tensor is copied, none transposed, so export then import is bit-exact.
// llm.c's GPT-2 has an MLP of 4C, LayerNorm eps 1e-5, GELU's tanh form and the head tied
// to wte: a shardlab gpt model with d_ff = 4 d_model and norm_eps 1e-5. Other models (llama,
// MoE, another d_ff or eps) are a UserError on export.
//
// The padded vocabulary lives only in the file: export writes wte's V rows, then zero rows
// up to Vp = V rounded up to a multiple of 128 (50257 -> 50304, as llm.c pads); import
// keeps the first V rows and refuses a padding row that is not zero (llm.c writes zeros
// and its training never changes them, so a non-zero row means the header's V does not
// fit the data). Import reads version 3 (fp32) and version 5 (bf16, widened exactly to
// fp32); export writes version 3. A file that is short, long, or has another magic or
// version is a UserError naming the file, the field and the values.
//
//   llmc::export_model(config, [&](const std::string& name, const Shape& shape) {...}, "gpt2_124M.bin");
//   nn::ModelConfig c = llmc::read_config("gpt2_124M.bin");
//   llmc::import_checkpoint("gpt2_124M.bin", c, "init.h5");
#pragma once

#include <cstdint>
#include <string>

#include "framework/model_weights.h"
#include "framework/nn/config.h"

namespace shardlab::llmc {

constexpr int32_t kModelMagic = 20240326;
constexpr int64_t kVocabMultiple = 128;  // Vp = V rounded up to this

// Whether the file starts with llm.c's model magic (what convert imports as one).
bool is_model_file(const std::string& path);
// The model the file's header describes; UserError for a file too short for its header,
// another magic or version, impossible sizes, or a size other than the header's model needs.
nn::ModelConfig read_config(const std::string& path);
// Every parameter of `config`'s model (which must be the header's) from the file.
void import_model(const std::string& path, const nn::ModelConfig& config, const ParamSink& params);
// import_model into a shardlab checkpoint at `ckpt` (write_weights_checkpoint).
void import_checkpoint(const std::string& path, const nn::ModelConfig& config, const std::string& ckpt);
// Writes `config`'s parameters as a version 3 (fp32) file at `path`, atomically.
void export_model(const nn::ModelConfig& config, const ParamSource& params, const std::string& path);

}  // namespace shardlab::llmc
