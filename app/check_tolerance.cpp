#include "app/check_tolerance.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace tpusim {

namespace {

// Values of `k` that are cast to bf16 as the head or the tail of a hand-made split: hi = bf16(x)
// and lo = bf16(x - hi), hi possibly widened back to f32 before the subtraction.
std::set<ValueId> split_casts(const Kernel& k) {
  std::map<ValueId, const Op*> made_by;
  for (const Op& op : k.body) made_by[op.output] = &op;
  auto widened_from = [&](ValueId v) {
    const auto it = made_by.find(v);
    return it != made_by.end() && it->second->kind == OpKind::cast ? it->second->inputs[0] : v;
  };
  std::set<ValueId> split;
  for (const Op& op : k.body) {
    if (op.kind != OpKind::elementwise || op.fn != EwFn::sub || op.inputs.size() != 2) continue;
    const ValueId x = op.inputs[0], hi = widened_from(op.inputs[1]);
    const auto head = made_by.find(hi);
    if (head == made_by.end() || head->second->kind != OpKind::cast || head->second->inputs[0] != x)
      continue;
    for (const Op& tail : k.body)
      if (tail.kind == OpKind::cast && tail.inputs[0] == op.output &&
          k.values[tail.output].dtype == DType::bf16) {
        split.insert(hi);
        split.insert(tail.output);
      }
  }
  return split;
}

Rounding rounding_of(const Kernel& k) {
  Rounding r = Rounding::f32;
  auto at_least = [&](Rounding x) { r = std::max(r, x); };
  const std::set<ValueId> split = split_casts(k);
  for (const Op& op : k.body) {
    if (op.kind == OpKind::dot) {
      const bool f32_operand = std::any_of(op.inputs.begin(), op.inputs.end(), [&](ValueId v) {
        return k.values[v].dtype == DType::f32;
      });
      if (f32_operand && op.precision == Precision::default_) at_least(Rounding::bf16);
      if (f32_operand && op.precision == Precision::high) at_least(Rounding::bf16x3);
    } else if (op.kind == OpKind::cast && k.values[op.output].dtype == DType::bf16 &&
               k.values[op.inputs[0]].kind != ValueKind::input_block) {
      at_least(split.count(op.output) ? Rounding::bf16x3 : Rounding::bf16);
    }
  }
  return r;
}

}  // namespace

Rounding rounding_of(const Program& p, DType output) {
  Rounding r = output == DType::bf16 ? Rounding::bf16 : Rounding::f32;
  for (const ProgramItem& item : p.items)
    if (const auto* call = std::get_if<KernelCall>(&item.what))
      r = std::max(r, rounding_of(*call->kernel));
  return r;
}

double relative_tolerance(Rounding r) {
  switch (r) {
    case Rounding::bf16:
      return 2 * std::ldexp(1.0, -7);  // 2 ulps of 8 significant bits
    case Rounding::bf16x3:
      return 4 * std::ldexp(1.0, -16);
    case Rounding::f32:
      break;
  }
  return 1e-5;
}

std::string name(Rounding r) {
  return r == Rounding::bf16 ? "bf16" : r == Rounding::bf16x3 ? "bf16x3" : "f32";
}

}  // namespace tpusim
