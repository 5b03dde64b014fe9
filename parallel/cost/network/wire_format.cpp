#include "parallel/cost/network/wire_format.h"

#include <cmath>

#include "framework/error.h"
#include "framework/ops/wire_format.h"

namespace shardlab::cost {
namespace {
// Values per block exponent of the int8 wire: the runtime's own block.
constexpr double kInt8WireBlock = static_cast<double>(shardlab::kInt8Block);
}  // namespace

const std::vector<DType>& wire_dtypes() {
  static const std::vector<DType> dtypes{DType::kFp32, DType::kBf16, DType::kInt8};
  return dtypes;
}

double wire_bytes(DType wire, double values) {
  if (!(values >= 0)) throw UserError("a wire carries a non-negative number of values, got " + format_number(values));
  switch (wire) {
    case DType::kFp32:
    case DType::kBf16: return values * bytes_of(wire);
    case DType::kInt8: return values + std::ceil(values / kInt8WireBlock);  // one exponent byte per block
    default: break;
  }
  throw UserError("no collective carries " + to_string(wire) + " on the wire; wire dtypes are fp32, bf16 and int8");
}

double wire_bytes_per_value(DType wire) {
  return wire == DType::kInt8 ? 1 + 1 / kInt8WireBlock : wire_bytes(wire, 1);
}

DType parse_wire_dtype(const std::string& text, const std::string& flag) {
  for (DType dtype : wire_dtypes())
    if (text == to_string(dtype)) return dtype;
  throw UserError(flag + " '" + text + "' is not a wire dtype; choose fp32, bf16 or int8");
}

}  // namespace shardlab::cost
