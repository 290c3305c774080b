#include "app/hlo_loops.h"

#include <fmt/format.h>

#include <algorithm>

#include "sim/error.h"

namespace tpusim {
namespace {

int64_t constant_value(const HloModule& m, const HloInstruction& c) {
  try {
    return std::stoll(c.literal);
  } catch (const std::exception&) {
    throw Error(fmt::format("{}:{}: constant '{}' is not an integer", m.file, c.line, c.name));
  }
}

// What the body adds to tuple element `index` each iteration (a loop the compiler unrolled
// adds its unroll factor), 0 if it is not `counter + constant`.
int64_t counter_step(const HloModule& m, const HloComputation& body, int index) {
  const HloInstruction& root = body.root();
  if (root.opcode != "tuple" || index >= static_cast<int>(root.operands.size())) return 0;
  const HloInstruction* add = body.find(root.operands[index]);
  if (!add || add->opcode != "add" || add->operands.size() != 2) return 0;
  for (const std::string& o : add->operands) {
    const HloInstruction* c = body.find(o);
    if (c && c->opcode == "constant") return constant_value(m, *c);
  }
  return 0;
}

}  // namespace

// known_trip_count from the backend config, else `i < N` (or N > i) in the condition with
// i's start a constant in the loop's initial tuple and its step a constant the body adds.
int64_t hlo_trip_count(const HloModule& m, const HloComputation& comp, const HloInstruction& w) {
  const std::string cfg = w.attr("backend_config");
  const auto at = cfg.find("\"known_trip_count\":{\"n\":\"");
  if (at != std::string::npos) return std::stoll(cfg.substr(at + 25));
  auto fail = [&](const std::string& why) -> int64_t {
    throw Error(fmt::format("{}:{}: while '{}': cannot find its trip count ({})", m.file, w.line,
                            w.name, why));
  };
  const HloComputation& cond = m.computation(w.attr("condition"));
  const HloInstruction& root = cond.root();
  if (root.opcode != "compare" || root.operands.size() != 2) return fail("no compare at root");
  const std::string dir = root.attr("direction");
  const HloInstruction* a = cond.find(root.operands[0]);
  const HloInstruction* b = cond.find(root.operands[1]);
  if (dir == "GT") std::swap(a, b);
  if ((dir != "LT" && dir != "GT") || !a || !b || a->opcode != "get-tuple-element" ||
      b->opcode != "constant")
    return fail("the condition is not counter < constant");
  const int64_t limit = constant_value(m, *b);
  const int index = std::stoi(a->attr("index"));
  const HloInstruction* init = comp.find(w.operands.at(0));
  if (!init || init->opcode != "tuple" || index >= static_cast<int>(init->operands.size()))
    return fail("the initial value is not a tuple");
  const HloInstruction* start = comp.find(init->operands[index]);
  while (start && start->opcode == "copy") start = comp.find(start->operands.at(0));
  if (!start || start->opcode != "constant")
    return fail("the counter does not start at a constant");
  const int64_t step = counter_step(m, m.computation(w.attr("body")), index);
  if (step <= 0) return fail("the counter does not grow by a constant");
  return std::max<int64_t>(0, (limit - constant_value(m, *start) + step - 1) / step);
}

}  // namespace tpusim
