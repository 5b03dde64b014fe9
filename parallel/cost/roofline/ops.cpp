#include "parallel/cost/roofline/ops.h"

#include <algorithm>
#include <cctype>

#include "framework/error.h"

namespace shardlab::cost {

double vector_flops(const HardwareProfile& hw) { return static_cast<double>(vector_alus(hw)) * hw.facts.clock_hz; }

double clock_for_vector_flops(const HardwareProfile& hw, double flops_per_second, double flops_per_cycle) {
  const int64_t alus = vector_alus(hw);
  if (!(flops_per_second > 0) || !(flops_per_cycle > 0) || alus < 1) {
    throw UserError("the clock of " + hw.name + "'s vector units needs positive FLOP/s (got " +
                    std::to_string(flops_per_second) + "), FLOPs per cycle (got " + std::to_string(flops_per_cycle) +
                    ") and ALUs (got " + std::to_string(alus) + ")");
  }
  return flops_per_second / (static_cast<double>(alus) * flops_per_cycle);
}

Roofline elementwise_roofline(double n, int inputs, double flops_per_element, DType dtype, const HardwareProfile& hw) {
  if (!(n > 0)) throw UserError("an elementwise op needs a positive element count, got " + std::to_string(n));
  if (inputs < 1) throw UserError("an elementwise op reads at least one input, got " + std::to_string(inputs));
  if (!(flops_per_element >= 0)) throw UserError("FLOPs per element must be >= 0");
  const double bytes = n * (inputs + 1) * bytes_of(dtype);
  return roofline(n * flops_per_element, bytes, peak_flops(hw, dtype), hw.hbm_bandwidth);
}

std::string EinsumSpec::letters() const {
  std::string all;
  for (const std::string& operand : inputs)
    for (char c : operand)
      if (all.find(c) == std::string::npos) all += c;
  return all;
}

std::string EinsumSpec::contracted() const {
  std::string out;
  for (char c : letters())
    if (output.find(c) == std::string::npos) out += c;
  return out;
}

EinsumSpec parse_einsum(const std::string& spec) {
  const size_t arrow = spec.find("->");
  if (arrow == std::string::npos)
    throw UserError("einsum '" + spec + "' has no '->'; write it like bd,df->bf (inputs, then the output)");
  const auto check_operand = [&](const std::string& operand) {
    for (size_t i = 0; i < operand.size(); ++i) {
      if (!std::isalpha(static_cast<unsigned char>(operand[i])))
        throw UserError("einsum '" + spec + "': '" + operand + "' holds '" + operand[i] + "'; use one letter per dim");
      if (operand.find(operand[i], i + 1) != std::string::npos)
        throw UserError("einsum '" + spec + "': '" + operand + "' repeats " + operand[i] + "; traces are not priced");
    }
  };
  EinsumSpec e;
  const std::string inputs = spec.substr(0, arrow);
  size_t start = 0;
  while (start <= inputs.size()) {
    const size_t stop = std::min(inputs.find(',', start), inputs.size());
    e.inputs.push_back(inputs.substr(start, stop - start));
    check_operand(e.inputs.back());
    start = stop + 1;
  }
  if (inputs.empty()) throw UserError("einsum '" + spec + "' has no inputs before '->'");
  e.output = spec.substr(arrow + 2);
  check_operand(e.output);
  const std::string all = e.letters();
  for (char c : e.output)
    if (all.find(c) == std::string::npos)
      throw UserError("einsum '" + spec + "': output dim " + c + " is in no input");
  return e;
}

Roofline einsum_roofline(const std::string& spec, const std::map<char, int64_t>& dims,
                         const std::vector<DType>& dtypes, const HardwareProfile& hw) {
  const EinsumSpec e = parse_einsum(spec);
  if (dtypes.size() != 1 && dtypes.size() != e.inputs.size() + 1)
    throw UserError("einsum '" + spec + "' has " + std::to_string(e.inputs.size()) + " inputs and an output; give one dtype or " +
                    std::to_string(e.inputs.size() + 1));
  const auto dtype = [&](size_t operand) { return dtypes.size() == 1 ? dtypes[0] : dtypes[operand]; };
  const auto size = [&](char c) {
    const auto it = dims.find(c);
    if (it == dims.end() || it->second < 1)
      throw UserError("einsum '" + spec + "': dim " + c + " has no positive size; give it in --dims, e.g. " + c + "=4096");
    return static_cast<double>(it->second);
  };
  const auto elements = [&](const std::string& operand) {
    double n = 1;
    for (char c : operand) n *= size(c);
    return n;
  };
  double points = 1;
  for (char c : e.letters()) points *= size(c);
  const bool contraction = e.inputs.size() >= 2 && !e.contracted().empty();
  double bytes = elements(e.output) * bytes_of(dtype(e.inputs.size()));
  DType compute = dtype(0);
  for (size_t i = 0; i < e.inputs.size(); ++i) {
    bytes += elements(e.inputs[i]) * bytes_of(dtype(i));
    compute = compute_dtype(compute, dtype(i));
  }
  return roofline((contraction ? 2 : 1) * points, bytes, peak_flops(hw, compute), hw.hbm_bandwidth);
}

AttentionRoofline attention_roofline(const AttentionShape& a, const HardwareProfile& hw) {
  if (a.batch < 1 || a.q_len < 1 || a.kv_len < 1 || a.heads < 1 || a.kv_heads < 1 || a.head_dim < 1)
    throw UserError("attention sizes must be positive, got B=" + std::to_string(a.batch) + " T=" + std::to_string(a.q_len) +
                    " S=" + std::to_string(a.kv_len) + " N=" + std::to_string(a.heads) + " K=" +
                    std::to_string(a.kv_heads) + " H=" + std::to_string(a.head_dim));
  if (a.heads % a.kv_heads != 0)
    throw UserError("kv heads " + std::to_string(a.kv_heads) + " do not divide the heads " + std::to_string(a.heads) +
                    "; grouped-query attention needs K to divide N");
  const double b = a.batch, t = a.q_len, s = a.kv_len, n = a.heads, k = a.kv_heads, h = a.head_dim;
  const double bytes_per = bytes_of(a.dtype);
  AttentionRoofline r;
  r.roofline = roofline(4 * b * t * s * n * h, bytes_per * (2 * b * t * n * h + 2 * b * s * k * h),
                        peak_flops(hw, a.dtype), hw.hbm_bandwidth);
  // Intensity at S = T is 2 T N / (b (N + K)); set it equal to the critical intensity.
  r.compute_bound_context = r.roofline.critical_intensity * bytes_per * (n + k) / (2 * n);
  r.decode_intensity_limit = 2 * n / (bytes_per * k);
  return r;
}

}  // namespace shardlab::cost
