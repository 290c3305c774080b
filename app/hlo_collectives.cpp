#include "app/hlo_collectives.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "app/hlo_work.h"
#include "sim/error.h"

namespace tpusim {
namespace {

std::vector<std::string> comma_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    const auto a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
    if (a != std::string::npos) out.push_back(item.substr(a, b - a + 1));
  }
  return out;
}

// mesh['axis_0'=16,'axis_1'=8] {'axis_0'}: the product of the named axes' sizes.
int64_t mesh_group_size(const HloModule& m, const HloInstruction& in, const std::string& g) {
  std::map<std::string, int64_t> sizes;
  const auto close = g.find(']');
  for (const std::string& a : comma_list(g.substr(5, close - 5))) {
    const auto eq = a.find('=');
    if (eq != std::string::npos) sizes[a.substr(0, eq)] = std::stoll(a.substr(eq + 1));
  }
  // The axes follow the mesh, or a device_ids attribute that reorders the devices first.
  const std::string ids = in.attr("device_ids");
  const std::string& named = ids.empty() ? g : ids;
  const auto open = named.rfind('{'), end = named.rfind('}');
  if (open == std::string::npos || end == std::string::npos || end < open)
    throw Error(fmt::format("{}:{}: '{}': replica groups '{}' name no mesh axes", m.file, in.line,
                            in.name, g));
  int64_t n = 1;
  for (std::string a : comma_list(named.substr(open + 1, end - open - 1))) {
    // 'axis':(k)m is m devices of the axis, k apart.
    if (const auto colon = a.find(':'); colon != std::string::npos) {
      const auto paren = a.find(')', colon);
      n *= std::stoll(a.substr(paren == std::string::npos ? colon + 1 : paren + 1));
      continue;
    }
    const auto it = sizes.find(a);
    if (it == sizes.end())
      throw Error(fmt::format("{}:{}: '{}': replica groups name mesh axis {} it does not define",
                              m.file, in.line, in.name, a));
    n *= it->second;
  }
  return n;
}

int64_t replica_group_size(const HloModule& m, const HloInstruction& in) {
  const std::string g = in.attr("replica_groups");
  if (g.empty() || g == "{}") return 1;
  if (g.rfind("mesh[", 0) == 0) return mesh_group_size(m, in, g);
  if (g[0] == '[') {  // [groups,size]<=[n]
    const auto comma = g.find(','), close = g.find(']');
    return std::stoll(g.substr(comma + 1, close - comma - 1));
  }
  const auto first = g.find('{', 1), end = g.find('}', 1);
  if (first == std::string::npos || end == std::string::npos) return 1;
  const std::string members = g.substr(first + 1, end - first - 1);
  return 1 + std::count(members.begin(), members.end(), ',');
}

// The bytes a collective delivers: a -start's tuple holds its operand, its result and status
// scalars (the result is the largest); a collective over several arrays returns them all.
int64_t result_bytes(const HloInstruction& in) {
  if (!in.shape.is_tuple()) return in.shape.bytes();
  int64_t largest = 0, sum = 0;
  for (const HloShape& e : in.shape.tuple) {
    largest = std::max(largest, e.bytes());
    sum += e.bytes();
  }
  return in.opcode.ends_with("-start") ? largest : sum;
}

// The remat policy's offload as the compiler schedules it: an asynchronous dynamic-update-slice
// of one layer's array into a stacked array in pinned host memory (the layout's S(5)), and a
// dynamic-slice of one back out of it (C5 #11's step: q, k and v of each layer,
// [80, 2, 64, 4096, 128] S(5)). Each moves its update or its slice over the host link; the
// stacked array stays where it is. (No compiled step here copies to host with copy-start.)
std::optional<Collective> host_transfer(const HloInstruction& in) {
  constexpr int kPinnedHost = 5;
  const HloShape& s = in.shape;
  auto on_host = [](const HloShape& x) { return !x.is_tuple() && x.memory_space == kPinnedHost; };
  // ((operands...), result, status)
  if (!s.is_tuple() || s.tuple.size() < 2 || !s.tuple[0].is_tuple() || s.tuple[0].tuple.empty())
    return std::nullopt;
  const std::vector<HloShape>& operands = s.tuple[0].tuple;
  const HloShape& result = s.tuple[1];
  int64_t bytes = -1;
  if (in.opcode == "dynamic-update-slice-start" && operands.size() > 1 && on_host(operands[0]))
    bytes = operands[1].bytes();
  if (in.opcode == "dynamic-slice-start" && on_host(operands[0])) bytes = result.bytes();
  if (bytes < 0) return std::nullopt;
  return Collective{CollectiveKind::permute, bytes, host_link()};
}

// A frontend attribute's quoted value (key="value" inside frontend_attributes={...}), "" if absent.
std::string frontend_attribute(const HloInstruction& in, const std::string& key) {
  const std::string f = in.attr("frontend_attributes");
  const auto at = f.find(key + "=\"");
  if (at == std::string::npos) return "";
  const auto start = at + key.size() + 2;
  return f.substr(start, f.find('"', start) - start);
}

// _xla_megascale_target="{1,2}x{0:255}": the slices (listed, or a:b ranges) times the devices of
// each; the number of slices.
int64_t megascale_slices(const HloModule& m, const HloInstruction& in) {
  const std::string target = frontend_attribute(in, "_xla_megascale_target");
  const auto open = target.find('{'), close = target.find('}');
  if (open != 0 || close == std::string::npos)
    throw Error(fmt::format("{}:{}: '{}': megascale target '{}' names no slices", m.file, in.line,
                            in.name, target));
  int64_t n = 0;
  for (const std::string& item : comma_list(target.substr(1, close - 1))) {
    const auto colon = item.find(':');
    n += colon == std::string::npos
             ? 1
             : std::stoll(item.substr(colon + 1)) - std::stoll(item.substr(0, colon)) + 1;
  }
  return n;
}

}  // namespace

std::string hlo_host_transfer_rendezvous(const HloInstruction& in) {
  if (in.attr("is_host_transfer") != "true") return "";
  return frontend_attribute(in, "_xla_host_transfer_rendezvous");
}

// The custom call at the root of an async collective fusion ("AsyncCollectiveStart" or
// "AsyncCollectiveDone"), "" for any other instruction.
std::string hlo_async_collective_role(const HloModule& m, const HloInstruction& in) {
  if (in.opcode != "fusion") return "";
  const HloInstruction& root = m.computation(in.attr("calls")).root();
  if (root.opcode != "custom-call") return "";
  const std::string t = root.attr("custom_call_target");
  return t.size() >= 2 && t.front() == '"' ? t.substr(1, t.size() - 2) : t;
}

std::optional<Collective> hlo_collective(const HloModule& m, const HloInstruction& in) {
  if (auto h = host_transfer(in)) return h;
  // XLA's TPU async collective fusion: the collective inside, started by this fusion.
  if (hlo_async_collective_role(m, in) == "AsyncCollectiveStart") {
    for (const HloInstruction& x : m.computation(in.attr("calls")).instructions)
      if (auto c = hlo_collective(m, x)) return c;
    throw Error(fmt::format("{}:{}: '{}' starts no collective", m.file, in.line, in.name));
  }
  // A multi-slice step's reduction over DCN: a host transfer to the megascale runtime, the send
  // carrying this device's array, its recv (same rendezvous) the reduced one.
  if (in.opcode == "send" && in.attr("is_host_transfer") == "true") {
    const std::string type = frontend_attribute(in, "_xla_megascale_transfer_type");
    if (!in.shape.is_tuple() || in.shape.tuple.empty() || hlo_host_transfer_rendezvous(in).empty())
      throw Error(
          fmt::format("{}:{}: '{}': a host-transfer send needs its array in a tuple and a "
                      "_xla_host_transfer_rendezvous",
                      m.file, in.line, in.name));
    const int64_t slices = megascale_slices(m, in), sent = in.shape.tuple[0].bytes();
    const MeshAxis dcn{fmt::format("dcn over {} slices", slices), slices, false, 1, true};
    if (type == "ALL_REDUCE") return Collective{CollectiveKind::all_reduce, sent, dcn};
    if (type == "ALL_GATHER") return Collective{CollectiveKind::all_gather, sent * slices, dcn};
    throw Error(
        fmt::format("{}:{}: '{}': megascale transfer '{}' has no model (ALL_REDUCE and "
                    "ALL_GATHER have)",
                    m.file, in.line, in.name, type));
  }
  const auto kind = collective_kind(in.opcode);
  if (!kind) return std::nullopt;
  Collective c;
  c.kind = *kind;
  const int64_t out = result_bytes(in);
  c.bytes = out;
  if (c.kind == CollectiveKind::reduce_scatter) c.bytes = out * replica_group_size(m, in);
  if (c.kind == CollectiveKind::permute) {
    // One hop to a neighbour; a ring's two directions use different links.
    const std::string pairs = in.attr("source_target_pairs");
    c.axis = {fmt::format("permute {}", pairs.substr(0, pairs.find('}') + 1)), 2, false};
    return c;
  }
  // The group runs as a ring (both directions of each link) over as many torus dimensions as
  // the compiler's emitter drives: "StrategyND{... cores:{16 16}}" two, a 1-D emitter
  // (1DAllGather...) one, and so does an async collective fusion's gather, which names none (its
  // final bundles forward shards both ways round one ring; tests/jax/weight_gathers.sh). An
  // all-to-all sends each destination its share as a remote DMA in the direction its routing
  // table gives (NetRouterEmitter's final bundles for 256 v5e chips: one block of DMAs per link
  // direction, N, W, S and E), which the routers forward hop by hop: it loads every dimension the
  // group spans (tests/jax/all_to_all_routed.sh), as does v5e's AllGatherWithNetRouterEmitter,
  // which sends each shard in all four directions.
  const std::string cfg = in.attr("backend_config");
  const bool routed =
      c.kind == CollectiveKind::all_to_all ||
      cfg.find("\"emitter\":\"AllGatherWithNetRouterEmitter\"") != std::string::npos;
  int dims = routed ? 0 : 1;
  if (const auto at = cfg.find("cores:{"); at != std::string::npos) {
    const std::string sides = cfg.substr(at + 7, cfg.find('}', at) - at - 7);
    dims = 1 + static_cast<int>(std::count(sides.begin(), sides.end(), ' '));
  }
  std::string axis = in.attr("replica_groups");
  if (const std::string ids = in.attr("device_ids"); !ids.empty()) axis += " " + ids;
  c.axis = {axis, replica_group_size(m, in), true, dims};
  return c;
}

}  // namespace tpusim
