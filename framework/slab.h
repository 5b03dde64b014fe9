// Boxes (HDF5 calls them hyperslabs) of row-major tensors: an offset and a count per dim.
//
// A sharded layout owns a box of each global tensor (tensor parallel: a block of columns)
// or a flat element range (ZeRO: a slice of the flattened parameters). flat_range_boxes
// turns such a range into the few boxes that cover it, in element order, so box-based
// I/O (checkpoints) serves both.
//
//   flat_range_boxes({4, 5}, 3, 13)  ->  {[0,3] x 2}, {[1,0] x 5}, {[2,0] x 3}
//                                        (offset, count per dim; 2 + 5 + 3 = 10 elements)
#pragma once

#include <vector>

#include "framework/tensor.h"

namespace shardlab {

struct Box {
  Shape offset;
  Shape count;
};

// True when the box has one entry per dim of `shape` and lies inside it.
bool box_inside(const Shape& shape, const Box& box);

// Elements [begin, end) of the row-major flattening of `shape` as at most 2 * ndim - 1
// boxes in element order. A 0-d shape (one element) gives one box with no dims.
std::vector<Box> flat_range_boxes(const Shape& shape, int64_t begin, int64_t end);

}  // namespace shardlab
