#include "framework/nn/layers.h"

#include "framework/nn/remat.h"
#include "framework/ops.h"

namespace shardlab::nn {

Linear::Linear(Module& parent, const std::string& name, int64_t in, int64_t out, bool has_bias, float init_std) {
  parent.add_child_module(*this, name);
  add_parameter(weight, "weight", {out, in}, {Init::Normal, init_std}, true);
  if (has_bias) add_parameter(bias, "bias", {out}, {Init::Zeros}, false);
}

Tensor Linear::operator()(const Tensor& x) const {
  return forward_hooked(x, [this](const Tensor& in) {
    const Tensor w = use("weight", weight), b = use("bias", bias);
    if (tensor_parallel.product) return tensor_parallel.product(in, w, b);
    if (!tensor_parallel.reduce_partial) return rematerialised_linear(*this, in, w, b);
    Tensor y = tensor_parallel.reduce_partial(rematerialised_linear(*this, in, w, Tensor()));
    return b.defined() ? ops::add(y, b) : y;
  });
}

Embedding::Embedding(Module& parent, const std::string& name, int64_t vocab_, int64_t dim) : vocab(vocab_) {
  parent.add_child_module(*this, name);
  add_parameter(weight, "weight", {vocab, dim}, {Init::Normal, 0.02f}, true);
}

Tensor Embedding::operator()(std::span<const int32_t> ids, int64_t B, int64_t T) const {
  return post_hooked(ops::embedding(use("weight", weight), ids, B, T, first_row, vocab));
}

Norm::Norm(Module& parent, const std::string& name, int64_t dim, Kind kind_, float eps_) : kind(kind_), eps(eps_) {
  parent.add_child_module(*this, name);
  add_parameter(weight, "weight", {dim}, {Init::Ones}, false);
  if (kind == Layer) add_parameter(bias, "bias", {dim}, {Init::Zeros}, false);
}

Tensor Norm::operator()(const Tensor& x) const {
  return forward_hooked(x, [this](const Tensor& in) {
    const Tensor w = use("weight", weight);
    return kind == Layer ? ops::layer_norm(in, w, use("bias", bias), eps) : ops::rms_norm(in, w, eps);
  });
}

Mlp::Mlp(Module& parent, const std::string& name, int64_t dim, int64_t hidden, float out_std)
    : fc(*this, "fc", dim, hidden, true), fc2(*this, "fc2", hidden, dim, true, out_std) {
  parent.add_child_module(*this, name);
}

Tensor Mlp::operator()(const Tensor& x) const {
  return forward_hooked(x, [this](const Tensor& in) { return fc2(ops::gelu(fc(in))); });
}

SwiGlu::SwiGlu(Module& parent, const std::string& name, int64_t dim, int64_t hidden, float out_std)
    : gate(*this, "gate", dim, hidden, false), up(*this, "up", dim, hidden, false),
      down(*this, "down", hidden, dim, false, out_std) {
  parent.add_child_module(*this, name);
}

Tensor SwiGlu::operator()(const Tensor& x) const {
  return forward_hooked(x, [this](const Tensor& in) { return down(ops::swiglu(gate(in), up(in))); });
}

}  // namespace shardlab::nn
