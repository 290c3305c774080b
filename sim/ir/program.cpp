#include "sim/ir/program.h"

#include <fmt/format.h>

#include "sim/error.h"

namespace tpusim {
namespace {
void check_deps(const Program& p, const std::string& name, const std::vector<int>& deps) {
  for (int d : deps)
    if (d < 0 || d >= static_cast<int>(p.items.size()))
      throw Error(fmt::format("program '{}': item '{}' depends on item {} which does not precede it",
                              p.name, name, d));
}
}  // namespace

int Program::add_kernel(std::shared_ptr<const Kernel> k, std::vector<int> deps, int64_t repeat,
                        bool loop) {
  check_deps(*this, k->name, deps);
  std::string n = k->name;
  items.push_back({std::move(n), KernelCall{std::move(k), repeat, loop}, std::move(deps)});
  return static_cast<int>(items.size() - 1);
}

int Program::add_collective(std::string name, Collective c, std::vector<int> deps) {
  check_deps(*this, name, deps);
  items.push_back({std::move(name), c, std::move(deps)});
  return static_cast<int>(items.size() - 1);
}

}  // namespace tpusim
