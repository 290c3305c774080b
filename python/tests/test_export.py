"""The exporter on small kernels: what it writes, and what it refuses (naming what and where)."""
import os
import sys
import unittest

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))

import gdn_scan  # noqa: E402
import kernels_for_tests as k  # noqa: E402
import layer_norm  # noqa: E402
from tpusim_jax.export import ExportError, check_data, export  # noqa: E402


def arg(name, shape, dtype=jnp.float32):
    return name, jax.ShapeDtypeStruct(shape, dtype)


class ExportTest(unittest.TestCase):
    def test_layer_norm_becomes_one_kernel(self):
        p = export(layer_norm.layer_norm, [arg("x", (512, 256), jnp.bfloat16),
                                           arg("g", (1, 256), jnp.bfloat16)], "ln")
        self.assertEqual(len(p["items"]), 1)
        kern = p["items"][0]["kernel"]
        self.assertEqual(kern["grid"], [2])
        self.assertEqual(kern["semantics"], ["parallel"])
        self.assertEqual([o["name"] for o in kern["inputs"]], ["x", "g"])
        self.assertEqual(kern["inputs"][0]["index_map"],
                         [{"offset": 0, "coeff": [1]}, {"offset": 0, "coeff": [0]}])
        self.assertEqual(kern["inputs"][1]["index_map"],
                         [{"offset": 0, "coeff": [0]}, {"offset": 0, "coeff": [0]}])
        fns = [op.get("fn") for op in kern["ops"]]
        self.assertIn("rsqrt", fns)
        self.assertEqual(kern["ops"][-1]["op"], "copy")
        self.assertEqual(p["outputs"], ["layer_norm_kernel.out0"])

    def test_matmul_dot_dims_precision_and_two_axis_maps(self):
        p = export(k.matmul, [arg("x", (128, 256)), arg("y", (256, 256))], "mm")
        kern = p["items"][0]["kernel"]
        self.assertEqual(kern["grid"], [2, 2])
        self.assertEqual(kern["outputs"][0]["index_map"],
                         [{"offset": 0, "coeff": [1, 0]}, {"offset": 0, "coeff": [0, 1]}])
        dot = next(op for op in kern["ops"] if op["op"] == "dot")
        self.assertEqual(dot["dims"], {"lhs_contract": [1], "rhs_contract": [0],
                                       "lhs_batch": [], "rhs_batch": []})
        self.assertEqual(dot["precision"], "default")
        self.assertEqual(dot["dtype"], "f32")

    def test_check_data_holds_inputs_and_jax_outputs(self):
        args = [arg("x", (128, 256)), arg("y", (256, 256))]
        p = export(k.matmul, args, "mm")
        data = check_data(k.matmul, args, p)
        self.assertEqual(sorted(data["inputs"]), ["x", "y"])
        out = data["outputs"][p["outputs"][0]]
        self.assertEqual(out["shape"], [128, 256])
        self.assertEqual(len(out["data"]), 128 * 256)

    def test_masks_from_iotas_comparisons_and_select(self):
        p = export(k.sibling_mask, [arg("s", (128, 128))], "sib")
        ops = p["items"][0]["kernel"]["ops"]
        kinds = {op["op"] for op in ops}
        fns = {op.get("fn") for op in ops}
        self.assertIn("iota", kinds)
        self.assertTrue({"idiv", "eq", "ne", "and", "select"} <= fns, fns)
        # where(mask, s, 0.0): the literal 0.0 becomes a constant operand of the select
        select = next(op for op in ops if op.get("fn") == "select")
        self.assertEqual(len(select["in"]), 3)

    def test_a_non_affine_index_map_names_the_kernel_and_operand(self):
        with self.assertRaises(ExportError) as e:
            export(k.squared_index_map, [arg("x", (32, 128))], "sq")
        self.assertIn("kernel _copy_kernel: the index map of x is not affine", str(e.exception))

    def test_an_unsupported_body_primitive_names_it_and_the_line(self):
        with self.assertRaises(ExportError) as e:
            export(k.unsupported_in_body, [arg("x", (8, 128))], "cs")
        self.assertRegex(str(e.exception), r"kernels_for_tests\.py:\d+:\d+ .*kernel _sort_kernel: "
                                           r"primitive '\w+' is not supported in a kernel body")

    def test_a_fori_loop_in_the_body_is_unrolled_with_its_index_a_constant(self):
        p = export(k.fori_sum, [arg("x", (8, 8, 128))], "fori")
        ops = p["items"][0]["kernel"]["ops"]
        slices = [op for op in ops if op["op"] == "slice"]
        self.assertEqual([(s["axis"], s["start"], s["size"]) for s in slices],
                         [(0, i, 1) for i in range(4)])
        self.assertEqual(sum(op.get("fn") == "mul" for op in ops), 4)  # x[i] * 2, once a trip

    def test_a_write_at_a_loop_index_names_it_and_the_line(self):
        with self.assertRaises(ExportError) as e:
            export(k.fori_write, [arg("x", (8, 8, 128))], "fw")
        self.assertRegex(str(e.exception), r"kernels_for_tests\.py:\d+:\d+ .*a write at an "
                                           r"integer index into a block dim of 4")

    def scan_kernel(self, fn, names, shapes):
        p = export(fn, [arg(n, s, jnp.bfloat16 if n in ("w", "u", "q", "k", "do") else
                            jnp.float32) for n, s in zip(names, shapes)], "scan")
        return p["items"][0]["kernel"]

    def test_scan_forward_whens_views_and_casts(self):
        chunk, state = (1, 2, 8, 64, 128), (1, 8, 128, 128)
        kern = self.scan_kernel(gdn_scan.scan_fwd, ["w", "u", "q", "k", "g", "h0"],
                                [chunk] * 4 + [(1, 2, 8, 64, 1), state])
        self.assertEqual(kern["semantics"], ["parallel", "parallel", "arbitrary"])
        self.assertEqual(kern["scratch"], [{"name": "scratch0", "shape": [8, 128, 128],
                                            "dtype": "f32"}])
        whens = [(op["op"], op["when"]) for op in kern["ops"] if "when" in op]
        # h = h0 at the first chunk, h_final = h at the last: each a view and a store
        self.assertIn(("copy", {"kind": "first", "axis": 2}), whens)
        self.assertIn(("copy", {"kind": "last", "axis": 2}), whens)
        # w_ref[0, 0] on a (1, 1, 8, 64, 128) block is a [8, 64, 128] view
        self.assertIn([8, 64, 128], [op.get("shape") for op in kern["ops"]
                                     if op["op"] == "reshape"])
        self.assertEqual(sum(op["op"] == "dot" for op in kern["ops"]), 4)
        self.assertEqual(sum(op["op"] == "concat" for op in kern["ops"]), 1)

    def test_scan_backward_casts_as_mosaic_canonicalizes_them(self):
        # The kernel casts w, u, q, k, do to f32 and every product's operands to bf16 (24
        # truncf, 5 extf in Mosaic's input); Mosaic's canonicalized module keeps 8 truncf and 3
        # extf (docs/jax_bridge.md), as the exporter's folding, CSE and dead-code removal do.
        chunk, state = (1, 2, 4, 64, 128), (1, 4, 128, 128)
        kern = self.scan_kernel(gdn_scan.scan_bwd,
                                ["w", "u", "q", "k", "g", "h_saved", "do", "dh_final"],
                                [chunk] * 4 + [(1, 2, 4, 64, 1), chunk, chunk, state])
        casts = [op["dtype"] for op in kern["ops"] if op["op"] == "cast"]
        self.assertEqual((casts.count("bf16"), casts.count("f32")), (8, 3))
        ids = [op["out"] for op in kern["ops"] if "out" in op]
        first = len(kern["inputs"]) + len(kern["outputs"]) + len(kern["scratch"])
        self.assertEqual(ids, list(range(first, first + len(ids))))

    def test_ladder_iotas_stay_small_and_splits_are_shared_as_in_mosaic(self):
        import gdn_invert_ladder
        p = export(gdn_invert_ladder.invert_ladder, [arg("S", (1, 8, 2, 128, 128))], "ladder")
        ops = p["items"][0]["kernel"]["ops"]
        # broadcasted_iota((tile_n, C, C), 1) and (..., 2): the sequences along their own dims.
        self.assertEqual(sorted(op["shape"] for op in ops if op["op"] == "iota"),
                         [[1, 1, 128], [1, 128, 1]])
        # Mosaic's canonicalized module: 42 truncf and 21 extf (7 levels, 3 operand splits each).
        casts = [op["dtype"] for op in ops if op["op"] == "cast"]
        self.assertEqual((casts.count("bf16"), casts.count("f32")), (42, 21))
        # Only the mask, the identity and the result need the whole tile: one broadcast each
        # of the identity, and S arrives whole.
        self.assertLessEqual(sum(op["op"] == "broadcast" for op in ops), 2)

    def test_when_on_a_middle_grid_index_is_refused(self):
        with self.assertRaises(ExportError) as e:
            export(k.when_on_a_middle_step, [arg("x", (32, 128))], "mid")
        self.assertIn("program_id(0) == 1: only the first (0) and last (3) grid index",
                      str(e.exception))


if __name__ == "__main__":
    unittest.main()
