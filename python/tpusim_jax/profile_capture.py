"""`python -m tpusim_jax profile MODULE:FUNCTION --arg ... --steps N -o TRACE.json.gz`: runs a
function under jax.profiler on this machine's device (the CPU here) and keeps the Perfetto trace
jax.profiler writes (`create_perfetto_trace=True`), each call inside a StepTraceAnnotation so the
trace has steps. On the CPU the XLA runtime names every executed thunk after its HLO instruction
(args hlo_op, hlo_module, device_ordinal, run_id), a while loop's span holding its iterations';
`tpusim import profile` reads that as it reads a TPU device's "XLA Ops" line.
"""
from __future__ import annotations

import glob
import os
import shutil
import tempfile

import jax
import numpy as np


def random_inputs(fn_args, seed: int = 0):
    """Normal random values of each argument's shape and dtype (small, finite)."""
    rng = np.random.default_rng(seed)
    return [jax.numpy.asarray(rng.standard_normal(a.shape) * 0.1, dtype=a.dtype)
            for _, a in fn_args]


def capture(fn, fn_args, steps: int, output: str, xplane: str | None = None) -> str:
    """Warms `fn` up (compile), then profiles `steps` calls; writes the trace to `output` (and
    XProf's own .xplane.pb of the same run to `xplane`)."""
    jitted = jax.jit(fn)
    inputs = random_inputs(fn_args)
    jax.block_until_ready(jitted(*inputs))
    with tempfile.TemporaryDirectory() as tmp:
        with jax.profiler.trace(tmp, create_perfetto_trace=True):
            for step in range(steps):
                with jax.profiler.StepTraceAnnotation("step", step_num=step):
                    jax.block_until_ready(jitted(*inputs))
        traces = glob.glob(os.path.join(tmp, "**", "perfetto_trace.json.gz"), recursive=True)
        if len(traces) != 1:
            raise RuntimeError(f"jax.profiler wrote {len(traces)} Perfetto traces, expected 1")
        shutil.copyfile(traces[0], output + ".tmp")
        if xplane:
            (space,) = glob.glob(os.path.join(tmp, "**", "*.xplane.pb"), recursive=True)
            shutil.copyfile(space, xplane)
    os.replace(output + ".tmp", output)
    return output
