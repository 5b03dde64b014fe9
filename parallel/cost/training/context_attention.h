// Attention over the context axis, priced (the cost side of parallel/context, train_gpt's
// --cp-comm): each of c chips holds Tq = T/c positions of every row and needs the keys and
// values of all of them.
//
//   ring       (the default, as train_gpt's) c steps per layer: attend to the K/V block in
//              hand while ppermute passes it to the next chip. A block is
//              rows x T/c x 2 x K x H elements. Forward: c - 1 blocks; backward: the blocks
//              round again (c - 1) and the dK/dV sums following them (c), the last of which
//              nothing hides. Each step's transfer overlaps that step's block attention,
//              4 Tq Tk N H FLOPs times the fraction the causal mask leaves (1/2 on every step
//              with head-tail balance; backward twice that): exposed = what it does not hide.
//   allgather  (LLaMA 3's) all_gather every chip's block per layer, reduce_scatter dK/dV.
//
// Dimension letters as model/transformer.h; Tq, Tk the query and key positions of a block.
//
//   RingStep step{.block_bytes = 4 << 20, .transfer_seconds = 40e-6, .compute_seconds = 30e-6};
//   RingLayer ring = ring_layer(step, 4);   // ring.forward_exposed = 3 x 10 us
#pragma once

#include "parallel/spec/context_comm.h"

namespace shardlab::cost {

// The runtime's choice and spelling (parallel/spec/context_comm.h): parse_context_comm,
// context_comm_name.
using parallel::ContextComm;

// The fraction of a K/V block's scores the causal mask leaves a ring step to compute: with
// head-tail balance (rank r holds chunks r and 2c-1-r) every step's block is half visible.
constexpr double kBalancedVisibleFraction = 0.5;

// Forward FLOPs of one ring step: this chip's queries (Tq per row) against one block of
// keys (Tk per row), QK^T and PV at 2 FLOPs a multiply-add, `visible` of it computed.
double ring_block_flops(double rows, double tq, double tk, double heads, double head_dim,
                        double visible = kBalancedVisibleFraction);
// Bytes of one K/V block: rows x Tk x 2 x K x H x bytes per element.
double ring_block_bytes(double rows, double tk, double kv_heads, double head_dim, double bytes_per_element);

// One ring step of one layer and microbatch on one chip: its block's transfer to the
// neighbour and the forward attention compute on the block in hand.
struct RingStep {
  double block_bytes = 0;
  double transfer_seconds = 0;
  double compute_seconds = 0;  // forward; backward's is twice it
};

// A layer's ring over c chips: blocks sent and the transfer time compute does not hide.
struct RingLayer {
  int forward_blocks = 0;   // c - 1 K/V
  int backward_blocks = 0;  // c - 1 K/V and c dK/dV
  double forward_seconds = 0, backward_seconds = 0;  // every block's transfer
  double forward_exposed = 0;   // (c - 1) max(0, x - f)
  double backward_exposed = 0;  // 2 max(0, x - 2f) + (c - 2) max(0, 2x - 2f) + x
};
RingLayer ring_layer(const RingStep& step, int context);

}  // namespace shardlab::cost
