"""Reading XLA's buffer assignment (the memory-usage report of --xla_dump_to) into compile-step's
`buffers`: the default (HBM) space of the largest module, its eight largest slots, and the values
live at its peak (the live-range report) with their shapes and op names."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))

from tpusim_jax.compile import hbm_buffers  # noqa: E402

# The head of a real report (C1's compiled step), shortened, and a smaller module beside it.
STEP = """Memory Space: default (color=0)
Total bytes: 10596866048 (9.87GiB)
  cumulative_size;       size;       offset; used_by_n_values; shapes_list
  ------------------------------------------------------------
    2.32GiB( 15%);    2.32GiB;   3870064640;                1; f32[1,4096,151936]
    4.64GiB( 29%);    1.16GiB;   6359384064;                2; 2\u00d7bf16[4096,151936]
    6.08GiB( 38%);  288.00MiB;     57278464;                5; 5\u00d7bf16[9,1,4096,4096]
   11.42GiB( 72%);   64.00MiB;   1850785792;                2; 2\u00d7f32[1,32,32,1,128,128]
    1.38GiB(100%);       512B;   1107935232;                1; pred[]
  The rest 32 values are less than 5% of the total size and not shown.

Memory Space: vmem (color=1)
Total bytes: 16777216 (16.00MiB)
  cumulative_size;       size;       offset; used_by_n_values; shapes_list
  ------------------------------------------------------------
   16.00MiB(100%);   16.00MiB;            0;                8; bf16[1,32,128,32,128]
"""
OTHER = """Memory Space: default (color=0)
Total bytes: 1024 (1.00KiB)
  cumulative_size;       size;       offset; used_by_n_values; shapes_list
  ------------------------------------------------------------
    1.00KiB(100%);    1.00KiB;            0;                1; f32[256]
"""

# The same module's buffer assignment, live ranges and optimized HLO (C1's compiled step,
# shortened): the bf16 weight gradient and its all-reduce share one buffer (counted once), a host
# value is left out, the entry's parameter is counted apart, a loop body's parameter is not one.
ASSIGNMENT = """BufferAssignment:
allocation 0: size 21233664, parameter 16, shape |f32[9,3,16,12288]| at ShapeIndex {}, maybe-live-out:
 value: <18699 param.125 @0> (size=21233664,offset=0): f32[9,3,16,12288]{3,2,1,0:T(8,128)}
allocation 1: size 10596866048, preallocated-temp:
 value: <18877 convert_bitcast_fusion.34{0} @0> (size=2489319424,offset=3870064640): f32[1,4096,151936]{2,1,0:T(8,128)}
 value: <19167 fusion.1913 @0> (size=1244659712,offset=6359384064): bf16[4096,151936]{1,0:T(8,128)(2,1)}
 value: <19168 all-reduce.55 @0> (size=1244659712,offset=6359384064): bf16[4096,151936]{1,0:T(8,128)(2,1)}
 value: <19842 while.790{1} (phi) @0> (size=301989888,offset=57278464): bf16[9,1,4096,4096]{3,2,1,0:T(8,128)(2,1)}
 value: <19900 param.7 @0> (size=21233664,offset=0): f32[9,3,16,12288]{3,2,1,0:T(8,128)}
allocation 2: size 4096, color 5:
 value: <20001 copy-start.153{0} @0> (size=4096,offset=0): bf16[1,4096,4096]{2,1,0:T(8,128)(2,1)S(5)}
"""
LIVE_RANGE = """HloLiveRange (max 20):
  InstructionSequence:
    0:param.125
    12:fusion.1913
  BufferLiveRange:
    param.125{}:0-20
    convert_bitcast_fusion.34{0}:3-18
    fusion.1913{}:12-12
    all-reduce.55{}:12-20
    while.790{1}:1-14
    param.7{}:2-5
    copy-start.153{0}:0-20
  Live ranges at 12 (peak):
    convert_bitcast_fusion.34{0}: 2489319424 bytes (cumulative: 2489319424 bytes)
"""
HLO = """HloModule jit_step

%body (param.7: f32[9,3,16,12288]) -> f32[8] {
  %param.7 = f32[9,3,16,12288]{3,2,1,0:T(8,128)} parameter(0)
}

ENTRY %main.156_spmd (param.125: f32[9,3,16,12288]) -> f32[8] {
  %param.125 = f32[9,3,16,12288]{3,2,1,0:T(8,128)} parameter(125), metadata={op_name="mu[\\'gdn_wi_0\\']"}
  %convert_bitcast_fusion.34 = (f32[1,4096,151936]{2,1,0:T(8,128)}, bf16[4096]{0:T(1024)(128)(2,1)S(1)}) fusion(%fusion.1931), kind=kLoop, calls=%c, metadata={op_name="jit(step)/jvp()/convert_element_type"}
  %fusion.1913 = bf16[4096,151936]{1,0:T(8,128)(2,1)} fusion(%a), kind=kOutput, calls=%d, metadata={op_name="jit(step)/transpose(jvp(...e,ev->...v))/dot_general"}
  %all-reduce.55 = bf16[4096,151936]{1,0:T(8,128)(2,1)} all-reduce(%fusion.1913), channel_id=140, metadata={op_name="jit(step)/transpose(jvp(...e,ev->...v))/dot_general"}
  %while.790 = (s32[]{:T(128)}, /*index=1*/bf16[9,1,4096,4096]{3,2,1,0:T(8,128)(2,1)}) while(%tuple.1), condition=%c, body=%b, metadata={op_name="jit(step)/jvp()/while"}
}
"""


class HbmBuffers(unittest.TestCase):
    def test_the_largest_modules_hbm_slots(self):
        with tempfile.TemporaryDirectory() as d:
            for name, text in (("module_0000.jit_step", STEP), ("module_0001.jit_x", OTHER)):
                with open(os.path.join(d, name + ".memory-usage-report.txt"), "w") as f:
                    f.write(text)
            b = hbm_buffers(d, most=4)
        self.assertEqual(b["heap_bytes"], 10596866048)
        self.assertEqual([s["values"] for s in b["largest"]],
                         ["f32[1,4096,151936]", "2 x bf16[4096,151936]",
                          "5 x bf16[9,1,4096,4096]", "2 x f32[1,32,32,1,128,128]"])
        self.assertEqual(b["largest"][2]["bytes"], 288 * 2**20)
        self.assertEqual(b["largest"][0]["bytes"], round(2.32 * 2**30))  # as the report rounds
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "m.memory-usage-report.txt"), "w") as f:
                f.write(STEP)
            every = hbm_buffers(d)["largest"]
        self.assertEqual(len(every), 5)  # the HBM space only, not the VMEM slot after it
        self.assertEqual(every[-1], {"bytes": 512, "values": "pred[]"})

    def test_what_is_live_in_hbm_at_the_peak(self):
        with tempfile.TemporaryDirectory() as d:
            module = os.path.join(d, "module_0000.jit_step.after_optimizations")
            for suffix, text in (("-memory-usage-report.txt", STEP),
                                 ("-buffer-assignment.txt", ASSIGNMENT),
                                 ("-live-range.txt", LIVE_RANGE), (".txt", HLO)):
                with open(module + suffix, "w") as f:
                    f.write(text)
            b = hbm_buffers(d, most=2)
        # At 12: the parameter, the f32 logits, the gradient buffer (once), the stacked inputs.
        self.assertEqual(b["peak_live_bytes"], 21233664 + 2489319424 + 1244659712 + 301989888)
        self.assertEqual(b["peak_live_at"], "fusion.1913 (jit(step)/transpose(jvp(...e,ev->...v))"
                                            "/dot_general)")
        self.assertEqual(b["peak_live_parameter_bytes"], 21233664)
        self.assertEqual(b["peak_live"], [
            {"bytes": 2489319424, "value": "convert_bitcast_fusion.34{0}",
             "shape": "f32[1,4096,151936]", "opcode": "fusion",
             "op": "jit(step)/jvp()/convert_element_type"},
            {"bytes": 1244659712, "value": "fusion.1913", "shape": "bf16[4096,151936]",
             "opcode": "fusion", "op": "jit(step)/transpose(jvp(...e,ev->...v))/dot_general"}])

    def test_no_live_range_report_leaves_the_slots(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "m-memory-usage-report.txt"), "w") as f:
                f.write(STEP)
            self.assertNotIn("peak_live", hbm_buffers(d))

    def test_no_report_is_none(self):
        with tempfile.TemporaryDirectory() as d:
            self.assertIsNone(hbm_buffers(d))


if __name__ == "__main__":
    unittest.main()
