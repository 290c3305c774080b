"""The work of a traced function outside its Pallas kernels, as XLA would run it.

The jaxpr is flattened (jit, custom_jvp/custom_vjp and checkpoint calls inlined, as traced: a
checkpointed function's recompute stays where JAX put it), dead values are dropped as XLA drops
them, and the remaining equations become program items in order:

- a `pallas_call`: a kernel (export.export_pallas_call);
- a `scan` (lax.scan, and fori_loop with static bounds, which JAX traces as a scan), or a `while`
  whose trip count shows in its counter (known_trips): a loop with its trip count, whose body is
  exported the same way (a loop inside a loop body is refused);
- `triangular_solve`: an item of its own (tpusim runs it as XLA's TPU backend does at C <= 128);
- a `shard_map`: its body, on one device's shards (a tpusim program is what one chip runs), with
  its collectives (psum, pmax, pmin, all_gather, reduce_scatter, ppermute) as program
  collectives over the mesh axes they name;
- everything else: HLO ops grouped into fusions. The grouping imitates XLA's producer-consumer
  fusion [assume: the TPU compiler's fusion decisions are not public; `python -m tpusim_jax
  compile` shows the real ones]: elementwise ops, converts, broadcasts, reshapes, slices and
  reductions join the fusion of the values they consume; a dot is a fusion of its own; a fusion
  whose value a dot, a kernel or a loop consumes is closed, and so is one that ends in a reduction.
  A fusion of scalars only (a loop counter) runs on the scalar unit and is not exported; a fusion
  of reshapes only is a bitcast and costs nothing.

`while` with another trip count, `cond`, collectives outside a shard_map and other
primitives are refused with one line naming the primitive and the user code's line.
"""
from __future__ import annotations

import numpy as np
from jax.extend import core as jcore

from tpusim_jax.errors import ExportError, where

# tpusim's HLO reader takes XLA's dtype names.
HLO_DTYPES = {"bfloat16": "bf16", "float32": "f32", "float16": "f16", "int8": "s8",
              "int32": "s32", "uint32": "u32", "bool": "pred", "uint8": "u8"}
# jaxpr primitive -> HLO opcode, for the ops fusions are made of.
OPCODES = {
    "add": "add", "add_any": "add", "sub": "subtract", "mul": "multiply", "div": "divide",
    "max": "maximum", "min": "minimum", "neg": "negate", "abs": "abs", "sign": "sign",
    "floor": "floor", "ceil": "ceil", "round": "round-nearest-afz", "rem": "remainder",
    "exp": "exponential", "exp2": "exponential", "log": "log", "log1p": "log-plus-one",
    "expm1": "exponential-minus-one", "tanh": "tanh", "logistic": "logistic", "rsqrt": "rsqrt",
    "sqrt": "sqrt", "cbrt": "cbrt", "pow": "power", "sin": "sine", "cos": "cosine", "tan": "tan",
    "atan2": "atan2", "erf": "erf", "integer_pow": "multiply", "square": "multiply",
    "eq": "compare", "ne": "compare", "lt": "compare", "le": "compare", "gt": "compare",
    "ge": "compare", "and": "and", "or": "or", "not": "not", "xor": "xor",
    "select_n": "select", "clamp": "clamp", "is_finite": "is-finite",
    "convert_element_type": "convert", "stop_gradient": "copy", "copy": "copy",
    "copy_p": "copy", "broadcast_in_dim": "broadcast", "reshape": "reshape",
    "squeeze": "reshape", "expand_dims": "reshape", "transpose": "transpose", "iota": "iota",
    "slice": "slice", "dynamic_slice": "dynamic-slice",
    "dynamic_update_slice": "dynamic-update-slice", "concatenate": "concatenate", "pad": "pad",
    "rev": "reverse", "gather": "gather", "reduce_sum": "reduce", "reduce_max": "reduce",
    "reduce_min": "reduce", "reduce_prod": "reduce", "reduce_and": "reduce",
    "reduce_or": "reduce", "argmax": "reduce", "argmin": "reduce",
    # A cumulative op over n elements: taken as one pass over its input [assume: XLA's TPU
    # backend scans associatively; the log-depth passes are not modelled].
    "cumsum": "reduce", "cummax": "reduce", "cumlogsumexp": "reduce", "cumprod": "reduce",
    "dot_general": "dot",
}
PRECISIONS = {None: "default", "DEFAULT": "default", "HIGH": "high", "HIGHEST": "highest"}
# Collectives (inside shard_map) -> tpusim's collective kinds.
COLLECTIVES = {"psum": "all_reduce", "pmax": "all_reduce", "pmin": "all_reduce",
               "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
               "ppermute": "permute"}
# Opcodes that change no bytes: a fusion of only these is a bitcast.
BITCASTS = {"reshape"}
# Calls inlined where they are: (primitive, the parameter holding the called jaxpr).
CALLS = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr",
         "core_call": "call_jaxpr", "custom_jvp_call": "call_jaxpr",
         "custom_vjp_call": "call_jaxpr", "custom_vjp_call_jaxpr": "fun_jaxpr",
         "remat2": "jaxpr", "checkpoint": "jaxpr", "custom_lin": None}


def dot_fields(eqn) -> dict:
    """A dot_general's dimension numbers and precision as the program format writes them."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    precision = eqn.params.get("precision")
    if isinstance(precision, tuple):
        precision = precision[0]
    name = getattr(precision, "name", precision)
    if name not in PRECISIONS:
        raise ExportError(f"{where(eqn)}: dot precision {precision} is not one tpusim models")
    return {"dims": {"lhs_contract": list(lc), "rhs_contract": list(rc),
                     "lhs_batch": list(lb), "rhs_batch": list(rb)},
            "precision": PRECISIONS[name]}


def hlo_dtype(aval, what: str) -> str:
    name = np.dtype(aval.dtype).name
    if name not in HLO_DTYPES:
        raise ExportError(f"{what}: dtype {name} is not one tpusim models")
    return HLO_DTYPES[name]


COMPARISONS = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
               "ne": np.not_equal}


def known_trips(eqn, most: int = 1 << 24) -> int | None:
    """The trip count of a while loop whose condition compares one carried counter with a
    constant, the counter starting at a constant and stepped by a constant in the body (what
    XLA's while loop analysis finds too); None otherwise."""
    cond, body = eqn.params["cond_jaxpr"], eqn.params["body_jaxpr"]
    nc, nb = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
    if len(cond.jaxpr.eqns) != 1:
        return None
    test = cond.jaxpr.eqns[0]
    if test.primitive.name not in COMPARISONS or len(test.invars) != 2:
        return None
    counter, bound = test.invars
    flipped = isinstance(counter, jcore.Literal)
    if flipped:
        counter, bound = bound, counter
    if not isinstance(bound, jcore.Literal) or counter not in cond.jaxpr.invars[nc:]:
        return None
    k = cond.jaxpr.invars[nc:].index(counter)
    start = eqn.invars[nc + nb + k]
    step = next((e for e in body.jaxpr.eqns if e.outvars[0] is body.jaxpr.outvars[k]), None)
    if not isinstance(start, jcore.Literal) or step is None or \
            step.primitive.name not in ("add", "sub") or \
            step.invars[0] is not body.jaxpr.invars[nb + k] or \
            not isinstance(step.invars[1], jcore.Literal):
        return None
    delta = step.invars[1].val * (1 if step.primitive.name == "add" else -1)
    compare = COMPARISONS[test.primitive.name]
    i, trips = start.val, 0
    while (compare(bound.val, i) if flipped else compare(i, bound.val)) and trips <= most:
        i, trips = i + delta, trips + 1
    return trips if trips <= most else None


class Node:
    """One equation of the flattened jaxpr: its operands and results by name."""

    def __init__(self, eqn, ins: list, outs: list[str], body=None, site: str = ""):
        self.eqn, self.ins, self.outs, self.body = eqn, ins, outs, body
        self.site = site or "from autodiff"  # where in the user's code
        self.prim = eqn.primitive.name
        self.position = 0  # in its Flat


class Flat:
    """A flattened jaxpr: nodes in order, the names of its inputs and outputs, and every
    name's aval."""

    def __init__(self):
        self.nodes: list[Node] = []
        self.inputs: list[str] = []
        self.outputs: list = []
        self.trips = 0  # a while loop's body: its trip count


class Flattener:
    def __init__(self):
        self.avals: dict[str, object] = {}
        self.constants: dict[str, object] = {}  # closed-over arrays, by name
        self.mesh: dict[str, int] = {}  # axis sizes of the shard_maps met
        self.count = 0

    def fresh(self, var, stem="v") -> str:
        self.count += 1
        name = f"{stem}{self.count}"
        self.avals[name] = var.aval
        return name

    def flatten(self, jaxpr, in_names: list[str], consts=(), flat: Flat | None = None,
                site: str = "") -> Flat:
        """Flattens `jaxpr` (its invars named `in_names`) into `flat` (a new one by default);
        the returned Flat's outputs are the jaxpr's outvars' names (or Literals). `site` is
        where the enclosing call is in the user's code, for equations that jax's own functions
        made (they have no user frame of their own)."""
        flat = flat or Flat()
        env = dict(zip(jaxpr.invars, in_names))
        for var, name in zip(jaxpr.invars, in_names):
            self.avals.setdefault(name, var.aval)
        for var, value in zip(jaxpr.constvars, consts):
            name = self.fresh(var, "const")
            self.constants[name] = value
            env[var] = name

        def read(v):
            return v if isinstance(v, jcore.Literal) else env[v]

        for eqn in jaxpr.eqns:
            p = eqn.primitive.name
            here = where(eqn) or site
            ins = [read(v) for v in eqn.invars]
            if p in CALLS and CALLS[p] and CALLS[p] in eqn.params:
                called = eqn.params[CALLS[p]]
                inner, inner_consts = getattr(called, "jaxpr", called), getattr(called, "consts", ())
                names = [self.materialize(x) for x in ins]
                sub = self.flatten(inner, names, inner_consts, flat, here)
                env.update(zip(eqn.outvars, sub.outputs))
                continue
            if p == "shard_map":  # the body is what one device runs, on its shards
                mesh = eqn.params["mesh"]
                self.mesh.update({str(a): int(n) for a, n in dict(mesh.shape).items()})
                called = eqn.params["jaxpr"]
                inner = getattr(called, "jaxpr", called)
                shards = [self.fresh(v, "shard") for v in inner.invars]
                sub = self.flatten(inner, shards, getattr(called, "consts", ()), flat, here)
                env.update(zip(eqn.outvars, sub.outputs))
                continue
            outs = [self.fresh(v) for v in eqn.outvars]
            body = None
            if p == "scan":
                closed = eqn.params["jaxpr"]
                body = Flat()
                body.inputs = [self.fresh(v, "it") for v in closed.jaxpr.invars]
                self.flatten(closed.jaxpr, body.inputs, closed.consts, body, here)
            elif p == "while" and (trips := known_trips(eqn)) is not None:
                closed = eqn.params["body_jaxpr"]
                body = Flat()
                body.inputs = [self.fresh(v, "it") for v in closed.jaxpr.invars]
                self.flatten(closed.jaxpr, body.inputs, closed.consts, body, here)
                body.trips = trips
            elif p in ("while", "cond"):
                what = "a while_loop whose trip count is not known when traced (a counter " \
                       "from a constant, stepped by a constant, against a constant bound is)" \
                    if p == "while" else "a cond"
                raise ExportError(f"{here}: {what} outside a kernel is not supported: "
                                  f"tpusim programs have no data-dependent control flow "
                                  f"(compile the function instead: docs/compiler_import.md)")
            node = Node(eqn, ins, outs, body, here)
            node.position = len(flat.nodes)
            flat.nodes.append(node)
            env.update(zip(eqn.outvars, outs))
        flat.outputs = [read(v) for v in jaxpr.outvars]
        return flat

    def materialize(self, x) -> str:
        """A literal as a named scalar constant (calls bind names; ops name their operands)."""
        if not isinstance(x, jcore.Literal):
            return x
        self.count += 1
        name = f"lit{self.count}"
        self.avals[name] = x.aval
        self.constants[name] = x.val
        return name


def live_nodes(flat: Flat) -> list[Node]:
    """The nodes whose results reach an output, as XLA's dead code elimination keeps them."""
    live = {o for o in flat.outputs if isinstance(o, str)}
    kept = []
    for node in reversed(flat.nodes):
        if any(o in live for o in node.outs):
            kept.append(node)
            live.update(x for x in node.ins if isinstance(x, str))
            if node.body is not None:  # a loop reads all of its operands
                node.body.nodes = live_nodes(node.body)
    return list(reversed(kept))


class Fusion:
    def __init__(self, index: int):
        self.index = index
        self.nodes: list[Node] = []
        self.open = True


class ItemWriter:
    """Turns a flattened jaxpr into program items (kernels, fusions, loops, solves)."""

    def __init__(self, flattener: Flattener, export_kernel):
        self.f = flattener
        self.export_kernel = export_kernel  # (eqn, index, operand names) -> (kernel, out names)
        self.kernels = 0
        self.fusions = 0
        self.inverted: set[str] = set()  # matrices a solve has inverted
        self.in_vmem: set[str] = set()  # values of the loop body being written kept in VMEM

    def items(self, flat: Flat, in_loop: bool = False) -> list[dict]:
        nodes = live_nodes(flat)
        uses: dict[str, int] = {}
        for node in nodes:
            for x in node.ins:
                if isinstance(x, str):
                    uses[x] = uses.get(x, 0) + 1
        outputs = {o for o in flat.outputs if isinstance(o, str)}
        group_of: dict[str, Fusion] = {}  # value name -> the fusion that makes it
        order: list[object] = []  # Fusions and other nodes, by the position of their last node
        for node in nodes:
            if node.prim in OPCODES:
                fusion = self.join(node, group_of)
                for o in node.outs:
                    group_of[o] = fusion
                if fusion in order:
                    order.remove(fusion)
                order.append(fusion)
                continue
            for x in node.ins:  # a consumer outside fusions closes the fusion it reads
                if isinstance(x, str) and x in group_of:
                    group_of[x].open = False
            order.append(node)
        # In a loop body, what one iteration makes and uses itself stays in VMEM, as the compiled
        # scan of the GDN main path shows (docs/jax_bridge.md); the carry and the per-iteration
        # slices of the scanned arrays move through HBM.
        in_vmem = {o for n in nodes for o in n.outs} - outputs if in_loop else set()
        items = []
        for entry in order:
            self.in_vmem = in_vmem  # again for each entry: a loop's body, written between, has its own
            if isinstance(entry, Fusion):
                item = self.fusion_item(entry, uses, outputs)
                if item:
                    items.append(item)
            else:
                items.extend(self.node_items(entry, in_loop))
        return items

    def join(self, node: Node, group_of: dict) -> Fusion:
        producers = []
        for x in node.ins:
            g = group_of.get(x) if isinstance(x, str) else None
            if g is not None and g.open and g not in producers:
                producers.append(g)
        if node.prim == "dot_general":  # reads its operands from HBM
            for g in producers:
                g.open = False
            producers = []
        if not producers:
            fusion = Fusion(self.fusions)
            self.fusions += 1
        else:
            fusion = producers[0]
            for other in producers[1:]:  # a value two fusions feed: they become one
                fusion.nodes.extend(other.nodes)
                for n in other.nodes:
                    for o in n.outs:
                        group_of[o] = fusion
                other.nodes = []
        fusion.nodes.append(node)
        if node.prim == "dot_general" or OPCODES.get(node.prim) == "reduce":
            fusion.open = False
        return fusion

    def name_of(self, x) -> str:
        return x if isinstance(x, str) else self.f.materialize(x)

    def fusion_item(self, fusion: Fusion, uses: dict, outputs: set) -> dict | None:
        members = sorted(fusion.nodes, key=lambda n: n.position)
        if not members:
            return None
        produced = {o for n in members for o in n.outs}
        inner = {}
        for n in members:
            for x in n.ins:
                if isinstance(x, str):
                    inner[x] = inner.get(x, 0) + 1
        results = [o for n in members for o in n.outs
                   if o in outputs or uses.get(o, 0) > inner.get(o, 0)]
        opcodes = {OPCODES[n.prim] for n in members}
        scalar = all(self.f.avals[o].shape == () for n in members for o in n.outs)
        if not results or scalar or opcodes <= BITCASTS:
            return None
        params, ops = [], []
        for n in members:
            operands = []
            for x in n.ins:
                name = self.name_of(x)
                if name in self.f.constants and np.ndim(self.f.constants[name]) == 0:
                    if not any(op["name"] == name for op in ops):
                        ops.append(self.value(name, "constant"))
                elif name not in produced and name not in params:
                    params.append(name)
                operands.append(name)
            for o in n.outs:
                op = self.value(o, OPCODES[n.prim])
                op["operands"] = operands
                if n.prim == "dot_general":
                    op.update(dot_fields(n.eqn))
                ops.append(op)
        prims = list(dict.fromkeys(n.prim for n in members))
        label = ", ".join(prims[:4]) + (", ..." if len(prims) > 4 else "")
        return {"xla": {"name": f"fusion.{fusion.index} ({label})",
                        "source": members[0].site,
                        "params": [self.value(x, "parameter") for x in params],
                        "ops": ops, "results": results}}

    def value(self, name: str, opcode: str) -> dict:
        aval = self.f.avals[name]
        v = {"name": name, "opcode": opcode, "shape": [int(d) for d in aval.shape],
             "dtype": hlo_dtype(aval, name)}
        if name in self.in_vmem:
            v["memory"] = "vmem"
        return v

    def node_items(self, node: Node, in_loop: bool) -> list[dict]:
        if node.prim == "pallas_call":
            names = [self.name_of(x) for x in node.ins]
            kernel, _ = self.export_kernel(node.eqn, self.kernels, names)
            self.kernels += 1
            return [{"kernel": kernel}]
        if node.prim in ("scan", "while"):
            if in_loop:
                raise ExportError(f"{node.site}: a scan inside a scan's body is not "
                                  f"supported yet (tpusim loops hold kernels only)")
            trips = node.body.trips if node.prim == "while" else node.eqn.params["length"]
            return [{"loop": {"name": f"{node.prim} ({node.site})", "trips": int(trips),
                              "items": self.items(node.body, True)}}]
        if node.prim == "triangular_solve":
            a, b = (self.value(self.name_of(x), "parameter") for x in node.ins)
            flags = {k: bool(node.eqn.params[k])
                     for k in ("left_side", "lower", "transpose_a", "unit_diagonal")}
            # XLA expands a solve into the inverse of a's diagonal blocks and a product; solves
            # of one matrix share the inverse (CSE): under remat the VJP's transposed solve
            # reuses the recompute's (the compiled main path runs two inversions, not three:
            # docs/kernels/gdn.md).
            inverted = a["name"] in self.inverted
            self.inverted.add(a["name"])
            return [{"solve": {"name": f"triangular_solve ({node.site})", "a": a, "b": b,
                               "inverse_known": inverted, **flags}}]
        if node.prim in COLLECTIVES:
            return [self.collective(node, in_loop)]
        raise ExportError(f"{node.site}: primitive '{node.prim}' outside a Pallas kernel is "
                          f"not supported (compile the function instead: docs/compiler_import.md)")

    def collective(self, node: Node, in_loop: bool) -> dict:
        """A collective over mesh axes, with the bytes tpusim's collective model takes: the
        gathered result for an all-gather, the whole input for a reduce-scatter or an all-reduce,
        what each device sends for a permute."""
        if in_loop:
            raise ExportError(f"{node.site}: a collective inside a loop's body is not supported "
                              f"yet (tpusim loops hold kernels)")
        params = node.eqn.params
        axes = params.get("axes", params.get("axis_name"))
        axes = tuple(axes) if isinstance(axes, (tuple, list)) else (axes,)
        size = 1
        for a in axes:
            if str(a) not in self.f.mesh:
                raise ExportError(f"{node.site}: {node.prim} over axis '{a}', which no shard_map "
                                  f"around it names (pmap is not supported)")
            size *= self.f.mesh[str(a)]
        kind = COLLECTIVES[node.prim]
        def nbytes(name):
            aval = self.f.avals[name]
            return int(np.prod(aval.shape, dtype=np.int64)) * np.dtype(aval.dtype).itemsize
        moved = node.outs if kind == "all_gather" else [self.name_of(x) for x in node.ins]
        return {"collective": {"name": f"{node.prim} over {','.join(map(str, axes))} "
                                       f"({node.site})",
                               "kind": kind, "bytes": sum(nbytes(n) for n in moved),
                               "axis": {"name": ",".join(map(str, axes)), "size": size},
                               "results": node.outs}}
