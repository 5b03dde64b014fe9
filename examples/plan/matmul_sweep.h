// `shardlab-plan matmul --sweep D:F,...`: the book's roofline plot as a table (chapter
// "roofline", Question 3: peak FLOP/s against B for several D and F): for B = 1, 2, 4, ...
// up to --batch, the FLOP/s each X[B,D] . W[D,F] reaches (Roofline::achieved_flops,
// min(peak, intensity x HBM bandwidth)) and its share of the peak, in the dtypes of `m`.
//
//   shardlab-plan matmul --hw tpu-v5e --w-dtype int8 --batch 1024 --sweep 1024:4096,8192:32768
#pragma once

#include <string>

#include "examples/plan/args.h"
#include "parallel/cost/roofline/roofline.h"

namespace shardlab::plan {

// The table for `shapes` ("D:F,D:F", sizes take suffixes) with batches up to m.b; json
// gets "sweep": one row per batch. UserError naming a malformed D:F pair.
std::string matmul_sweep(const std::string& shapes, const cost::MatmulSpec& m, const cost::HardwareProfile& hw,
                         Json& json);

}  // namespace shardlab::plan
