// Wire formats: how fp32 values travel between ranks (docs/collectives.md, "Wire formats").
// The collectives always sum in fp32; a wire format only changes what a message carries.
//
//   fp32  4 bytes a value, exact.
//   bf16  2 bytes a value (framework/ops/bf16.h): |error| <= 2^-8 |x|.
//   int8  block-scaled: the values in blocks of kInt8Block, each block one exponent byte e
//         and one int8 q per value, x ~ q * 2^e with |q| <= 127 -- n + ceil(n / 256) bytes
//         for n values, 3.98x fewer than fp32. The shared scale is a power of two (as in
//         the OCP microscaling formats), chosen as the smallest that keeps the block's
//         largest magnitude A within 127 after rounding, so 64 <= max|q| <= 127 and
//         |error| <= 2^(e-1) <= A / 127.5 for every value of the block. Two properties the
//         collectives rely on: a decoded message encodes back to the same bytes (the
//         quantisation is idempotent, so a value forwarded round a ring is never rounded
//         twice, and every rank holds identical values), and q * 2^e is exact in fp32.
//         A block holding a NaN or an infinity travels as "non-finite" and decodes to NaN,
//         so a diverged gradient is never hidden by the compression. Blocks below 2^-120
//         use the smallest exponent, 2^-127 (absolute error <= 2^-128).
//
// Blocks start at the first value of each encoded span: two encodings of the same values
// agree only when their spans start at the same value.
//
// Error feedback (1-bit Adam, EF-SGD): encode() and round_to_wire() with a residual add
// the residual to the values first and leave in it what the rounding lost, so that over
// many steps the rounding errors cancel instead of accumulating: the sum of what was
// sent equals the sum of the values minus the last residual.
//
//   std::vector<uint8_t> bytes(wire_bytes(DType::kInt8, n));
//   encode(DType::kInt8, x, n, bytes.data());            // or encode(..., residual) with feedback
//   decode(DType::kInt8, bytes.data(), n, y);            // |y - x| <= A / 127.5 per block
#pragma once

#include <cstdint>

#include "framework/precision.h"

namespace shardlab {

inline constexpr int64_t kInt8Block = 256;

// Bytes that `n` values occupy on the wire in `wire` (fp32, bf16 or int8).
int64_t wire_bytes(DType wire, int64_t n);

// Writes wire_bytes(wire, n) bytes for x[0, n). With `residual` (n floats, may be null)
// it encodes x + residual and sets residual to (x + residual) - decoded.
void encode(DType wire, const float* x, int64_t n, uint8_t* out, float* residual = nullptr);
void decode(DType wire, const uint8_t* in, int64_t n, float* out);
// dst = a + decoded(in) (dst may be a): a reduction that never materialises the message.
void add_decoded(DType wire, const uint8_t* in, int64_t n, const float* a, float* dst);
// x = decoded(encoded(x)) in place: the values a peer would receive. With `residual`,
// error feedback as for encode().
void round_to_wire(DType wire, float* x, int64_t n, float* residual = nullptr);

// The largest |decoded - x| an int8 block of these values allows: A / 127.5 where A is
// the block's largest magnitude (2^-128 below 2^-120); for tests and error budgets.
float int8_block_error_bound(const float* x, int64_t n);

}  // namespace shardlab
