#include "framework/slab.h"

#include "framework/error.h"

namespace shardlab {
namespace {

// Covers [begin, end) of the sub-array at index `prefix`: a partial head row, a block of
// whole rows, a partial tail row; partial rows recurse one dim deeper.
void cover(const Shape& shape, const Shape& prefix, int64_t begin, int64_t end, std::vector<Box>& out) {
  if (begin >= end) return;
  const size_t dim = prefix.size();
  const int64_t inner = numel_of(Shape(shape.begin() + static_cast<std::ptrdiff_t>(dim) + 1, shape.end()));
  auto whole_rows = [&](int64_t first, int64_t n) {
    Box box{prefix, Shape(prefix.size(), 1)};
    box.offset.push_back(first);
    box.count.push_back(n);
    for (size_t d = dim + 1; d < shape.size(); ++d) {
      box.offset.push_back(0);
      box.count.push_back(shape[d]);
    }
    out.push_back(std::move(box));
  };
  auto part_of_row = [&](int64_t index, int64_t from, int64_t to) {
    Shape deeper = prefix;
    deeper.push_back(index);
    cover(shape, deeper, from, to, out);
  };
  const int64_t first = begin / inner, whole_end = end / inner;
  if (begin % inner == 0 && end % inner == 0) return whole_rows(first, whole_end - first);
  if (first == (end - 1) / inner) return part_of_row(first, begin - first * inner, end - first * inner);
  int64_t whole_begin = first;
  if (begin % inner != 0) {
    part_of_row(first, begin % inner, inner);
    ++whole_begin;
  }
  if (whole_end > whole_begin) whole_rows(whole_begin, whole_end - whole_begin);
  if (end % inner != 0) part_of_row(whole_end, 0, end % inner);
}

}  // namespace

bool box_inside(const Shape& shape, const Box& box) {
  if (box.offset.size() != shape.size() || box.count.size() != shape.size()) return false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (box.offset[d] < 0 || box.count[d] < 0 || box.offset[d] + box.count[d] > shape[d]) return false;
  }
  return true;
}

std::vector<Box> flat_range_boxes(const Shape& shape, int64_t begin, int64_t end) {
  SL_ASSERT(0 <= begin && begin <= end && end <= numel_of(shape),
            "range [" + std::to_string(begin) + ", " + std::to_string(end) + ") of shape " + shape_str(shape));
  std::vector<Box> boxes;
  if (shape.empty()) {
    if (end > begin) boxes.push_back({});
    return boxes;
  }
  cover(shape, {}, begin, end, boxes);
  return boxes;
}

}  // namespace shardlab
