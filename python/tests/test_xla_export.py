"""The exporter on work outside Pallas kernels: fusions, loops, solves, and what it refuses."""
import contextlib
import io
import os
import sys
import tempfile
import unittest

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P

sys.path.insert(0, os.path.dirname(__file__))

import kernels_for_tests as k  # noqa: E402
from tpusim_jax.cli import main  # noqa: E402
from tpusim_jax.export import ExportError, export  # noqa: E402


def arg(name, shape, dtype=jnp.float32):
    return name, jax.ShapeDtypeStruct(shape, dtype)


def kinds(items):
    return [next(iter(item)) for item in items]


def opcodes(item):
    return [op["opcode"] for op in item["xla"]["ops"] if op["opcode"] != "constant"]


def dot_then_elementwise(x, w):
    y = jnp.dot(x, w, precision=lax.Precision.HIGHEST)
    return jnp.sum(jnp.tanh(y) * 2.0, axis=1)


def scan_over_rows(h, xs):
    def body(c, x):
        t = jnp.exp(x * c)  # made and used within one iteration
        return c + t, t * 2.0
    return lax.scan(body, h, xs)


def counted_loop(x):
    return lax.fori_loop(0, 5, lambda i, a: a * 1.5, x)


def two_solves_of_one_matrix(a, b):
    lower = jnp.tril(a) + 4.0 * jnp.eye(128)
    solve = jax.scipy.linalg.solve_triangular
    return solve(lower, b, lower=True) + solve(lower, 2.0 * b, lower=True)


def dead_work(x):
    _ = jnp.exp(x)  # unused: XLA drops it
    return x * 3.0


def counted_while(x):
    return lax.while_loop(lambda c: c[0] < 7, lambda c: (c[0] + 1, c[1] * 2.0), (0, x))[1]


def data_dependent_while(x):
    return lax.while_loop(lambda a: jnp.sum(a) < 100.0, lambda a: a * 2.0, x)


def branch(x):
    return lax.cond(jnp.sum(x) > 0, jnp.exp, jnp.tanh, x)


def sharded(x, w):
    mesh = jax.sharding.AbstractMesh((2, 4), ("data", "model"))

    def body(x, w):
        y = lax.psum(x @ w, "model")
        return jnp.exp(x), lax.all_gather(jnp.tanh(y), "data", axis=0, tiled=True)
    return jax.shard_map(body, mesh=mesh, in_specs=(P("data", "model"), P("model", None)),
                         out_specs=(P("data", "model"), P()), check_vma=False)(x, w)


def sort_outside(x):
    return jnp.sort(x, axis=1)


class XlaExportTest(unittest.TestCase):
    def test_a_dot_is_its_own_fusion_and_elementwise_consumers_fuse_with_the_reduction(self):
        p = export(dot_then_elementwise, [arg("x", (256, 512)), arg("w", (512, 128))], "f")
        self.assertIs(p["functional"], False)
        self.assertEqual(kinds(p["items"]), ["xla", "xla"])
        dot, rest = p["items"]
        self.assertEqual(opcodes(dot), ["dot"])
        self.assertEqual(dot["xla"]["ops"][0]["precision"], "highest")
        self.assertEqual(dot["xla"]["ops"][0]["dims"],
                         {"lhs_contract": [1], "rhs_contract": [0], "lhs_batch": [], "rhs_batch": []})
        self.assertEqual([x["name"] for x in dot["xla"]["params"]], ["x", "w"])
        self.assertEqual(opcodes(rest), ["tanh", "multiply", "reduce"])
        self.assertEqual(rest["xla"]["params"][0]["name"], dot["xla"]["results"][0])
        self.assertEqual(p["outputs"], rest["xla"]["results"])

    def test_a_scan_is_a_loop_whose_iteration_values_stay_in_vmem(self):
        p = export(scan_over_rows, [arg("h", (8, 128)), arg("xs", (16, 8, 128))], "s")
        self.assertEqual(kinds(p["items"]), ["loop"])
        loop = p["items"][0]["loop"]
        self.assertEqual(loop["trips"], 16)
        self.assertRegex(loop["name"], r"test_xla_export\.py:\d+:\d+ \(scan_over_rows\)")
        (body,) = loop["items"]
        self.assertEqual(opcodes(body), ["multiply", "exponential", "add", "multiply"])
        # The carry and the row of xs come from HBM; t, made and used in the iteration, does not
        # leave VMEM; the new carry and the stacked t * 2 go back to HBM.
        self.assertTrue(all("memory" not in x for x in body["xla"]["params"]))
        t = next(op for op in body["xla"]["ops"] if op["opcode"] == "exponential")
        self.assertEqual(t["memory"], "vmem")
        self.assertEqual(len(body["xla"]["results"]), 2)

    def test_a_fori_loop_with_static_bounds_is_a_loop_without_its_counter(self):
        p = export(counted_loop, [arg("x", (8, 128))], "c")
        loop = p["items"][0]["loop"]
        self.assertEqual(loop["trips"], 5)
        self.assertEqual([opcodes(i) for i in loop["items"]], [["multiply"]])  # no i + 1

    def test_a_while_loop_with_a_counted_trip_count_is_a_loop(self):
        p = export(counted_while, [arg("x", (8, 128))], "w")
        loop = p["items"][0]["loop"]
        self.assertEqual(loop["trips"], 7)
        self.assertRegex(loop["name"], r"^while ")
        self.assertEqual([opcodes(i) for i in loop["items"]], [["multiply"]])

    def test_solves_of_one_matrix_share_its_inverse(self):
        p = export(two_solves_of_one_matrix, [arg("a", (128, 128)), arg("b", (128, 64))], "t")
        solves = [i["solve"] for i in p["items"] if "solve" in i]
        self.assertEqual([s["inverse_known"] for s in solves], [False, True])
        self.assertEqual(solves[0]["a"]["shape"], [128, 128])
        self.assertTrue(solves[0]["lower"] and solves[0]["left_side"])

    def test_a_shard_map_is_one_devices_work_with_its_collectives_over_mesh_axes(self):
        p = export(sharded, [arg("x", (256, 512)), arg("w", (512, 128))], "m")
        # dot, psum, exp (the first result, traced first), tanh, all_gather
        self.assertEqual(kinds(p["items"]), ["xla", "collective", "xla", "xla", "collective"])
        dot = p["items"][0]["xla"]
        self.assertEqual([x["shape"] for x in dot["params"]], [[128, 128], [128, 128]])  # shards
        psum, gather = p["items"][1]["collective"], p["items"][4]["collective"]
        self.assertEqual((psum["kind"], psum["axis"], psum["bytes"]),
                         ("all_reduce", {"name": "model", "size": 4}, 128 * 128 * 4))
        # An all-gather's bytes are its gathered result's: [256, 128] f32.
        self.assertEqual((gather["kind"], gather["axis"], gather["bytes"]),
                         ("all_gather", {"name": "data", "size": 2}, 256 * 128 * 4))
        self.assertEqual(p["items"][3]["xla"]["params"][0]["name"], psum["results"][0])

    def test_dead_values_are_dropped(self):
        p = export(dead_work, [arg("x", (8, 128))], "d")
        self.assertEqual([opcodes(i) for i in p["items"]], [["multiply"]])

    def test_a_work_only_function_is_one_fusion(self):
        p = export(k.work_outside_kernels, [arg("x", (8, 128))], "w")
        self.assertEqual([opcodes(i) for i in p["items"]], [["tanh", "add"]])

    def test_data_dependent_control_flow_and_unknown_primitives_are_refused_with_the_line(self):
        for fn, what in ((data_dependent_while, "a while_loop"), (branch, "a cond"),
                         (sort_outside, "primitive 'sort'")):
            with self.assertRaises(ExportError) as e:
                export(fn, [arg("x", (8, 128))], "r")
            self.assertRegex(str(e.exception),
                             rf"test_xla_export\.py:\d+:\d+ \({fn.__name__}\): {what}")

    def test_the_functional_check_is_refused_for_xla_work_and_nothing_is_written(self):
        with tempfile.TemporaryDirectory() as d:
            out, check = os.path.join(d, "p.json"), os.path.join(d, "c.json")
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                code = main(["export", f"{k.__file__}:work_outside_kernels", "--arg",
                             "x=8x128:f32", "-o", out, "--check", check])
            self.assertEqual(code, 2)
            self.assertIn("the functional check runs programs of Pallas kernels only",
                          err.getvalue())
            self.assertEqual(os.listdir(d), [])


if __name__ == "__main__":
    unittest.main()
