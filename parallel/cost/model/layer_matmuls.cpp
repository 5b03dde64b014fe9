#include "parallel/cost/model/layer_matmuls.h"

namespace shardlab::cost {

std::vector<LayerOp> layer_ops(const TransformerShape& s) {
  s.validate();
  const double d = s.d_model, f = s.d_ff, n = s.heads, k = s.kv_heads, h = s.head_dim, v = s.vocab;
  const double t = s.context;
  // An MoE layer holds E copies of each MLP matrix and runs k of them per token.
  const double copies = s.experts > 0 ? static_cast<double>(s.experts) : 1;
  const double active = s.experts > 0 ? static_cast<double>(s.top_k) : 1;
  const std::string e = s.experts > 0 ? "E," : "";
  std::vector<LayerOp> ops;
  auto mlp = [&](const std::string& name, const std::string& einsum) {
    ops.push_back({"mlp", name, einsum, copies * d * f, active * 6 * d * f});
  };
  if (s.gated_mlp) {
    mlp("W_in1 (gate)", "A[B,T,D] . W_in1[" + e + "D,F]");
    mlp("W_in2 (in)", "A[B,T,D] . W_in2[" + e + "D,F]");
  } else {
    mlp("W_in", "A[B,T,D] . W_in[" + e + "D,F]");
  }
  mlp("W_out", "A[B,T,F] . W_out[" + e + "F,D]");
  ops.push_back({"attention", "W_Q", "A[B,T,D] . W_Q[D,N,H]", d * n * h, 6 * d * n * h});
  ops.push_back({"attention", "W_K", "A[B,T,D] . W_K[D,K,H]", d * k * h, 6 * d * k * h});
  ops.push_back({"attention", "W_V", "A[B,T,D] . W_V[D,K,H]", d * k * h, 6 * d * k * h});
  ops.push_back({"attention", "W_O", "A[B,T,N,H] . W_O[N,H,D]", n * h * d, 6 * n * h * d});
  ops.push_back({"dot-product attention", "Q.K", "Q[B,T,N,H] . K[B,S,N,H]", 0, 6 * t * n * h});
  ops.push_back({"dot-product attention", "S.V", "S[B,T,S,N] . V[B,S,N,H]", 0, 6 * t * n * h});
  ops.push_back({"vocab", "W_unembed", "A[B,T,D] . W_unembed[D,V]", d * v, 6 * d * v, false});
  return ops;
}

}  // namespace shardlab::cost
