// shardlab-plan roofline: the book's chapter 1 calculators for ops other than the matmul
// (`shardlab-plan matmul`): a bare FLOP count's time at the matmul units' and the vector
// units' peak (vector_alus x clock), an elementwise op (--vector: on the vector units), a general einsum from its spec and dim
// sizes, and dot-product attention's intensity at a context length with the context where
// it turns compute-bound and where its FLOPs overtake the projections'
// (parallel/cost/roofline/ops.h).
//
//   shardlab-plan roofline --flop-count 1e12 --hw h100     # 1.01 ms
//   shardlab-plan roofline --einsum bd,df->bf --dims b=4096,d=8192,f=32768 --dtype bf16
//   shardlab-plan roofline --elementwise 1M --inputs 2 --flops-per-element 1
//   shardlab-plan roofline --attention --model llama3-70b --context 8k
#pragma once

#include <cxxopts.hpp>

namespace shardlab::plan {

void add_roofline_flags(cxxopts::Options& options);
int cmd_roofline(const cxxopts::ParseResult& args);

}  // namespace shardlab::plan
