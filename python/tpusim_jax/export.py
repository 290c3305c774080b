"""Turns a traced JAX function into a tpusim program (the JSON of docs/jax_bridge.md).

Every pallas_call becomes a kernel: its grid, dimension semantics, one BlockSpec per operand (block
shape and the index map, checked to be affine in the grid indices), VMEM scratch, and the body's
ops translated from the kernel jaxpr. What the translation does not support yet is refused with
one line naming the primitive and the source line it came from; nothing is guessed.
"""
from __future__ import annotations

import json
import random

import jax
import numpy as np
from jax.extend import core as jcore

from tpusim_jax.errors import ExportError, where
from tpusim_jax.xla_export import Flattener, ItemWriter, dot_fields, live_nodes

FORMAT = "tpusim-program"
VERSION = 1

# Predicates (bool) live in 32-bit lanes on the VPU: tpusim holds them as s32 0/1.
DTYPES = {"bfloat16": "bf16", "float32": "f32", "int8": "int8", "int32": "s32", "bool": "s32"}
UNARY = {"neg": "neg", "exp": "exp", "log": "log", "tanh": "tanh", "logistic": "logistic",
         "rsqrt": "rsqrt", "sign": "sign"}
BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "max": "max", "min": "min",
          "rem": "rem", "eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge",
          "and": "and", "or": "or"}
COMMUTATIVE = {"add", "mul", "max", "min", "eq", "ne", "and", "or"}
# Scalar arithmetic on constants is folded, as XLA would.
FOLDABLE = {"neg": np.negative, "sign": np.sign, "add": np.add, "sub": np.subtract,
            "mul": np.multiply, "max": np.maximum, "min": np.minimum,
            "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
            "gt": np.greater, "ge": np.greater_equal}
# A comparison with its operands swapped.
MIRRORED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}
REDUCTIONS = {"reduce_sum": "add", "reduce_max": "max"}
# Calls whose body is inlined (jnp helpers trace to these).
# Trips of a loop in a kernel body the exporter unrolls at most.
MAX_UNROLLED_TRIPS = 256
CALLS = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr", "custom_jvp_call": "call_jaxpr",
         "custom_vjp_call": "call_jaxpr"}


def dtype_name(dtype, what: str) -> str:
    name = np.dtype(dtype).name
    if name not in DTYPES:
        raise ExportError(f"{what}: dtype {name} is not one tpusim models (bf16, f32, int8, s32)")
    return DTYPES[name]


class Const:
    """A scalar constant of the jaxpr (a literal, or one passed into a call or converted)."""

    def __init__(self, value: float, dtype):
        self.value, self.dtype = value, dtype


class GridIndex:
    """pl.program_id(axis): the grid index, known only per grid step."""

    def __init__(self, axis: int):
        self.axis = axis


class GridPredicate:
    """A comparison of a grid index with its first or last value: the `when` of tpusim's ops
    (pl.when(program_id(a) == 0) and == num_programs(a) - 1)."""
    NEGATION = {"first": "not_first", "not_first": "first", "last": "not_last",
                "not_last": "last"}

    def __init__(self, kind: str, axis: int):
        self.kind, self.axis = kind, axis

    def negated(self) -> "GridPredicate":
        return GridPredicate(self.NEGATION[self.kind], self.axis)

    def json(self) -> dict:
        return {"kind": self.kind, "axis": self.axis}


class BodyTranslator:
    """Translates one kernel jaxpr into tpusim body ops over JSON value ids."""

    def __init__(self, kernel: str, grid=()):
        self.kernel = kernel
        self.grid = list(grid)
        self.when: GridPredicate | None = None  # the pl.when being translated
        self.ops: list[dict] = []
        self.next_id = 0
        self.ids: dict = {}      # jaxpr var -> value id
        self.shapes: dict = {}   # value id -> tpusim shape (reductions keep their axes)
        self.widened: dict = {}  # value id of an exact widening cast -> (its input, its dtype)
        self.computed: dict = {}  # an op without its name and result -> the value it made
        self.readers: dict = {}   # an op's inputs -> the keys of `computed` that read them
        self.outer = ""          # the place of the call being inlined

    def new_value(self, shape) -> int:
        v = self.next_id
        self.next_id += 1
        self.shapes[v] = list(shape)
        return v

    def where(self, eqn) -> str:
        """The eqn's place in user code, or the enclosing call's (jnp helpers' bodies have none)."""
        return where(eqn) or self.outer

    def fail(self, eqn, what: str):
        raise ExportError(f"{self.where(eqn)}: kernel {self.kernel}: {what}")

    def resolve(self, var):
        """A var's value id, or the Const it stands for."""
        if isinstance(var, (int, Const)):
            return var
        if isinstance(var, jcore.Literal):
            return Const(float(var.val), var.aval.dtype)
        return self.ids[var]

    def full(self, eqn, var) -> int:
        """`var`'s value at its own shape: elementwise ops keep broadcast values small (an iota,
        a broadcast_in_dim), the rest (dots, reductions, layout, stores) need them whole."""
        v = self.value(eqn, var)
        shape = list(var.aval.shape)
        if self.shapes[v] == shape:
            return v
        return self.emit(eqn, {"op": "broadcast", "in": [v], "shape": shape}, shape)

    def value(self, eqn, var) -> int:
        v = self.resolve(var)
        if isinstance(v, Const):
            self.fail(eqn, f"'{eqn.primitive}' with a constant operand here is not supported yet")
        return v

    def emit(self, eqn, op: dict, shape) -> int:
        """A new value computed by `op`, or the value an identical op made before (common
        subexpressions are eliminated, as Mosaic's canonicalization does; a store to a ref
        forgets the ops that read it)."""
        key = json.dumps({k: v for k, v in op.items() if k != "name"}, sort_keys=True) + \
            json.dumps(self.when.json() if self.when else None)
        if key in self.computed:
            return self.computed[key]
        out = self.new_value(shape)
        op["out"] = out
        self.append(eqn, op)
        self.computed[key] = out
        self.readers.setdefault(tuple(op["in"]), []).append(key)
        return out

    def append(self, eqn, op: dict):
        op.setdefault("name", f"{eqn.primitive} {self.where(eqn)}")
        if self.when is not None:
            op["when"] = self.when.json()
        self.ops.append(op)

    def run(self, jaxpr, invar_ids):
        for var, v in zip(jaxpr.invars, invar_ids):
            self.ids[var] = v
        for eqn in jaxpr.eqns:
            self.eqn(eqn)
        return [self.ids.get(v) for v in jaxpr.outvars]

    def eqn(self, eqn):
        p = eqn.primitive.name
        out = eqn.outvars[0] if eqn.outvars else None
        if p in CALLS:
            inner = eqn.params[CALLS[p]]
            inner = getattr(inner, "jaxpr", inner)
            outer, self.outer = self.outer, self.where(eqn)
            outs = self.run(inner, [self.resolve(v) for v in eqn.invars])
            self.outer = outer
            for var, v in zip(eqn.outvars, outs):
                self.ids[var] = v
        elif p == "get":
            ref = self.value(eqn, eqn.invars[0])
            view, picks = self.ref_view(eqn, eqn.invars[1:], reading=True)
            for axis, start in picks:  # x[i] of a dim of n: a slice of one, then the view
                shape = list(self.shapes[ref])
                shape[axis] = 1
                ref = self.emit(eqn, {"op": "slice", "in": [ref], "axis": axis, "start": start,
                                      "size": 1}, shape)
            if view == self.shapes[ref]:
                self.ids[out] = ref
            else:  # x[0] of a block whose leading dims are 1: the same data, fewer dims
                self.ids[out] = self.emit(eqn, {"op": "reshape", "in": [ref], "shape": view},
                                          view)
        elif p == "swap":
            ref, val = self.value(eqn, eqn.invars[0]), self.full(eqn, eqn.invars[1])
            view, _ = self.ref_view(eqn, eqn.invars[2:])
            if view != self.shapes[ref]:
                val = self.emit(eqn, {"op": "reshape", "in": [val], "shape": self.shapes[ref]},
                                self.shapes[ref])
            self.append(eqn, {"op": "copy", "name": f"store {where(eqn)}", "in": [val],
                              "into": ref})
            for inputs in [i for i in self.readers if ref in i]:
                for key in self.readers.pop(inputs):
                    self.computed.pop(key, None)
            self.ids[out] = ref
        elif p == "program_id":
            self.ids[out] = GridIndex(int(eqn.params["axis"]))
        elif p in ("eq", "ne") and any(isinstance(self.resolve(v), GridIndex)
                                       for v in eqn.invars):
            self.ids[out] = self.grid_predicate(eqn, p)
        elif p == "convert_element_type" and isinstance(self.resolve(eqn.invars[0]),
                                                        GridPredicate):
            self.ids[out] = self.resolve(eqn.invars[0])
        elif p == "cond":
            self.cond(eqn)
        elif p == "scan":
            self.unrolled_loop(eqn)
        elif p == "concatenate":
            ins = [self.full(eqn, v) for v in eqn.invars]
            self.ids[out] = self.emit(eqn, {"op": "concat", "in": ins,
                                            "axis": int(eqn.params["dimension"])},
                                      out.aval.shape)
        elif p == "slice":
            self.slice(eqn)
        elif p == "convert_element_type" and isinstance(self.resolve(eqn.invars[0]), Const):
            c = self.resolve(eqn.invars[0])
            self.ids[out] = Const(c.value, eqn.params["new_dtype"])
        elif p == "convert_element_type":
            self.convert(eqn)
        elif p in REDUCTIONS:
            x = self.full(eqn, eqn.invars[0])
            axes = sorted(int(a) for a in eqn.params["axes"])
            shape = [1 if i in axes else d for i, d in enumerate(self.shapes[x])]
            self.ids[out] = self.emit(eqn, {"op": "reduce", "fn": REDUCTIONS[p], "in": [x],
                                            "axes": axes}, shape)
        elif p == "broadcast_in_dim":
            self.broadcast(eqn)
        elif p == "reshape":
            x = self.full(eqn, eqn.invars[0])
            self.ids[out] = self.emit(eqn, {"op": "reshape", "in": [x],
                                            "shape": list(out.aval.shape)}, out.aval.shape)
        elif p in FOLDABLE and all(isinstance(self.resolve(v), Const) for v in eqn.invars):
            args = [np.asarray(self.resolve(v).value, v.aval.dtype) for v in eqn.invars]
            self.ids[out] = Const(float(FOLDABLE[p](*args)), out.aval.dtype)
        elif p in UNARY:
            x = self.value(eqn, eqn.invars[0])
            self.ids[out] = self.emit(eqn, {"op": "elementwise", "fn": UNARY[p], "in": [x]},
                                      self.shapes[x])
        elif p == "integer_pow" and eqn.params["y"] == 2:
            x = self.value(eqn, eqn.invars[0])
            self.ids[out] = self.emit(eqn, {"op": "elementwise", "fn": "mul", "in": [x, x]},
                                      self.shapes[x])
        elif p in BINARY:
            self.binary(eqn, BINARY[p])
        elif p == "iota":
            # An iota varies along one dim only: it is that 1-D sequence broadcast, as Mosaic
            # lowers it (the ladder's masks: 119 vector divisions per grid step in the compiled
            # kernel, docs/kernels/gdn.md), and tpusim's elementwise ops broadcast size-1 dims.
            dim = int(eqn.params["dimension"])
            shape = [d if i == dim else 1 for i, d in enumerate(eqn.params["shape"])]
            self.ids[out] = self.emit(eqn, {"op": "iota", "in": [], "shape": shape,
                                            "dtype": self.dtype(eqn, eqn.params["dtype"]),
                                            "axis": dim}, shape)
        elif p == "select_n":
            self.select(eqn)
        elif p == "dot_general":
            self.dot(eqn)
        else:
            self.fail(eqn, f"primitive '{p}' is not supported in a kernel body yet")

    def convert(self, eqn):
        """A cast; narrowing a value that was widened from the target dtype gives the original
        back, as the compilers fold it [assume: MLIR arith folds truncf(extf(a)) to a for Mosaic,
        XLA's algebraic simplifier convert(convert(a)) for fusions; to check in the compiled
        kernel]: Pallas code casts bf16 blocks to f32 and back to bf16 at each product. A value
        cast twice to one dtype is cast once (common subexpressions are eliminated).
        Seen in Mosaic's own passes (docs/jax_bridge.md): the scan backward's 24 truncf become 8
        after canonicalization."""
        x = self.value(eqn, eqn.invars[0])
        src = np.dtype(eqn.invars[0].aval.dtype)
        to = np.dtype(eqn.params["new_dtype"])
        name = self.dtype(eqn, to)
        if to == src:
            self.ids[eqn.outvars[0]] = x
        elif self.widened.get(x, (None, None))[1] == name:
            self.ids[eqn.outvars[0]] = self.widened[x][0]
        else:
            out = self.emit(eqn, {"op": "cast", "in": [x], "dtype": name}, self.shapes[x])
            if jax.numpy.issubdtype(src, jax.numpy.floating) and \
                    jax.numpy.issubdtype(to, jax.numpy.floating) and to.itemsize > src.itemsize:
                self.widened[out] = (x, self.dtype(eqn, src))
            self.ids[eqn.outvars[0]] = out

    def ref_view(self, eqn, flat_indexers, reading=False):
        """The shape a ref access sees: the block's, without the dims indexed by an integer
        (x[0, 0] on a (1, 1, ...) block), and the (axis, index) pairs that pick one entry of a
        longer dim (reads only: x[i] in an unrolled loop). Partial slices and dynamic indices are
        refused."""
        leaves = [self.resolve(v) for v in flat_indexers]
        indexers = jax.tree_util.tree_unflatten(eqn.params["tree"], leaves)
        picks = []
        if not indexers:  # x[...]
            return self.shapes[self.value(eqn, eqn.invars[0])], picks
        if len(indexers) != 1:
            self.fail(eqn, "a ref accessed through a chain of views is not supported yet")
        (indexer,) = indexers
        view = []
        for axis, (size, index) in enumerate(zip(indexer.shape, indexer.indices)):
            start = getattr(index, "start", index)
            if isinstance(start, Const):
                start = int(start.value)
            if not isinstance(start, int):
                self.fail(eqn, "a ref read or write at a dynamic index is not supported yet")
            if hasattr(index, "size"):  # a slice: only the whole dim
                if start != 0 or index.size != size or index.stride != 1:
                    self.fail(eqn, f"a ref slice [{start}:{start + index.size}] of a dim of "
                                   f"{size} is not supported yet (whole dims, or an index into "
                                   f"a dim of 1)")
                view.append(size)
            elif size != 1 and reading:
                picks.append((axis, start))
            elif size != 1:
                self.fail(eqn, f"a write at an integer index into a block dim of {size} is not "
                               f"supported yet (only into dims of 1)")
        return view, picks

    def grid_predicate(self, eqn, p: str) -> GridPredicate:
        a, b = (self.resolve(v) for v in eqn.invars)
        if isinstance(a, Const):
            a, b = b, a
        if not isinstance(b, Const):
            self.fail(eqn, "a grid index compared with something other than a constant is not "
                           "supported yet")
        last = self.grid[a.axis] - 1
        if int(b.value) == 0:
            pred = GridPredicate("first", a.axis)
        elif int(b.value) == last:
            pred = GridPredicate("last", a.axis)
        else:
            self.fail(eqn, f"program_id({a.axis}) == {int(b.value)}: only the first (0) and "
                           f"last ({last}) grid index are supported in a condition yet")
        return pred.negated() if p == "ne" else pred

    def cond(self, eqn):
        """pl.when(pred): the branch's ops run when the grid predicate holds."""
        index, *operands = eqn.invars
        pred = self.resolve(index)
        if not isinstance(pred, GridPredicate) or len(eqn.params["branches"]) != 2:
            self.fail(eqn, "a condition on data (lax.cond, or pl.when on a value) is not "
                           "supported yet; pl.when on the first or last grid index is")
        if self.when is not None:
            self.fail(eqn, "a pl.when inside a pl.when is not supported yet")
        if eqn.outvars:
            self.fail(eqn, "a condition with results is not supported yet")
        for branch, when in zip(eqn.params["branches"], (pred.negated(), pred)):
            self.when = when
            self.run(branch.jaxpr, [self.resolve(v) for v in operands])
        self.when = None

    def unrolled_loop(self, eqn):
        """A fori_loop (a scan over its carry alone) in a kernel body with a static trip count:
        its body once per iteration, the index a constant in each, so refs it indexes by it are
        read at known offsets. Mosaic keeps the loop (scf.for); tpusim's IR has none inside a
        grid step and charges the unrolled iterations the same work, without a per-iteration
        loop overhead [assume]."""
        prm = eqn.params
        length, nc, nk = int(prm["length"]), int(prm["num_consts"]), int(prm["num_carry"])
        body = prm["jaxpr"]
        if len(eqn.invars) != nc + nk or len(body.jaxpr.outvars) != nk:
            self.fail(eqn, "a scan over arrays in a kernel body is not supported yet (a "
                           "fori_loop over its carry is)")
        if length > MAX_UNROLLED_TRIPS:
            self.fail(eqn, f"a loop of {length} trips in a kernel body is over the "
                           f"{MAX_UNROLLED_TRIPS} tpusim unrolls")
        consts = []
        for c in body.consts:
            if np.ndim(c) != 0:
                self.fail(eqn, "a loop body closing over an array constant is not supported yet")
            consts.append(Const(float(c), np.asarray(c).dtype))
        outer = [self.resolve(v) for v in eqn.invars]
        carry = outer[nc:]
        for _ in range(length):
            for var, v in zip(body.jaxpr.constvars, consts):
                self.ids[var] = v
            self.run(body.jaxpr, outer[:nc] + carry)
            carry = [self.resolve(v) for v in body.jaxpr.outvars]
        for var, v in zip(eqn.outvars, carry):
            self.ids[var] = v

    def slice(self, eqn):
        if eqn.params.get("strides") not in (None, (1,) * len(eqn.params["start_indices"])):
            self.fail(eqn, "a strided slice is not supported yet")
        x = self.full(eqn, eqn.invars[0])
        for axis, (start, stop) in enumerate(zip(eqn.params["start_indices"],
                                                 eqn.params["limit_indices"])):
            if (start, stop) != (0, self.shapes[x][axis]):
                shape = list(self.shapes[x])
                shape[axis] = stop - start
                x = self.emit(eqn, {"op": "slice", "in": [x], "axis": axis, "start": int(start),
                                    "size": int(stop - start)}, shape)
        self.ids[eqn.outvars[0]] = x

    def dtype(self, eqn, dtype) -> str:
        return dtype_name(dtype, f"{where(eqn)}: kernel {self.kernel}")

    def operand(self, eqn, var) -> int:
        """A value, or for a literal a [1, ..., 1] constant of the result's rank."""
        var = self.resolve(var)
        if not isinstance(var, Const):
            return var
        shape = [1] * len(eqn.outvars[0].aval.shape)
        return self.emit(eqn, {"op": "constant", "in": [], "shape": shape,
                               "dtype": self.dtype(eqn, var.dtype), "value": var.value}, shape)

    def select(self, eqn):
        pred, *cases = eqn.invars
        if len(cases) != 2 or np.dtype(pred.aval.dtype) != np.bool_:
            self.fail(eqn, "select_n over more than two cases is not supported yet")
        c, no, yes = (self.operand(eqn, v) for v in (pred, cases[0], cases[1]))
        shape = list(np.broadcast_shapes(*(tuple(self.shapes[v]) for v in (c, no, yes))))
        self.ids[eqn.outvars[0]] = self.emit(
            eqn, {"op": "elementwise", "fn": "select", "in": [c, yes, no]}, shape)

    def broadcast(self, eqn):
        c = self.resolve(eqn.invars[0])
        if isinstance(c, Const):  # a broadcast scalar stays a scalar
            self.ids[eqn.outvars[0]] = Const(c.value, eqn.outvars[0].aval.dtype)
            return
        x = self.value(eqn, eqn.invars[0])
        target = list(eqn.outvars[0].aval.shape)
        dims = list(eqn.params["broadcast_dimensions"])
        # The value as tpusim holds it where it has the operand's rank (itself maybe a smaller
        # broadcast), else the operand's shape (a reduction keeps its axes as 1s in tpusim).
        src = list(eqn.invars[0].aval.shape)
        if len(self.shapes[x]) == len(src):
            src = self.shapes[x]
        # The operand's dims placed where they land, size 1 elsewhere: tpusim's elementwise ops
        # broadcast numpy-style, so the value need not be materialised at the target shape.
        expanded = [src[dims.index(i)] if i in dims else 1 for i in range(len(target))]
        if self.shapes[x] == expanded:
            self.ids[eqn.outvars[0]] = x
        else:
            self.ids[eqn.outvars[0]] = self.emit(
                eqn, {"op": "reshape", "in": [x], "shape": expanded}, expanded)

    def binary(self, eqn, fn: str):
        a, b = (self.resolve(v) for v in eqn.invars)
        if fn in ("and", "or") and np.dtype(eqn.invars[0].aval.dtype) != np.bool_:
            self.fail(eqn, f"bitwise '{fn}' on integers is not supported (only on predicates)")
        if fn == "div" and np.issubdtype(np.dtype(eqn.invars[0].aval.dtype), np.integer):
            fn = "idiv"
        if isinstance(a, Const) and (fn in COMMUTATIVE or fn in MIRRORED):
            a, b = b, a
            fn = MIRRORED.get(fn, fn)
        if isinstance(b, Const):
            x = self.operand(eqn, a)
            self.ids[eqn.outvars[0]] = self.emit(
                eqn, {"op": "elementwise", "fn": fn, "in": [x], "scalar": b.value},
                self.shapes[x])
            return
        x, y = self.operand(eqn, a), self.operand(eqn, b)
        shape = list(np.broadcast_shapes(tuple(self.shapes[x]), tuple(self.shapes[y])))
        self.ids[eqn.outvars[0]] = self.emit(
            eqn, {"op": "elementwise", "fn": fn, "in": [x, y]}, shape)

    def dot(self, eqn):
        fields = dot_fields(eqn)
        x, y = (self.full(eqn, v) for v in eqn.invars)
        out = eqn.outvars[0].aval
        self.ids[eqn.outvars[0]] = self.emit(
            eqn, {"op": "dot", "in": [x, y], **fields,
                  "dtype": dtype_name(out.dtype, f"{where(eqn)}: kernel {self.kernel}")},
            out.shape)


def without_dead_ops(ops: list[dict], first_temp: int) -> list[dict]:
    """The ops whose results reach a store (as the compiler's dead-code elimination leaves them:
    a cast to f32 whose only use was folded away), with their value ids renumbered in order from
    `first_temp` (the ids below it are the kernel's operands and scratch)."""
    live: set = set()
    kept = []
    for op in reversed(ops):
        if op["op"] == "copy" or op["out"] in live:
            live.update(op["in"])
            kept.append(op)
    kept.reverse()
    renumber = {v: v for v in range(first_temp)}
    for op in kept:
        op["in"] = [renumber[v] for v in op["in"]]
        if "into" in op:
            op["into"] = renumber[op["into"]]
        if "out" in op:
            renumber[op["out"]] = len(renumber)
            op["out"] = renumber[op["out"]]
    return kept


def affine_index_map(kernel: str, operand: str, closed, grid) -> list[dict]:
    """The index map as one affine expression per block dim, or ExportError if it is not affine."""
    def at(g):
        return [int(v) for v in jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *g)]
    rank = len(grid)
    base = at([0] * rank)
    coeff = []
    for a in range(rank):
        unit = [0] * rank
        unit[a] = 1 if grid[a] > 1 else 0
        got = at(unit)
        coeff.append([g - b for g, b in zip(got, base)])
    exprs = [{"offset": base[d], "coeff": [coeff[a][d] for a in range(rank)]}
             for d in range(len(base))]
    rng = random.Random(0)
    points = [[n - 1 for n in grid]] + [[rng.randrange(n) for n in grid] for _ in range(8)]
    for g in points:
        predicted = [e["offset"] + sum(c * x for c, x in zip(e["coeff"], g)) for e in exprs]
        if at(g) != predicted:
            raise ExportError(f"kernel {kernel}: the index map of {operand} is not affine in the "
                              f"grid indices (at grid {g} it gives {at(g)}, an affine map "
                              f"{predicted})")
    return exprs


def block_shape(kernel: str, operand: str, bm) -> list[int]:
    shape = []
    for d in bm.block_shape:
        size = getattr(d, "block_size", None)
        if not isinstance(size, int):
            raise ExportError(f"kernel {kernel}: {operand} has a block dim {d} (squeezed or "
                              f"element-indexed) that is not supported yet")
        shape.append(size)
    return shape


def semantics(eqn, rank: int) -> list[str]:
    params = eqn.params.get("compiler_params")
    sem = getattr(params, "dimension_semantics", None) if params is not None else None
    if sem is None:
        return ["arbitrary"] * rank  # Mosaic's default
    return ["parallel" if "parallel" in str(s).lower() else "arbitrary" for s in sem]


def kernel_name(eqn, index: int) -> str:
    body = eqn.params["jaxpr"]
    info = getattr(body, "debug_info", None)
    return eqn.params.get("name") or getattr(info, "func_name", None) or f"pallas_call_{index}"


def export_pallas_call(eqn, index: int, in_names: list[str]) -> tuple[dict, list[str]]:
    gm = eqn.params["grid_mapping"]
    name = kernel_name(eqn, index)
    if gm.num_index_operands or gm.num_dynamic_grid_bounds:
        raise ExportError(f"{where(eqn)}: kernel {name}: scalar prefetch and dynamic grids are "
                          f"not supported yet")
    grid = [int(n) for n in gm.grid]
    out_names = [f"{name}.out{j}" for j in range(gm.num_outputs)]
    operands = []
    for j, bm in enumerate(gm.block_mappings):
        is_input = j < gm.num_inputs
        array = in_names[j] if is_input else out_names[j - gm.num_inputs]
        aval = bm.array_aval
        operands.append({
            "name": array,
            "shape": list(aval.shape),
            "dtype": dtype_name(aval.dtype, f"kernel {name}: {array}"),
            "block": block_shape(name, array, bm),
            "index_map": affine_index_map(name, array, bm.index_map_jaxpr, grid),
        })
    body = eqn.params["jaxpr"]
    t = BodyTranslator(name, grid)
    refs = [t.new_value(op["block"]) for op in operands]
    scratch = []
    for var in body.invars[len(operands):]:
        inner = getattr(var.aval, "inner_aval", None)
        space = str(getattr(var.aval, "memory_space", "")).lower()
        if inner is None or "smem" in space or "semaphore" in space:
            raise ExportError(f"kernel {name}: scratch {var.aval} (SMEM, semaphores) is not "
                              f"supported yet")
        scratch.append({"name": f"scratch{len(scratch)}", "shape": list(inner.shape),
                        "dtype": dtype_name(inner.dtype, f"kernel {name}: scratch")})
        refs.append(t.new_value(inner.shape))
    t.run(body, refs)
    kernel = {"name": name, "origin": "pallas", "grid": grid,
              "semantics": semantics(eqn, len(grid)),
              "inputs": operands[:gm.num_inputs], "outputs": operands[gm.num_inputs:],
              "scratch": scratch, "ops": without_dead_ops(t.ops, len(refs))}
    return kernel, out_names


def export(fn, args: list[tuple[str, jax.ShapeDtypeStruct]], name: str) -> dict:
    """The program of `fn` applied to `args` (name, shape and dtype each). A function of Pallas
    kernels only keeps its arrays' names (the functional check binds them); one with work
    outside its kernels is exported as XLA would run it (xla_export)."""
    closed = jax.make_jaxpr(fn)(*[a for _, a in args])
    names = [n for n, _ in args]
    flattener = Flattener()
    flat = flattener.flatten(closed.jaxpr, names, closed.consts)
    if all(n.prim == "pallas_call" for n in live_nodes(flat)):
        items: list[dict] = []
        outs = export_calls(closed.jaxpr, names, items)
        return {"format": FORMAT, "version": VERSION, "name": name, "items": items,
                "outputs": outs}
    items = ItemWriter(flattener, export_pallas_call).items(flat)
    outs = [o if isinstance(o, str) else flattener.materialize(o) for o in flat.outputs]
    return {"format": FORMAT, "version": VERSION, "name": name, "items": items,
            "outputs": outs, "functional": False}


def export_calls(jaxpr, in_names: list[str], items: list[dict]) -> list[str]:
    """Appends the kernels of `jaxpr` to `items` (jit-wrapped calls inlined); returns the names
    of its outputs."""
    env = dict(zip(jaxpr.invars, in_names))
    for eqn in jaxpr.eqns:
        p = eqn.primitive.name
        if p in ("jit", "pjit"):
            inner = eqn.params["jaxpr"].jaxpr
            ins = [operand_name(eqn, env, v) for v in eqn.invars]
            env.update(zip(eqn.outvars, export_calls(inner, ins, items)))
            continue
        if p != "pallas_call":
            raise ExportError(f"{where(eqn)}: primitive '{p}' outside a Pallas kernel "
                              f"is not supported yet (only pallas_calls export so far)")
        ins = [operand_name(eqn, env, v) for v in eqn.invars]
        kernel, outs = export_pallas_call(eqn, len(items), ins)
        items.append({"kernel": kernel})
        env.update(zip(eqn.outvars, outs))
    return [operand_name(None, env, v) for v in jaxpr.outvars]


def operand_name(eqn, env: dict, var) -> str:
    if var not in env:
        place = f"{where(eqn)}: " if eqn is not None else ""
        raise ExportError(f"{place}a kernel operand or result that is not an argument or a "
                          f"kernel output (a constant?) is not supported yet")
    return env[var]


def collect_kernels(fn, args: list[tuple[str, jax.ShapeDtypeStruct]], name: str,
                    only: set | None = None) -> dict:
    """Every pallas_call of `fn` (or those named in `only`), wherever it is (inside scans, loops,
    conditions, custom VJPs, shard_maps), as a program of kernels with operands named
    KERNEL.inN / KERNEL.outN: what the compiler import resolves the compiled program's Pallas
    custom calls to, by kernel name."""
    closed = jax.make_jaxpr(fn)(*[a for _, a in args])
    items: list[dict] = []
    seen: set = set()

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "pallas_call":
                kname = kernel_name(eqn, len(items))
                if kname not in seen and (only is None or kname in only):
                    seen.add(kname)
                    ins = [f"{kname}.in{j}" for j in range(len(eqn.invars))]
                    items.append({"kernel": export_pallas_call(eqn, len(items), ins)[0]})
                continue
            for sub in jcore.jaxprs_in_params(eqn.params):
                walk(sub)

    walk(closed.jaxpr)
    return {"format": FORMAT, "version": VERSION, "name": name, "items": items,
            "outputs": [o for item in items for o in
                        (x["name"] for x in item["kernel"]["outputs"])]}


def check_data(fn, args, program: dict, seed: int = 0, make_inputs=None) -> dict:
    """Inputs, and JAX's outputs on them (Pallas in interpret mode on the CPU). The inputs are
    normal random values, or `make_inputs(key, [ShapeDtypeStruct...])`'s for a function whose
    inputs must meet a precondition (the ladder's strictly lower S)."""
    from jax.experimental.pallas import tpu as pltpu
    key = jax.random.PRNGKey(seed)
    if make_inputs is not None:
        values = list(make_inputs(key, [a for _, a in args]))
    else:
        values = [jax.random.normal(k, a.shape, jax.numpy.float32).astype(a.dtype)
                  for (_, a), k in zip(args, jax.random.split(key, len(args)))]
    with pltpu.force_tpu_interpret_mode():
        outs = jax.tree_util.tree_leaves(fn(*values))
    def host(x):
        return {"shape": list(x.shape), "dtype": DTYPES[np.dtype(x.dtype).name],
                "data": np.asarray(x, np.float32).ravel().tolist()}
    return {"seed": seed,
            "inputs": {n: host(v) for (n, _), v in zip(args, values)},
            "outputs": {n: host(o) for n, o in zip(program["outputs"], outs)}}
