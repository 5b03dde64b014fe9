#include "parallel/cost/training/context_attention.h"

#include <algorithm>

#include "framework/error.h"

namespace shardlab::cost {

double ring_block_flops(double rows, double tq, double tk, double heads, double head_dim, double visible) {
  return 4 * rows * tq * tk * heads * head_dim * visible;
}

double ring_block_bytes(double rows, double tk, double kv_heads, double head_dim, double bytes_per_element) {
  return rows * tk * 2 * kv_heads * head_dim * bytes_per_element;
}

RingLayer ring_layer(const RingStep& step, int context) {
  RingLayer r;
  if (context <= 1) return r;
  const double x = step.transfer_seconds, f = step.compute_seconds, c = context;
  r.forward_blocks = context - 1;
  r.backward_blocks = 2 * context - 1;
  r.forward_seconds = r.forward_blocks * x;
  r.backward_seconds = r.backward_blocks * x;
  // Forward: step s < c-1 passes its block on while attending to it.
  r.forward_exposed = (c - 1) * std::max(0.0, x - f);
  // Backward, each step 2f of compute: the first carries one K/V block, the middle ones a
  // K/V block and the previous step's dK/dV, the last that dK/dV alone; the last step's
  // own dK/dV then travels home with nothing left to hide it.
  r.backward_exposed = 2 * std::max(0.0, x - 2 * f) + (c - 2) * std::max(0.0, 2 * x - 2 * f) + x;
  return r;
}

}  // namespace shardlab::cost
