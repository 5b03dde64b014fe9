// What a collective carries on the wire (issue 29's --reduce-dtype and --gather-dtype):
// the dtype of the values each ring step sends, not the dtype they are summed in (sums are
// always fp32), so a wire format changes a collective's bytes and never its FLOPs.
//
// Bytes on the wire for n values (the one definition the cost model prices with):
//   fp32  4 n
//   bf16  2 n
//   int8  n + ceil(n / 256): int8 values in blocks of 256, each block with one exponent
//         byte, a power-of-two scale (as in the OCP MX formats); 1.0039 bytes per value.
//
// The gradient reductions of the data axes (data, fsdp, context, and the expert axis's
// dense gradients) carry WireDtypes::reduce; the FSDP/ZeRO-3 parameter all_gathers carry
// WireDtypes::gather (training/train_step.h prices both).
//
//   wire_bytes(DType::kInt8, 1000) == 1004;   // 1000 values + 4 block exponents
//   WireDtypes w{.reduce = parse_wire_dtype("int8", "--reduce-dtype")};
#pragma once

#include <string>
#include <vector>

#include "parallel/cost/roofline/roofline.h"

namespace shardlab::cost {


struct WireDtypes {
  DType reduce = DType::kBf16;  // gradient all_reduce / reduce_scatter over the data axes
  DType gather = DType::kBf16;  // FSDP parameter all_gather (forward and backward)
};

// The wire dtypes, least compressed first: fp32, bf16, int8.
const std::vector<DType>& wire_dtypes();
// Bytes of n values on the wire, as above. UserError for a dtype no wire carries (fp8, int4).
double wire_bytes(DType wire, double values);
// Bytes per value of a large array (n -> infinity): 4, 2, 1 + 1/256. What the book's
// critical batch scales with (training/axis_conditions.h).
double wire_bytes_per_value(DType wire);
// "fp32", "bf16" or "int8" for `flag` (e.g. "--reduce-dtype"); UserError naming the value
// and the choices otherwise.
DType parse_wire_dtype(const std::string& text, const std::string& flag);

}  // namespace shardlab::cost
