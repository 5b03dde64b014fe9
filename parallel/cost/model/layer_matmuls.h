// A Transformer's matmuls one by one (book chapter "transformers", "Counting parameters and
// FLOPs"): each op's einsum, its parameters per layer and its training FLOPs per token and
// layer, as the chapter's tables list them -- the MLP's in/gate/out (W_in1, W_in2, W_out;
// in and out without gating), attention's Q/K/V/O projections, the dot-product attention's
// Q.K and S.V (no parameters), and the unembedding (once, not per layer).
//
// A matmul's training FLOPs are 6 per parameter and token (2 forward, 4 backward); the
// dot products over T queries and S = T keys 6 T N H each per token. With multi-head
// attention (K = N) the sums are the chapter's 3DF / 18BTDF, 4DNH / 24BTDNH and 12BT^2NH
// per layer over B T tokens; with K < N the K and V rows shrink to DKH. An MoE layer's
// expert rows hold E of each matrix, of which a token's k run (FLOPs k x 6 D F).
//
//   for (const LayerOp& op : layer_ops(model_preset("llama3-70b")))
//     std::cout << op.name << " " << op.params << " " << op.train_flops_per_token << "\n";
#pragma once

#include <string>
#include <vector>

#include "parallel/cost/model/transformer.h"

namespace shardlab::cost {

struct LayerOp {
  std::string group;  // "mlp", "attention", "dot-product attention", "vocab"
  std::string name;   // e.g. "W_in1 (gate)", "W_Q", "Q.K", "W_unembed"
  std::string einsum;                 // the chapter's notation, e.g. "A[B,T,D] . W_Q[D,N,H]"
  double params = 0;                  // per layer (the vocab row: total)
  double train_flops_per_token = 0;   // per layer and token, forward + backward
  bool per_layer = true;              // false for the vocab row
};

// The rows above for shape s (at its context T); throws UserError for an invalid shape.
std::vector<LayerOp> layer_ops(const TransformerShape& s);

}  // namespace shardlab::cost
