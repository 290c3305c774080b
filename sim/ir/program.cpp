#include "sim/ir/program.h"

#include <fmt/format.h>

#include "sim/error.h"

namespace tpusim {
namespace {
void check_deps(const Program& p, const std::string& name, const std::vector<int>& deps) {
  for (int d : deps)
    if (d < 0 || d >= static_cast<int>(p.items.size()))
      throw Error(fmt::format(
          "program '{}': item '{}' depends on item {} which does not precede it", p.name, name, d));
}
}  // namespace

std::vector<const Kernel*> kernels_of(const ProgramItem& item) {
  std::vector<const Kernel*> out;
  if (const auto* c = std::get_if<KernelCall>(&item.what)) out.push_back(c->kernel.get());
  if (const auto* l = std::get_if<Loop>(&item.what))
    for (const auto& k : l->body) out.push_back(k.get());
  return out;
}

bool is_forward_stage(const std::string& stage) { return stage.rfind("fwd", 0) == 0; }
bool is_recompute_stage(const std::string& stage) { return stage.rfind("remat", 0) == 0; }

int Program::add_kernel(std::shared_ptr<const Kernel> k, std::vector<int> deps, std::string stage) {
  check_deps(*this, k->name, deps);
  std::string n = k->name;
  items.push_back({std::move(n), KernelCall{std::move(k)}, std::move(deps), std::move(stage)});
  return static_cast<int>(items.size() - 1);
}

int Program::add_loop(std::string name, std::vector<std::shared_ptr<const Kernel>> body,
                      int64_t trips, std::vector<int> deps) {
  check_deps(*this, name, deps);
  if (body.empty() || trips < 1)
    throw Error(fmt::format("program '{}': loop '{}' needs a body and at least one trip",
                            this->name, name));
  items.push_back({std::move(name), Loop{std::move(body), trips}, std::move(deps), ""});
  return static_cast<int>(items.size() - 1);
}

int Program::add_collective(std::string name, Collective c, std::vector<int> deps) {
  check_deps(*this, name, deps);
  items.push_back({std::move(name), c, std::move(deps), ""});
  return static_cast<int>(items.size() - 1);
}

void Program::append(const Program& other, const std::string& stage) {
  const int base = static_cast<int>(items.size());
  for (ProgramItem item : other.items) {
    for (int& d : item.deps) d += base;
    if (item.stage.empty()) item.stage = stage;
    items.push_back(std::move(item));
  }
}

}  // namespace tpusim
