#include "examples/support/compute_prediction.h"

#include <algorithm>

#include "parallel/comm/collectives.h"
#include "parallel/cost/strategies.h"
#include "parallel/cost/transformer.h"
#include "parallel/data_parallel/data_parallel.h"

namespace shardlab::cli {
namespace {

int axis_size(const parallel::Mesh& mesh, const char* axis) { return mesh.has_axis(axis) ? mesh.axis_size(axis) : 1; }

}  // namespace

std::vector<cost::GemmShape> model_gemm_shapes(const RunConfig& run, const parallel::Mesh& mesh) {
  const nn::ModelConfig& c = run.model;
  const int64_t t = axis_size(mesh, "tensor"), pipe = axis_size(mesh, "pipe");
  const int64_t rows = std::max<int64_t>(1, run.batch / parallel::DataAxes::of(mesh).all->size() / run.grad_accum);
  const int64_t M = rows * run.sequence_length(), D = c.d_model, H = c.head_dim(), F = c.d_ff;
  const int64_t layers = std::max<int64_t>(1, c.n_layers / pipe);  // one stage's
  const int64_t moe_layers = c.experts > 0 ? std::max<int64_t>(0, c.moe_layers() / pipe) : 0;
  const int64_t dense_layers = layers - moe_layers;
  const int64_t up = c.arch == nn::Arch::Llama ? 2 : 1;  // SwiGLU: gate and up projections
  std::vector<cost::GemmShape> shapes = {
      {.m = M, .k = D, .n = (c.n_heads + 2 * c.n_kv_heads) * H / t, .count = layers},  // wqkv
      {.m = M, .k = c.n_heads * H / t, .n = D, .count = layers},                        // wo
      {.m = M, .k = D, .n = F / t, .count = up * dense_layers},                          // MLP up
      {.m = M, .k = F / t, .n = D, .count = dense_layers},                               // MLP down
      {.m = M, .k = D, .n = c.vocab / t, .count = 1},                                    // head
  };
  if (moe_layers > 0) {  // each expert sees about k/E of the tokens
    const int64_t m = std::max<int64_t>(1, M * c.top_k / c.experts);
    const int64_t experts = c.experts / axis_size(mesh, "expert") * moe_layers;
    shapes.push_back({.m = m, .k = D, .n = F / t, .count = up * experts});
    shapes.push_back({.m = m, .k = F / t, .n = D, .count = experts});
  }
  return shapes;
}

double measure_model_gemm_flops(const RunConfig& run, const parallel::Mesh& mesh) {
  float flops = static_cast<float>(cost::measure_gemm_shapes_flops(model_gemm_shapes(run, mesh)));
  parallel::all_reduce(mesh.all(), {&flops, 1});
  return flops / mesh.size();
}

double predict_compute_seconds(const RunConfig& run, const parallel::Mesh& mesh, double gemm_flops) {
  cost::TrainConfig tc;
  tc.model = cost::shape_of(run.model);
  tc.model.context = run.sequence_length();  // the run's sequences, which may be shorter than the model's context
  tc.batch_tokens = static_cast<double>(run.batch * run.sequence_length());
  tc.remat = run.model.remat;
  tc.precision = cost::fp32_training();
  const cost::Layout layout{.data = axis_size(mesh, "data"),
                            .fsdp = axis_size(mesh, "fsdp"),
                            .pipe = axis_size(mesh, "pipe"),
                            .expert = axis_size(mesh, "expert"),
                            .tensor = axis_size(mesh, "tensor"),
                            .microbatches = run.grad_accum};
  cost::HardwareProfile hw = cost::hardware("local");
  if (gemm_flops > 0) hw.flops_fp32 = hw.flops_bf16 = gemm_flops;  // fp32 training here: both the same
  return cost::estimate_train_step(tc, layout, hw).compute_seconds;
}

}  // namespace shardlab::cli
