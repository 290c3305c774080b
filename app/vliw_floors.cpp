#include "app/vliw_floors.h"

#include <fmt/format.h>

#include "sim/error.h"

namespace tpusim {

std::map<std::string, int64_t> vliw_floors_of(const nlohmann::json& record,
                                              const std::string& path) {
  std::map<std::string, int64_t> out;
  if (record.is_null() || !record.contains("vliw_floors")) return out;
  const nlohmann::json& cycles = record["vliw_floors"].value("cycles", nlohmann::json());
  if (!cycles.is_object())
    throw Error(
        fmt::format("{}: 'vliw_floors' has no 'cycles' map of instruction -> cycles", path));
  for (const auto& [name, value] : cycles.items()) {
    if (!value.is_number_integer() || value.get<int64_t>() < 0)
      throw Error(fmt::format("{}: vliw_floors: '{}' is not a count of cycles", path, name));
    out[name] = value.get<int64_t>();
  }
  return out;
}

namespace {

bool floored(std::shared_ptr<const Kernel>& k, const std::map<std::string, int64_t>& floors) {
  if (k->origin != Origin::xla) return false;  // Pallas kernels carry their kernel's name
  const auto it = floors.find(k->name);
  if (it == floors.end()) return false;
  auto copy = std::make_shared<Kernel>(*k);
  copy->vliw_floor_cycles = it->second;
  k = std::move(copy);
  return true;
}

}  // namespace

int apply_vliw_floors(Program& p, const std::map<std::string, int64_t>& floors) {
  if (floors.empty()) return 0;
  int count = 0;
  for (ProgramItem& item : p.items) {
    if (auto* call = std::get_if<KernelCall>(&item.what)) count += floored(call->kernel, floors);
    if (auto* loop = std::get_if<Loop>(&item.what))
      for (auto& k : loop->body) count += floored(k, floors);
  }
  return count;
}

int apply_recorded_vliw_floors(Program& p, const nlohmann::json& record, const std::string& path) {
  const int count = apply_vliw_floors(p, vliw_floors_of(record, path));
  if (count == 0)
    throw Error(fmt::format(
        "{}: --vliw-floors: the compile recorded no VLIW floors (compile it with --vliw-floors)",
        path));
  return count;
}

}  // namespace tpusim
