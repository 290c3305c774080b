"""Compiles a JAX function for a TPU topology on this (TPU-less) host with libtpu, as MaxText's
train_compile does, and writes what the compiler decided: the optimized HLO, its memory and cost
analyses, and for every Pallas kernel the scoped VMEM Mosaic reserved and the instruction mix of
its lowered body (Mosaic's LLO dump). tpusim imports the directory (`tpusim run --hlo DIR`).

The program is placed on one chip (device 0 of the topology): the questions it answers are about
one chip's schedule (how XLA lowers a solve or a scan, what Mosaic makes of a kernel body).
"""
from __future__ import annotations

import base64
import collections
import glob
import json
import os
import re
import shutil
from importlib import metadata

from tpusim_jax.bundles import BundleDump, floors
from tpusim_jax.export import ExportError, collect_kernels

FORMAT = "tpusim-compile"
VERSION = 1

# The kernel's entry function in Mosaic's final LLO module (the index maps are transform_N).
_FUNC = re.compile(r"^\s*func\.func @([A-Za-z_][\w.]*)\(")
_OP = re.compile(r"\b(llo\.[a-z_0-9]+)\b")
# Scoped VMEM per Pallas custom call, in the compiled HLO's backend config.
_SCOPED = re.compile(r'"used_scoped_memory_configs":\[\{"memory_space":"1","offset":"\d+",'
                     r'"size":"(\d+)"\}\]')
# The kernel's name: op_name ends in NAME/pallas_call.
_KERNEL_NAME = re.compile(r'op_name="(?:[^"]*/)?([^"/]+)/pallas_call"')


def mosaic_dump_flag(dump_dir: str) -> None:
    """Asks libtpu to dump Mosaic's passes into `dump_dir`; must run before libtpu starts."""
    flags = os.environ.get("LIBTPU_INIT_ARGS", "")
    os.environ["LIBTPU_INIT_ARGS"] = f"{flags} --xla_mosaic_dump_to={dump_dir}".strip()


def buffer_dump_flag(dump_dir: str) -> None:
    """Asks XLA to dump its buffer assignment into `dump_dir`: libtpu's compile reads XLA_FLAGS
    (its LIBTPU_INIT_ARGS refuse --xla_dump_to). Must run before XLA first reads its flags."""
    flags = os.environ.get("XLA_FLAGS", "")
    os.environ["XLA_FLAGS"] = f"{flags} --xla_dump_to={dump_dir}".strip()


# A buffer slot of the memory-usage report: "2.32GiB( 15%); 2.32GiB; OFFSET; N; SHAPES".
_SLOT = re.compile(r"^\s*[0-9.]+\w*\(\s*\d+%\);\s*([0-9.]+)([KMGT]i)?B;\s*\d+;\s*(\d+);\s*(.*)$")
_UNITS = {None: 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def hbm_buffers(dump_dir: str, most: int = 8) -> dict | None:
    """The HBM side of XLA's buffer assignment, from the dump's memory-usage report of the
    largest module: its heap (every slot, bytes), its `most` largest slots, each with the
    values that share it in turn (shapes as XLA prints them), and what is live in HBM at the
    step's peak (`peak_live...`, see peak_live)."""
    best, best_path = None, ""
    for path in glob.glob(os.path.join(dump_dir, "*memory-usage-report.txt")):
        with open(path) as f:
            lines = f.read().splitlines()
        if not lines or not lines[0].startswith("Memory Space: default"):
            continue
        total = re.match(r"Total bytes: (\d+)", lines[1]) if len(lines) > 1 else None
        if not total:
            continue
        slots = []
        for line in lines[2:]:
            if line.startswith("Memory Space:"):
                break
            m = _SLOT.match(line)
            if m and len(slots) < most:
                slots.append({"bytes": round(float(m.group(1)) * _UNITS[m.group(2)]),
                              "values": m.group(4).strip().replace("\u00d7", " x ")})
        if best is None or int(total.group(1)) > best["heap_bytes"]:
            best, best_path = {"heap_bytes": int(total.group(1)), "largest": slots}, path
    # The sweep reads the largest module's reports only.
    live = peak_live(best_path[:-len("-memory-usage-report.txt")], most) if best else None
    if live is not None:
        best.update(live)
    return best


# A value of the buffer assignment: " value: <ID NAME{INDEX} [(phi)] @0> (size=S,offset=O): SHAPE".
# (a value that is not a tuple element has no {INDEX}).
_VALUE = re.compile(r"^ value: <\d+ ([\w.\-]+)(?:\{([\d,]*)\})?[^>]*> \(size=(\d+),offset=(\d+)\)")
# A live range of the live-range report: "    NAME{INDEX}:START-END"; a position of its schedule:
# "    N:NAME".
_RANGE = re.compile(r"^\s+([\w.\-]+)\{([\d,]*)\}:(\d+)-(\d+)$")
_POSITION = re.compile(r"^\s+(\d+):([\w.\-]+)$")


def peak_live(module: str, most: int) -> dict | None:
    """What is live in HBM at the peak of the step (dump files MODULE-buffer-assignment.txt,
    MODULE-live-range.txt and MODULE.txt): XLA's values, each in its buffer (values sharing one
    counted once), swept over their live ranges in the schedule; their bytes at the peak, those of
    the step's parameters (weights, optimizer state) among them, the instruction the peak is at,
    and the `most` largest of the others, each with its shape, and the opcode and op_name of the
    instruction that defines it.
    Values in other memory spaces (VMEM, host) are left out. None without those reports."""
    assignment, ranges = module + "-buffer-assignment.txt", module + "-live-range.txt"
    if not (os.path.exists(assignment) and os.path.exists(ranges)):
        return None
    buffer_of, hbm, allocation = {}, True, ""
    with open(assignment) as f:
        for line in f:
            if line.startswith("allocation "):
                allocation, hbm = line.split(":")[0], not re.search(r", color [1-9]", line)
            elif hbm and (m := _VALUE.match(line)):
                key = (m.group(1), m.group(2) or "")
                buffer_of[key] = (allocation, int(m.group(4)), int(m.group(3)))
    events = collections.defaultdict(list)  # schedule position -> (buffer, +1 or -1, value)
    schedule = {}
    with open(ranges) as f:
        for line in f:
            if p := _POSITION.match(line):
                schedule[int(p.group(1))] = p.group(2)
                continue
            m = _RANGE.match(line)
            if m and (key := (m.group(1), m.group(2))) in buffer_of:
                events[int(m.group(3))].append((buffer_of[key], 1, key))
                events[int(m.group(4)) + 1].append((buffer_of[key], -1, key))
    users, live, total, peak = collections.Counter(), {}, 0, (-1, {}, -1)
    for t in sorted(events):
        for buffer, step, key in events[t]:
            users[buffer] += step
            if step > 0 and users[buffer] == 1:
                total += buffer[2]
                live[buffer] = key
            elif step < 0 and users[buffer] == 0:
                total -= buffer[2]
                live.pop(buffer, None)
        if total > peak[0]:
            peak = (total, dict(live), t)
    values = sorted(((b[2],) + key for b, key in peak[1].items()), key=lambda v: -v[0])
    at = schedule.get(peak[2], "")
    shapes = _defining_shapes(module + ".txt", {name for _, name, _ in values} | {at})
    # The entry computation's parameters (a loop body's are values carried through the loop).
    is_parameter = [shapes.get(v[1], ("", ""))[1] == "entry parameter" for v in values]
    others = [v for v, parameter in zip(values, is_parameter) if not parameter]
    listed = []
    for size, name, index in others[:most]:
        shape, opcode, op = shapes.get(name, ("", "", ""))
        if index and shape.startswith("("):
            parts = _tuple_elements(shape)
            if "," not in index and int(index) < len(parts):
                shape = parts[int(index)]
        listed.append({"bytes": size, "value": name + (f"{{{index}}}" if index else ""),
                       "shape": _without_layout(shape), "opcode": opcode, "op": op})
    at_op = shapes.get(at, ("", "", ""))[2]
    return {"peak_live_bytes": peak[0], "peak_live_at": at + (f" ({at_op})" if at_op else ""),
            "peak_live_parameter_bytes": peak[0] - sum(v[0] for v in others),
            "peak_live": listed}


def _defining_shapes(hlo_path: str, names: set) -> dict:
    """name -> (shape, opcode, op_name) of the instructions `names` in an HLO text file; the
    entry computation's parameters have the opcode "entry parameter"."""
    found, entry = {}, False
    if not os.path.exists(hlo_path):
        return found
    with open(hlo_path) as f:
        for line in f:
            if not line.startswith(" "):  # a computation's header or its closing brace
                entry = line.startswith("ENTRY ")
            m = re.match(r"\s*(?:ROOT )?%([\w.\-]+) = ", line)
            if not m or m.group(1) not in names:
                continue
            rest = line[m.end():]
            shape = rest[:_shape_end(rest)]
            opcode = rest[len(shape):].split("(", 1)[0].strip()
            if entry and opcode == "parameter":
                opcode = "entry parameter"
            op = re.search(r'op_name="([^"]*)"', line)
            found[m.group(1)] = (shape, opcode, op.group(1).replace("\\'", "'") if op else "")
    return found


def _shape_end(text: str) -> int:
    """Where the shape at the start of `text` ends (the space before the opcode)."""
    depth = 0
    for i, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == " " and depth == 0:
            return i
    return len(text)


def _tuple_elements(shape: str) -> list:
    """The element shapes of a tuple shape "(a, b, ...)"."""
    parts, depth, start = [], 0, 1
    for i, c in enumerate(shape):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if (c == "," and depth == 1) or (c == ")" and depth == 0):
            parts.append(re.sub(r"/\*.*?\*/", "", shape[start:i]).strip())
            start = i + 1
    return parts


def _without_layout(shape: str) -> str:
    """f32[1,4096,151936]{2,1,0:T(8,128)} -> f32[1,4096,151936]."""
    return re.sub(r"\{[^{}]*(?:\([^()]*\)[^{}]*)*\}", "", shape)


# What libtpu is told this host is, so that it does not probe for TPU metadata and warn; the
# compile target is the --topology, whatever this names.
_HOST_ACCELERATOR = {"v5e": "v5litepod-4", "v6e": "v6e-4", "v5p": "v5p-8", "v4": "v4-8"}


def topology(name: str, num_slices: int = 1):
    """The compile-only devices of a TPU topology such as v5e:2x2 or v5p:2x2x1 (of `num_slices`
    such slices joined over DCN: MegaScale devices with a slice_id, as MaxText's train_compile
    asks for them)."""
    from jax.experimental import topologies
    generation = name.partition(":")[0]
    os.environ.setdefault("TPU_ACCELERATOR_TYPE", _HOST_ACCELERATOR.get(generation, "v5litepod-4"))
    os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
    # libtpu guards a TPU against two processes with /tmp/libtpu_lockfile; compiling owns no TPU,
    # so concurrent compiles (a sweep, parallel tests) must not refuse each other.
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    try:
        if num_slices > 1:
            return topologies.get_topology_desc(platform="tpu", topology_name=name,
                                                num_slices=num_slices)
        return topologies.get_topology_desc(platform="tpu", topology_name=name)
    except Exception as e:  # libtpu's errors are RuntimeErrors of several kinds
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ExportError(f"--topology {name}: libtpu refused it: {first}") from None


def llo_op_counts(dump_dir: str) -> dict[str, dict[str, int]]:
    """Per kernel name, the LLO instructions of its body in Mosaic's final module (one grid
    step's straight-line code; the ops under a pl.when are counted once)."""
    counts: dict[str, dict[str, int]] = {}
    for path in sorted(glob.glob(os.path.join(dump_dir, "*post-finalize-llo.txt"))):
        func, ops = None, collections.Counter()
        with open(path) as f:
            for line in f:
                m = _FUNC.match(line)
                if m:
                    func = m.group(1)
                    if not func.startswith("transform_") and func not in counts:
                        ops = collections.Counter()
                        counts[func] = ops
                    continue
                if func and not func.startswith("transform_") and counts.get(func) is ops:
                    ops.update(_OP.findall(line))
    return {k: dict(sorted(v.items(), key=lambda kv: -kv[1])) for k, v in counts.items()}


def pallas_kernels(hlo: str, dump_dir: str, names: list[str]) -> list[dict]:
    """Each Pallas custom call of the compiled HLO: its instruction, its kernel's name (found in
    the serialized Mosaic module it carries, among the exported kernels' `names`; else from the
    op_name), the scoped VMEM Mosaic reserved for it, and its LLO instruction counts."""
    llo = llo_op_counts(dump_dir)
    kernels = []
    for line in hlo.splitlines():
        if 'custom_call_target="tpu_custom_call"' not in line:
            continue
        instruction = re.match(r"\s*(?:ROOT\s+)?%?([^\s=]+)\s*=", line)
        body = re.search(r'"body":"([^"]+)"', line)
        module = base64.b64decode(body.group(1)) if body else b""
        found = [n for n in names if n.encode() in module]
        name_match = _KERNEL_NAME.search(line)
        name = max(found, key=len) if found else name_match.group(1) if name_match else "?"
        scoped = _SCOPED.search(line)
        kernels.append({"instruction": instruction.group(1) if instruction else "?",
                        "name": name,
                        "scoped_vmem_bytes": int(scoped.group(1)) if scoped else None,
                        "llo_ops": llo.get(name, {})})
    return kernels


def versions() -> dict[str, str]:
    out = {}
    for pkg in ("jax", "jaxlib", "libtpu"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def memory_summary(compiled) -> dict[str, int]:
    """The compiler's memory analysis of one chip's program, and what its HBM must hold."""
    mem = compiled.memory_analysis()
    memory = {
        "argument_bytes": mem.argument_size_in_bytes,
        "output_bytes": mem.output_size_in_bytes,
        "alias_bytes": mem.alias_size_in_bytes,
        "temp_bytes": mem.temp_size_in_bytes,
        "generated_code_bytes": mem.generated_code_size_in_bytes,
        # Pinned host memory (remat offload), not in HBM.
        "host_temp_bytes": mem.host_temp_size_in_bytes,
    }
    # Arguments, outputs not aliased to them, temporaries (XLA's buffer assignment peak) and the
    # program itself.
    memory["total_bytes"] = (memory["argument_bytes"] + memory["output_bytes"]
                             - memory["alias_bytes"] + memory["temp_bytes"]
                             + memory["generated_code_bytes"])
    return memory


def cost_summary(compiled) -> dict[str, float]:
    """The compiler's cost analysis: FLOPs, transcendentals, bytes accessed, optimal seconds."""
    cost = compiled.cost_analysis() or {}
    if isinstance(cost, list):
        cost = cost[0] if cost else {}
    return {k: float(cost[k]) for k in ("flops", "transcendentals", "bytes accessed",
                                        "optimal_seconds") if k in cost}


def compile_for_topology(fn, args, topology_name: str, out_dir: str, function: str,
                         vliw_floors: bool = False) -> dict:
    """Compiles `fn` on `args` (name, ShapeDtypeStruct) for one chip of the topology; writes
    DIR/optimized.hlo and DIR/compile.json and returns the latter's content; with `vliw_floors`
    the record holds each op's VLIW schedule length (bundles.py)."""
    bundles = BundleDump() if vliw_floors else None
    try:
        return _compile_for_topology(fn, args, topology_name, out_dir, function, bundles)
    finally:
        if bundles:
            bundles.close()


def _compile_for_topology(fn, args, topology_name, out_dir, function, bundles) -> dict:
    import jax
    from jax.sharding import SingleDeviceSharding

    if versions()["libtpu"] == "not installed":
        raise ExportError("compile needs libtpu (scripts/setup.sh installs the pinned version)")
    dump = os.path.join(out_dir, "mosaic")
    shutil.rmtree(dump, ignore_errors=True)
    mosaic_dump_flag(dump)
    topo = topology(topology_name)
    device = topo.devices[0]
    placed = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=SingleDeviceSharding(device))
              for _, a in args]
    # Pallas lowering asks the default device which TPU generation it targets.
    with jax.default_device(device):
        lowered = jax.jit(fn).lower(*placed)
        compiled = lowered.compile()
    hlo = compiled.as_text()
    memory = memory_summary(compiled)
    cost = cost_summary(compiled)
    with open(os.path.join(out_dir, "optimized.hlo"), "w") as f:
        f.write(hlo)
    result = {
        "format": FORMAT, "version": VERSION, "function": function,
        "topology": topology_name, "device_kind": device.device_kind,
        "args": [{"name": n, "shape": list(a.shape), "dtype": str(a.dtype)} for n, a in args],
        "versions": versions(),
        "memory": memory,
        "cost": cost,
        "hlo": "optimized.hlo",
    }
    if bundles:
        result["vliw_floors"] = floors(bundles.dir, hlo, device.device_kind,
                                       result["versions"]["libtpu"])
    # The Pallas kernels as tpusim programs, for the HLO import to resolve the custom calls.
    result["kernels_program"] = None
    names = []
    try:
        kernels = collect_kernels(fn, args, function)
        names = [item["kernel"]["name"] for item in kernels["items"]]
        if kernels["items"]:
            result["kernels_program"] = "kernels.json"
            with open(os.path.join(out_dir, "kernels.json"), "w") as f:
                json.dump(kernels, f, indent=1)
    except ExportError as e:
        result["kernels_export_error"] = str(e)
    result["pallas_kernels"] = pallas_kernels(hlo, dump, names)
    with open(os.path.join(out_dir, "compile.json"), "w") as f:
        json.dump(result, f, indent=1)
    return result
