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
  // Training FLOPs per token: the 6N rule on the multiply-adds one token makes, a weight's
  // parameters or a dot product's T N H.
  const auto per_token = [](double multiply_adds) { return train_flops(multiply_adds, 1); };
  std::vector<LayerOp> ops;
  auto mlp = [&](const std::string& name, const std::string& einsum) {
    ops.push_back({"mlp", name, einsum, copies * d * f, per_token(active * d * f)});
  };
  if (s.gated_mlp) {
    mlp("W_in1 (gate)", "A[B,T,D] . W_in1[" + e + "D,F]");
    mlp("W_in2 (in)", "A[B,T,D] . W_in2[" + e + "D,F]");
  } else {
    mlp("W_in", "A[B,T,D] . W_in[" + e + "D,F]");
  }
  mlp("W_out", "A[B,T,F] . W_out[" + e + "F,D]");
  ops.push_back({"attention", "W_Q", "A[B,T,D] . W_Q[D,N,H]", d * n * h, per_token(d * n * h)});
  ops.push_back({"attention", "W_K", "A[B,T,D] . W_K[D,K,H]", d * k * h, per_token(d * k * h)});
  ops.push_back({"attention", "W_V", "A[B,T,D] . W_V[D,K,H]", d * k * h, per_token(d * k * h)});
  ops.push_back({"attention", "W_O", "A[B,T,N,H] . W_O[N,H,D]", n * h * d, per_token(n * h * d)});
  ops.push_back({"dot-product attention", "Q.K", "Q[B,T,N,H] . K[B,S,N,H]", 0, per_token(t * n * h)});
  ops.push_back({"dot-product attention", "S.V", "S[B,T,S,N] . V[B,S,N,H]", 0, per_token(t * n * h)});
  ops.push_back({"vocab", "W_unembed", "A[B,T,D] . W_unembed[D,V]", d * v, per_token(d * v), false});
  return ops;
}

}  // namespace shardlab::cost
