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

# The same module's live-range report at its peak and the instructions it names (C1's compiled
# step, shortened: a tuple element with an index comment, a value without op_name).
LIVE_RANGE = """HloLiveRange (max 7172):
  BufferLiveRange:
    constant.1179.clone.3{}:700-703
  Live ranges at 1913 (peak):
    convert_bitcast_fusion.34{0}: 2489319424 bytes (cumulative: 2489319424 bytes)
    all-reduce.55{}: 1244659712 bytes (cumulative: 3733979136 bytes)
    while.790{1}: 301989888 bytes (cumulative: 4035969024 bytes)
    copy-start.153{0}: 33554432 bytes (cumulative: 4069523456 bytes)
    param.125{}: 21233664 bytes (cumulative: 4090757120 bytes)
    param.7{}: 21233664 bytes (cumulative: 4111990784 bytes)
    multiply.507{}: 4 bytes (cumulative: 4111990788 bytes)
  Stack trace breakdown for peak usage: 4 111 990 788 bytes
"""
HLO = """HloModule jit_step

%body (param.9: f32[8]) -> f32[8] {
  %param.7 = f32[9,3,16,12288]{3,2,1,0:T(8,128)} parameter(0)
}

ENTRY %main.156_spmd (param.125: f32[9,3,16,12288]) -> f32[8] {
  %convert_bitcast_fusion.34 = (f32[1,4096,151936]{2,1,0:T(8,128)}, bf16[4096]{0:T(1024)(128)(2,1)S(1)}) fusion(%fusion.1931), kind=kLoop, calls=%c, metadata={op_name="jit(step)/jvp()/convert_element_type"}
  %all-reduce.55 = bf16[4096,151936]{1,0:T(8,128)(2,1)} all-reduce(%fusion.1913), channel_id=140, metadata={op_name="jit(step)/transpose(jvp(...e,ev->...v))/dot_general"}
  %while.790 = (s32[]{:T(128)}, bf16[9,1,4096,4096]{3,2,1,0:T(8,128)(2,1)}, /*index=2*/f32[8]{0}) while(%tuple.1), condition=%c, body=%b, metadata={op_name="jit(step)/jvp()/while"}
  %param.125 = f32[9,3,16,12288]{3,2,1,0:T(8,128)} parameter(125), metadata={op_name="mu[\\'gdn_wi_0\\']"}
  %copy-start.153 = (bf16[1,4096,4096]{2,1,0:T(8,128)(2,1)S(1)}, bf16[1,4096,4096]{2,1,0:T(8,128)(2,1)}, u32[]{:S(2)}) copy-start(%p)
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

    def test_the_values_live_at_the_peak(self):
        with tempfile.TemporaryDirectory() as d:
            module = os.path.join(d, "module_0000.jit_step.after_optimizations")
            for suffix, text in (("-memory-usage-report.txt", STEP),
                                 ("-live-range.txt", LIVE_RANGE), (".txt", HLO)):
                with open(module + suffix, "w") as f:
                    f.write(text)
            b = hbm_buffers(d, most=3)
        self.assertEqual(b["peak_live_bytes"], 4111990788)  # every value, not only those shown
        # The entry's parameter apart, not the loop body's.
        self.assertEqual(b["peak_live_parameter_bytes"], 21233664)
        self.assertEqual(b["peak_live"], [
            {"bytes": 2489319424, "value": "convert_bitcast_fusion.34{0}",
             "shape": "f32[1,4096,151936]", "opcode": "fusion",
             "op": "jit(step)/jvp()/convert_element_type"},
            {"bytes": 1244659712, "value": "all-reduce.55", "shape": "bf16[4096,151936]",
             "opcode": "all-reduce", "op": "jit(step)/transpose(jvp(...e,ev->...v))/dot_general"},
            {"bytes": 301989888, "value": "while.790{1}", "shape": "bf16[9,1,4096,4096]",
             "opcode": "while", "op": "jit(step)/jvp()/while"}])

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
