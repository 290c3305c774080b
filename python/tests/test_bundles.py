"""bundles.py against a final_bundles program counted by hand: bundles outside loops once, a loop
body times its exit test's trip count, a nested loop multiplied through, the busiest MXU's pushes
at 16 cycles a bf16 vreg, and floors only for the HLO's own instructions."""
import os
import tempfile
import unittest

from tpusim_jax.bundles import floors, program_cycles

# 2 bundles, then an outer loop of 3 trips (1 bundle, an inner loop of 4 trips of 2 bundles with
# a bf16 push on mxu0 each, 1 bundle with the outer exit test), then 1 bundle with an f32 push on
# mxu1. Cycles: 2 + 3 x (1 + 4 x 2 + 1) + 1 = 33. Pushes: mxu0 3 x 4 x 16 = 192, mxu1 8.
PROGRAM = """= control target key start
LB: loop body
= control target key end

     0   :  { %s1 = smov 0 }
   0x1   :  { %s2 = smov 0 }
   0x2 LB: > { %s3 = sadd.s32 1, %s2 }
   0x3 LB: > { %v1 = vmatmul.bf16.gmra.mxu0 %v0 }
   0x4   : > { %p1 = scmp.ge.s32.totalorder %s4, 4 /* loop exit test */ }
   0x5   : > { %p2 = scmp.ge.s32.totalorder %s5, 3 /* loop exit test */ }
   0x6   :  { %v2 = vmatmul.f32.gmra.mxu1 %v0 }
"""


class BundlesTest(unittest.TestCase):
    def test_loops_multiply_and_pushes_count_per_mxu(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "123-fusion.7-01-final_bundles.txt")
            with open(path, "w") as f:
                f.write(PROGRAM)
            self.assertEqual(program_cycles(path), (2 + 3 * (1 + 4 * 2 + 1) + 1, 192, 0))
            other = os.path.join(d, "124-TLP-01-final_bundles.txt")
            with open(other, "w") as f:
                f.write(PROGRAM)
            hlo = "  %fusion.7 = f32[8]{0} fusion(%p), kind=kLoop, calls=%c\n"
            # 33 bundles against 192 push cycles: the MXU bounds it on v5e, not on v6e.
            self.assertEqual(floors(d, hlo, "TPU v5 lite", "0.0.42.1")["cycles"],
                             {"fusion.7": 192})
            self.assertEqual(floors(d, hlo, "TPU v6 lite", "0.0.42.1")["cycles"],
                             {"fusion.7": 33})


if __name__ == "__main__":
    unittest.main()
