"""The exporter on small kernels: what it writes, and what it refuses (naming what and where)."""
import os
import sys
import unittest

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))

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

    def test_work_outside_kernels_names_the_primitive_and_line(self):
        with self.assertRaises(ExportError) as e:
            export(k.work_outside_kernels, [arg("x", (8, 128))], "xla")
        self.assertRegex(str(e.exception),
                         r"kernels_for_tests\.py:\d+:\d+ \(work_outside_kernels\): primitive "
                         r"'tanh' outside a Pallas kernel")

    def test_an_unsupported_body_primitive_names_it_and_the_line(self):
        with self.assertRaises(ExportError) as e:
            export(k.unsupported_in_body, [arg("x", (8, 128))], "cs")
        self.assertRegex(str(e.exception), r"kernels_for_tests\.py:\d+:\d+ .*kernel _sort_kernel: "
                                           r"primitive '\w+' is not supported in a kernel body")


if __name__ == "__main__":
    unittest.main()
