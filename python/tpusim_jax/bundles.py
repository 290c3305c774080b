"""The compiled program's own VLIW schedule, from libtpu's final bundles: per HLO instruction,
how many cycles its program issues (each loop body times its trip count, nested loops too), or, on
a chip with 128-wide MXUs, the pushes its busiest MXU takes if those are more. It leaves out every
wait on HBM, DMA or collectives, but counts the branch-guarded regions of a loop body (a software
pipeline's first and last trips, a tile's epilogue) on every trip: an estimate of the op's time,
which `tpusim run --hlo --vliw-floors` takes as its floor (app/vliw_floors.h)."""
from __future__ import annotations

import collections
import glob
import os
import re
import shutil
import tempfile

_BUNDLE = re.compile(r"^\s*(?:0x[0-9a-f]+|0)\s+(?:LB:)?\s*[:>]")
# The back-branch test of a counted loop: its induction variable against the trip count.
_EXIT = re.compile(r"scmp\.\w+\.s32\.totalorder %s\w+, (\d+) /\* loop exit test \*/")
_PUSH = re.compile(r"vmatmul\.(\w+)\.[\w.]*?(mxu\d)")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%([\w.\-]+) = ", re.M)
# A bf16 vreg holds 16 rows of 128 (two packed per sublane), an f32 one 8; a 128-wide MXU takes a
# row a cycle (v5e: 197e12 FLOP/s = 4 MXUs x 128 x 128 x 2 x 1.5e9).
_ROWS_PER_PUSH = {"bf16": 16}


def dump_flags(dump_dir: str) -> str:
    """libtpu's flags that write each compiled program's final bundles into `dump_dir`."""
    return (f"--xla_jf_dump_to={dump_dir} --xla_jf_dump_llo_text=true "
            "--xla_jf_dump_llo_pass_label_regex=final_bundles")


def program_cycles(path: str) -> tuple[int, int, int]:
    """(issued cycles, busiest MXU's push cycles, loops without a counted exit test) of one
    final_bundles program; a loop whose trip count is not a constant is counted once."""
    stack = [[0, 0, collections.Counter()]]  # bundles, inner loops' cycles, pushes per MXU
    uncounted = 0
    with open(path) as f:
        for line in f:
            if not _BUNDLE.match(line):
                continue
            if " LB:" in line:
                stack.append([0, 0, collections.Counter()])
            top = stack[-1]
            top[0] += 1
            for dtype, mxu in _PUSH.findall(line):
                top[2][mxu] += _ROWS_PER_PUSH.get(dtype, 8)
            if "loop exit test" in line and len(stack) > 1:
                m = _EXIT.search(line)
                uncounted += m is None
                _close(stack, int(m.group(1)) if m else 1)
    while len(stack) > 1:
        uncounted += 1
        _close(stack, 1)
    bundles, inner, pushes = stack[0]
    return bundles + inner, max(pushes.values(), default=0), uncounted


def _close(stack: list, trips: int) -> None:
    bundles, inner, pushes = stack.pop()
    stack[-1][1] += trips * (bundles + inner)
    for mxu, rows in pushes.items():
        stack[-1][2][mxu] += trips * rows


def floors(dump_dir: str, hlo_text: str, device_kind: str, libtpu: str) -> dict:
    """The record's `vliw_floors`: the source and, per instruction of `hlo_text` that has a
    program in `dump_dir`, its floor in cycles. On v6e (256-wide MXUs, whose push rate no fact
    gives) the MXU pushes are not used."""
    names = set(_INSTRUCTION.findall(hlo_text))
    mxu_128 = "v6" not in device_kind.lower()
    cycles = {}
    for path in sorted(glob.glob(os.path.join(dump_dir, "*-final_bundles.txt"))):
        if "schedule-analysis" in path:
            continue
        name = re.sub(r"^\d+-", "", os.path.basename(path))
        name = re.sub(r"-\d+-final_bundles\.txt$", "", name)
        if name not in names:
            continue
        issued, pushes, _ = program_cycles(path)
        cycles[name] = max(issued, pushes if mxu_128 else 0)
    return {"source": f"libtpu {libtpu} final bundles", "cycles": dict(sorted(cycles.items()))}


class BundleDump:
    """A scratch directory for the bundles of one compile, its flags added to LIBTPU_INIT_ARGS
    (before libtpu starts) and taken out again afterwards, so the record keeps the run's own."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="tpusim_bundles_")
        self.flags = os.environ.get("LIBTPU_INIT_ARGS")
        os.environ["LIBTPU_INIT_ARGS"] = f"{self.flags or ''} {dump_flags(self.dir)}".strip()

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.flags is None:
            os.environ.pop("LIBTPU_INIT_ARGS", None)
        else:
            os.environ["LIBTPU_INIT_ARGS"] = self.flags
